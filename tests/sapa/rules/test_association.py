"""Tests for `sapa/rules/association.py`: dose-association and matched-norm decide from the entry's adjusted p-values
and their intervals, and meet their calibration targets on a short run (the stored one has 1000 trials)."""

import math

import pytest

from empirics.training.dose_response import Contrast, exact_spearman
from sapa.rules import calibrate, rule_named
from sapa.rules.association import (ALPHA_FAILS, EQUIVALENCE, DoseEvidence, decide_dose, decide_matched,
                                    matched_evidence)


def test_a_monotone_dose_response_decides_either_way():
    down = exact_spearman(range(8), [0.9, 0.85, 0.8, 0.7, 0.6, 0.55, 0.5, 0.4])  # higher norm, lower accuracy
    up = exact_spearman(range(8), [0.4, 0.5, 0.55, 0.6, 0.7, 0.8, 0.85, 0.9])
    assert decide_dose(DoseEvidence(down, down.p_less, down.p_greater)) == "HOLDS"
    assert decide_dose(DoseEvidence(up, up.p_less, up.p_greater)) == "FAILS"
    assert up.p_greater == pytest.approx(1 / math.factorial(8))


def test_an_inverted_u_is_undetermined_and_adjusted_p_decide():
    bump = exact_spearman(range(8), [0.5, 0.7, 0.8, 0.9, 0.9, 0.8, 0.7, 0.5])
    assert decide_dose(DoseEvidence(bump, bump.p_less, bump.p_greater)) == "UNDETERMINED"
    up = exact_spearman(range(8), range(8))
    assert decide_dose(DoseEvidence(up, 1.0, ALPHA_FAILS * 1.01)) == "UNDETERMINED"  # Holm moved it above the level


def _contrast(diffs):
    return Contrast(tuple(diffs), tuple(0.0 for _ in diffs), sum(diffs) / len(diffs), math.nan, math.nan, len(diffs))


def test_matched_norm_fails_beyond_the_margin_holds_inside_it():
    far = matched_evidence(_contrast([-0.2, -0.18, -0.22, -0.19, -0.21, -0.2]))
    assert decide_matched(far) == "FAILS"
    near = matched_evidence(_contrast([0.001, -0.002, 0.0015, -0.001, 0.0005, 0.0]))
    assert decide_matched(near) == "HOLDS" and -EQUIVALENCE < near.lo < near.hi < EQUIVALENCE
    noisy = matched_evidence(_contrast([0.1, -0.1, 0.05, -0.08]))
    assert decide_matched(noisy) == "UNDETERMINED"
    assert decide_matched(matched_evidence(_contrast([0.0]))) == "UNDETERMINED"


@pytest.mark.parametrize("name", ["dose-association", "matched-norm"])
def test_calibration_meets_targets_on_a_short_run(name):
    c = calibrate(rule_named(name), trials=200, seed=1)
    assert c.false_fails_rate <= 0.01 + 3 * math.sqrt(0.01 * 0.99 / 200)
    assert c.false_holds_rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 200)
