"""Tests for `sapa/evidence/growth_profiles.py` (and the growth entries' decisions, `sapa/claims/growth_check.py`):
the regime rule, the exact profiles and constants, the worst-case side and the Monte Carlo plumbing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.evidence import growth_profiles as gp
from sapa.evidence import monte_carlo as mc
from sapa.theory.moments import exact_moments, local_growth_exponent


@pytest.mark.parametrize("r", [0.0, 0.5, 1.0, 1.003, 2.0, 60.0, 19672.9])
def test_regime_start_is_the_first_n_within_tolerance(r):
    n0 = gp.regime_start(r)
    e = lambda N: 0.5 * N / (N - 1 + r)  # noqa: E731 - the local exponent of the 1/√N-scaled E-RMS norm
    assert abs(e(n0) - 0.5) <= gp.TOL + 1e-12
    if n0 > 1:
        assert abs(e(n0 - 1) - 0.5) > gp.TOL
    for N in (n0, n0 + 1, 2 * n0, 100 * n0):  # monotone: stays inside afterwards
        assert abs(e(N) - 0.5) <= gp.TOL + 1e-12


def test_local_exponent_formula_matches_theory():
    m = exact_moments(3, "tied", 196, 64, 16, sigma=1 / 8)
    r = m.crossover_n - 1
    assert 0.5 * 196 / (195 + r) == pytest.approx(m.growth_exponent, rel=1e-12)
    assert local_growth_exponent(196, float(m.m_off), float(m.m_diag)) == pytest.approx(m.growth_exponent, rel=1e-12)


def test_exact_profile_paper_model_has_no_regime():
    pr = gp.exact_profile(3, "paper", 0.0, 64, 32)
    assert pr["crossover_n"] == 2 and pr["regime_start_n"] == 1
    assert pr["scaled_exponent_at_196"] == 0.5 and pr["asymptotic_scaled_exponent"] == 0.5


def test_exact_profile_tied_cubic_is_far_from_sqrt_n_at_vit_base():
    pr = gp.exact_profile(3, "tied", 1.0, 768, 64)
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
    fit = mc.rms_exponent(N, sq)
    assert fit["ci"][0] <= 0.5 <= fit["ci"][1]
    assert fit["level"] == mc.LEVEL and math.isfinite(fit["slope"])


def test_coefficient_of_scale_policies():
    from sapa.theory.families import scale_factor as coefficient

    assert coefficient("inv_sqrt_n", 16) == 0.25
    assert coefficient("const", 16, c=0.0625) == 0.0625


@pytest.mark.parametrize("p,scaled,token,fro", [(1, True, "HOLDS", "HOLDS"), (3, True, "HOLDS", "FAILS"),
                                                (1, False, "HOLDS", "HOLDS"), (3, False, "HOLDS", "FAILS")])
def test_worst_case_evidence_per_input_set(growth_context, p, scaled, token, fro):
    worst_ctx = growth_context  # tests/conftest.py: small sizes, the closed-form witnesses as the only starts
    from sapa.evidence import growth_worst_case as worst

    ev, figs = worst.evidence(worst_ctx, p, scaled)
    assert ev["verdict_worst_case"] == {"token": token, "fro": fro}
    assert ev["theory_and_numerics_agree"] is True
    assert ev["predicted_exponent"] == (0.5 if scaled else 1.0)
    assert figs and all((worst_ctx.out_dir / f).exists() for f in figs)
    assert (worst_ctx.out_dir / "data" / "worst_case.json").exists()
    assert "N^" in worst.headline(ev)


# ----------------------------------------------------------------------------- readings


@pytest.mark.parametrize("r,shift", [(1.0, 0.0), (19673.0, 0.0), (1.3, 0.5), (0.5, 0.0)])
def test_sup_local_exponent_is_the_supremum_over_n(r, shift):
    from sapa.evidence.growth_profiles import sup_local_exponent

    N = np.geomspace(2, 1e9, 4000)
    e = 0.5 * N / (N - 1 + r) + shift
    s = sup_local_exponent(r, shift)
    assert e.max() <= s + 1e-12  # nothing on the grid exceeds it
    if r >= 1:  # approached as N → ∞: the gap at the last grid point is ½(r−1)/(N−1+r) < ½r/N
        assert s - e.max() <= 0.5 * r / N[-1]
    if r < 1:
        assert s == pytest.approx(e[0], abs=1e-12)


def test_upper_bound_reading_holds_where_the_tight_reading_is_a_regime():
    from sapa.claims.growth_check import tight as _tight
    from sapa.claims.growth_check import upper as _upper
    from sapa.evidence.growth_profiles import sup_local_exponent

    r_tied = 19673.0  # tied x³ at ViT-Base
    assert _upper(0.5, sup_local_exponent(r_tied, 0.0)) == "HOLDS"
    verdict, start = _tight(0.5, r_tied, 0.0)
    assert verdict == "HOLDS_IN_REGIME" and start > 1e5
    assert _tight(0.5, 1.0, 0.0)[0] == "HOLDS"  # the paper's model: m_diag = m_off


def test_constants_against_softmax_match_exact_moments():
    """‖x³/√N‖ at ViT-Base, tied weights: √(E‖S^{∘3}‖²/N) from exact_moments, and its ratio to √N."""
    from sapa.evidence.growth_profiles import constants

    c = constants(3, scaled=True)["ViT-Base"]
    e = exact_moments(3, "tied", 196, 768, 64, rho=1.0, sigma=1 / math.sqrt(768))
    want = math.sqrt(e.expected_fro2 / 196)
    got = c["models"]["tied"]
    assert got["rms_fro"] == pytest.approx(want, rel=1e-3)  # stored to 4 significant digits
    assert got["ratio_to_softmax_bound_sqrtN"] == pytest.approx(want / 14.0, rel=1e-3)
    assert c["softmax_bound_sqrtN"] == 14.0


def test_jacobian_wrt_s_moment_against_monte_carlo():
    """E‖∂(S^{∘3})/∂S‖²_F = 9·E‖S^{∘2}‖²_F: exact vs a seeded Monte Carlo (iid weights, small sizes)."""
    from sapa.common.seeds import rng_for
    from sapa.evidence.growth_profiles import jac_s_moments

    N, D, d, T = 6, 4, 3, 20_000
    rng = rng_for(0, "test-jac-s")
    X = rng.standard_normal((T, N, D))  # (T, N, D)
    WQ, WK = rng.standard_normal((2, T, D, d)) / math.sqrt(D)  # (T, D, d) each
    S = X @ WQ @ np.swapaxes(X @ WK, 1, 2)  # (T, N, d) @ (T, d, N) -> (T, N, N)
    vals = (9 * S**4).sum(axis=(1, 2))  # ‖3 S^{∘2}‖²_F per trial
    exact = jac_s_moments(3, "iid", 0.0, D, d, N, 1 / math.sqrt(D))
    z = (vals.mean() - exact) / (vals.std(ddof=1) / math.sqrt(T))
    assert abs(z) < 4  # heavy tails (degree-8 Gaussian polynomial): a 4σ two-sided bound, fixed seed
    assert jac_s_moments(1, "iid", 0.0, D, d, N, 1.0) == N * N  # ∂S/∂S = identity: N² for every input
