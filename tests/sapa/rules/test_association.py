"""Tests for `sapa/rules/association.py`: the arm-association and seed-contrast rules are symmetric, pure and
calibrated (false FAILS ≤ 1 %, false HOLDS ≤ 5 % on synthetic experiments with the real cluster structure)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from empirics.training.norm_accuracy import ArmAssociation, SeedContrast
from empirics.montecarlo.samplers import rng_for
from sapa.rules import all_rules, calibrate, rule_named
from sapa.rules import association as A


def _ev(p_less, p_greater, lo, hi):
    return ArmAssociation(rho=0.0, p_less=p_less, p_greater=p_greater, lo=lo, hi=hi, level=A.LEVEL, n_arms=6,
                          n_perm=720, exact=True, n_boot=100)


def test_decide_branches_and_symmetry():
    assert A.decide_arm(_ev(1 / 720, 1.0, -0.9, -0.2)) == "HOLDS"
    assert A.decide_arm(_ev(1.0, 1 / 720, 0.2, 0.9)) == "FAILS"  # the mirror image
    assert A.decide_arm(_ev(1 / 720, 1.0, -0.9, 0.1)) == "UNDETERMINED"  # interval touches 0
    assert A.decide_arm(_ev(0.02, 0.99, -0.9, -0.2)) == "UNDETERMINED"  # p above α
    assert A.decide_arm(_ev(A.ALPHA, 1.0, -0.9, -0.2)) == "HOLDS"  # p = α is enough
    assert A.decide_arm(_ev(math.nan, math.nan, math.nan, math.nan)) == "UNDETERMINED"
    mc = ArmAssociation(rho=0.5, p_less=1.0, p_greater=1 / 10000, lo=0.1, hi=0.8, level=A.LEVEL, n_arms=10,
                        n_perm=9999, exact=False, n_boot=100)  # Monte Carlo p (10 arms): its floor 1/(9999 + 1) < α
    assert A.decide_arm(mc) == "FAILS"
    c = SeedContrast(mean=-1.0, p_less=1 / 64, p_greater=1.0, lo=-2.0, hi=-0.5, level=A.CONTRAST_LEVEL, n=6)
    assert A.decide_contrast(c) == "HOLDS"


def test_thresholds_declared_once():
    assert A.ALPHA * A.K_READINGS <= 0.05 and A.LEVEL == pytest.approx(1 - 2 * A.ALPHA)
    r = rule_named("arm-association")
    assert r in all_rules() and r.thresholds["alpha_per_reading_one_sided"] == A.ALPHA
    assert rule_named("seed-contrast").thresholds["interval_level"] == A.CONTRAST_LEVEL


def test_study_designs_are_the_training_study_readings():
    """One synthetic design per (budget, task) reading of study_arm_level; both permutation paths are calibrated."""
    from empirics.training.norm_accuracy import MAX_EXACT_ARMS, N_BOOT
    from empirics.training.train_study import FULL, QUICK

    want = {(len(c.task_arms(t)), len(c.plan(t).Ns), c.seeds) for c in (QUICK, FULL) for t in c.tasks}
    assert set(A.STUDY_DESIGNS) == want and A.SIM_N_BOOT == N_BOOT
    assert min(a for a, _, _ in A.STUDY_DESIGNS) <= MAX_EXACT_ARMS < max(a for a, _, _ in A.STUDY_DESIGNS)
    for d in A.STUDY_DESIGNS:
        e = A.simulate_study("holds", rng_for(0, "shape", *d), design=d)
        assert e.n_arms == d[0] and len(e.strata) == d[1] and e.level == A.LEVEL and e.n_boot == N_BOOT
        assert e.exact == (d[0] <= MAX_EXACT_ARMS) and e.n_perm == (math.factorial(d[0]) if e.exact else 9999)


def test_study_runs_have_the_cluster_structure():
    """A seed's effect is shared by every arm at one N (same initialisation), nothing is shared across N cells,
    and norm and accuracy of one run are correlated within the arm (SIM_WITHIN_RHO)."""
    lnorm, acc = A.study_runs(np.random.default_rng(0), 3, 0.0, strata=2, seeds=4000)
    assert lnorm.shape == acc.shape == (3, 2, 4000)
    rho = lambda x, y: stats.spearmanr(x, y).statistic  # noqa: E731  (sd ≈ 1/√4000 = 0.016 under independence)
    assert rho(lnorm[0, 0], lnorm[1, 0]) > 0.3  # shared seed: population Pearson correlation 0.25 / 0.5
    assert abs(rho(lnorm[0, 0], lnorm[0, 1])) < 0.1  # independent models at different N
    assert rho(lnorm[0, 0], acc[0, 0]) > 0.15  # within-run: 0.6 · 0.25 / 0.5 = 0.3 (seed effects independent)
    assert abs(rho(lnorm[0, 0], acc[1, 0])) < 0.1  # across arms only the arm effects could link them (ρ = 0 here)


def test_arm_association_is_calibrated():
    """Null (no arm-level association, within-run correlation 0.6) and designed effect (ρ = +0.9), study designs.

    A synthetic study costs ~0.1 s (9999 Monte Carlo orders, 4000 arm resamples), so this run is short: the 99.9 %
    binomial quantile of the target rate bounds the measured rate (n = 60: 4/60 for 1 %, 9/60 for 5 %); the rule's
    own count (400) runs in tests/sapa/rules/test_rules.py under ``-m slow``."""
    n = 60
    c = calibrate(A.ARM_ASSOCIATION, trials=n, seed=1)
    assert c.false_fails_rate <= stats.binom.ppf(0.999, n, 0.01) / n
    assert c.false_holds_rate <= stats.binom.ppf(0.999, n, 0.05) / n
    assert c.power > c.false_fails_rate  # the rule sees the designed effect more often than the null


def test_seed_contrast_calibration_and_its_floor():
    c = calibrate(A.SEED_CONTRAST, trials=200, seed=0)
    assert c.false_fails_rate == 0 and c.false_holds_rate == 0 and c.power == 0  # 3 seeds: p ≥ 1/8 > α
    six = [A.decide_contrast(A.simulate_contrast("fails", rng_for(3, "s", k), seeds=6)) for k in range(200)]
    null = [A.decide_contrast(A.simulate_contrast("holds", rng_for(4, "s", k), seeds=6)) for k in range(200)]
    assert six.count("FAILS") / 200 > 0.1 and null.count("FAILS") / 200 <= 0.01 + 2 * math.sqrt(0.01 * 0.99 / 200)
