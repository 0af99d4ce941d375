"""Tests for `sapa/claims/learning_check.py`, `sapa/claims/mechanism_across_n.py` and `empirics/training/learning_analysis.py` on crafted and tiny studies:
exits read as grid intervals, the slowdown's two questions with Holm over the entry, the softmax gate of the mechanism
probes, and the negative control through the same estimator and rule."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sapa.empirics.training import learning_analysis as LA
from sapa.claims import learning_check as LCL
from sapa.claims import mechanism_across_n as MAN

STEPS = [0, 10, 20, 40, 80, 160, 320, 640]


def _step_curve(exit_at, lo=0.1, hi=0.9):
    return [lo if (t < exit_at or t == 0) else hi for t in STEPS]


def _crafted(exits):
    """exits {(N, arm, seed): exit step or None}; history and runs of one task 'digits' at one lr."""
    hist, runs = [], []
    for (N, arm, seed), t in exits.items():
        curve = _step_curve(t if t is not None else 10 ** 9)
        for s, v in zip(STEPS, curve):
            hist.append({"task": "digits", "N": N, "arm": arm, "alpha": math.nan, "lr": 1e-3, "seed": seed,
                         "step": s, "quantity": "val_acc", "value": v})
            hist.append({"task": "digits", "N": N, "arm": arm, "alpha": math.nan, "lr": 1e-3, "seed": seed,
                         "step": s, "quantity": "attn_fro", "value": 1.0 if s < (t or 10 ** 9) else 2.0})
        runs.append({"task": "digits", "N": N, "arm": arm, "p": 0 if arm == "softmax" else 3, "scale": "x",
                     "alpha": math.nan, "lr": 1e-3, "seed": seed, "in_study": True, "diverged": False,
                     "chance_acc": 0.1, "val_acc_final": curve[-1], "test_acc": curve[-1]})
    return pd.DataFrame(runs), pd.DataFrame(hist)


def _study_cells(ex):
    runs, hist = _crafted(ex)
    from sapa.empirics.training.study_analysis import best_lr

    Ns = sorted({N for N, _, _ in ex})
    return LA.study_learning(runs, hist, best_lr(runs), {("digits", N): 0.1 for N in Ns})


def test_slowdown_that_grows_with_n_is_read_from_exit_intervals():
    ex = {}
    for N, mult in ((16, 2), (32, 8), (64, 32)):  # the arm's exit: 2×, 8×, 32× softmax's (s ≈ 1, 3, 5)
        for seed, ts in enumerate((10, 20, 10, 20, 10, 20)):
            ex[(N, "softmax", seed)] = ts
            ex[(N, "x3_sqrtN", seed)] = ts * mult
    cells = _study_cells(ex)
    c = {(x["N"], x["arm"]): x for x in cells}
    assert c[(64, "x3_sqrtN")]["steps_to_leave_floor"]["0"] == 320
    assert c[(64, "x3_sqrtN")]["intervals"]["floor"]["0"] == [160.0, 320.0]  # (previous evaluation, exit]
    tr = LA.slowdown_trends(cells, None, "floor")[("digits", "x3_sqrtN")]
    assert tr.censored == (0, 0, 0) and 3.0 < tr.delta < 5.0
    rs = LCL.slowdown_readings({("digits", "x3_sqrtN"): tr}, "steps to leave the floor", ("slowdown",))
    assert [r.key for r in rs] == [("slowdown", "digits", "x3_sqrtN", "growth"),
                                   ("slowdown", "digits", "x3_sqrtN", "doubling")]
    assert [r.rule for r in rs] == ["slowdown-growth", "slowdown-doubling"]
    assert [r.verdict for r in rs] == ["FAILS", "FAILS"] and "power" in rs[0].why
    nx = LA.norms_at_exit(cells)
    assert nx["x3_sqrtN"]["median_change_at_exit"] == pytest.approx(round(math.log(2), 5))


def test_censored_arm_is_not_converged_and_enters_beyond_the_cap():
    ex = {(16, "softmax", 0): 10, (16, "x3_sqrtN", 0): None, (64, "softmax", 0): 10, (64, "x3_sqrtN", 0): 40}
    cells = _study_cells(ex)
    c = {(x["N"], x["arm"]): x for x in cells}
    assert c[(16, "x3_sqrtN")]["exits"]["censored"] == 1 and c[(16, "x3_sqrtN")]["converged"] == {"0": False}
    assert c[(16, "x3_sqrtN")]["intervals"]["floor"]["0"] == [640.0, math.inf]  # right-censored at the cap
    tr = LA.slowdown_trends(cells, None, "floor")[("digits", "x3_sqrtN")]
    assert tr.censored == (1, 0)
    line = LCL.learning_line(c[(16, "x3_sqrtN")])
    assert "0/1 seeds" in line and "beyond the cap" in line and "does not learn" not in line


def test_holm_is_over_the_entrys_readings():
    """The same trend read alone and beside three others: its adjusted p is at least the raw one, up to 4×."""
    ex = {}
    for N, mult in ((16, 2), (32, 4), (64, 8)):
        for seed, ts in enumerate((10, 20, 10, 20)):
            ex[(N, "softmax", seed)] = ts
            ex[(N, "x3_sqrtN", seed)] = ts * mult * (1 if seed % 2 else 2)
    tr = LA.slowdown_trends(_study_cells(ex), None, "floor")[("digits", "x3_sqrtN")]
    one = LCL.slowdown_readings({("a", "x3_sqrtN"): tr}, "m")
    two = LCL.slowdown_readings({("a", "x3_sqrtN"): tr, ("b", "x3_sqrtN"): tr}, "m")
    raw = tr.p_greater[0.0]
    assert f"p(Δ ≤ 0) = {raw * 2:.3g}" in one[0].why  # 2 readings (growth, more than 2×) of one trend
    assert f"p(Δ ≤ 0) = {min(1.0, raw * 4):.3g}" in two[0].why  # the growth p's are the smallest of 4


def _mech(solved_by_softmax: bool, arm_mult=(2, 4, 8), seeds=4):
    """A mechanism result dict: copy1 at N = 16, 32, 64; softmax reaches 0.5 at 20, 0.9 at 40 (or never)."""
    steps = [0, 10, 20, 40, 80, 160, 320, 640]

    def curve(t_half, t_solve):
        return [0.0 if s == 0 else (0.95 if t_solve is not None and s >= t_solve else 0.6 if s >= t_half else 0.1)
                for s in steps]

    chunks, results = [], []
    for k, N in enumerate((16, 32, 64)):
        for fam, arm in (("softmax", "softmax"), ("p1", "x_sqrtN")):
            mem, acc = [], []
            for r in range(seeds):
                if arm == "softmax":
                    acc.append(curve(20, 40 if solved_by_softmax or k == 0 else None))
                else:
                    m = arm_mult[k] * (1 + (r % 2))
                    acc.append(curve(20 * m, 40 * m))
                mem.append([arm, r])
            chunks.append({"task": "copy1", "N": N, "family": fam, "members": mem})
            K = len(steps)
            results.append({"steps": steps, "members": mem, "val_acc": [[a[j] for a in acc] for j in range(K)],
                            "profile": [[[1 / 9] * 9 for _ in mem] for _ in range(K)],
                            "attn_fro": [[1.0 + j for _ in mem] for j in range(K)], "chance": 1 / 16})
    return {"config": {"probes": [{"task": "copy1", "role": "probe", "steps": 640}]}, "chunks": chunks,
            "results": results}


def test_mechanism_cells_softmax_does_not_solve_enter_no_verdict():
    verdict, rs, answer, ev, findings = MAN.outcome(_mech(True), ("x_sqrtN",))
    assert len(rs) == 2 and ev["too_hard"] == []
    verdict, rs, answer, ev, findings = MAN.outcome(_mech(False), ("x_sqrtN",))
    assert rs == () and verdict == "UNDETERMINED"  # only N = 16 is solved by softmax: no trend over N
    assert ev["too_hard"] == [{"task": "copy1", "N": 32}, {"task": "copy1", "N": 64}]
    assert any("too hard for this model at this budget" in f for f in findings)
    assert "Too hard for this model at this budget" in answer


def test_mechanism_growth_is_decided_and_the_control_goes_through_the_same_rule():
    verdict, rs, answer, ev, findings = MAN.outcome(_mech(True), ("x_sqrtN",))
    g = next(r for r in rs if r.key[-1] == "growth")
    assert g.verdict == "FAILS" and "grows with N for copy1 x/√N" in answer
    fal, rob = MAN.conditions(ev.pop("_slow"), rs, verdict)
    ctrl = fal["negative_control"]
    assert ctrl["verdict"] == "FAILS" and ctrl["control_delta"] == pytest.approx(ctrl["delta"] + 4.0, abs=1e-3)
    assert [r["condition"].split(" (")[0] for r in rob["varied"]][1:3] == ["family-wise levels ×0.5",
                                                                           "family-wise levels ×2"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from sapa.empirics.training import train_study as ts
    from sapa.empirics.training.mechanism import MECH_TINY

    return ts.run_study("tiny", tmp_path_factory.mktemp("t"), workers=1, progress=False, mechanism=MECH_TINY)


def test_ledger_fields_on_a_tiny_study(tiny):
    from sapa.empirics.training.study_analysis import accuracy_trends, best_lr

    best = best_lr(tiny.runs)
    floors = {(t, int(n)): 0.1 for t, n in zip(best["task"], best["N"])}
    blk = LCL.learning_block(tiny, best, accuracy_trends(tiny.runs, best), floors)
    for c in blk["cells"]:
        assert {"curve", "steps_to_leave_floor", "exits", "final_acc", "converged", "intervals"} <= set(c)
        assert c["exits"]["censored"] == sum(v is None for v in c["steps_to_leave_floor"].values())
    verdict, rs, answer, ev, findings = MAN.outcome(tiny.mechanism)
    # six steps: softmax solves no cell, so nothing is judged and every cell is reported as too hard
    assert verdict == "UNDETERMINED" and rs == () and len(ev["too_hard"]) == 4
    for c in ev["cells"]:
        assert 0 <= c["solved_fraction"] <= 1 and not c["decidable"]
    assert any("solved (≥ 0.9)" in f for f in findings)


def test_learning_speed_only_withholds_a_holds():
    from sapa.claims.scale_keeps_training_stable import with_learning_speed
    from sapa.ledger import Reading

    first = Reading(name="x^p/√N … (conjunction)", statement="s", verdict="HOLDS", rule="stability-trend", why="w")
    slow = lambda v: Reading(name="digits: x/√N slowdown", statement="s", verdict=v,  # noqa: E731
                             rule="slowdown-growth", key=("slowdown", "digits", "x_sqrtN", "growth"))
    assert with_learning_speed(first, (slow("HOLDS"),)).verdict == "HOLDS"
    got = with_learning_speed(first, (slow("FAILS"),))
    assert got.verdict == "UNDETERMINED" and "learning speed" in got.why and "learning speed" in got.name
    failing = Reading(name="n (conjunction)", statement="s", verdict="FAILS", rule="stability-trend")
    assert with_learning_speed(failing, (slow("HOLDS"),)).verdict == "FAILS"
    assert with_learning_speed(first, ()) is first


def test_power_is_never_read_at_a_spread_below_the_grids_resolution():
    """Three seeds per cell, each inside one grid interval (width 0.94), the largest N right-censored: σ̂ runs to its
    floor, so the power line reads the grid's w/√12 and the noncentral-t power there, and the unbounded se says so."""
    from sapa.empirics.training.censored_trend import design_power, interval_trend
    from sapa.rules.learning import ALPHA_FAILS

    tr = interval_trend((64, 128), [np.array([[2.1, 3.04]] * 3), np.array([[2.1, 3.04], [2.6, np.inf], [2.6, np.inf]])])
    line = LCL.power_line(tr, 8)
    w = 0.94 / math.sqrt(12)
    assert f"is below the grid's resolution: read at w/√12 = {w:.2f}" in line
    assert line.startswith(f"power {design_power(tr.n, tr.N, w, 1.0, ALPHA_FAILS / 8):.0%} ")
    assert design_power(tr.n, tr.N, w, 1.0, ALPHA_FAILS / 8) < 0.5 < design_power(tr.n, tr.N, tr.sigma, 1.0, ALPHA_FAILS / 8)
    why = LCL.slowdown_readings({("text", "x_sqrtN"): tr}, "steps")[0].why
    assert tr.se >= LCL.SE_UNBOUNDED and "se unbounded: the intervals bound Δ on one side only" in why


