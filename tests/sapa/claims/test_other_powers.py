"""Tests for `sapa/claims/other_powers.py`: every p = 1…5 is O(√N) and √N only from N*(p), which rises with p."""

from __future__ import annotations

import math

import pytest

from sapa.claims import other_powers
from sapa.ledger import reading_keyed
from sapa.theory.moments import exact_moments


@pytest.fixture(scope="module")
def outcome(growth_context):
    return other_powers.check(growth_context)


def test_answered_with_every_power_o_sqrt_n_and_tight_only_in_a_regime(outcome):
    assert outcome.verdict == "ANSWERED"  # on the small context, as on the quick budget
    for p in other_powers.POWERS:
        assert reading_keyed(outcome.readings, "p", p, "upper").verdict == "HOLDS"
        assert reading_keyed(outcome.readings, "p", p, "tight").verdict == "HOLDS_IN_REGIME"


@pytest.mark.parametrize("p", [1, 3, 5])
def test_the_crossover_at_vit_base_is_exact_moments_own(outcome, p):
    """N* = 1 + E S_11^{2p}/E S_12^{2p} (tied, ViT-Base) as the table states it, from exact_moments directly."""
    row = next(t for t in outcome.evidence["table"] if t["p"] == p and t["model"] == "tied" and t["setting"] == "ViT-Base")
    e = exact_moments(p, "tied", 196, 768, 64, rho=1.0, sigma=1 / math.sqrt(768))
    assert row["crossover_n"] == pytest.approx(1 + e.m_diag / e.m_off, rel=1e-12)
    assert outcome.evidence["crossover_increases_with_p_tied"] is True


def test_a_false_variant_fails_and_the_answer_is_stable(outcome):
    assert outcome.falsifiability["negative_control"]["verdict"] == "FAILS"
    assert outcome.robustness["stable"] is True
