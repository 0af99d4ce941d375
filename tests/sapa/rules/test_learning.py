"""Tests for `sapa/rules/learning.py`: the censoring logic of slowdown-trend, final-gap-trend's convergence gate,
and both rules' calibration against their targets (a short run; the stored one has 2000 trials)."""

import numpy as np
import pytest

from empirics.training.learning_curves import slowdown_evidence
from empirics.training.study_analysis import gap_trend
from sapa.rules import calibrate, rule_named
from sapa.rules.learning import FinalGapEvidence, MARGIN_SLOW, decide_final_gap, decide_slowdown

NS = (16, 32, 64)


def _ev(means, sd=0.3, cens=(0, 0, 0), R=5):
    rng = np.random.default_rng(0)
    vals = [m + sd * rng.standard_normal(R) for m in means]
    flags = [[k < c for k in range(R)] for c in cens]
    return slowdown_evidence(NS, vals, flags)


def test_flat_slowdown_holds_and_growing_fails():
    assert decide_slowdown(_ev((1.0, 1.0, 1.0))) == "HOLDS"
    assert decide_slowdown(_ev((0.0, 2.0, 4.0))) == "FAILS"


def test_censoring_below_the_largest_n_is_undetermined_and_at_it_forbids_holds():
    assert decide_slowdown(_ev((0.0, 2.0, 4.0), cens=(1, 0, 0))) == "UNDETERMINED"
    assert decide_slowdown(_ev((1.0, 1.0, 1.0), cens=(0, 0, 2))) == "UNDETERMINED"  # flat but censored: no HOLDS
    assert decide_slowdown(_ev((0.0, 2.0, 4.0), cens=(0, 0, 2))) == "FAILS"  # a lower bound already grows


def test_no_spread_or_one_cell_is_undetermined():
    assert decide_slowdown(slowdown_evidence(NS, [[1.0, 1.0]] * 3, [[False, False]] * 3)) == "UNDETERMINED"
    assert decide_slowdown(slowdown_evidence((16,), [[1.0, 2.0]], [[False, False]])) == "UNDETERMINED"


def test_final_gap_fails_only_when_converged():
    tr = gap_trend(NS, [np.array([0.0, 0.01, -0.01]), np.array([-0.3, -0.31, -0.29]), np.array([-0.6, -0.61, -0.59])])
    assert decide_final_gap(FinalGapEvidence(tr, 0)) == "FAILS"
    assert decide_final_gap(FinalGapEvidence(tr, 2)) == "UNDETERMINED"


@pytest.mark.parametrize("name", ["slowdown-trend", "final-gap-trend"])
def test_calibration_meets_targets_on_a_short_run(name):
    c = calibrate(rule_named(name), trials=300, seed=1)
    assert c.false_fails_rate <= 0.02 and c.false_holds_rate <= 0.06  # targets 1 % / 5 %, ±binomial sd at 300
    assert MARGIN_SLOW == 1.0
