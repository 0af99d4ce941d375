"""Tests for `sapa/rules/bound.py`: HOLDS, HOLDS_LOOSE, FAILS and the numerics that beat a proof."""

from __future__ import annotations

from sapa.rules import bound

def test_bound_rule_cases():
    E = bound.BoundEvidence
    assert bound.decide(E(claimed=2.0, sharp=0.5, found=0.5)) == "HOLDS_LOOSE"
    assert bound.decide(E(claimed=1.0, sharp=1.0, found=1.0 - 1e-15)) == "HOLDS"
    assert bound.decide(E(claimed=1.0, sharp=1.0, found=1.0 + 1e-12)) == "HOLDS"  # round-off
    assert bound.decide(E(claimed=1.0, sharp=1.0, found=1.01)) == "FAILS"
    assert bound.decide(E(claimed=2.0, sharp=0.5, found=0.7)) == "UNDETERMINED"  # numerics beat the proof
