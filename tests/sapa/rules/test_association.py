"""Tests for `sapa/rules/association.py`: the arm-association and seed-contrast rules are symmetric, pure and
calibrated (false FAILS ≤ 1 %, false HOLDS ≤ 5 % on synthetic experiments with the real cluster structure)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from empirics.norm_accuracy import ArmAssociation, SeedContrast
from empirics.samplers import rng_for
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
    c = SeedContrast(mean=-1.0, p_less=1 / 64, p_greater=1.0, lo=-2.0, hi=-0.5, level=A.CONTRAST_LEVEL, n=6)
    assert A.decide_contrast(c) == "HOLDS"


def test_thresholds_declared_once():
    assert A.ALPHA * A.K_READINGS <= 0.05 and A.LEVEL == pytest.approx(1 - 2 * A.ALPHA)
    r = rule_named("arm-association")
    assert r in all_rules() and r.thresholds["alpha_per_reading_one_sided"] == A.ALPHA
    assert rule_named("seed-contrast").thresholds["interval_level"] == A.CONTRAST_LEVEL


def test_synthetic_runs_have_the_cluster_structure():
    rng = np.random.default_rng(0)
    lnorm, acc = A.synthetic_runs(rng, 6, 0.9)
    assert lnorm.shape == acc.shape == (6, A.SIM_STRATA, A.SIM_SEEDS)
    # paired strata: the replicate effect is shared, so stratum differences vary far less than the runs
    d = lnorm[:, 0, :] - lnorm[:, 1, :]
    assert np.std(d - d.mean()) < np.std(lnorm[:, 0, :] - lnorm[:, 0, :].mean())


def test_arm_association_is_calibrated():
    """Null (no arm-level association, within-arm run correlation 0.6) and designed effect (ρ = +0.9), 5–6 arms."""
    n = 200
    c = calibrate(A.ARM_ASSOCIATION, trials=n, seed=1)
    slack = 2 * math.sqrt(0.01 * 0.99 / n)  # binomial sampling error of a 1 % rate
    assert c.false_fails_rate <= 0.01 + slack and c.false_holds_rate <= 0.05
    assert c.power > c.false_fails_rate  # the rule sees the designed effect more often than the null


def test_arm_association_six_arms_power_exceeds_five():
    def fails(arms, truth, n=120):
        return sum(A.decide_arm(A.simulate_arms(truth, rng_for(2, "t", arms, truth, k), n_arms=arms)) == "FAILS"
                   for k in range(n)) / n

    assert fails(6, "fails") > fails(5, "fails") >= 0.0
    assert fails(6, "holds") <= 0.05


def test_seed_contrast_calibration_and_its_floor():
    c = calibrate(A.SEED_CONTRAST, trials=200, seed=0)
    assert c.false_fails_rate == 0 and c.false_holds_rate == 0 and c.power == 0  # 3 seeds: p ≥ 1/8 > α
    six = [A.decide_contrast(A.simulate_contrast("fails", rng_for(3, "s", k), seeds=6)) for k in range(200)]
    null = [A.decide_contrast(A.simulate_contrast("holds", rng_for(4, "s", k), seeds=6)) for k in range(200)]
    assert six.count("FAILS") / 200 > 0.1 and null.count("FAILS") / 200 <= 0.01 + 2 * math.sqrt(0.01 * 0.99 / 200)
