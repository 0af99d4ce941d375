"""Tests for `sapa/claims/scale_keeps_training_stable.py`: the headline conjunction and the other readings on synthetic studies with
a known trend, the findings (table, divergences, α*, lr at the grid edge, bigram plateau), the shared study cache, and
the check end to end on a cached study. The rule's calibration is tested in tests/sapa/rules/test_stability.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from sapa.claims import scale_keeps_training_stable as SC
from sapa.evidence import training_study as TS
from sapa.prose import scale_keeps_training_stable_words as W
from tests.empirics.training.study_fixture import make_study

TASKS = {"digits": (16, 64), "text": (32, 64, 128)}


def _study(gap, diverge=None, noise=0.004, seeds=3, seed=0, **kw):
    return make_study(tasks=TASKS, seeds=seeds, gap=gap, diverge=diverge, noise=noise, seed_sd=0.01, seed=seed,
                      history=False, **kw)


def _readings(st):
    a = SC.analyse(st.runs)
    return a, SC.readings(a)


def _degrade(arms, per_doubling=-0.06):
    return lambda t, a, N: per_doubling * math.log2(N / min(TASKS[t])) if a in arms else 0.0


def _by_key(rs):
    return {r.key: r.verdict for r in rs}


def test_scaled_arms_flat_unscaled_degrading():
    a, rs = _readings(_study(_degrade({"x3", "x"})))
    v = _by_key(rs)
    assert rs[0].verdict == "HOLDS" and rs[0].rule == "stability-trend" and rs[0].key == ("headline",)
    assert all(v[("accuracy", t, arm)] == "HOLDS" for t in TASKS for arm in ("x_sqrtN", "x3_sqrtN"))
    assert v[("accuracy", "text", "x3")] == "FAILS" and v[("accuracy", "digits", "x")] == "FAILS"
    assert v[("accuracy", "text", "x_N")] == "HOLDS"
    assert ("accuracy", "text", "x3_sqrti") in v and ("accuracy", "digits", "x3_sqrti") not in v  # causal: text only
    # Δ is the designed change over the range: −0.06 per doubling × 2 doublings (digits), × 2 (text 32→128)
    for t in TASKS:
        ev = a["accuracy"][(t, "x3")]
        assert abs(ev.delta + 0.12) < 4 * ev.se  # within 4 standard errors of the designed change
    n_acc = sum(1 for r in rs[1:] if r.rule == "stability-trend")
    assert n_acc == 2 * 8 + 1 and sum(r.rule == "divergence-trend" for r in rs) == n_acc
    assert W.corrected(rs) is None


def test_headline_fails_if_one_component_fails():
    _, rs = _readings(_study(_degrade({"x3_sqrtN"})))
    assert rs[0].verdict == "FAILS" and "text: x³/√N FAILS" in rs[0].why
    c = W.corrected(rs)
    assert "degradation beyond it is shown for digits: x³/√N, text: x³/√N" in c


def test_headline_undetermined_when_noise_hides_the_trend():
    _, rs = _readings(_study(lambda t, a, N: 0.0, noise=0.08, seeds=2, seed=5))
    assert rs[0].verdict == "UNDETERMINED"
    assert "FAILS" not in {r.verdict for r in rs[1:5]}


def test_divergence_enters_accuracy_at_chance_and_the_divergence_reading_sees_it():
    def div(t, a, N, lr, r):  # text x³: from N = 64 on, lr 1e-2 diverges, and 3e-3 too except seed 2 at N = 64
        return a == "x3" and t == "text" and N >= 64 and (lr == 1e-2 or (lr == 3e-3 and (N == 128 or r < 2)))

    a, rs = _readings(_study(lambda t, a, N: 0.0, diverge=div))
    v = _by_key(rs)
    ev = a["divergence"][("text", "x3")]  # stable-share gaps per N: (0, 0, 0), (−⅔, −⅔, −⅓), (−⅔, −⅔, −⅔)
    assert np.allclose(ev.cell_mean, (0, -5 / 9, -2 / 3)) and math.isclose(ev.delta, -2 / 3)
    assert math.isclose(ev.pooled_sd, 1 / 9) and math.isclose(ev.se, (1 / 9) * math.sqrt(2 / 3))
    assert v[("divergence", "text", "x3")] == "FAILS"
    assert v[("divergence", "text", "x3_sqrtN")] == "UNDETERMINED"  # nothing diverges: se = 0
    assert a["accuracy"][("text", "x3")].diverged == (0, 0, 0)  # the best lr (1e-3) avoids them
    lines = W.divergence_lines(a["counts"])
    assert lines[0] == f"digits divergence: 0/{9 * 2 * 3 * 3} members diverged"  # arms × N × lrs × seeds, in study
    assert "x³ N=32 0/3 at best lr, 0/9 over the grid, N=64 0/3 at best lr, 5/9 over the grid" in lines[1]


def test_findings_table_edges_alpha_and_plateau():
    st = _study(lambda t, a, N: 0.0, lr_opt={"x": 1e-2})
    a = SC.analyse(st.runs)
    lines = W.table_lines(a["table"])
    assert lines[0].startswith("digits softmax: N=16: lr 0.003,") and len(lines) == 9 + 10
    row = a["table"][(a["table"]["task"] == "digits") & (a["table"]["arm"] == "x") & (a["table"]["N"] == 64)].iloc[0]
    assert f"N=64: lr 0.01, {row['median']:.3f} [{row['lo']:.3f}, {row['hi']:.3f}]" in next(
        ln for ln in lines if ln.startswith("digits x:"))
    (edge,) = W.edge_lines(a["best"])
    assert "digits N=16 x (high: 0.01)" in edge and "5/" in edge  # x at both digits N and the three text N
    assert W.alpha_line(st.provenance) == "α* (tuned at the smallest N, then fixed): digits p=1: 4, p=3: 4; text p=1: 4, p=3: 4"
    # a task without fixed-α arms names nothing, and a study without any says so: never an empty line
    assert W.alpha_line({"alpha_star": {"digits": {}, "text": {"1": 8.0}}}) == \
        "α* (tuned at the smallest N, then fixed): text p=1: 8"
    assert W.alpha_line({"alpha_star": {"digits": {}}}) == "α*: not reported by the study (no fixed-α arm was trained)"
    p = SC.plateau_from(a["table"], {32: 0.40, 64: 0.44, 128: None})
    assert set(p["per_N"]) == {32, 64} and p["per_N"][32]["left"] and not p["per_N"][64]["left"]
    assert "only at N = [32]" in W.plateau_line(p) and not p["left_at_every_N"]
    assert SC.plateau_from(a["table"], {}) is None and "not measured" in W.plateau_line(None)


def test_study_is_obtained_once_and_its_failure_is_kept(tmp_path, monkeypatch):
    import sapa.empirics.training.train_study as TS
    from sapa.budget import budget_named
    from sapa.ledger import Context

    calls = []

    def boom(name, out, seed=0, **kw):
        calls.append((name, out, seed))
        raise RuntimeError("disk full")

    monkeypatch.setattr(TS, "run_study", boom)
    ctx = Context(budget_named("quick", seed=4), tmp_path)
    out = SC.CLAIM.check(ctx)
    assert out.verdict == "UNDETERMINED" and "RuntimeError: disk full" in out.headline
    from sapa.claims.norm_vs_accuracy import CLAIM as TC0

    assert TC0.check(ctx).verdict == "UNDETERMINED" and calls == [("quick", tmp_path / "train", 4)]


def test_check_end_to_end_on_a_cached_study(tmp_path, monkeypatch):
    import sapa.ledger
    from sapa.figures import training_vs_n
    from sapa.budget import budget_named
    from sapa.ledger import Context, run_claim

    monkeypatch.setattr(sapa.ledger, "calibration_note", lambda rule: {"rule": rule.name})
    monkeypatch.setattr(TS, "bigram_by_n", lambda Ns, cfg: {N: 0.3 for N in Ns})
    drawn = []

    def fake_draw(study, out_dir, floors=None):  # drawing is tested in tests/figures/test_training_vs_n.py
        drawn.append(study)
        assert floors == {"text": {N: 0.3 for N in TASKS["text"]}}  # the bigram predictor, drawn as the floor
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = [out_dir / f"s_{k}.png" for k in ("acc", "norms", "lr")]
        for p in paths:
            p.write_bytes(b"x")
        return paths

    monkeypatch.setattr(training_vs_n, "draw", fake_draw)
    st = _study(_degrade({"x3"}))
    ctx = Context(budget_named("quick", seed=0), tmp_path)
    ctx.cache[TS.CACHE_KEY] = st
    e = run_claim(SC.CLAIM, ctx)
    assert e.kind == "claim" and e.verdict == "HOLDS" and e.rule["name"] == "stability-trend"
    assert e.figures == ["figures/s_acc.png", "figures/s_norms.png", "figures/s_lr.png"] and drawn == [st]
    assert e.readings[0]["verdict"] == "HOLDS" and e.corrected_claim is None
    assert "other arms degrading beyond 0.05: digits x³" in e.headline
    assert any(f.startswith("text bigram plateau: softmax left the bigram plateau at every N") for f in e.findings)
    ev = e.evidence
    assert set(ev["accuracy_trends"]) >= {"digits/x_sqrtN", "text/x3_sqrti"} and len(ev["accuracy_vs_n"]) == 9 * 2 + 10 * 3
    json.dumps(ev, allow_nan=False)
    from dataclasses import asdict

    from sapa.labels import violations

    assert violations(asdict(e)) == []
    ctrl = e.falsifiability["negative_control"]
    # a further 0.20 loss injected into the (tight, synthetic) x/√N trend: the same rule must see it
    assert ctrl["verdict"] == "FAILS" and ctrl["reachable"] and ctrl["fails_only_below"] > -1
    assert e.robustness["stable"] is True and len(e.robustness["varied"]) == 5
    json.dumps(asdict(e), allow_nan=False)
    # the second entry reuses the same runs (never retrains) and draws only its own dose-response figure
    from sapa.claims.norm_vs_accuracy import CLAIM as TC0

    e2 = run_claim(TC0, ctx)
    assert len(drawn) == 1 and all(f.startswith("figures/dose_response") for f in e2.figures)


def test_registered_beside_norm_vs_accuracy():
    from sapa.claims import ORDER, all_claims

    i = ORDER.index(SC.CLAIM.id)
    assert ORDER[i + 1] == "norm-vs-accuracy"
    c = {x.id: x for x in all_claims()}[SC.CLAIM.id]
    assert c.kind == "claim" and c.check is SC.check and c.contract.refuted_by


def test_records_are_json_safe():
    df = pd.DataFrame({"a": [np.float64(np.inf), np.int64(3)], "b": ["x", "y"]})
    assert SC._records(df) == [{"a": None, "b": "x"}, {"a": 3.0, "b": "y"}]


def test_cells_where_softmax_stayed_on_the_plateau_leave_the_trend_not_the_table():
    """A text N where the reference learned nothing is dropped from every accuracy trend, and only from those."""
    st = _study(_degrade({"x_sqrtN"}, per_doubling=-0.2))  # x/√N collapses at N = 128 on text
    a_all = SC.analyse(st.runs)
    a = SC.analyse(st.runs, frozenset({("text", 128)}))
    assert a_all["accuracy"][("text", "x_sqrtN")].N == (32, 64, 128)
    assert a["accuracy"][("text", "x_sqrtN")].N == (32, 64) and a["uninformative"] == [("text", 128)]
    assert a["accuracy"][("digits", "x_sqrtN")].N == a_all["accuracy"][("digits", "x_sqrtN")].N
    assert set(a["table"]["N"]) == set(a_all["table"]["N"])  # the tables and figures keep every cell
    assert a["divergence"].keys() == a_all["divergence"].keys()
    line = W.level_lines(a["table"])
    assert any(s.startswith("text level") and "N=128" in s for s in line)


def _table(cells):
    """A minimal accuracy table: (arm, N, median, lo) rows of the text task."""
    return pd.DataFrame([{"task": "text", "arm": a, "N": n, "median": m, "lo": lo, "hi": m + 0.01}
                         for a, n, m, lo in cells])


def test_an_arm_is_on_the_floor_only_if_no_trend_cell_left_it_for_every_seed():
    bigram = {32: 0.27, 64: 0.27, 128: 0.27}
    m = SC.PLATEAU_MARGIN
    t = _table([("softmax", n, 0.40, 0.38) for n in bigram]
               + [("x_sqrtN", 32, 0.30, 0.27 + m - 1e-9), ("x_sqrtN", 64, 0.28, 0.275), ("x_sqrtN", 128, 0.28, 0.27)]
               + [("x", 32, 0.31, 0.27 + m + 1e-3), ("x", 64, 0.28, 0.27), ("x", 128, 0.28, 0.27)]  # left at N = 32
               + [("x3", 32, 0.28, 0.27), ("x3", 64, 0.28, 0.27), ("x3", 128, 0.40, 0.35)])  # left only at N = 128
    assert SC.floored_arms(t, bigram) == {("text", "x_sqrtN")}  # a median above the band is not enough: every seed
    assert SC.floored_arms(t, bigram, frozenset({("text", 128)})) == {("text", "x_sqrtN"), ("text", "x3")}
    assert SC.floored_arms(t, {32: 0.27, 64: None, 128: None}) == frozenset()  # one trend N: no trend to censor
    assert SC.off_the_floor(0.30, 0.27) and not SC.off_the_floor(0.27 + m, 0.27)
    line = W.floor_line(SC.floored_arms(t, bigram), t, bigram)
    assert line.startswith("text floor: x/√N did not leave the bigram plateau") and "N=32: softmax 0.400" in line


def test_a_floored_arm_is_not_judged_whatever_the_rule_would_read():
    st = _study(_degrade({"x3"}))  # text x³ degrades (the rule reads FAILS); x/√N is flat (HOLDS)
    fl = frozenset({("text", "x_sqrtN"), ("text", "x3")})
    a = SC.analyse(st.runs, floored=fl)
    rs = SC.readings(a)
    r = {x.key: x for x in rs}
    for arm, would in (("x_sqrtN", "HOLDS"), ("x3", "FAILS")):
        got = r[("accuracy", "text", arm)]
        assert got.verdict == "UNDETERMINED" and got.why.startswith("not judged") and f"would have read {would}" in got.why
    assert r[("accuracy", "digits", "x3")].verdict == "FAILS"  # the same arm elsewhere is judged
    assert rs[0].verdict == "UNDETERMINED"  # a component not judged: the conjunction cannot hold
    assert "text x/√N Δ" in W.headline(rs, a) and "(on the floor, not judged)" in W.headline(rs, a)
    c = W.corrected(rs, fl)
    assert "text: x/√N did not leave the task's floor within the step cap" in c and "undetermined for none" in c


def test_a_design_that_cannot_reach_fails_is_marked_as_unable_to_fail():
    # 2 seeds per cell, 2 cells: df = 2, and the rule says FAILS only for Δ < −δ − t(0.9975, 2)·se, beyond −1 at se 0.1
    from sapa.empirics.training.study_analysis import GapTrend
    from sapa.claims.scale_keeps_training_stable import conditions

    def trend(se, df):
        return GapTrend(task="digits", arm="x_sqrtN", quantity="test_acc", N=(16, 64), n=(2, 2), cell_mean=(0.0, 0.0),
                        slope=0.0, delta=0.0, se=se, df=df, pooled_sd=se)

    for se, df, kind in ((0.1, 2, "by_construction"), (0.01, 8, "could_fail")):
        a = {"accuracy": {("digits", "x_sqrtN"): trend(se, df)}, "tasks": ["digits"], "floored": ()}
        fal, rob = conditions(a, ())
        assert fal["kind"] == kind, (se, df)
        if kind == "could_fail":
            assert fal["negative_control"]["verdict"] == "FAILS" and fal["negative_control"]["reachable"]
        else:
            assert "cannot come out FAILS" in fal["why"]
