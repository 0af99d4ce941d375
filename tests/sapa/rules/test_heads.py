"""Tests for `sapa/rules/heads.py`: the ``head-fraction`` rule is pure, reads the band both ways, its synthetic
heads have the exponents they claim, and it is calibrated (false FAILS ≤ 1 %, false HOLDS ≤ 5 %)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.empirics.realmodel.real import paired_rms_exponents
from sapa.common.seeds import rng_for
from sapa.rules import all_rules, calibrate, rule_named
from sapa.rules import heads as R


def _ev(intervals, **band):
    lo, hi = zip(*intervals)
    return R.HeadFractionEvidence(lo=lo, hi=hi, **band)


def test_registered():
    assert rule_named("head-fraction") is R.HEAD_FRACTION and R.HEAD_FRACTION in all_rules()
    assert R.HEAD_FRACTION.thresholds["edge"] == pytest.approx(0.55)


def test_decide_branches():
    inside, above, unclear = (0.40, 0.50), (0.60, 0.70), (0.50, 0.60)
    assert R.decide(_ev([inside] * 9 + [above])) == "HOLDS"  # 90 % demonstrably within
    assert R.decide(_ev([inside] * 8 + [unclear] + [above])) == "UNDETERMINED"  # 80 % within, 90 % consistent
    assert R.decide(_ev([inside] * 6 + [above] * 4)) == "UNDETERMINED"  # 60 % consistent: not below FAIL_BELOW
    assert R.decide(_ev([inside] * 5 + [above] * 5)) == "FAILS"
    assert R.decide(_ev([unclear] * 5 + [above] * 5)) == "FAILS"  # unclear heads count as consistent, still < 60 %
    assert R.decide(R.HeadFractionEvidence(lo=(), hi=())) == "UNDETERMINED"
    assert R.decide(_ev([(math.nan, 0.5)] * 3)) == "UNDETERMINED"


def test_two_sided_band_rejects_a_slow_head():
    """The same intervals: within O(√N) (upper bound), outside 0.5 ± 0.05 (two-sided) — softmax's case."""
    slow = [(0.10, 0.30)] * 10
    assert R.decide(_ev(slow)) == "HOLDS"
    assert R.decide(_ev(slow, band_lo=0.45, band_hi=0.55)) == "FAILS"
    ev = _ev([(0.40, 0.47), (0.46, 0.50), (0.56, 0.60)], band_lo=0.45, band_hi=0.55)
    assert list(ev.consistent()) == [True, True, False] and list(ev.within()) == [False, True, False]


def test_truth_exponents():
    rng = np.random.default_rng(0)
    e = R.truth_exponents("holds", rng)
    assert e.size == R.SIM_HEADS == 72 and np.sum(e == R.EDGE) == math.ceil(0.9 * 72) and np.all(e >= R.EDGE)
    e = R.truth_exponents("fails", rng)
    assert np.sum(e <= R.EDGE) == 36 and np.all(e[e > R.EDGE] == pytest.approx(R.A + 2 * R.TOL))
    with pytest.raises(ValueError):
        R.truth_exponents("maybe", rng)


def test_synthetic_heads_have_the_stated_exponents():
    """Many texts: the estimator's slope converges to the head's exponent (the truth of the calibration is exact)."""
    rng = np.random.default_rng(1)
    e = np.array([0.2, 0.55, 0.65, 1.2])
    V = R.synthetic_norms(e, rng, 0.12, texts=40_000)
    f = paired_rms_exponents(R.SIM_N, V, n_boot=20, rng=rng)
    assert f["slope"] == pytest.approx(e, abs=0.01)


def test_simulate_is_shaped_like_the_real_evidence():
    ev = R.simulate("holds", rng_for(0, "test", "heads"))
    assert len(ev.lo) == len(ev.hi) == 72 and all(lo <= hi for lo, hi in zip(ev.lo, ev.hi))
    assert ev == R.simulate("holds", rng_for(0, "test", "heads"))  # seeded
    width = np.median(np.subtract(ev.hi, ev.lo))
    assert 0.01 < width < 0.4  # real: median interval width 0.02 … 0.14


def test_calibration_quick():
    c = calibrate(R.HEAD_FRACTION, trials=60)
    assert c.false_fails_rate <= 0.02 and c.false_holds_rate == 0.0 and c.power > 0.2


@pytest.mark.slow
def test_calibration_meets_targets():
    c = calibrate(R.HEAD_FRACTION, trials=2000, seed=1)
    assert c.false_fails_rate <= 0.01 and c.false_holds_rate <= 0.05 and c.meets_targets and c.power > 0.3


def test_heads_to_flip_counts_the_heads_between_the_verdict_and_its_threshold():
    """41 of 72 heads consistent against FAILS below 60 % (43.2 heads): 3 heads from UNDETERMINED."""
    H = 72
    lo = tuple([0.0] * 41 + [1.0] * (H - 41))  # 41 consistent (lo ≤ ½ + TOL), none within with hi = 2
    ev = R.HeadFractionEvidence(lo=lo, hi=(2.0,) * H)
    d = R.heads_to_flip(ev)
    assert d["verdict"] == "FAILS" and d["heads_to_flip"] == 3 and d["fail_threshold"] == pytest.approx(43.2)
    more = R.HeadFractionEvidence(lo=tuple([0.0] * 44 + [1.0] * (H - 44)), hi=(2.0,) * H)
    assert R.decide(more) == "UNDETERMINED"  # 3 more heads flip it, as counted
    all_in = R.HeadFractionEvidence(lo=(0.0,) * H, hi=(0.5,) * H)
    assert R.heads_to_flip(all_in) == {**R.heads_to_flip(all_in), "verdict": "HOLDS", "heads_to_flip": H - 65 + 1}


def test_heads_to_flip_an_undetermined_fraction_counts_the_nearer_threshold():
    # mutation run: `need_w - w` → `need_w + w` survived; 10 heads, 5 within the band, all 10 consistent with it:
    # 9 within would make HOLDS (4 more), fewer than 6 consistent would make FAILS (5 fewer): the distance is 4
    within, straddle = (R.A - R.TOL, R.A - R.TOL), (R.A - R.TOL, R.A + 2 * R.TOL)
    lo, hi = zip(*([within] * 5 + [straddle] * 5))
    ev = R.HeadFractionEvidence(lo=lo, hi=hi)
    d = R.heads_to_flip(ev)
    assert (d["verdict"], d["within"], d["consistent"]) == ("UNDETERMINED", 5, 10)
    assert d["heads_to_flip"] == min(math.ceil(R.HIGH * 10) - 5, 10 - math.ceil(R.FAIL_BELOW * 10) + 1) == 4
