"""Tests for `sapa/claims/growth_claims.py` and `sapa/claims/mc.py`: the regime rule and the MC plumbing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.claims import growth_claims, mc
from theory.moments import exact_moments, local_growth_exponent


@pytest.mark.parametrize("r", [0.0, 0.5, 1.0, 1.003, 2.0, 60.0, 19672.9])
def test_regime_start_is_the_first_n_within_tolerance(r):
    n0 = growth_claims.regime_start(r)
    e = lambda N: 0.5 * N / (N - 1 + r)  # noqa: E731 - the local exponent of the 1/√N-scaled E-RMS norm
    assert abs(e(n0) - 0.5) <= growth_claims.TOL + 1e-12
    if n0 > 1:
        assert abs(e(n0 - 1) - 0.5) > growth_claims.TOL
    for N in (n0, n0 + 1, 2 * n0, 100 * n0):  # monotone: stays inside afterwards
        assert abs(e(N) - 0.5) <= growth_claims.TOL + 1e-12


def test_local_exponent_formula_matches_theory():
    m = exact_moments(3, "tied", 196, 64, 16, sigma=1 / 8)
    r = m.crossover_n - 1
    assert 0.5 * 196 / (195 + r) == pytest.approx(m.growth_exponent, rel=1e-12)
    assert local_growth_exponent(196, float(m.m_off), float(m.m_diag)) == pytest.approx(m.growth_exponent, rel=1e-12)


def test_exact_profile_paper_model_has_no_regime():
    pr = growth_claims.exact_profile(3, "paper", 0.0, 64, 32)
    assert pr["crossover_n"] == 2 and pr["regime_start_n"] == 1
    assert pr["scaled_exponent_at_196"] == 0.5 and pr["asymptotic_scaled_exponent"] == 0.5


def test_exact_profile_tied_cubic_is_far_from_sqrt_n_at_vit_base():
    pr = growth_claims.exact_profile(3, "tied", 1.0, 768, 64)
    assert pr["crossover_n"] > 10_000 and pr["scaled_exponent_at_196"] < 0.01
    assert pr["regime_start_n"] > 100_000


def test_exact_rms_slope_recovers_a_power_law():
    N = [8, 16, 32, 64]
    assert mc.exact_rms_slope(N, [3.0 * n**1.4 for n in N]) == pytest.approx(0.7, abs=1e-12)


def test_rms_exponent_interval_covers_truth_on_synthetic_data():
    rng = np.random.default_rng(5)
    N = [8, 16, 32, 64, 128]
    # ‖·‖² = N·(χ²_k/k): E = N, light tails; the RMS exponent is 0.5.
    sq = [n * rng.chisquare(20, size=400) / 20 for n in N]
    fit = mc.rms_exponent(N, sq, (0, 1))
    assert fit["ci"][0] <= 0.5 <= fit["ci"][1]
    assert fit["level"] == mc.LEVEL and math.isfinite(fit["slope"])


def test_coefficient_of_scale_policies():
    assert mc._coefficient("inv_sqrt_n", None, 16) == 0.25
    assert mc._coefficient("const", 0.0625, 16) == 0.0625


@pytest.fixture(scope="module")
def worst_ctx(tmp_path_factory):
    from dataclasses import replace

    from sapa.budget import QUICK
    from sapa.ledger import Context

    return Context(budget=replace(QUICK, worst_Ns=(3, 6), worst_steps=2), out_dir=tmp_path_factory.mktemp("wc"))


@pytest.mark.parametrize("p,scaled,token,fro", [(1, True, "HOLDS", "HOLDS"), (3, True, "HOLDS", "FAILS"),
                                                (1, False, "HOLDS", "HOLDS"), (3, False, "HOLDS", "FAILS")])
def test_worst_case_evidence_per_input_set(worst_ctx, p, scaled, token, fro):
    from sapa.claims import worst

    ev, figs = worst.evidence(worst_ctx, p, scaled)
    assert ev["verdict_worst_case"] == {"token": token, "fro": fro}
    assert ev["theory_and_numerics_agree"] is True
    assert ev["predicted_exponent"] == (0.5 if scaled else 1.0)
    assert figs and all((worst_ctx.out_dir / f).exists() for f in figs)
    assert (worst_ctx.out_dir / "data" / "worst_case.pkl").exists()
    assert "N^" in worst.headline(ev)
