"""Tests for `sapa/rules/`: every verdict rule is pure, reads declared thresholds, and meets its calibration targets.

Calibration is measured on synthetic evidence with a known truth (``Rule.simulate``); the targets are
false FAILS ≤ 1 % (statement true, least favourable case) and false HOLDS ≤ 5 % (designed effect).
The tolerance on a measured rate comes from its sample size: with n trials and a true rate at the
target t, the count of wrong verdicts is Binomial(n, t); we require the measured count to stay
below the 99.9 % binomial quantile so a rule exactly at its target fails this test with prob. ≤ 0.1 %.
"""

from __future__ import annotations

import math

import pytest
from scipy import stats

from common.seeds import rng_for
from sapa.rules import (
    CLAIM_VERDICTS,
    FALSE_FAILS_TARGET,
    FALSE_HOLDS_TARGET,
    all_rules,
    bound,
    cached_calibration,
    calibrate,
    direction,
    growth,
    profile,
    rule_named,
    timing,
)
from sapa.rules.agreement import AgreementEvidence, tail_p
from sapa.rules.agreement import decide as decide_agreement

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


@pytest.mark.slow
def test_growth_upper_calibration_meets_targets():
    c = _calibration("growth-upper")
    assert c.trials == 400
    assert c.false_fails_rate <= _ceiling(FALSE_FAILS_TARGET, c.trials)
    assert c.false_holds_rate <= _ceiling(FALSE_HOLDS_TARGET, c.trials)


@pytest.mark.parametrize("name", [r.name for r in all_rules() if r.name != "growth-upper"])
def test_decide_is_pure_and_speaks_the_vocabulary(name):
    rule = rule_named(name)
    for truth in ("holds", "fails"):
        ev = rule.simulate(truth, rng_for(3, "purity", name, truth))
        v = rule.decide(ev)
        assert v in CLAIM_VERDICTS and rule.decide(ev) == v  # same evidence, same verdict


def test_calibration_is_reproducible():
    a = calibrate(rule_named("direction"), trials=200, seed=7)
    b = calibrate(rule_named("direction"), trials=200, seed=7)
    assert a == b


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


def test_bound_rule_cases():
    E = bound.BoundEvidence
    assert bound.decide(E(claimed=2.0, sharp=0.5, found=0.5)) == "HOLDS_LOOSE"
    assert bound.decide(E(claimed=1.0, sharp=1.0, found=1.0 - 1e-15)) == "HOLDS"
    assert bound.decide(E(claimed=1.0, sharp=1.0, found=1.0 + 1e-12)) == "HOLDS"  # round-off
    assert bound.decide(E(claimed=1.0, sharp=1.0, found=1.01)) == "FAILS"
    assert bound.decide(E(claimed=2.0, sharp=0.5, found=0.7)) == "UNDETERMINED"  # numerics beat the proof


def test_direction_and_profile_case_labels():
    assert direction.case_direction(0.4, 0.6) == "decreases"
    assert direction.case_direction(-0.6, -0.4) == "increases"
    assert direction.case_direction(-0.021, -0.021) == "flat"  # the tied x³ case: flat, not "increases"
    assert direction.case_direction(0.05, 0.2) == "unresolved"
    D = direction.DirectionEvidence
    assert direction.decide(D((("a", 0.5, 0.5), ("b", -0.02, -0.02)))) == "HOLDS_IN_REGIME"
    assert direction.decide(D((("a", 0.5, 0.5), ("b", -0.5, -0.5)))) == "FAILS"
    assert profile.case_shape(-0.05, 0.05) == "uniform"
    assert profile.case_shape(0.4, 0.6) == "non-uniform"
    assert profile.case_shape(0.05, 0.2) == "inconclusive"
    P = profile.ProfileEvidence
    assert profile.decide(P((("a", 0.45, 0.55), ("b", 0.4, 0.6)))) == "FAILS"
    assert profile.decide(P((("a", -0.01, 0.01), ("b", 0.4, 0.6)))) == "HOLDS_IN_REGIME"


