"""Tests for `sapa/rules/learning.py`: the two slowdown questions on interval-censored trends, final-gap-trend's gate
and the reason it names, and the rules' calibration against their targets (a short run; the stored one has 1000 or
2000 trials)."""

import math

import numpy as np
import pytest

from empirics.training.censored_trend import interval_trend
from empirics.training.study_analysis import gap_trend
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


@pytest.mark.parametrize("name", ["slowdown-growth", "slowdown-doubling", "final-gap-trend"])
def test_calibration_meets_targets_on_a_short_run(name):
    n = 100
    c = calibrate(rule_named(name), trials=n, seed=1)
    assert c.false_fails_rate <= 0.01 + 3 * math.sqrt(0.01 * 0.99 / n)
    assert c.false_holds_rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)
