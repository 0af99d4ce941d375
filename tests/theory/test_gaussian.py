"""Tests for `theory/gaussian.py`: quadratic-form moments from cumulants (arXiv 2410.18613, Thm 4.2-4.4).

Every closed form is compared exactly (``==``) with a brute-force expansion of the
polynomial in independent standard normal symbols, E z^{2k} = (2k-1)!!.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sapa.theory import gaussian as g
from sapa.theory.gaussian import (
    chi2_moment,
    double_factorial,
    gaussian_expectation,
    joint_qf_moments,
    linear_traces,
    moments_from_cumulants,
    power_traces,
    qf_moment_times_linear,
    qf_moments,
)


def _qf(M, x):
    """xᵀ M x as a sympy expression (M a nested list / array of ints)."""
    n = len(x)
    return sum(int(M[i][j]) * x[i] * x[j] for i in range(n) for j in range(n))


def _brute_qf_moment(A, B, k, l, L=None):
    """E[(xᵀAx)^k (xᵀBx)^l], x = L z (z standard normal), by Isserlis expansion."""
    n = len(A)
    z = sp.symbols(f"z0:{n}")
    x = list(sp.Matrix(L) * sp.Matrix(z)) if L is not None else list(z)
    return gaussian_expectation(_qf(A, x) ** k * _qf(B, x) ** l, z)


def test_double_factorial():
    assert [double_factorial(n) for n in (-1, 0, 1, 2, 3, 5, 7, 9)] == [1, 1, 1, 2, 3, 15, 105, 945]


def test_chi2_moment_matches_isserlis():
    z = sp.symbols("z0:3")
    for k in range(4):
        assert chi2_moment(3, k) == gaussian_expectation(sum(zi**2 for zi in z) ** k, z)
    n = sp.Symbol("n")
    assert sp.expand(chi2_moment(n, 3)) == sp.expand(n * (n + 2) * (n + 4))


def test_moments_from_cumulants_normal_and_symbols():
    assert moments_from_cumulants([0, 1, 0, 0, 0, 0]) == [1, 0, 1, 0, 3, 0, 15]
    k1, k2 = sp.symbols("k1 k2")
    m = moments_from_cumulants([k1, k2, 0])
    assert sp.expand(m[3] - (k1**3 + 3 * k1 * k2)) == 0


def test_qf_moments_symbolic_power_sums():
    t = sp.symbols("t1:4")
    m = qf_moments(t)
    assert m[2] == t[0] ** 2 + 2 * t[1]
    assert sp.expand(m[3] - (t[0] ** 3 + 6 * t[0] * t[1] + 8 * t[2])) == 0


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_qf_moments_vs_brute_force(k):
    A = [[2, -1, 0], [-1, 1, 3], [0, 3, -2]]
    assert qf_moments(power_traces(np.array(A), k))[k] == _brute_qf_moment(A, A, k, 0)


@pytest.mark.parametrize("k,l", [(0, 1), (1, 1), (2, 1), (1, 2), (3, 1), (2, 2)])
def test_joint_moments_vs_brute_force(k, l):
    A = [[1, 2], [2, -1]]
    B = [[3, 0], [0, 1]]
    assert joint_qf_moments(np.array(A), np.array(B), k, l) == _brute_qf_moment(A, B, k, l)


@pytest.mark.parametrize("k,l", [(1, 1), (2, 1), (2, 2)])
def test_joint_moments_with_covariance(k, l):
    L = [[1, 0], [2, 1]]  # x = L z ~ N(0, L Lᵀ)
    Sigma = np.array(L) @ np.array(L).T
    A = [[1, 1], [1, 0]]
    B = [[2, -1], [-1, 1]]
    assert joint_qf_moments(np.array(A), np.array(B), k, l, Sigma=Sigma) == _brute_qf_moment(A, B, k, l, L)


def test_linear_formula_equals_joint_recursion():
    A = np.array([[1, 2, 0], [2, -1, 1], [0, 1, 2]])
    B = np.array([[1, 0, 1], [0, 2, 0], [1, 0, 1]])
    qm = qf_moments(power_traces(A, 5))
    u = linear_traces(A, B, 5)
    for k in range(6):
        assert qf_moment_times_linear(qm, u, k) == joint_qf_moments(A, B, k, 1)


def test_float_path_matches_exact(monkeypatch):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6)) * 40.0
    A = A + A.T
    exact = qf_moments(power_traces(A, 6))
    monkeypatch.setattr(g, "EXACT_MAX_DIM", 0)
    approx = qf_moments(power_traces(A, 6))
    for e, a in zip(exact, approx):
        assert math.isclose(float(e), float(a), rel_tol=1e-10)


def test_float_path_no_overflow_large_scale():
    A = np.eye(40) * 1e30  # tr(A^10) = 40e300 > float max after the Bell polynomial
    t = power_traces(A, 12)
    assert math.isclose(float(t[-1] / (40 * Fraction(1e30) ** 12)), 1.0, rel_tol=1e-12)
    m = qf_moments(t)
    assert isinstance(m[12], Fraction) and m[12] > 0


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(-3, 3), min_size=3, max_size=3),
    st.lists(st.integers(-3, 3), min_size=3, max_size=3),
    st.integers(0, 3),
    st.integers(0, 2),
)
def test_joint_moments_hypothesis(a, b, k, l):
    A = [[a[0], a[1]], [a[1], a[2]]]
    B = [[b[0], b[1]], [b[1], b[2]]]
    assert joint_qf_moments(np.array(A), np.array(B), k, l) == _brute_qf_moment(A, B, k, l)


def _multinomial_moment(lams, k, weight_index=None):
    """E[(Σ λ_i z_i²)^k · z_j²] (j = weight_index, or no extra factor) by the multinomial theorem."""
    n = len(lams)
    total = Fraction(0)

    def rec(i, left, coef, prod):
        nonlocal total
        if i == n - 1:
            ks = prod + [left]
            c = coef // math.factorial(left)
            term = Fraction(c)
            for lam, kk in zip(lams, ks):
                term *= Fraction(lam) ** kk * double_factorial(2 * kk - 1)
            if weight_index is not None:
                term *= 2 * ks[weight_index] + 1  # E z^{2k+2} / E z^{2k}
            total += term
            return
        for kk in range(left + 1):
            rec(i + 1, left - kk, coef // math.factorial(kk), prod + [kk])

    rec(0, k, math.factorial(k), [])
    return total


@pytest.mark.parametrize("k", [5, 8, 10])
def test_high_order_moments_vs_multinomial(k):
    """Orders used by p = 4, 5 (and the MC variances): E Q^k and E[Q^k R] exactly, A diagonal WLOG."""
    lams = [3, -1, Fraction(1, 2)]
    A = np.diag(np.array(lams, dtype=object))
    assert qf_moments(power_traces(A, k))[k] == _multinomial_moment(lams, k)
    B = np.array([[2, 1, 0], [1, -1, 4], [0, 4, 5]])
    want = sum(B[j, j] * _multinomial_moment(lams, k - 1, weight_index=j) for j in range(3))
    got = qf_moment_times_linear(qf_moments(power_traces(A, k - 1)), linear_traces(A, B, k - 1), k - 1)
    assert got == want
