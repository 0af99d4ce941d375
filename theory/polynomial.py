"""Exact Jacobians of polynomial attention φ(S) = c·S^{∘p}, S = X W Xᵀ (arXiv 2410.18613).

The paper (Thms 4.2, 4.4 and Cors 4.3, 4.5) bounds the Frobenius norms of φ(S) and of its
Jacobian for φ(x) = x and x³ (scaled by 1/√N) in expectation. This module gives the
deterministic, exact finite-N identities those expectations are taken of, for every integer
p ≥ 1, element-wise power, optional causal mask (row i sees j ≤ i) and per-row coefficients
c_i (e.g. the dynamic causal scale 1/√i):

* w.r.t. X, S = X W Xᵀ (shared X):  ∂P_ij/∂x_k = c p S_ij^{p−1} (δ_ik W x_j + δ_jk Wᵀ x_i), so
  ‖∂P/∂X‖²_F = c²p² [Σ_{i≠j} S_ij^{2p−2}(‖W x_j‖² + ‖Wᵀ x_i‖²) + Σ_i S_ii^{2p−2}‖(W + Wᵀ)x_i‖²]
  (the diagonal S_ii depends on x_i twice);
* w.r.t. S:  ‖∂P/∂S‖²_F = c²p² Σ_ij S_ij^{2p−2};
* w.r.t. (A, B) in the paper's independent model S = A Bᵀ:
  ‖∂P/∂(A, B)‖²_F = c²p² Σ_ij S_ij^{2p−2}(‖b_j‖² + ‖a_i‖²).

Sums run over visible entries (j ≤ i under the mask); on row i, c² reads c_i².
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from sapa.common.validate import InputError, finite_matrix, positive_int

# ---------------------------------------------------------------------------------------
# helpers: coefficients and masks, shared by the numpy and sympy paths
# ---------------------------------------------------------------------------------------


def _row_coefficients(c, N: int, symbolic: bool) -> list:
    """c as a length-N list of per-row coefficients c_i (a scalar c is repeated)."""
    if isinstance(c, bool):
        raise InputError(f"c must be a number or a sequence of numbers, got {c!r}")
    if isinstance(c, sp.Basic) or np.ndim(c) == 0:
        coeffs = [c] * N
    else:
        coeffs = list(c) if symbolic else list(np.ravel(c))
        if len(coeffs) != N:
            raise InputError(f"c must be a scalar or one value per row ({N}), got {len(coeffs)}")
    if not symbolic:
        coeffs = list(finite_matrix("c", coeffs, (N,)))
    return coeffs


def _visible(N: int, causal: bool) -> np.ndarray:
    """(N, N) boolean mask of the entries row i attends to: all, or j ≤ i when causal."""
    return np.tril(np.ones((N, N), bool)) if causal else np.ones((N, N), bool)


def _degree(p) -> int:
    return positive_int("p", p)


def _is_symbolic(*arrays) -> bool:
    return any(isinstance(a, sp.MatrixBase) for a in arrays)


# ---------------------------------------------------------------------------------------
# symbolic model
# ---------------------------------------------------------------------------------------


def poly_attention_symbolic(
    N: int, D: int, p: int, c=1, causal: bool = False
) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """P = c·(X W Xᵀ)^{∘p} with explicit real symbols x_ia (N, D), w_ab (D, D, not symmetric).

    Returns (X (N, D), W (D, D), P (N, N)); masked entries (j > i when causal) are 0 and
    row i is scaled by c_i when ``c`` is a sequence.
    """
    N, D, p = positive_int("N", N), positive_int("D", D), _degree(p)
    X = sp.Matrix(N, D, lambda i, a: sp.Symbol(f"x_{i + 1}_{a + 1}", real=True))
    W = sp.Matrix(D, D, lambda a, b: sp.Symbol(f"w_{a + 1}_{b + 1}", real=True))
    S = X * W * X.T  # (N, D) @ (D, D) @ (D, N) -> (N, N)
    coeffs = _row_coefficients(c, N, symbolic=True)
    vis = _visible(N, causal)
    P = sp.Matrix(N, N, lambda i, j: coeffs[i] * S[i, j] ** p if vis[i, j] else sp.Integer(0))
    return X, W, P


def poly_jacobian_fro2_sympy(N: int, D: int, p: int, causal: bool = False, c=1) -> sp.Expr:
    """Σ (∂vec P/∂vec X)² from ``sp.Matrix.jacobian`` of P = c(X W Xᵀ)^{∘p}: the brute-force truth.

    Uses the symbols of :func:`poly_attention_symbolic` (same N, D give the same symbols), so
    the result can be compared with :func:`poly_jacobian_fro2_closed_form` on (X, W).
    """
    X, W, P = poly_attention_symbolic(N, D, p, c, causal)
    jac = P.reshape(N * N, 1).jacobian(X.reshape(N * D, 1))  # (N², N·D)
    return sum(e**2 for e in jac)


# ---------------------------------------------------------------------------------------
# closed forms (numpy arrays or sympy matrices)
# ---------------------------------------------------------------------------------------


def poly_jacobian_fro2_closed_form(X, W, p: int, c=1, causal: bool = False):
    """‖∂P/∂X‖²_F = Σ_i c_i²p² [Σ_{j≠i} S_ij^{2p−2}(‖Wx_j‖² + ‖Wᵀx_i‖²) + S_ii^{2p−2}‖(W+Wᵀ)x_i‖²].

    P = c·(X W Xᵀ)^{∘p}; j ranges over j ≤ i when causal.

    Args:
        X: tokens, (N, D), numpy array or sympy Matrix.
        W: bilinear form (D, D), not necessarily symmetric.
        p: integer power p ≥ 1 (element-wise).
        c: scalar coefficient, or one coefficient per row (N,).
        causal: restrict to j ≤ i.
    Returns:
        float for numpy input, sympy expression for sympy input.
    """
    p = _degree(p)
    if _is_symbolic(X, W):
        X, W = sp.Matrix(X), sp.Matrix(W)
        N = X.shape[0]
        S = X * W * X.T  # (N, N)
        Y, Z = X * W.T, X * W  # (N, D): rows W x_j and Wᵀ x_i
        coeffs = _row_coefficients(c, N, symbolic=True)
        vis = _visible(N, causal)
        total = sp.Integer(0)
        for i in range(N):
            row = sp.Integer(0)
            for j in range(N):
                if not vis[i, j]:
                    continue
                if i == j:
                    v = Y.row(i) + Z.row(i)  # ((W + Wᵀ) x_i)ᵀ
                    weight = v.dot(v)
                else:
                    weight = Y.row(j).dot(Y.row(j)) + Z.row(i).dot(Z.row(i))
                row += S[i, j] ** (2 * p - 2) * weight
            total += coeffs[i] ** 2 * p**2 * row
        return total
    X = finite_matrix("X", X, (None, None))
    N, D = X.shape
    W = finite_matrix("W", W, (D, D))
    coeffs = np.asarray(_row_coefficients(c, N, symbolic=False))  # (N,)
    S = X @ W @ X.T  # (N, D) @ (D, D) @ (D, N) -> (N, N)
    Y, Z = X @ W.T, X @ W  # (N, D): rows W x_j and Wᵀ x_i
    ny, nz = np.sum(Y * Y, axis=1), np.sum(Z * Z, axis=1)  # (N,), (N,)
    weight = ny[None, :] + nz[:, None]  # (N, N): ‖W x_j‖² + ‖Wᵀ x_i‖²
    np.fill_diagonal(weight, np.sum((Y + Z) ** 2, axis=1))  # ‖(W + Wᵀ) x_i‖²
    terms = np.where(_visible(N, causal), S ** (2 * p - 2) * weight, 0.0)  # (N, N)
    return float(p**2 * np.sum(coeffs**2 * terms.sum(axis=1)))


def poly_jacobian_wrt_S_fro2(S, p: int, c=1, causal: bool = False):
    """‖∂P/∂S‖²_F = Σ_i c_i² p² Σ_j S_ij^{2p−2} for P = c·S^{∘p}, S (N, N) (j ≤ i when causal)."""
    p = _degree(p)
    if _is_symbolic(S):
        S = sp.Matrix(S)
        N = S.shape[0]
        coeffs, vis = _row_coefficients(c, N, symbolic=True), _visible(N, causal)
        return sum(
            coeffs[i] ** 2 * p**2 * S[i, j] ** (2 * p - 2)
            for i in range(N)
            for j in range(N)
            if vis[i, j]
        )
    S = finite_matrix("S", S, (None, None))
    N = S.shape[0]
    if S.shape[1] != N:
        raise InputError(f"S must be square, got shape {S.shape}")
    coeffs = np.asarray(_row_coefficients(c, N, symbolic=False))
    terms = np.where(_visible(N, causal), S ** (2 * p - 2), 0.0)  # (N, N)
    return float(p**2 * np.sum(coeffs**2 * terms.sum(axis=1)))


def poly_jacobian_wrt_AB_fro2(A, B, p: int, c=1, causal: bool = False):
    """‖∂P/∂(A,B)‖²_F = Σ_i c_i²p² Σ_j S_ij^{2p−2}(‖b_j‖² + ‖a_i‖²), S = A Bᵀ with A, B (N, d).

    The paper's model: queries A and keys B as independent variables, so no diagonal term.
    """
    p = _degree(p)
    if _is_symbolic(A, B):
        A, B = sp.Matrix(A), sp.Matrix(B)
        N = A.shape[0]
        S = A * B.T  # (N, d) @ (d, N) -> (N, N)
        coeffs, vis = _row_coefficients(c, N, symbolic=True), _visible(N, causal)
        return sum(
            coeffs[i] ** 2 * p**2 * S[i, j] ** (2 * p - 2)
            * (B.row(j).dot(B.row(j)) + A.row(i).dot(A.row(i)))
            for i in range(N)
            for j in range(N)
            if vis[i, j]
        )
    A = finite_matrix("A", A, (None, None))
    N, d = A.shape
    B = finite_matrix("B", B, (N, d))
    coeffs = np.asarray(_row_coefficients(c, N, symbolic=False))
    S = A @ B.T  # (N, d) @ (d, N) -> (N, N)
    weight = np.sum(B * B, axis=1)[None, :] + np.sum(A * A, axis=1)[:, None]  # (N, N)
    terms = np.where(_visible(N, causal), S ** (2 * p - 2) * weight, 0.0)
    return float(p**2 * np.sum(coeffs**2 * terms.sum(axis=1)))


def poly_fro2(S, p: int, c=1, causal: bool = False):
    """‖P‖²_F = Σ_i c_i² Σ_j S_ij^{2p} for P = c·S^{∘p}, S (N, N) (j ≤ i when causal)."""
    p = _degree(p)
    if _is_symbolic(S):
        S = sp.Matrix(S)
        N = S.shape[0]
        coeffs, vis = _row_coefficients(c, N, symbolic=True), _visible(N, causal)
        return sum(
            coeffs[i] ** 2 * S[i, j] ** (2 * p) for i in range(N) for j in range(N) if vis[i, j]
        )
    S = finite_matrix("S", S, (None, None))
    N = S.shape[0]
    if S.shape[1] != N:
        raise InputError(f"S must be square, got shape {S.shape}")
    coeffs = np.asarray(_row_coefficients(c, N, symbolic=False))
    terms = np.where(_visible(N, causal), S ** (2 * p), 0.0)
    return float(np.sum(coeffs**2 * terms.sum(axis=1)))
