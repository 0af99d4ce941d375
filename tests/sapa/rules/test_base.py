"""Tests for `sapa/rules/__init__.py` and `sapa/rules/base.py`: every verdict rule (discovered from the package) is
pure, reads declared thresholds, and meets its calibration targets; each rule's own cases: tests/sapa/rules/test_<rule>.py.

Calibration is measured on synthetic evidence with a known truth (``Rule.simulate``); the targets are
false FAILS ≤ 1 % (statement true, least favourable case) and false HOLDS ≤ 5 % (designed effect).
The tolerance on a measured rate comes from its sample size: with n trials and a true rate at the
target t, the count of wrong verdicts is Binomial(n, t); we require the measured count to stay
below the 99.9 % binomial quantile so a rule exactly at its target fails this test with prob. ≤ 0.1 %.
"""

from __future__ import annotations

import pytest
from scipy import stats

from sapa.common.seeds import rng_for
from sapa.rules import CLAIM_VERDICTS, FALSE_FAILS_TARGET, FALSE_HOLDS_TARGET, all_rules, cached_calibration, calibrate, rule_named

FAST = {r.name: min(r.trials, 400) for r in all_rules()}  # default run; `sapa calibrate` uses each rule's own count


def _ceiling(rate: float, n: int) -> float:
    """Largest measured rate consistent with a true rate ``rate`` at the 99.9 % binomial quantile."""
    return stats.binom.ppf(0.999, n, rate) / n


def test_every_rule_is_named_once_and_declares_its_thresholds():
    names = [r.name for r in all_rules()]
    assert len(names) == len(set(names))
    for r in all_rules():
        assert r.thresholds and r.summary and {"holds", "fails"} <= set(r.design)


# Rules whose 400 trials take tens of CPU-seconds (a likelihood fit or an exact permutation test per trial): the default
# run checks their calibration at 100–200 trials (seed 1) in their own test modules (test_learning.py,
# test_association.py); the 400 trials run under ``-m slow``.
SLOW_CALIBRATION = {"growth-upper", "slowdown-growth", "slowdown-doubling", "dose-association"}


def _calibration(name: str):
    """``calibrate`` at FAST[name] trials, seed 0; at a rule's own count this is the ledger's cached calibration
    (``sapa.rules.cached_calibration``), computed once per process and shared with the claim tests."""
    rule = rule_named(name)
    if FAST[name] == rule.trials:
        return cached_calibration(name, 0)
    return calibrate(rule, trials=FAST[name], seed=0)


@pytest.mark.parametrize("name", [pytest.param(r.name, marks=pytest.mark.slow) if r.name in SLOW_CALIBRATION
                                  else r.name for r in all_rules() if r.name != "growth-upper"])
def test_calibration_meets_targets(name):
    c = _calibration(name)
    assert c.trials == FAST[name] and c.seed == 0
    assert c.false_fails_rate <= _ceiling(FALSE_FAILS_TARGET, c.trials)
    assert c.false_holds_rate <= _ceiling(FALSE_HOLDS_TARGET, c.trials)


@pytest.mark.parametrize("name", [r.name for r in all_rules() if r.name != "growth-upper"])
def test_decide_is_pure_and_speaks_the_vocabulary(name):
    rule = rule_named(name)
    for truth in ("holds", "fails"):
        ev = rule.simulate(truth, rng_for(3, "purity", name, truth))
        v = rule.decide(ev)
        assert v in CLAIM_VERDICTS and rule.decide(ev) == v  # same evidence, same verdict
        assert rule.decide(rule.simulate(truth, rng_for(3, "purity", name, truth))) == v  # same draw, same verdict


def test_calibration_is_reproducible():
    a = calibrate(rule_named("direction"), trials=200, seed=7)
    b = calibrate(rule_named("direction"), trials=200, seed=7)
    assert a == b
