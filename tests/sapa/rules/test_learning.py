"""Tests for `sapa/rules/learning.py`: the two slowdown questions on interval-censored trends, final-gap-trend's gate
and the reason it names, and the rules' calibration against their targets (a short run; the stored one has 1000 or
2000 trials)."""

import math

import numpy as np
import pytest

from sapa.empirics.training.censored_trend import interval_trend
from sapa.empirics.training.study_analysis import gap_trend
from sapa.rules import calibrate, rule_named
from sapa.rules.learning import (MARGINS, FinalGapEvidence, decide_final_gap, decide_slowdown, final_gap_reason,
                                 slowdown_test, verdicts_line)

NS = (16, 32, 64, 128)


def _trend(means, sd=0.3, R=12, width=0.2, seed=0):
    """Cells of R grid intervals of width ``width`` around normal draws with the given cell means."""
    rng = np.random.default_rng(seed)
    cells = []
    for m in means:
        v = m + sd * rng.standard_normal(R)
        lo = np.floor(v / width) * width
        cells.append(np.column_stack([lo, lo + width]))
    return interval_trend(NS, cells, MARGINS)


def test_a_flat_slowdown_does_not_grow_and_a_steep_one_grows_by_more_than_2x():
    flat, steep = _trend((1.0, 1.0, 1.0, 1.0)), _trend((0.0, 1.0, 2.0, 3.0))
    assert decide_slowdown(slowdown_test(flat, "growth")) == "HOLDS"
    assert decide_slowdown(slowdown_test(flat, "doubling")) == "HOLDS"
    assert decide_slowdown(slowdown_test(steep, "growth")) == "FAILS"
    assert decide_slowdown(slowdown_test(steep, "doubling")) == "FAILS"


def test_growth_near_one_doubling_is_decided_for_growth_and_open_for_more_than_2x():
    """Δ ≈ 1.1 at a per-seed sd of 0.65 (16 seeds): decisively a growth; more than 2× cannot be told from 2×."""
    tr = _trend((0.0, 0.37, 0.73, 1.1), sd=0.65, R=16)
    assert decide_slowdown(slowdown_test(tr, "growth")) == "FAILS"
    assert decide_slowdown(slowdown_test(tr, "doubling")) == "UNDETERMINED"


def test_right_censored_largest_n_still_shows_growth():
    """Every seed beyond the cap at the largest N: the lower bounds alone carry the growth."""
    rng = np.random.default_rng(1)
    cells = [np.column_stack([v := m + 0.3 * rng.standard_normal(8), v + 0.2]) for m in (0.4, 0.9, 1.4)]
    cells.append(np.column_stack([np.full(8, 3.2), np.full(8, np.inf)]))
    tr = interval_trend(NS, cells, MARGINS)
    assert tr.censored == (0, 0, 0, 8) and tr.delta > 2
    assert decide_slowdown(slowdown_test(tr, "growth")) == "FAILS"


@pytest.mark.parametrize("means,sd,growth,doubling", [
    ((1.0, 1.0, 1.0, 1.0), 0.3, "HOLDS", "HOLDS"), ((0.0, 1.0, 2.0, 3.0), 0.3, "FAILS", "FAILS"),
    ((0.0, 0.37, 0.73, 1.1), 0.65, "FAILS", "UNDETERMINED")])
def test_the_printed_verdicts_line_names_each_questions_own_label(means, sd, growth, doubling):
    line = verdicts_line(_trend(means, sd=sd, R=16))
    assert line.startswith(f"grows: {growth}, more than 2×: {doubling} ")


def test_no_trend_is_undetermined():
    one = interval_trend((16,), [np.array([[0.0, 0.2], [0.1, 0.3]])], MARGINS)
    assert math.isnan(one.delta) and decide_slowdown(slowdown_test(one, "growth")) == "UNDETERMINED"


def test_adjusted_p_values_decide_not_the_raw_ones():
    tr = _trend((0.0, 0.37, 0.73, 1.1), sd=0.3, R=16)
    raw = slowdown_test(tr, "growth")
    assert raw.p_fails < 0.01
    assert decide_slowdown(slowdown_test(tr, "growth", p_fails=0.02, p_holds=1.0)) == "UNDETERMINED"


