"""The bias alone in x^p/√N with ALiBi added to the logit: φ = (S − m|i − j|)^p/√N at S = 0.

Over the N² entries of one head, offset δ = |i − j| ≥ 1 occurs 2(N − δ) times (i − j = +δ and −δ, N − δ pairs
each) and δ = 0 N times, where (m·0)^{2p} = 0 for p ≥ 1. So

    B_p(N) = Σ_i Σ_j (m|i − j|)^{2p}/N = Σ_{δ=1}^{N−1} 2(N − δ)(mδ)^{2p}/N,

a polynomial in N of degree 2p + 1 with leading term 2m^{2p}N^{2p+1}/((2p + 1)(2p + 2)) and no N^{2p} term
(Faulhaber, exact for each integer p in :func:`bias_only_sum`; for every p > 0 the Riemann sum N^{−(2p+1)} B_p →
2m^{2p}∫₀¹(1 − t)t^{2p}dt, :func:`leading_coefficient_any_p`). Since the bias is deterministic, this part of E‖φ‖²_F does not depend on
the weight model: once it dominates (|i − j| ≫ std(S)/m), ½ d log E‖φ‖²_F/d log N → p + ½.
"""

from __future__ import annotations

import functools
import math

import sympy as sp

__all__ = ["N", "m", "delta", "bias_only_sum", "leading_term", "leading_coefficient_any_p", "bias_only_fro2"]

N, m = sp.symbols("N m", positive=True)
delta = sp.Symbol("delta", integer=True, nonnegative=True)


def bias_only_sum(p: int, start: int = 1) -> sp.Expr:
    """Σ_{δ=start}^{N−1} 2(N − δ)(mδ)^{2p}/N in closed form (a polynomial in N and m; start = 0 gives the same)."""
    return _bias_only_sum(int(p), int(start))


@functools.lru_cache(maxsize=64)
def _bias_only_sum(p: int, start: int) -> sp.Expr:
    """:func:`bias_only_sum`, summed by sympy once per (p, start) and process."""
    return sp.expand(sp.summation(2 * (N - delta) * (m * delta) ** (2 * p), (delta, start, N - 1)) / N)


def leading_term(p: int) -> tuple[int, sp.Expr]:
    """(degree in N, leading coefficient) of :func:`bias_only_sum` (p): (2p + 1, 2m^{2p}/((2p + 1)(2p + 2)))."""
    poly = sp.Poly(bias_only_sum(p), N)
    return poly.degree(), sp.factor(poly.LC())


def leading_coefficient_any_p() -> tuple[sp.Symbol, sp.Expr]:
    """(p, lim_{N→∞} B_p(N)/N^{2p+1}) for a symbolic p > 0: 2m^{2p}∫₀¹(1 − t)t^{2p}dt = 2m^{2p}/((2p + 1)(2p + 2)).

    B_p(N)/N^{2p+1} = (2m^{2p}/N) Σ_{δ=1}^{N−1} (1 − δ/N)(δ/N)^{2p}, a Riemann sum of a continuous integrand.
    """
    p, t = sp.Symbol("p", positive=True), sp.Symbol("t", positive=True)
    return p, sp.simplify(2 * m ** (2 * p) * sp.integrate((1 - t) * t ** (2 * p), (t, 0, 1)))


def bias_only_fro2(p: int, slope: float, n: int) -> float:
    """B_p(n) at m = slope in float64 (a compensated sum over the offsets)."""
    n, q = int(n), 2 * int(p)
    return math.fsum(2.0 * (n - k) * (slope * k) ** q for k in range(1, n)) / n
