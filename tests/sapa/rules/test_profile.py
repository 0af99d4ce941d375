"""Tests for `sapa/rules/profile.py`: the shape of each row profile and the verdict over cases."""

from __future__ import annotations

from sapa.rules import profile

def test_profile_case_labels():
    assert profile.case_shape(-0.05, 0.05) == "uniform"
    assert profile.case_shape(0.4, 0.6) == "non-uniform"
    assert profile.case_shape(0.05, 0.2) == "inconclusive"
    P = profile.ProfileEvidence
    assert profile.decide(P((("a", 0.45, 0.55), ("b", 0.4, 0.6)))) == "FAILS"
    assert profile.decide(P((("a", -0.01, 0.01), ("b", 0.4, 0.6)))) == "HOLDS_IN_REGIME"


def test_mutation_run_boundaries_of_the_profile_band():
    # mutation run: `hi <= tol` → `<`, `lo > tol` → `>=` survived
    from sapa.rules.profile import TOL, case_shape

    assert case_shape(-TOL, TOL) == "uniform"            # the band's closed ends belong to it
    assert case_shape(TOL, 2 * TOL) == "inconclusive"    # touching the band is not wholly outside it
    assert case_shape(-2 * TOL, -TOL) == "inconclusive"