def test_final_gap_fails_only_when_converged_and_the_reason_names_the_gate():
    tr = gap_trend(NS[:3], [np.array([0.0, 0.01, -0.01]), np.array([-0.3, -0.31, -0.29]),
                            np.array([-0.6, -0.61, -0.59])])
    assert decide_final_gap(FinalGapEvidence(tr, 0)) == "FAILS"
    assert decide_final_gap(FinalGapEvidence(tr, 2)) == "UNDETERMINED"
    assert "(the gate)" in final_gap_reason(FinalGapEvidence(tr, 2))[0]
    assert final_gap_reason(FinalGapEvidence(tr, 0)) == (final_gap_reason(FinalGapEvidence(tr, 0))[0], None)
    assert "gate" not in final_gap_reason(FinalGapEvidence(tr, 0))[0]


def test_final_gap_reason_is_power_where_fails_was_out_of_reach():
    """The issue's numbers: Δ = −0.039, se 0.006 (df 4): the upper bound −0.005 is above −0.05, so no convergence
    could have made it FAIL; the reason is the design's power, not the unconverged members."""
    g = [np.array([-0.207, -0.216, -0.225]), np.array([-0.246, -0.255, -0.264])]  # Δ = −0.039, se 0.0073
    tr = gap_trend((64, 128), g)
    ev = FinalGapEvidence(tr, 5)
    assert decide_final_gap(ev) == "UNDETERMINED"
    why, seeds = final_gap_reason(ev)
    assert "beyond this design's power" in why and "not the convergence gate" in why and seeds > 3
    assert "would read HOLDS" in why  # Δ = −0.039 lies inside the margin: more seeds can only show no degradation
    se_then = tr.se * math.sqrt(3 / seeds)  # the same spread at that many seeds: the lower bound clears −0.05
    from scipy import stats

    from sapa.rules.stability import ALPHA_HOLDS

    assert tr.delta - stats.t.ppf(1 - ALPHA_HOLDS, 2 * seeds - 2) * se_then > -0.05


@pytest.mark.parametrize("name", ["slowdown-growth", pytest.param("slowdown-doubling", marks=pytest.mark.slow),
                                  "final-gap-trend"])  # slowdown-doubling shares slowdown-growth's fit (~4 s)
def test_calibration_meets_targets_on_a_short_run(name):
    n = 100
    c = calibrate(rule_named(name), trials=n, seed=1)
    assert c.false_fails_rate <= 0.01 + 3 * math.sqrt(0.01 * 0.99 / n)
    assert c.false_holds_rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)


# ----------------------------------------------------------------------------- the calibrations' synthetic studies
# References written from the documented designs (the module docstrings and the rules' design records), seed by seed
# with scalar arithmetic, drawing from the generator in the implementation's order; they pin every constant of the
# designs (the pilot's spreads, the seeds, the N grid, the cap), which the short calibration runs cannot see.

DESIGN_DELTA = {("slowdown-growth", "holds"): 0.0, ("slowdown-growth", "fails"): 1.0,
                ("slowdown-doubling", "holds"): 1.0, ("slowdown-doubling", "fails"): 2.0,
                ("final-gap-trend", "holds"): -0.05, ("final-gap-trend", "fails"): -0.1}


def _design_delta(rule, truth):
    import re

    return float(re.search(r"Δ = (−?[0-9.]+)", rule.design[truth]).group(1).replace("−", "-"))


def test_the_rules_state_the_designs_their_simulations_draw():
    """The design record names Δ as the module docstring does (growth: 0 / 1, doubling: 1 / 2, final gap −0.05 / −0.1),
    and the default trials are those of the stored calibrations the ledger cites."""
    import json
    from pathlib import Path

    stored = json.loads((Path(__file__).resolve().parents[3] / "sapa" / "rules" / "calibrations.json").read_text())
    for (name, truth), delta in DESIGN_DELTA.items():
        rule = rule_named(name)
        assert _design_delta(rule, truth) == delta, (name, truth)
        assert rule.trials == stored[name]["calibration"]["trials"] == (2000 if name == "final-gap-trend" else 1000)
    assert "(the edge)" in rule_named("slowdown-growth").design["holds"]


