"""Tests for `sapa/evidence/dose_looks.py`: the dose-response's two looks — which doses belong to the second, the levels
each look is read at, an open reading decided by its second look's doses, and the planner that names the strata to
look at again (checked against ``doses_to_decide``). Synthetic dose grids with a known relation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sapa.evidence.dose_looks import gather, judge, looks, n_strata, second_look
from sapa.claims.norm_vs_accuracy import readings
from tests.sapa.claims.test_norm_vs_accuracy import DOSES, _runs, _Study


def _open_runs(extra=(), wiggle=None) -> pd.DataFrame:
    """``_runs("pos")`` with text x³/c's grid doses pushed off the line by ±wiggle[lr] in a (+, −, −, +) pattern: the
    grid alone leaves that reading open (lr 0.001 far out of reach, lr 0.01 near), and ``extra`` doses c at lr 0.01
    on the line (as arm x3_dose, the second look's)."""
    wiggle = {1e-3: 0.3, 1e-2: 0.08} if wiggle is None else wiggle
    r = _runs("pos")
    sel = (r["task"] == "text") & (r["arm"] == "x3_alpha")
    k = r.loc[sel, "alpha"].map({c: i for i, c in enumerate(DOSES)}).to_numpy()
    sign = np.where(k % 2 == 0, 1, -1) * np.where(k % 4 < 2, 1, -1)
    r.loc[sel, "test_acc"] = (0.7 + 0.1 * np.log10(r.loc[sel, "attn_fro"]) + r.loc[sel, "lr"].map(wiggle) * sign
                              + 0.003 * np.random.default_rng(1).standard_normal(int(sel.sum())))
    rows = [{"task": "text", "N": 64, "arm": "x3_dose", "p": 3, "alpha": c, "lr": 1e-2, "seed": s,
             "val_acc_final": 0.8 - 0.1 * math.log10(c), "test_acc": 0.8 - 0.1 * math.log10(c), "diverged": False,
             "chance_acc": 0.1, "attn_fro": 10 / c, "jac_x_fro": 10 ** 1.3 / c} for c in extra for s in range(3)]
    return pd.concat([r, pd.DataFrame(rows)], ignore_index=True)


def test_gather_marks_the_doses_off_the_grid_as_the_second_looks():
    from sapa.empirics.training.study_config import FULL, look2_doses

    t = gather(_Study(_open_runs(look2_doses(FULL)), config=FULL.as_dict()))["text"]
    two = t[t["look"] == 2]
    assert set(two["family"]) == {"x³/c"} and len(two) == 28 and set(two["lr"]) == {1e-2}
    assert np.isclose(t.loc[t["look"] == 1, "dose"].to_numpy()[:, None], np.array(DOSES)[None, :]).any(1).all()
    assert (gather(_Study(_open_runs(look2_doses(FULL))))["text"]["look"] == 1).all()  # no grid known: one look
    assert looks(FULL.as_dict()) == 2 and looks({}) == looks({"look2_refine": 1}) == 1


@pytest.mark.parametrize("n_looks", [1, 2])
def test_each_look_is_read_at_the_levels_over_the_looks(monkeypatch, n_looks):
    """Bonferroni over the looks: every verdict of a two-look design at FAILS 0.005 and HOLDS 0.025."""
    import sapa.evidence.dose_looks as dl

    seen, decide = set(), dl.decide
    monkeypatch.setattr(dl, "decide", lambda key, ev, f=None, h=None: seen.add((f, h)) or decide(key, ev, f, h))
    dl.judge(gather(_Study(_open_runs())), n_looks)
    assert seen == {(0.01 / n_looks, 0.05 / n_looks)}


def test_an_open_reading_is_decided_by_its_second_looks_doses():
    """The grid leaves text x³/c open at both lrs; the second look's 28 doses at lr 0.01, on the line, decide it
    (FAILS: a lower norm costs accuracy) at the halved level; without them it stays open and says none were taken."""
    from sapa.empirics.training.study_config import FULL, look2_doses

    before = {k: (v, look) for k, _, v, look in judge(gather(_Study(_open_runs(), config=FULL.as_dict())), 2)}
    assert before[("dose", "text", "x³/c")] == ("UNDETERMINED", 1)
    tables = gather(_Study(_open_runs(look2_doses(FULL)), config=FULL.as_dict()))
    after = {k: (v, look, ev) for k, ev, v, look in judge(tables, 2)}
    v, look, ev = after[("dose", "text", "x³/c")]
    assert (v, look) == ("FAILS", 2) and [s.n for s in ev.strata] == [8, 36]
    assert {k: x[:2] for k, x in after.items() if k != ("dose", "text", "x³/c")} == {
        k: x for k, x in before.items() if k != ("dose", "text", "x³/c")}  # decided at the first look: unchanged
    why = next(r.why for r in readings(tables, 2) if r.key == ("dose", "text", "x³/c"))
    assert "second look (each look at FAILS 0.005, HOLDS 0.025): 28 doses added between the grid's at lr 0.01" in why
    open_why = next(r.why for r in readings(gather(_Study(_open_runs(), config=FULL.as_dict())), 2)
                    if r.key == ("dose", "text", "x³/c"))
    assert "second look (each look at FAILS 0.005, HOLDS 0.025): none taken" in open_why


def test_the_second_look_names_the_open_strata_its_grid_can_decide():
    """Of the open reading's strata, the planner takes lr 0.01 (the finer grid's 36 doses suffice at its observed
    slope) and not lr 0.001 (out of reach); readings decided on the grid are never looked at again."""
    from dataclasses import replace

    from sapa.empirics.training.study_config import FULL
    from sapa.rules import association as RA

    runs = _open_runs()
    assert second_look(runs, FULL) == [("text", 3, 1e-2)]
    judged = judge(gather(_Study(runs, config=FULL.as_dict())), 2)
    m = n_strata([(k, e) for k, e, _, _ in judged])
    assert m == 10  # 4 readings × 2 lrs, and 2 matched-norm readings
    ev = {k: e for k, e, _, _ in judged}[("dose", "text", "x³/c")]
    need = [RA.doses_to_decide(s, m, 0.005, 0.025) for s in ev.strata]
    assert need[0] > 36 >= need[1]
    assert second_look(runs, replace(FULL, look2_refine=2)) == []  # 15 doses would not decide lr 0.01
    assert second_look(_runs("pos"), FULL) == []  # every reading decided on the grid
