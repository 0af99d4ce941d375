"""Tests for `theory/matrix_power.py`: E‖(XWXᵀ)^p‖²_F, the matrix-power reading of x^p (arXiv 2410.18613).

Three routes: the Wick polynomial against brute-force Isserlis expansion (exact ``==``, tiny
sizes), its leading coefficient against ‖W^p‖²_F, and a seeded Monte Carlo mean (z < 4,
sample SE). At p = 1 it must equal the element-wise reading of :mod:`sapa.theory.moments`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from sapa.common.validate import InputError
from sapa.theory.gaussian import gaussian_expectation
from sapa.theory.matrix_power import matrix_power_growth, matrix_power_symbolic
from sapa.theory.moments import N_, exact_moments

Z_MAX = 4.0  # two-sided P(|Z| > 4) = 6.3e-5 per check under the CLT
_W_FIXED = np.array([[0.9, -0.4, 0.3, 0.0], [0.2, 0.5, -0.7, 0.1], [0.0, 0.6, 0.4, -0.3], [0.5, 0.0, 0.2, 0.8]])


def _rand_int_matrix(seed, D, lo=-2, hi=3):
    return np.random.default_rng(seed).integers(lo, hi, size=(D, D))


def _z(samples, exact):
    n = samples.size
    return (samples.mean() - exact) / (samples.std(ddof=1) / math.sqrt(n))


def test_matrix_power_lives_in_one_module():
    from sapa.theory import moments

    assert not any(hasattr(moments, n) for n in ("P_MAX_MATRIX_POWER_EXACT", "MatrixPowerGrowth", "matrix_power_growth",
                                                   "matrix_power_symbolic"))


def test_matrix_power_p1_exact():
    t = {str(s): s for s in matrix_power_symbolic(1).free_symbols}
    want = N_**2 * t["tr(W Wt)"] + N_ * t["tr(W W)"] + N_ * t["tr(W)"] ** 2
    assert sp.expand(matrix_power_symbolic(1) - want) == 0
    W = _rand_int_matrix(5, 3)
    mp = matrix_power_growth(1, W, N=7)
    em = exact_moments(1, "shared", N=7, W=W)
    assert mp.poly.subs(N_, 7) == 7 * 6 * em.m_off + 7 * em.m_diag  # the two readings agree at p = 1


@pytest.mark.parametrize("p,N,D", [(2, 2, 2), (2, 3, 2), (2, 3, 1), (3, 2, 1), (3, 2, 2)])
def test_matrix_power_vs_brute_force(p, N, D):
    W = _rand_int_matrix(p * 100 + N * 10 + D, D)
    X = sp.Matrix(N, D, sp.symbols(f"x0:{N * D}"))
    Sp = (X * sp.Matrix(W) * X.T) ** p
    brute = gaussian_expectation(sum(v**2 for v in Sp), list(X))
    mp = matrix_power_growth(p, W)
    assert mp.exact and mp.poly.subs(N_, N) == brute


@pytest.mark.parametrize("p", [1, 2, 3])
def test_matrix_power_leading_term_and_growth(p):
    W = np.random.default_rng(p).standard_normal((4, 4))
    mp = matrix_power_growth(p, W, N=10**6)
    Wp = np.linalg.matrix_power(W, p)
    lead = sp.Poly(mp.poly, N_).coeff_monomial(N_ ** (2 * p))
    assert sp.Poly(mp.poly, N_).degree() == 2 * p
    assert math.isclose(float(lead), float(np.sum(Wp * Wp)), rel_tol=1e-9)
    assert abs(mp.growth_exponent - (p - 0.5)) < 1e-3 and mp.asymptotic_exponent == p - 0.5
    big = matrix_power_growth(5, W, N=100)
    assert not big.exact and "LEADING ORDER" in big.formula


def test_matrix_power_monte_carlo():
    """p = 2, N = 8, D = 4, T = 20000 samples of ‖(XWXᵀ)²‖²_F (sample SE)."""
    rng = np.random.default_rng(11)
    X = rng.standard_normal((20_000, 8, 4))
    S = X @ _W_FIXED @ np.swapaxes(X, -1, -2)
    S2 = S @ S
    vals = np.sum(S2**2, axis=(-1, -2))
    mp = matrix_power_growth(2, _W_FIXED, N=8)
    assert abs(_z(vals, mp.expected_fro2)) < Z_MAX


def test_matrix_power_input_errors():
    with pytest.raises(InputError):
        matrix_power_growth(0, np.eye(2))
    with pytest.raises(InputError):
        matrix_power_growth(2, np.ones((2, 3)))
    with pytest.raises(InputError):
        matrix_power_symbolic(4)


_W_NONSYM = np.array([[1, 2, 0], [-1, 0, 1], [0, 1, -2]])  # W ≠ Wᵀ: words in W and Wᵀ differ from their reversals


def _gauss_hermite_expectation(p: int, W: np.ndarray, N: int, nodes: int) -> float:
    """E‖(XWXᵀ)^p‖²_F by tensor Gauss–Hermite over the N·D entries of X: exact for polynomials of degree ≤ 2·nodes − 1
    in each entry (here 4p), so an independent exact route (up to float64 rounding) to the Wick polynomial."""
    t, w = np.polynomial.hermite.hermgauss(nodes)
    x, w = np.sqrt(2.0) * t, w / np.sqrt(np.pi)  # nodes and weights of the standard normal
    k = N * W.shape[0]
    X = np.stack(np.meshgrid(*([x] * k), indexing="ij"), -1).reshape(-1, N, W.shape[0])  # (G, N, D)
    wt = np.prod(np.stack(np.meshgrid(*([w] * k), indexing="ij"), -1).reshape(-1, k), axis=1)  # (G,)
    Sp = np.linalg.matrix_power(X @ W.astype(np.float64) @ np.swapaxes(X, -1, -2), p)  # (G, N, N)
    return float(wt @ np.sum(Sp * Sp, axis=(-1, -2)))


@pytest.mark.parametrize("p,N,D", [(3, 2, 3), (3, 3, 2), (2, 2, 3)])
def test_matrix_power_matches_gauss_hermite_for_a_non_symmetric_w(p, N, D):
    W = _W_NONSYM[:D, :D]
    assert not np.array_equal(W, W.T)
    want = _gauss_hermite_expectation(p, W, N, nodes=2 * p + 1)
    got = matrix_power_growth(p, W).poly.subs(N_, N)
    assert got.is_Integer and math.isclose(float(got), want, rel_tol=1e-12), (got, want)


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 6])
def test_matrix_power_leading_coefficient_is_the_norm_of_w_to_the_p(p):
    Wp = np.linalg.matrix_power(_W_NONSYM.astype(object), p)  # exact integers
    lead = sum(int(v) ** 2 for v in Wp.ravel())
    mp = matrix_power_growth(p, _W_NONSYM, N=10)
    assert mp.leading_coeff == lead
    if p > 3:  # beyond the exact polynomial the result is the leading order N^{2p}·‖W^p‖²_F
        assert not mp.exact and mp.expected_fro2 == float(lead * 10 ** (2 * p))
    else:
        assert sp.Poly(mp.poly, N_).coeff_monomial(N_ ** (2 * p)) == lead


def test_matrix_power_leading_coefficient_in_float64_beyond_exact_sizes():
    # D = 40 > EXACT_MAX_DIM: the float64 branch; ‖W^p‖²_F against numpy's own matrix power
    W = np.random.default_rng(40).standard_normal((40, 40)) / 6.0
    for p in (2, 4):
        Wp = np.linalg.matrix_power(W, p)
        assert math.isclose(float(matrix_power_growth(p, W).leading_coeff), float(np.sum(Wp * Wp)), rel_tol=1e-12)