def test_an_undecided_reading_names_the_seeds_at_its_observed_delta():
    """Δ̂ between the growth margins: the farther margin's side (FAILS past 0 at 0.01/m, or HOLDS below 0.5 at
    0.05/m) sizes the seeds, through seeds_for_power at Δ̂'s distance; on a margin no seed count decides it; a decided
    reading does not say it."""
    from dataclasses import replace

    from sapa.empirics.training.censored_trend import interval_trend, seeds_for_power
    from sapa.rules.learning import ALPHA_FAILS, ALPHA_HOLDS

    rng = np.random.default_rng(3)
    cells = [np.stack([v - 0.1, v + 0.1], 1) for v in (0.3 * k + rng.normal(0, 0.8, 6) for k in range(3))]
    tr = interval_trend((16, 32, 64), cells)
    d, a = max((tr.delta - 0.0, ALPHA_FAILS), (0.5 - tr.delta, ALPHA_HOLDS))
    want = seeds_for_power(tr.N, tr.sigma_for_power, d, a / 4, 0.8)
    assert LCL.observed_line(tr, "growth", 4) == f"at the observed Δ, 80% power to decide it needs {want} seeds per cell"
    assert "no number of seeds" in LCL.observed_line(replace(tr, delta=1.0), "doubling", 4)
    rs = LCL.slowdown_readings({("copy1", "x_sqrtN"): tr}, "steps")
    assert "UNDETERMINED" in {r.verdict for r in rs}  # six noisy seeds per cell: something is open
    for r in rs:
        assert ("at the observed Δ" in r.why) == (r.verdict == "UNDETERMINED")
