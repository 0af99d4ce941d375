"""Tests for `sapa/rules/direction.py`: the direction of each case and the verdict over cases."""

from __future__ import annotations

from sapa.rules import direction

def test_direction_case_labels():
    assert direction.case_direction(0.4, 0.6) == "decreases"
    assert direction.case_direction(-0.6, -0.4) == "increases"
    assert direction.case_direction(-0.021, -0.021) == "flat"  # the tied x³ case: flat, not "increases"
    assert direction.case_direction(0.05, 0.2) == "unresolved"
    D = direction.DirectionEvidence
    assert direction.decide(D((("a", 0.5, 0.5), ("b", -0.02, -0.02)))) == "HOLDS_IN_REGIME"
    assert direction.decide(D((("a", 0.5, 0.5), ("b", -0.5, -0.5)))) == "FAILS"
