"""Tests for `sapa/rules/like_softmax.py`: the "grows like softmax" rule, its thresholds and its calibration."""

from __future__ import annotations

import math

import pytest

from sapa.rules import FALSE_FAILS_TARGET, FALSE_HOLDS_TARGET, calibrate, rule_named
from sapa.rules import like_softmax as R


def ev(lo, hi, ratio, asym=math.nan, rlo=None):
    return R.LikeSoftmaxEvidence(lo, hi, asym, ratio if rlo is None else rlo, ratio, True)


@pytest.mark.parametrize("e,verdict", [
    (ev(0.5, 0.5, 1.0), "HOLDS"),
    (ev(0.55, 0.55, R.K), "HOLDS"),                       # both edges are still "like softmax"
    (ev(0.5, 0.5, 2093.0), "FAILS"),                      # x³/√N at ViT-B, iid: right rate, 2·10³× the constant
    (ev(1.0, 1.0, 1.0), "FAILS"),                         # unscaled x: rate N
    (ev(1.3, 1.3, 0.9, asym=0.0), "HOLDS_IN_REGIME"),      # fast only at small N
    (ev(0.4, 0.7, 1.0), "UNDETERMINED"),                  # a Monte Carlo interval straddling the edge
    (ev(0.5, 0.5, 12.0, rlo=8.0), "UNDETERMINED"),
    (ev(math.nan, 0.5, 1.0), "UNDETERMINED"),
])
def test_decide(e, verdict):
    assert R.decide(e) == verdict


def test_registered_and_calibrated():
    rule = rule_named("audit-like-softmax")
    c = calibrate(rule, trials=200, seed=1)
    assert c.false_fails_rate <= FALSE_FAILS_TARGET + 0.01  # 200 trials: binomial slack
    assert c.false_holds_rate <= FALSE_HOLDS_TARGET
    assert c.power >= 0.9


# --- verdict text and label agree (words, numbers and the rule's verdict) ---------------------------------------

@pytest.mark.parametrize("rate,size", [(r, s) for r in ("HOLDS", "HOLDS_IN_REGIME", "FAILS", "UNDETERMINED")
                                       for s in ("HOLDS", "FAILS", "UNDETERMINED")])
def test_verdict_why_agrees_with_the_combined_label(rate, size):
    verdict = R.combine(rate, size)
    why = R.verdict_why(rate, size, regime="N ≥ 450")
    if verdict == "FAILS":
        assert why.startswith("fails on ") and all(n in why for n, v in (("rate", rate), ("size", size)) if v == "FAILS")
    elif verdict == "UNDETERMINED":
        assert why.startswith("undetermined on ")
    elif verdict == "HOLDS_IN_REGIME":
        assert "N ≥ 450" in why and "holds on rate and size" not in why
    else:
        assert why == "holds on rate and size"


def test_holds_in_regime_text_must_name_its_regime():
    with pytest.raises(ValueError):
        R.verdict_why("HOLDS_IN_REGIME", "HOLDS")


def test_regime_text_is_past_the_last_judged_window():
    w = [{"from": 2.0, "to": 7.5, "below_n_min": True}, {"from": 300.0, "to": 1650.0, "below_n_min": False}]
    assert R.regime_text(w, 16, 2.0**20) == "N ≥ 1650"
    assert R.regime_text(w[:1], 16, 2.0**20) == "N ≥ 16"
    assert "asymptotic" in R.regime_text([{"from": 300.0, "to": 2.0**20, "below_n_min": False}], 16, 2.0**20)