def _grid_interval_by_scan(t, grid, cap):
    """(t_{k−1}, t_k] with t_k the first grid step ≥ t (lower end at least 1), (cap, ∞) beyond the cap."""
    if t > cap:
        return cap, math.inf
    k = next(i for i, g in enumerate(grid) if g >= t)
    return max(grid[k - 1] if k > 0 else 0, 1.0), grid[k]


def test_grid_interval_is_the_first_evaluation_at_or_after_the_exit():
    from sapa.empirics.training.mechanism import grid_steps
    from sapa.rules.learning import _grid_interval

    grid = grid_steps(2000)
    rng = np.random.default_rng(5)
    t = np.concatenate([2.0 ** rng.uniform(-1, 11.5, 300), np.asarray(grid[1:], float), [0.5, 1.0, 3.0, 8.0, 8.5, 2000.0,
                                                                                         2000.5]])
    got = _grid_interval(t, np.asarray(grid, float), 2000)
    want = np.array([_grid_interval_by_scan(v, grid, 2000) for v in t], float)
    assert np.array_equal(got, want)
    assert tuple(got[-7:-3, 0]) == (1.0, 1.0, 1.0, 1.0)  # exits in (0, 8]: the interval (1, 8]
    # the same contract on a grid whose first evaluation is past step 1: (t_0, t_1] starts at t_0
    grid = [4, 8, 16, 32]
    t = np.array([0.5, 2.0, 4.0, 5.0, 8.0, 9.0, 31.0, 32.0, 33.0])
    want = np.array([_grid_interval_by_scan(v, grid, 32) for v in t], float)
    assert np.array_equal(_grid_interval(t, np.asarray(grid, float), 32), want) and want[3, 0] == 4.0


def _reference_slowdown(question, truth, rng):
    """simulate_slowdown's model: R ∈ {8, 12, 16}, σ ~ U(0.4, 1.0), offset ~ U(0, 1); at cell k of N = 16…128,
    log2 t_s = 5.5 + 0.9k + 0.3z, log2 t_a = log2 t_s + offset + Δ·k/3 + σ·t₄/√2; exits on grid_steps(2000), censored
    beyond 2000; s ∈ (log2 a_lo − log2 s_hi, log2 a_hi − log2 s_lo]."""
    from sapa.empirics.training.mechanism import grid_steps

    grid = grid_steps(2000)
    delta = DESIGN_DELTA[f"slowdown-{question}", truth]
    R, sd = int(rng.choice((8, 12, 16))), float(rng.uniform(0.4, 1.0))
    off = rng.uniform(0, 1)
    cells = []
    for k in range(4):
        ls = 5.5 + 0.9 * k + 0.3 * rng.standard_normal(R)
        noise = rng.standard_t(4, R)
        cell = []
        for r in range(R):
            la = ls[r] + off + delta * k / 3 + sd * noise[r] / math.sqrt(2)
            (alo, ahi), (slo, shi) = (_grid_interval_by_scan(2.0 ** v, grid, 2000) for v in (la, ls[r]))
            cell.append([math.log2(alo) - math.log2(shi), math.log2(ahi) - math.log2(slo) if ahi < math.inf else math.inf])
        cells.append(cell)
    return cells


@pytest.mark.parametrize("question", ["growth", "doubling"])
@pytest.mark.parametrize("truth", ["holds", "fails"])
def test_simulated_slowdown_study_is_the_documented_design(question, truth):
    from sapa.rules.learning import simulate_slowdown

    for seed in range(3):
        ev = simulate_slowdown(question, truth, np.random.default_rng(seed))
        want = _reference_slowdown(question, truth, np.random.default_rng(seed))
        assert ev.trend.N == (16, 32, 64, 128) and ev.question == question
        for got_cell, want_cell in zip(ev.trend.data, want, strict=True):
            np.testing.assert_allclose(np.array(got_cell, float), np.array(want_cell, float), rtol=0, atol=1e-12)
        # Holm over the two questions read on the same trend (m = 2), spelled out
        tr = ev.trend
        for p_adj, raw in ((ev.p_fails, (tr.p_greater[0.0], tr.p_greater[1.0])),
                           (ev.p_holds, (tr.p_less[0.5], tr.p_less[1.0]))):
            mine = raw[0 if question == "growth" else 1]
            lo, hi = sorted(raw)
            first = min(1.0, 2 * lo)
            assert p_adj == pytest.approx(first if mine == lo else max(first, hi), rel=1e-12)


