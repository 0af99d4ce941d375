"""Tests for `sapa/claims/norm_vs_accuracy.py`: the dose-response readings on synthetic dose grids with a known relation
(verdicts fixed by design, slopes checked against numpy's least squares per learning rate), the reviewers' pair in the
answer, and the check end to end on a cached study."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

from sapa.claims.norm_vs_accuracy import CLAIM, gather, readings
from sapa.prose.norm_vs_accuracy_words import reviewer_pair

DOSES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)


@dataclass(frozen=True)
class _Study:
    runs: pd.DataFrame
    history: pd.DataFrame = field(default_factory=pd.DataFrame)
    config: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)


def _runs(relation: str, seed: int = 0) -> pd.DataFrame:
    """Dose grids of x/c, x³/c, softmax(S/τ) on two tasks: log10 norm = 2 − log10 c (p = 3: 1 − log10 c), accuracy =
    0.7 + slope·log10 norm + noise; relation "neg": a lower norm, a higher accuracy (−0.1 per decade); "pos": the
    opposite; "none": 0; "edge": exactly the margin, −0.02 per decade."""
    rng = np.random.default_rng(seed)
    slope = {"neg": -0.1, "pos": 0.1, "none": 0.0, "edge": -0.02}[relation]
    rows = []
    for task, N in (("digits", 16), ("text", 64)):
        for arm, p, offset in (("x_dose", 1, 2.0), ("x3_alpha", 3, 1.0), ("softmax_tau", 0, 0.5)):
            for c in DOSES[: 3 if p == 0 else 8]:
                ln = offset - math.log10(c)
                for lr in (1e-3, 1e-2):
                    for r in range(3):
                        acc = 0.7 + slope * ln + (0.02 if lr == 1e-2 else 0.0) + 0.003 * rng.standard_normal()
                        rows.append({"task": task, "N": N, "arm": arm, "p": p, "alpha": c, "lr": lr, "seed": r,
                                     "val_acc_final": acc, "test_acc": acc, "diverged": False, "chance_acc": 0.1,
                                     "attn_fro": 10 ** ln, "jac_x_fro": 10 ** (ln + 0.3)})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("relation, want", [("neg", "HOLDS"), ("pos", "FAILS"), ("none", "FAILS"),
                                            ("edge", "UNDETERMINED")])
def test_dose_association_verdict_by_design_and_slopes_are_numpys(relation, want):
    """A 10× lower norm buying 0.1 accuracy HOLDS; costing it, or buying nothing (a flat response, which no rank test
    could decide), FAILS; buying exactly the margin is undecided — and prints the seeds that would decide it."""
    tables = gather(_Study(_runs(relation)))
    rs = readings(tables)
    dose = [r for r in rs if r.key[0] == "dose"]
    assert len(dose) == 4 and {r.rule for r in dose} == {"dose-association"}
    assert {r.verdict for r in dose} == {want}
    t = tables["digits"]
    r0 = next(r for r in dose if r.key == ("dose", "digits", "x/c"))
    for lr in (1e-3, 1e-2):
        d = t[(t["family"] == "x/c") & (t["lr"] == lr)]
        b = np.polyfit(d["log10_attn_fro"], d["test_acc"], 1)[0]
        assert f"lr {lr:g}: b = {b:+.3f}" in r0.why
    assert "power" in r0.why and (("seeds per dose for 80 %" in r0.why) == (want == "UNDETERMINED"))


def test_matched_norm_reads_the_family_at_the_same_norm():
    """x³/c sits one decade of norm below x/c at the same c and lr, on the same accuracy-against-norm line: at matched
    norm the families agree within the margin (HOLDS); shifting x³/c's accuracy by −0.1 makes the family matter
    (FAILS). Each lr is matched to itself: 4 doses of x³/c (c ≤ 8) inside x/c's range at each of the 2 lrs."""
    runs = _runs("neg")
    tables = gather(_Study(runs))
    m = [r for r in readings(tables) if r.key[0] == "matched"]
    assert [r.verdict for r in m] == ["HOLDS", "HOLDS"] and all(r.why.startswith("8 (lr, dose) cells") for r in m)
    shifted = runs.copy()
    sel = shifted["arm"] == "x3_alpha"
    shifted.loc[sel, ["test_acc", "val_acc_final"]] -= 0.1
    m = [r for r in readings(gather(_Study(shifted))) if r.key[0] == "matched"]
    assert [r.verdict for r in m] == ["FAILS", "FAILS"]


def test_the_answer_states_the_reviewers_pair():
    tables = gather(_Study(_runs("pos")))
    pair = reviewer_pair(tables["digits"])
    t = tables["digits"]
    for lr in (1e-3, 1e-2):  # the pair at each lr of the grid, the same lr on both sides
        a = t[(t["family"] == "x³/c") & (t["dose"] == 1) & (t["lr"] == lr)].iloc[0]
        b = t[(t["family"] == "x/c") & (t["dose"] == 16) & (t["lr"] == lr)].iloc[0]
        assert a["log10_attn_fro"] == pytest.approx(1.0) and b["log10_attn_fro"] == pytest.approx(2 - math.log10(16))
        assert (f"at lr {lr:g}, x³/1 ends with ‖φ(S)‖_F 10^1.00 against x/16's 10^0.80 (higher) and accuracy "
                f"{a['test_acc']:.3f} against {b['test_acc']:.3f}") in pair


def test_check_reads_the_cached_study_end_to_end(tmp_path, monkeypatch):
    import sapa.ledger
    from sapa.budget import budget_named
    from sapa.evidence import training_study as scale_keeps_training_stable
    from sapa.ledger import Context, run_claim

    monkeypatch.setattr(sapa.ledger, "calibration_note", lambda rule: {"rule": rule.name})  # calibration: own tests
    ctx = Context(budget_named("quick", seed=0), tmp_path)
    ctx.cache[scale_keeps_training_stable.CACHE_KEY] = _Study(_runs("pos"))
    e = run_claim(CLAIM, ctx)
    assert e.verdict == "ANSWERED" and e.kind == "question"
    assert e.falsifiability["negative_control"]["verdict"] == "FAILS"  # accuracy := the doses' norm: +1 per decade
    assert "x³/1" in e.answer and "a 10× lower norm buys less than 0.02 accuracy, or costs it" in e.answer
    conds = [row["condition"] for row in e.robustness["varied"]]
    assert "‖∂φ(S)/∂X‖_F in place of ‖φ(S)‖_F" in conds and "margin ×2 (0.04 accuracy per decade of norm)" in conds
    assert any(f.endswith(".png") for f in e.figures) and (tmp_path / "data" / "dose_response.json").exists()
    json.dumps(e.evidence, allow_nan=False)


def test_check_is_undetermined_when_the_study_fails_or_has_no_dose_grid(tmp_path):
    from sapa.budget import budget_named
    from sapa.evidence import training_study as scale_keeps_training_stable
    from sapa.ledger import Context

    ctx = Context(budget_named("quick", seed=0), tmp_path)
    ctx.cache[scale_keeps_training_stable.CACHE_KEY] = RuntimeError("out of memory")
    out = CLAIM.check(ctx)
    assert out.verdict == "UNDETERMINED" and "out of memory" in out.headline
    ctx.cache[scale_keeps_training_stable.CACHE_KEY] = _Study(_runs("pos").query("arm == 'softmax_tau'"))
    assert CLAIM.check(ctx).evidence == {"status": "not run"}

