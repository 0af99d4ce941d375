"""Tests for `theory/alibi_bias.py`: the bias-only sum of (S − m|i − j|)^p/√N, exactly (sympy)."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp

from sapa.theory.alibi_bias import N, bias_only_fro2, bias_only_sum, leading_coefficient_any_p, leading_term, m


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_leading_term_is_2m2p_n2p1_over_2p1_2p2(p):
    degree, coef = leading_term(p)
    assert degree == 2 * p + 1
    assert sp.simplify(coef - 2 * m ** (2 * p) / ((2 * p + 1) * (2 * p + 2))) == 0
    poly = sp.Poly(bias_only_sum(p), N)
    assert poly.coeff_monomial(N ** (2 * p)) == 0  # the next term is O(N^{2p−1})
    assert poly.coeff_monomial(N ** (2 * p - 1)) == -m ** (2 * p) / 6  # Faulhaber's B₂ term: −N^{2p−1}m^{2p}/6


@pytest.mark.parametrize("p", [1, 2, 3])
def test_the_sum_counts_both_signs_of_i_minus_j_and_delta_zero_adds_nothing(p):
    # brute force over every (i, j) of an N × N head, diagonal included: Σ_i Σ_j (m|i − j|)^{2p}/N
    closed = bias_only_sum(p)
    assert sp.expand(closed - bias_only_sum(p, start=0)) == 0
    for n in range(1, 9):
        brute = sp.Add(*[(m * abs(i - j)) ** (2 * p) for i in range(n) for j in range(n)]) / n
        assert sp.expand(closed.subs(N, n) - brute) == 0
    # without the factor 2 (one sign of i − j only) the sum would be half: the closed form is not that
    half = sp.expand(sp.summation((N - sp.Symbol("k")) * (m * sp.Symbol("k")) ** (2 * p), (sp.Symbol("k"), 1, N - 1)) / N)
    assert sp.expand(closed - 2 * half) == 0


def test_symbolic_p_limit_matches_every_integer_p():
    p, lim = leading_coefficient_any_p()
    assert sp.simplify(lim - 2 * m ** (2 * p) / ((2 * p + 1) * (2 * p + 2))) == 0
    for k in (1, 2, 3, 5):
        assert sp.simplify(lim.subs(p, k) - leading_term(k)[1]) == 0
        # and the finite sums approach it: B_k(N)/N^{2k+1} at N = 10⁴ within 10⁻³ relative
        n = 10**4
        ratio = bias_only_sum(k).subs({N: n, m: 1}) / sp.Integer(n) ** (2 * k + 1) / lim.subs({p: k, m: 1})
        assert abs(float(ratio) - 1) < 1e-3


@pytest.mark.parametrize("p, slope, n", [(1, 1 / 16, 4096), (3, 1 / 16, 4096), (3, 1 / 2, 100), (2, 1 / 256, 7)])
def test_float_sum_equals_the_closed_form(p, slope, n):
    exact = bias_only_sum(p).subs({N: n, m: sp.Rational(Fraction(slope).numerator, Fraction(slope).denominator)})
    assert bias_only_fro2(p, slope, n) == pytest.approx(float(exact), rel=1e-14)