def test_agreement_gate_uses_the_binomial_tail():
    assert tail_p(AgreementEvidence(100, 0, 0.99)) == 1.0
    assert tail_p(AgreementEvidence(28, 10, 0.99)) < 1e-10  # the old x³ first pass: 10 of 28 missed
    assert decide_agreement(AgreementEvidence(28, 10, 0.99)) == "FAILS"
    assert decide_agreement(AgreementEvidence(28, 1, 0.99)) == "HOLDS"
    p = tail_p(AgreementEvidence(64, 3, 0.99))
    assert p == pytest.approx(1 - stats.binom.cdf(2, 64, 0.01), rel=1e-12)


def test_timing_cells_have_a_noise_band():
    F, B = timing.FACTOR, 1 + timing.NOISE
    five = lambda r: (r,) * timing.MIN_ROUNDS  # noqa: E731  (five steady rounds)
    assert timing.cell_class(None) == timing.cell_class(()) == "unmeasured"
    assert timing.cell_class(five(F / B)) == "within"
    assert timing.cell_class(five(F)) == "marginal"
    assert timing.cell_class(five(F * B * 1.01)) == "outside"
    assert timing.cell_class((F / B,) * (timing.MIN_ROUNDS - 1)) == "unsteady"  # too few rounds
    T = timing.TimingEvidence
    assert timing.decide(T((("a", five(0.2)), ("b", five(0.5))))) == "HOLDS"
    assert timing.decide(T((("a", five(0.2)), ("b", five(5.0))))) == "HOLDS_IN_REGIME"
    assert timing.decide(T((("a", five(5.0)), ("b", five(1.5))))) == "FAILS"
    assert timing.decide(T((("a", five(1.5)), ("b", ())))) == "UNDETERMINED"


def test_timing_round_gate_rounds_that_disagree_beyond_the_band():
    T = timing.TimingEvidence
    B = 1 + timing.NOISE
    steady = (0.5, 0.52, 0.49, 0.51, 0.5)
    jumpy = (0.5, 0.5, 0.5, 0.5, 0.5 * B * B * 1.01)  # one round beyond ±NOISE about the centre
    assert timing.decide(T((("a", steady),))) == "HOLDS"
    assert timing.decide(T((("a", steady), ("b", jumpy)))) == "UNDETERMINED"
    assert "round gate" in timing.why(T((("a", steady), ("b", jumpy))))


@pytest.mark.parametrize("load, cores, verdict", [(0.4, 2, "HOLDS"), (2.0, 2, "HOLDS"), (2.01, 2, "UNDETERMINED"),
                                                  (6.3, 2, "UNDETERMINED"), (6.3, 8, "HOLDS"), (None, 2, "HOLDS")])
def test_timing_load_gate_with_injected_load(load, cores, verdict):
    """The load gate on injected machine states: above the cores no timing is decided, whatever the ratios."""
    T = timing.TimingEvidence
    steady = (0.5, 0.52, 0.49, 0.51, 0.5)
    ev = T((("a", steady), ("b", steady)), load=load, cores=cores)
    assert timing.decide(ev) == verdict
    far = T((("a", (9.0,) * 5),), load=load, cores=cores)  # a clear FAILS is held back too
    assert timing.decide(far) == ("UNDETERMINED" if verdict == "UNDETERMINED" else "FAILS")
    if verdict == "UNDETERMINED":
        assert timing.why(ev).startswith(f"machine load {load:.2f} exceeds its {cores} cores")

def test_mutation_run_boundaries_of_profile_and_timing():
    # mutation run: `hi <= tol` → `<`, `lo > tol` → `>=` (profile) and a dropped filter of bad rounds (timing) survived
    from sapa.rules.profile import TOL, case_shape
    from sapa.rules.timing import interval

    assert case_shape(-TOL, TOL) == "uniform"            # the band's closed ends belong to it
    assert case_shape(TOL, 2 * TOL) == "inconclusive"    # touching the band is not wholly outside it
    assert case_shape(-2 * TOL, -TOL) == "inconclusive"
    assert interval([1.0, float("nan"), float("inf"), -2.0, 0.0, None, 3.0]) == (1.0, 3.0)
    assert interval([None, float("nan")]) is None
