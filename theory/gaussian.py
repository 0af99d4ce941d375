"""Exact moments of Gaussian quadratic forms, from cumulants (arXiv 2410.18613, Thm 4.2-4.4).

The expectations behind Thm 4.2, Cor 4.3, Thm 4.4 and Cor 4.5 of *Rethinking Softmax:
Self-Attention with Polynomial Activations* (arXiv 2410.18613) all reduce to moments of
quadratic forms ``Q = zᵀ A z`` in a standard normal vector ``z``. This module computes
them exactly, once, for every caller:

* single form: the cumulants are ``κ_r = 2^{r-1} (r-1)! t_r`` with power sums
  ``t_r = tr(A^r)``; moments are complete Bell polynomials of the cumulants
  (:func:`moments_from_cumulants`). Works with Python ints, ``Fraction``, sympy numbers
  or sympy symbols (``t_r`` may be symbols: the result is then a polynomial in them).
* two forms ``Q = zᵀAz``, ``R = zᵀBz``: the joint cumulant generating function is
  ``-½ log det(I - 2tA - 2uB) = Σ_k (1/2k) tr((2tA + 2uB)^k)``, so
  ``κ_{a,b} = a! b! 2^{a+b-1}/(a+b) · Σ_{words w, a A's, b B's} tr(w)``
  (:func:`joint_qf_moments`), and in the common linear case
  ``E[Q^k R] = Σ_{m=0}^k k!/(k-m)! · 2^m tr(A^m B) · E[Q^{k-m}]``
  (:func:`qf_moment_times_linear`).
* ``x ~ N(0, Σ)`` instead of ``N(0, I)``: ``xᵀAx = zᵀ Σ^{½} A Σ^{½} z`` and every trace
  ``tr(Σ^{½}AΣ^{½} ...)`` equals ``tr(ΣA ...)`` by cyclicity, so no square root is ever
  needed: pass ``ΣA`` and ``ΣB`` (not symmetric; only traces of their words are used).

Matrices are handled exactly (numpy ``object`` arrays of ``Fraction``) when small, or in
float64 with an exact power-of-two rescaling (so large ``D`` neither overflows nor loses
the scale) when large; see :func:`power_traces`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Sequence

import numpy as np
import sympy as sp

__all__ = [
    "double_factorial",
    "chi2_moment",
    "moments_from_cumulants",
    "qf_cumulants",
    "qf_moments",
    "qf_moment_times_linear",
    "joint_qf_moments",
    "power_traces",
    "linear_traces",
    "to_exact",
    "gaussian_expectation",
    "EXACT_MAX_DIM",
]

# Above this size matrix traces are computed in float64 (rescaled), below it exactly.
EXACT_MAX_DIM = 32


def double_factorial(n: int) -> int:
    """(n)!! = n (n-2) (n-4) ... with (-1)!! = 0!! = 1; E z^{2k} = (2k-1)!! for z ~ N(0,1)."""
    if n < -1:
        raise ValueError(f"double factorial of {n} is not defined here")
    out = 1
    while n > 1:
        out *= n
        n -= 2
    return out


def chi2_moment(n, k: int):
    """μ_k(n) = n (n+2) ... (n+2k-2) = E[(χ²_n)^k]; μ_0 = 1; ``n`` may be a sympy symbol.

    >>> chi2_moment(3, 2)
    15
    """
    out = 1
    for i in range(k):
        out = out * (n + 2 * i)
    return out


def moments_from_cumulants(kappa: Sequence) -> list:
    """m_n = B_n(κ_1, ..., κ_n) (complete Bell polynomial), via m_{n+1} = Σ_i C(n,i) κ_{i+1} m_{n-i}.

    Args:
      kappa: ``[κ_1, ..., κ_K]`` (numbers or sympy expressions).

    Returns:
      ``[m_0, m_1, ..., m_K]`` with ``m_0 = 1``; sympy results are expanded.

    >>> moments_from_cumulants([0, 1, 0, 0])  # N(0,1)
    [1, 0, 1, 0, 3]
    """
    exprs = [k for k in kappa if isinstance(k, sp.Expr) and not k.is_number]
    if exprs:  # symbolic: do the recursion in sympy Poly arithmetic (fast), return Exprs
        gens = sorted(set().union(*(k.free_symbols for k in exprs)), key=str)
        polys = [sp.Poly(k, *gens) for k in kappa]
        return [sp.Integer(1)] + [m.as_expr() for m in _bell(polys, sp.Poly(1, *gens))[1:]]
    return _bell(list(kappa), 1)


def _bell(kappa: list, one) -> list:
    m = [one]
    for n in range(len(kappa)):
        acc = 0 * one
        for i in range(n + 1):
            acc = acc + math.comb(n, i) * kappa[i] * m[n - i]
        m.append(acc)
    return m


def qf_cumulants(traces: Sequence) -> list:
    """κ_r = 2^{r-1} (r-1)! t_r for Q = zᵀAz, z ~ N(0, I), t_r = tr(A^r) (r = 1..len(traces))."""
    return [2 ** (r - 1) * math.factorial(r - 1) * t for r, t in enumerate(traces, start=1)]


def qf_moments(traces: Sequence) -> list:
    """E[(zᵀAz)^k], k = 0..K, from t_r = tr(A^r), r = 1..K (A symmetric, z ~ N(0, I)).

    >>> qf_moments([3, 3])  # A = I_3: E[(χ²_3)^k] = 1, 3, 15
    [1, 3, 15]
    """
    return moments_from_cumulants(qf_cumulants(traces))


def qf_moment_times_linear(q_moments: Sequence, lin_traces: Sequence, k: int):
    """E[Q^k R] = Σ_{m=0}^k k!/(k-m)! 2^m u_m E[Q^{k-m}], Q = zᵀAz, R = zᵀBz, u_m = tr(A^m B).

    Derivation: ∂_u of the joint MGF det(I - 2tA - 2uB)^{-1/2} at u = 0 is
    M_Q(t) · tr((I - 2tA)^{-1} B) = M_Q(t) Σ_m (2t)^m u_m; take k! [t^k].

    Args:
      q_moments: ``[E Q^0, ..., E Q^k]`` (e.g. from :func:`qf_moments`).
      lin_traces: ``[u_0, ..., u_k]`` with ``u_m = tr(A^m B)``.
      k: power of Q.
    """
    acc = 0
    for m in range(k + 1):
        acc = acc + math.perm(k, m) * 2**m * lin_traces[m] * q_moments[k - m]
    return sp.expand(acc) if isinstance(acc, sp.Expr) else acc


def gaussian_expectation(expr, zs: Sequence):
    """E[expr] over independent z_i ~ N(0, 1) (the symbols ``zs``), by expansion and E z^{2k} = (2k-1)!!.

    Brute-force reference (Isserlis for independent coordinates): ``expr`` must be a
    polynomial in ``zs`` (a sympy expression or a ``Poly`` in exactly ``zs``); other
    symbols are kept as coefficients.

    >>> z = sp.Symbol("z"); gaussian_expectation((1 + z) ** 4, [z])
    10
    """
    poly = expr if isinstance(expr, sp.Poly) else sp.Poly(expr, *zs)
    acc = 0
    for mon, c in poly.terms():
        w = 1
        for k in mon:
            if k % 2:
                w = 0
                break
            w *= double_factorial(k - 1)
        if w:
            acc = acc + c * w
    return sp.expand(acc)


# --------------------------------------------------------------------------- matrices


def to_exact(M) -> np.ndarray:
    """Return ``M`` as a numpy ``object`` array of exact numbers (Fraction / sympy)."""
    if isinstance(M, sp.MatrixBase):
        return np.array(M.tolist(), dtype=object)
    arr = np.asarray(M)
    if arr.dtype == object:
        return arr.copy()
    out = np.empty(arr.shape, dtype=object)
    for idx, v in np.ndenumerate(arr):
        out[idx] = Fraction(int(v)) if np.issubdtype(arr.dtype, np.integer) else Fraction(float(v))
    return out


def _is_exact(M) -> bool:
    if isinstance(M, sp.MatrixBase):
        return True
    arr = np.asarray(M)
    return arr.dtype == object or np.issubdtype(arr.dtype, np.integer) or arr.shape[0] <= EXACT_MAX_DIM


def _scale_exponent(M: np.ndarray) -> int:
    """e with 2^e ≈ max row-sum norm of M (exact rescaling by a power of two)."""
    nrm = float(np.max(np.sum(np.abs(M), axis=1)))
    return 0 if nrm == 0.0 else int(round(math.log2(nrm)))


def power_traces(A, r_max: int) -> list:
    """[tr(A^r) for r = 1..r_max], exactly for small or exact ``A``, else float64 rescaled.

    Float path: ``A = 2^e Â`` with ``‖Â‖ ≈ 1``; ``tr(Â^r)`` is computed in float64 and
    returned as the exact ``Fraction(tr(Â^r)) · 2^{e r}``, so nothing overflows and the
    downstream Bell polynomials stay exact in these (rounded) traces.
    """
    if _is_exact(A):
        A = to_exact(A)
        out, P = [], A
        for r in range(1, r_max + 1):
            out.append(sum(P[i, i] for i in range(P.shape[0])))
            if r < r_max:
                P = P.dot(A)
        return out
    A = np.asarray(A, dtype=np.float64)
    e = _scale_exponent(A)
    Ah = A * 2.0 ** (-e)
    out, P = [], Ah
    for r in range(1, r_max + 1):
        out.append(Fraction(float(np.trace(P))) * Fraction(2) ** (e * r))
        if r < r_max:
            P = P @ Ah
    return out


def linear_traces(A, B, m_max: int) -> list:
    """[tr(A^m B) for m = 0..m_max] (exact for small/exact inputs, else float64 rescaled)."""
    if _is_exact(A) and _is_exact(B):
        A, B = to_exact(A), to_exact(B)
        out, P = [], B
        for m in range(m_max + 1):
            out.append(sum(P[i, i] for i in range(P.shape[0])))
            if m < m_max:
                P = A.dot(P)
        return out
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    ea, eb = _scale_exponent(A), _scale_exponent(B)
    Ah, Bh = A * 2.0 ** (-ea), B * 2.0 ** (-eb)
    out, P = [], Bh
    for m in range(m_max + 1):
        out.append(Fraction(float(np.trace(P))) * Fraction(2) ** (ea * m + eb))
        if m < m_max:
            P = Ah @ P
    return out


def _word_trace_sums(A: np.ndarray, B: np.ndarray, r_max: int) -> dict:
    """{(a, b): Σ_{words with a A's and b B's} tr(word)} for a + b = 1..r_max (exact)."""
    n = A.shape[0]
    eye = np.empty((n, n), dtype=object)
    for i in range(n):
        for j in range(n):
            eye[i, j] = Fraction(int(i == j))
    level = {0: eye}  # level[b] = Σ words of length r with b B's
    out = {}
    for r in range(1, r_max + 1):
        new = {}
        for b in range(r + 1):
            acc = None
            if b in level:  # last letter A
                acc = level[b].dot(A)
            if b - 1 in level:  # last letter B
                t = level[b - 1].dot(B)
                acc = t if acc is None else acc + t
            new[b] = acc
        level = new
        for b, M in level.items():
            out[(r - b, b)] = sum(M[i, i] for i in range(n))
    return out


def joint_qf_moments(A, B, k: int, l: int, Sigma=None):
    """E[(xᵀAx)^k (xᵀBx)^l], x ~ N(0, Σ), exact, from the joint CGF -½ log det(I - 2tΣA - 2uΣB).

    Joint cumulants κ_{a,b} = a! b! 2^{a+b-1}/(a+b) Σ_{words} tr(w) (words in ΣA, ΣB with
    a and b letters); moments by the bivariate recursion
    m_{a,b} = Σ_{i<a, j≤b} C(a-1,i) C(b,j) κ_{i+1,j} m_{a-1-i,b-j}  (and symmetrically in b).

    Args:
      A, B: (D, D) symmetric matrices (exact or float; converted to exact Fractions).
      k, l: powers (k + l ≥ 0).
      Sigma: (D, D) covariance of x, default identity.
    """
    A, B = to_exact(A), to_exact(B)
    if Sigma is not None:
        S = to_exact(Sigma)
        A, B = S.dot(A), S.dot(B)
    n = k + l
    if n == 0:
        return Fraction(1)
    sums = _word_trace_sums(A, B, n)
    kap = {}
    for (a, b), s in sums.items():
        kap[(a, b)] = Fraction(math.factorial(a) * math.factorial(b) * 2 ** (a + b - 1), a + b) * s

    @lru_cache(maxsize=None)
    def mom(a: int, b: int):
        if a == 0 and b == 0:
            return Fraction(1)
        acc = Fraction(0)
        if a > 0:
            for i in range(a):
                for j in range(b + 1):
                    acc += math.comb(a - 1, i) * math.comb(b, j) * kap[(i + 1, j)] * mom(a - 1 - i, b - j)
        else:
            for j in range(b):
                acc += math.comb(b - 1, j) * kap[(0, j + 1)] * mom(0, b - 1 - j)
        return acc

    return mom(k, l)