@pytest.mark.parametrize("truth", ["holds", "fails"])
def test_simulated_final_gaps_are_the_documented_design(truth):
    """2–4 cells at N = 16, 32, … (log2 N = 4, 5, …), 2–5 seeds, cell means rising linearly by Δ from U(−0.3, 0.05),
    gap noise 0.14·e^{0.5z}·t₄/√2; the trend's Δ against numpy least squares on the reference cell means."""
    from sapa.rules.learning import simulate_final_gap

    for seed in range(4):
        ev = simulate_final_gap(truth, np.random.default_rng(seed))
        rng = np.random.default_rng(seed)
        K, R = int(rng.choice((2, 3, 4))), int(rng.choice((2, 3, 4, 5)))
        x = [4.0 + k for k in range(K)]
        delta = DESIGN_DELTA["final-gap-trend", truth]
        base = rng.uniform(-0.3, 0.05)
        xbar = sum(x) / K
        gaps = []
        for k in range(K):
            scale = 0.14 * math.exp(0.5 * rng.standard_normal())
            gaps.append([base + delta * (x[k] - xbar) / (x[-1] - x[0]) + scale * v / math.sqrt(2)
                         for v in rng.standard_t(4, size=R)])
        means = [sum(g) / R for g in gaps]
        slope = np.linalg.lstsq(np.column_stack([np.ones(K), x]), np.array(means), rcond=None)[0][1]
        assert ev.unconverged == 0
        assert ev.trend.N == tuple(2 ** int(v) for v in x) and ev.trend.n == (R,) * K
        np.testing.assert_allclose(ev.trend.cell_mean, means, rtol=0, atol=1e-12)
        assert ev.trend.delta == pytest.approx(slope * (x[-1] - x[0]), rel=1e-9, abs=1e-12)


def test_final_gap_evidence_counts_no_unconverged_member_by_default():
    tr = gap_trend(NS[:3], [np.array([0.0, 0.01, -0.01]), np.array([-0.3, -0.31, -0.29]),
                            np.array([-0.6, -0.61, -0.59])])
    ev = FinalGapEvidence(tr)
    assert ev.unconverged == 0 and ev.as_dict()["unconverged"] == 0 and decide_final_gap(ev) == "FAILS"


def test_final_gap_reason_counts_the_seeds_a_fails_would_take():
    """Δ = −0.2 (beyond the margin) with a wide spread: undecided; the seeds per cell at which the same Δ and pooled sd
    put the upper bound Δ + t_{1−α_F, df}·se below −0.05 (se ∝ 1/√seeds), from numpy's pooled variance and scipy's t."""
    from scipy import stats

    from sapa.rules.stability import ALPHA_FAILS, MARGIN

    g = [np.array([-0.02, -0.1, -0.18]), np.array([-0.22, -0.3, -0.38])]  # Δ = −0.2, pooled sd 0.08
    tr = gap_trend((64, 128), g)
    ev = FinalGapEvidence(tr, 0)
    assert decide_final_gap(ev) == "UNDETERMINED"
    sp = math.sqrt((np.var(g[0], ddof=1) + np.var(g[1], ddof=1)) / 2)
    se = sp * math.sqrt(1 / 3 + 1 / 3)  # two cells one doubling apart: Δ = the difference of the means
    assert tr.delta == pytest.approx(-0.2, abs=1e-12) and tr.se == pytest.approx(se, rel=1e-12)
    upper = tr.delta + stats.t.ppf(1 - ALPHA_FAILS, 4) * se
    need = 3 * ((upper - tr.delta) / (-MARGIN - tr.delta)) ** 2
    why, seeds = final_gap_reason(ev)
    assert seeds == math.ceil(need) and seeds > 3
    assert f"≈ {seeds} seeds per cell would read FAILS" in why and "(3 seeds per cell" in why
    assert tr.delta + (upper - tr.delta) * math.sqrt(3 / seeds) < -MARGIN  # at that many seeds: a FAILS
    assert tr.delta + (upper - tr.delta) * math.sqrt(3 / (seeds - 1)) >= -MARGIN  # one fewer: not yet
