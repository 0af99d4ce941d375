"""Tests for `sapa/rules/growth.py`: the upper-bound reading against its tolerance, the tight rate's regime, the calibration."""

from __future__ import annotations

import math

import pytest

from sapa.rules import growth

@pytest.mark.slow
def test_growth_upper_calibration_meets_targets():
    from tests.sapa.rules.test_base import FALSE_FAILS_TARGET, FALSE_HOLDS_TARGET, _calibration, _ceiling

    c = _calibration("growth-upper")
    assert c.trials == 400
    assert c.false_fails_rate <= _ceiling(FALSE_FAILS_TARGET, c.trials)
    assert c.false_holds_rate <= _ceiling(FALSE_HOLDS_TARGET, c.trials)


def test_growth_upper_reads_the_interval_against_the_tolerance():
    ev = lambda lo, hi: growth.UpperEvidence(predicted=0.5, lo=lo, hi=hi, exact=lo == hi)  # noqa: E731
    assert growth.decide_upper(ev(0.5 + 1e-12, 0.5 + 1e-12)) == "HOLDS"  # a zero-width interval is not read by its sign
    assert growth.decide_upper(ev(0.5 + growth.TOL, 0.5 + growth.TOL)) == "HOLDS"
    assert growth.decide_upper(ev(0.62, 0.62)) == "FAILS"
    assert growth.decide_upper(ev(0.50, 0.60)) == "UNDETERMINED"
    assert growth.decide_upper(ev(math.nan, 0.5)) == "UNDETERMINED"


def test_growth_tight_distinguishes_regime_from_failure():
    N = (2.0, 16.0, 1024.0)
    tight = lambda local, asym: growth.TightEvidence(0.5, N, local, asym)  # noqa: E731
    assert growth.decide_tight(tight((0.5, 0.5, 0.5), 0.5)) == "HOLDS"
    assert growth.decide_tight(tight((0.02, 0.2, 0.49), 0.5)) == "HOLDS_IN_REGIME"
    assert growth.decide_tight(tight((0.5, 0.7, 0.9), 1.0)) == "FAILS"
    assert growth.regime_start(tight((0.02, 0.46, 0.49), 0.5)) == 16.0
