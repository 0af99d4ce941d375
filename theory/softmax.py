"""Theorem 4.1 of arXiv 2410.18613, settled: sharp bounds for softmax attention.

The paper (Saratchandran et al., "Rethinking Softmax: Self-Attention with Polynomial
Activations", Thm 4.1) states ‖softmax(S)‖_F ≤ √N and, Eq. 4.2, that the Jacobian of
row-softmax attention has Frobenius norm ≤ 2√N. This module derives, exactly:

* the Jacobian of one softmax row, J(s) = diag(s) − s sᵀ, by differentiating sympy's softmax;
* ‖J(s)‖²_F = p2 − 2 p3 + p2²  with power sums p_k = Σ_i s_i^k on the simplex (Σ s_i = 1);
* the sharp bound ‖J(s)‖_F ≤ 1/2 (Cauchy–Schwarz p2² ≤ p1 p3 = p3, then p2 − p2² ≤ 1/4),
  attained exactly at the two-point uniform rows, confirmed by an exact KKT enumeration;
* hence ‖∂softmax(τS)/∂S‖_F ≤ τ√N/2: Eq. 4.2 holds but is loose by a factor 4;
* the reviewers' one-hot example (review point 1.1): the Jacobian of a one-hot row is the
  zero matrix, so a step reading "1 − 0 = 2(…)" cannot hold;
* a reference formula for ‖∂P/∂X‖²_F when S = X W Xᵀ (optionally causal).
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
import sympy as sp

from sapa.common.validate import InputError, finite_matrix, positive_float, positive_int

P2, P3 = sp.symbols("p2 p3")  # power sums p_k = Σ_i s_i^k of a softmax row

# ---------------------------------------------------------------------------------------
# One softmax row: symbolic Jacobian and its Frobenius norm
# ---------------------------------------------------------------------------------------


def softmax_symbolic(n: int) -> tuple[tuple[sp.Symbol, ...], sp.Matrix]:
    """s_i = exp(z_i) / Σ_j exp(z_j) for real symbols z_1..z_n; returns (z, s) with s (n, 1)."""
    n = positive_int("n", n)
    z = sp.symbols(f"z1:{n + 1}", real=True)
    denom = sum(sp.exp(zj) for zj in z)
    return z, sp.Matrix([sp.exp(zi) / denom for zi in z])  # (n, 1)


def softmax_jacobian_symbolic(n: int) -> sp.Matrix:
    """J_ij = ∂s_i/∂z_j of s = softmax(z_1..z_n), obtained by sympy differentiation, (n, n)."""
    z, s = softmax_symbolic(n)
    return s.jacobian(sp.Matrix(z))  # (n, 1) wrt (n,) -> (n, n)


def softmax_jacobian_closed_form(s_symbols) -> sp.Matrix:
    """J(s) = diag(s) − s sᵀ for a sequence of sympy expressions s_1..s_n, (n, n)."""
    s = sp.Matrix(list(s_symbols))  # (n, 1)
    return sp.diag(*s) - s * s.T  # (n, n) - (n, 1) @ (1, n)


def jacobian_fro2_in_power_sums() -> sp.Expr:
    """‖diag(s) − s sᵀ‖²_F = p2 − 2 p3 + p2² on the simplex, in the symbols ``P2``, ``P3``."""
    return P2 - 2 * P3 + P2**2


def jacobian_fro2_power_sum_residual(n: int) -> sp.Expr:
    """‖J‖²_F − (p2 − 2p3 + p2²) for the *differentiated* softmax Jacobian; 0 proves the identity.

    The symbolic Jacobian (from :func:`softmax_jacobian_symbolic`) is written in terms of
    s_i by z_i = log s_i (softmax is invariant to scaling exp(z)), then Σ s_i = 1 is imposed by
    s_n = 1 − Σ_{i<n} s_i; the residual is expanded to a polynomial in s_1..s_{n−1}.
    """
    n = positive_int("n", n)
    J = softmax_jacobian_symbolic(n)  # (n, n) in exp(z_i)
    z = sp.symbols(f"z1:{n + 1}", real=True)
    s = sp.symbols(f"s1:{n + 1}", positive=True)
    on_simplex = {s[-1]: 1 - sum(s[:-1])}
    J_s = J.subs({zi: sp.log(si) for zi, si in zip(z, s)}).subs(on_simplex)
    fro2 = sum(sp.cancel(e) ** 2 for e in J_s)
    p = {k: sum(si**k for si in s).subs(on_simplex) for k in (2, 3)}
    target = jacobian_fro2_in_power_sums().subs({P2: p[2], P3: p[3]})
    return sp.expand(fro2 - target)


def sharp_row_jacobian_fro_bound() -> sp.Rational:
    """max_{s ∈ Δ_n, n ≥ 2} ‖J(s)‖_F = 1/2, computed as √max_q (q − q²).

    By Cauchy–Schwarz p2² = (Σ s_i^{1/2} s_i^{3/2})² ≤ p1 p3 = p3, so
    ‖J‖²_F = p2 − 2p3 + p2² ≤ p2 − p2² =: h(p2). h is maximised where h'(q) = 0; that q = 1/2
    is a feasible p2 (two-point uniform row, where also p3 = p2², so the bound is attained).
    """
    q = sp.Symbol("q", positive=True)
    h = q - q**2
    (q_star,) = sp.solve(sp.diff(h, q), q)
    assert sp.diff(h, q, 2).subs(q, q_star) < 0  # a maximum
    value = h.subs(q, q_star)
    # attained: the two-point uniform row has p2 = q_star and p3 = p2^2
    two_point = [sp.Rational(1, 2)] * 2
    fro2 = sum(e**2 for e in softmax_jacobian_closed_form(two_point))
    assert fro2 == value
    return sp.sqrt(value)


@lru_cache(maxsize=None)
def _face_critical_points(k: int) -> tuple[tuple[tuple[sp.Rational, ...], sp.Rational], ...]:
    """Critical points of f = p2 − 2p3 + p2² in the relative interior of the k-simplex.

    Lagrange: ∂f/∂s_i = λ for all i, Σ s_i = 1. λ is eliminated by ∂f/∂s_i − ∂f/∂s_1 = 0 and
    s_k by the constraint; the remaining polynomial system is checked zero-dimensional (finitely
    many complex solutions, so ``solve_poly_system`` lists them all) and only real points with
    every s_i > 0 are kept. Returns ((s_1..s_k), λ) pairs.
    """
    s = sp.symbols(f"s1:{k + 1}")
    p2, p3 = sum(x**2 for x in s), sum(x**3 for x in s)
    grad = [sp.diff(p2 - 2 * p3 + p2**2, x) for x in s]
    if k == 1:
        return (((sp.Integer(1),), grad[0].subs(s[0], 1)),)
    on_simplex = {s[-1]: 1 - sum(s[:-1])}
    eqs = [sp.expand((g - grad[0]).subs(on_simplex)) for g in grad[1:]]
    free = s[:-1]
    assert sp.groebner(eqs, *free, order="lex").is_zero_dimensional
    out = []
    for sol in sp.solve_poly_system(eqs, *free):
        point = tuple(sp.nsimplify(v) for v in sol) + (1 - sum(sol),)
        if all(v.is_real and v > 0 for v in point):
            lam = sp.simplify(grad[0].subs(dict(zip(s, point))))
            out.append((point, lam))
    return tuple(out)


def kkt_maxima(n: int) -> list[tuple[tuple[sp.Rational, ...], sp.Rational]]:
    """All KKT points of max ‖J(s)‖²_F = p2 − 2p3 + p2² over the simplex Δ_n, best first.

    Every support T ⊆ {1..n} is enumerated; on T the Lagrange system is solved exactly
    (:func:`_face_critical_points`, f is symmetric so one solve per |T|), and the point is kept
    when the KKT sign condition for the zero coordinates holds: ∂f/∂s_j = 0 ≤ λ for j ∉ T.
    The constraints are linear, so the global maximum is among these points; its value is
    list[0][1] (1/4 for n ≥ 2). Returns [(point s ∈ Δ_n, value ‖J(s)‖²_F), ...].
    """
    n = positive_int("n", n)
    found = []
    for k in range(1, n + 1):
        for point_T, lam in _face_critical_points(k):
            if k < n and lam < 0:
                continue  # moving mass onto an empty coordinate would increase f
            for T in itertools.combinations(range(n), k):
                point = [sp.Integer(0)] * n
                for idx, v in zip(T, point_T):
                    point[idx] = v
                value = sp.nsimplify(sum(e**2 for e in softmax_jacobian_closed_form(point)))
                found.append((tuple(point), value))
    found = sorted(set(found), key=lambda pv: (-pv[1], pv[0]))
    return found


# ---------------------------------------------------------------------------------------
# One softmax row: numbers
# ---------------------------------------------------------------------------------------


def _simplex_rows(name: str, s: object) -> np.ndarray:
    arr = finite_matrix(name, s)
    if arr.ndim < 1:
        raise InputError(f"{name} must have at least 1 dimension, got a scalar")
    if np.any(arr < 0):
        raise InputError(f"{name} must be non-negative (a point of the simplex)")
    if np.any(np.abs(arr.sum(axis=-1) - 1.0) > 1e-9):
        raise InputError(f"{name} rows must sum to 1 (a point of the simplex)")
    return arr


def _sum_of_others(a: np.ndarray) -> np.ndarray:
    """out_i = Σ_{j≠i} a_j (last axis): exclusive prefix + suffix sums (no cancellation)."""
    zero = np.zeros_like(a[..., :1])
    before = np.concatenate([zero, np.cumsum(a, axis=-1)[..., :-1]], axis=-1)
    after = np.concatenate([np.cumsum(a[..., ::-1], axis=-1)[..., -2::-1], zero], axis=-1)
    return before + after


def row_jacobian_fro(s: np.ndarray) -> np.ndarray | float:
    """‖diag(s) − s sᵀ‖_F = √(p2 − 2p3 + p2²) for rows s (..., n) of the simplex -> (...).

    Evaluated as √Σ_i s_i² [(Σ_{j≠i} s_j)² + Σ_{j≠i} s_j²] — the same quantity (1 − s_i =
    Σ_{j≠i} s_j on the simplex) written with non-negative terms only, so it stays accurate to a
    few ulps near a vertex, where the power-sum form cancels to 0.
    """
    s = _simplex_rows("s", s)  # (..., n)
    others = _sum_of_others(s)  # (..., n): Σ_{j≠i} s_j = 1 − s_i
    others_sq = _sum_of_others(s * s)  # (..., n): Σ_{j≠i} s_j²
    fro = np.sqrt(np.sum(s * s * (others * others + others_sq), axis=-1))
    return float(fro) if fro.ndim == 0 else fro


def row_jacobian_fro_max_points(n: int) -> np.ndarray:
    """The maximisers of ‖J(s)‖_F on Δ_n: the two-point uniform rows (e_i + e_j)/2, (n(n−1)/2, n).

    For n = 1 the simplex is the single point (1,), where J = 0; it is returned as (1, 1).
    """
    n = positive_int("n", n)
    if n == 1:
        return np.ones((1, 1))
    pairs = list(itertools.combinations(range(n), 2))
    out = np.zeros((len(pairs), n))
    for row, (i, j) in enumerate(pairs):
        out[row, [i, j]] = 0.5
    return out


def reviewer_one_hot_example(n: int) -> dict:
    """‖J(e_1)‖²_F = p2 − 2p3 + p2² = 1 − 2 + 1 = 0 at a one-hot row of length n.

    Review point 1.1 evaluates the paper's step at F_i1 = 1, others 0, and reads
    "1 − 0 = 2(1 + 0 + … + 0) = 2". Here both sides of the *correct* identity are evaluated:
    the Jacobian of a one-hot row is the zero matrix, so a factor-2 step cannot hold there.
    """
    n = positive_int("n", n)
    e1 = [sp.Integer(1)] + [sp.Integer(0)] * (n - 1)
    J = softmax_jacobian_closed_form(e1)
    p2, p3 = sum(v**2 for v in e1), sum(v**3 for v in e1)
    lhs = sum(e**2 for e in J)
    rhs = jacobian_fro2_in_power_sums().subs({P2: p2, P3: p3})
    return {
        "n": n,
        "row": tuple(e1),
        "jacobian_is_zero": J.is_zero_matrix,
        "p2": p2,
        "p3": p3,
        "lhs_jac_fro2": lhs,  # Σ_ij J_ij²
        "rhs_power_sums": rhs,  # p2 − 2p3 + p2²
        "identity_holds": sp.simplify(lhs - rhs) == 0,
        "reviewer_reading_lhs": sp.Integer(1) - 0,  # "1 − 0"
        "reviewer_reading_rhs": 2 * p2,  # "2(1 + 0 + … + 0)"
        "reviewer_reading_consistent": sp.Integer(1) - 0 == 2 * p2,
    }


# ---------------------------------------------------------------------------------------
# N x N attention matrix P = softmax(τ S), row-wise
# ---------------------------------------------------------------------------------------


def softmax_matrix_bounds(N: int, temperature: float = 1.0, causal: bool = False) -> dict:
    """sup ‖softmax(τS)‖_F = √N and sharp sup ‖∂softmax(τS)/∂S‖_F = τ√N/2 (N ≥ 2), exactly.

    Row i of P depends only on row i of S, so ∂P/∂S is block diagonal with blocks τ J(P_i)
    and ‖∂P/∂S‖²_F = τ² Σ_i ‖J(P_i)‖²_F ≤ τ² · m/4, m = number of rows with ≥ 2 visible
    entries (m = N for N ≥ 2; m = N − 1 under a causal mask, where row 1 is constant; m = 0
    for N = 1). Sharp: each term tends to 1/4 as row i tends to two-point uniform (attained at
    finite S only when rows have exactly 2 visible entries, or with −∞ masking).
    ‖P‖²_F = Σ_i p2(P_i) ≤ N, approached as rows tend to one-hot, attained only when every row
    has a single visible entry. Eq. 4.2's 2√N is compared at the same τ (chain rule: 2τ√N).

    Values are sympy numbers, exact for the float ``temperature`` given; ``*_float`` keys
    hold float64 copies.
    """
    N = positive_int("N", N)
    if isinstance(temperature, sp.Basic) and temperature.is_positive and temperature.is_finite:
        tau = temperature  # already exact, e.g. 1/sqrt(d)
    else:
        tau = sp.Rational(positive_float("temperature", temperature))  # the float's exact value
    m = N - 1 if causal else (N if N >= 2 else 0)  # rows whose Jacobian can be non-zero
    row_sharp = sharp_row_jacobian_fro_bound()  # 1/2
    out = {
        "N": N,
        "temperature": tau,
        "causal": bool(causal),
        "fro_sup": sp.sqrt(N),
        "fro_sup_attained": N == 1,
        "jac_wrt_S_sharp": tau * sp.sqrt(m) * row_sharp,
        "jac_wrt_S_attained_at_finite_S": m == 0 or N == 2,
        "paper_jac_bound": 2 * tau * sp.sqrt(N),
    }
    out["looseness_factor"] = (
        sp.nsimplify(out["paper_jac_bound"] / out["jac_wrt_S_sharp"]) if m else sp.oo
    )
    for key in ("fro_sup", "jac_wrt_S_sharp", "paper_jac_bound", "looseness_factor"):
        out[key + "_float"] = float(out[key])
    return out


def _softmax_rows(S: np.ndarray, causal: bool) -> np.ndarray:
    """Row-wise softmax of S (N, N), masked entries (j > i when causal) set to exactly 0."""
    N = S.shape[0]
    visible = np.tril(np.ones((N, N), bool)) if causal else np.ones((N, N), bool)
    logits = np.where(visible, S, -np.inf)
    logits = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=1, keepdims=True)


def softmax_attention_jacobian_fro2_reference(
    X: np.ndarray, W: np.ndarray, tau: float = 1.0, causal: bool = False
) -> float:
    """‖∂P/∂X‖²_F = τ² Σ_i [‖z_i‖²‖J_i‖²_F + ‖J_i Y‖²_F + 2P_ii(P_ii g_ii − Σ_j P_ij² g_ij)].

    P = softmax(τ X W Xᵀ) row-wise (causal: row i sees j ≤ i), Y = X Wᵀ (rows y_j = W x_j),
    z_i = Wᵀ x_i, J_i = diag(P_i) − P_i P_iᵀ, (J_i Y)_j = P_ij (y_j − ȳ_i), ȳ_i = Σ_j P_ij y_j,
    g_ij = (y_j − ȳ_i)ᵀ z_i. From ∂S_ij/∂x_k = δ_ik W x_j + δ_jk Wᵀ x_i,
    ∂P_i/∂x_k = τ J_i (δ_ik Y + e_k z_iᵀ); summing ‖·‖²_F over k gives the three terms (the
    last is the cross term of k = i). Masked entries have P_ij = 0 and drop out. A clear
    O(N²D) loop, meant as a reference, not a kernel.

    Args:
        X: tokens, (N, D).
        W: bilinear form W = W_Q W_Kᵀ, (D, D), not necessarily symmetric.
        tau: temperature τ > 0 inside the softmax.
        causal: apply the causal mask.
    """
    X = finite_matrix("X", X, (None, None))
    N, D = X.shape
    W = finite_matrix("W", W, (D, D))
    tau = positive_float("tau", tau)
    P = _softmax_rows(tau * (X @ W @ X.T), causal)  # (N, D) @ (D, D) @ (D, N) -> (N, N)
    Y = X @ W.T  # (N, D): row j is W x_j
    Z = X @ W  # (N, D): row i is Wᵀ x_i
    total = 0.0
    for i in range(N):
        p = P[i]  # (N,)
        J_fro2 = float(row_jacobian_fro(p)) ** 2
        y_bar = p @ Y  # (N,) @ (N, D) -> (D,)
        dev = Y - y_bar  # (N, D): y_j − ȳ_i
        JY_fro2 = np.sum((p[:, None] * dev) ** 2)  # ‖J_i Y‖²_F
        g = dev @ Z[i]  # (N, D) @ (D,) -> (N,): g_ij
        cross = 2.0 * p[i] * (p[i] * g[i] - np.sum(p**2 * g))
        total += (Z[i] @ Z[i]) * J_fro2 + JY_fro2 + cross
    return float(tau**2 * total)
