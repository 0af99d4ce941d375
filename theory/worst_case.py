"""Worst-case ‖c·S^{∘p}‖_F, ‖∂(c·S^{∘p})/∂X‖_F and ‖·‖₂ over bounded inputs, S = X W Xᵀ (arXiv 2410.18613, Thm 4.2–Cor 4.5).

The paper's growth claims are in expectation over Gaussian X. This module gives the *worst
case* over two input sets of the same total energy R² = r²N:

``token``  every token on a sphere, ‖x_i‖ = r (what LayerNorm enforces);
``fro``    only the total, ‖X‖_F = R = r√N (energy may sit on one token).

Notation: W ∈ R^{D×D} (W_Q W_Kᵀ), W_s = (W + Wᵀ)/2, λ = the eigenvalue of W_s of largest
modulus with unit eigenvector u (so uᵀWu = λ), σ = ‖W‖₂ ≥ |λ|. From
∂S_ij/∂x_k = δ_ik W x_j + δ_jk Wᵀ x_i and |S_ij| ≤ σ‖x_i‖‖x_j‖:

The lower ends are values at explicit inputs (:func:`witnesses`; for the Frobenius norms the
best of several, computed exactly by :func:`cluster_norms`); below, the aligned and
concentrated witnesses, which already fix the exponent.

token (aligned input x_i = r u):
    ‖φ‖_F  ∈ c N (r²)^p · [|λ|^p, σ^p]
    ‖J‖²_F = c²p²(r²λ)^{2p−2} r² [N(N−1)(‖Wu‖² + ‖Wᵀu‖²) + 4Nλ²]   (aligned)
           ≤ c²p²(r²σ)^{2p−2} r²σ² [2N(N−1) + 4N]
    ‖J‖₂   ∈ c p (r²)^{p−1} 2r√N · [|λ|^p, σ^p]   (direction 1⊗u/√N; upper: ‖X‖₂ ≤ r√N)

fro (concentrated input x_1 = R u, x_i = 0 otherwise):
    ‖φ‖_F  ∈ c (R²)^p · [|λ|^p, σ^p]              (upper: Σ|S_ij|^{2p} ≤ ‖S‖_F^{2p}, ‖S‖_F ≤ σR²)
    ‖J‖_F  ≥ c p (R²|λ|)^{p−1} 2R|λ|  (p ≥ 2),     c R [(N−1)(‖Wu‖² + ‖Wᵀu‖²) + 4λ²]^{½}  (p = 1)
    ‖J‖_F  ≤ c p (σR²)^{p−1} 2σR      (p ≥ 2),     c σ R √(2N + 2)                          (p = 1)
    ‖J‖₂   ∈ c p (R²)^{p−1} 2R · [|λ|^p, σ^p]

Both ends of every bracket are the same power of N, so the worst-case growth exponent of
each quantity is exact. With R = r√N and c ∝ N^{−γ} (γ = ½ for the paper's 1/√N, 0 unscaled):

    token:  ‖φ‖_F ~ N^{1−γ},    ‖J‖_F ~ N^{1−γ},                  ‖J‖₂ ~ N^{½−γ}
    fro:    ‖φ‖_F ~ N^{p−γ},    ‖J‖_F ~ N^{max(p−½, 1)−γ},        ‖J‖₂ ~ N^{p−½−γ}

So under per-token bounds x^p/√N grows like √N in the worst case at *every* N (Frobenius
norms), while with only the total energy bounded x³/√N grows like N^{2.5}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sapa.common.validate import InputError, choice, finite_matrix, positive_float, positive_int

CONSTRAINTS = ("token", "fro")
QUANTITIES = ("fro", "jac_fro", "jac_spec")


@dataclass(frozen=True)
class Bracket:
    """Exact bounds on max ‖·‖ over the constraint set: lower (attained by ``witness``) ≤ max ≤ upper."""

    lower: float
    upper: float
    witness: str  # the named input of :func:`witnesses` that attains ``lower``


def worst_case_exponent(p: int, quantity: str, constraint: str, gamma: float = 0.0) -> float:
    """Exact exponent e of max ‖·‖ ∝ N^e over the constraint set, for c ∝ N^{−γ} (table in the module docstring)."""
    p = positive_int("p", p)
    choice("quantity", quantity, QUANTITIES)
    choice("constraint", constraint, CONSTRAINTS)
    if constraint == "token":
        e = 0.5 if quantity == "jac_spec" else 1.0
    elif quantity == "fro":
        e = float(p)
    elif quantity == "jac_fro":
        e = max(p - 0.5, 1.0)
    else:
        e = p - 0.5
    return e - float(gamma)


def top_pair(W: np.ndarray) -> tuple[float, np.ndarray, float]:
    """(λ, u, σ): the eigenvalue of W_s = (W+Wᵀ)/2 of largest modulus, its unit eigenvector, ‖W‖₂."""
    W = finite_matrix("W", W, (None, None))
    if W.shape[0] != W.shape[1]:
        raise InputError(f"W must be square, got shape {W.shape}")
    lam, Q = np.linalg.eigh((W + W.T) / 2)
    k = int(np.argmax(np.abs(lam)))
    return float(lam[k]), Q[:, k], float(np.linalg.norm(W, 2))


def cluster_norms(W: np.ndarray, V: np.ndarray, n: np.ndarray, p: int, c: float = 1.0) -> tuple[float, float]:
    """(‖φ‖_F, ‖∂φ/∂X‖_F) of φ = c·S^{∘p}, S = XWXᵀ, when X has n_k tokens equal to v_k; V (K, D), n (K,).

    With M = V W Vᵀ (K, K), P_kl = n_k n_l − δ_kl n_k ordered pairs i ≠ j, a_l = ‖W v_l‖²,
    b_k = ‖Wᵀ v_k‖², d_k = ‖(W + Wᵀ) v_k‖²:
        ‖φ‖²_F = c² Σ_kl n_k n_l M_kl^{2p}
        ‖J‖²_F = c²p² [Σ_kl P_kl M_kl^{2p−2} (a_l + b_k) + Σ_k n_k M_kk^{2p−2} d_k]   (0⁰ = 1).
    """
    W, V, n = np.asarray(W, float), np.atleast_2d(np.asarray(V, float)), np.asarray(n, float)
    M = V @ W @ V.T  # (K, D) @ (D, D) @ (D, K)
    a = np.sum((V @ W.T) ** 2, axis=1)  # ‖W v_l‖²
    b = np.sum((V @ W) ** 2, axis=1)  # ‖Wᵀ v_k‖²
    d = np.sum((V @ (W + W.T)) ** 2, axis=1)  # ‖(W + Wᵀ) v_k‖²
    P = np.outer(n, n) - np.diag(n)
    fro2 = c * c * float(np.sum(np.outer(n, n) * M ** (2 * p)))
    jac2 = (c * p) ** 2 * float(np.sum(P * M ** (2 * p - 2) * (a[None, :] + b[:, None]))
                                + np.sum(n * np.diag(M) ** (2 * p - 2) * d))
    return math.sqrt(fro2), math.sqrt(jac2)


def witnesses(constraint: str, N: int, W: np.ndarray, r: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Named inputs on the constraint set as clusters (V (K, D), counts (K,)).

    token: ``aligned`` (every x_i = r u) and ``singular_pair`` (⌈N/2⌉ tokens r·a, ⌊N/2⌋ r·b,
    (a, b) the top singular pair of W, so S_ij = r²σ across the halves);
    fro: ``concentrated`` (x_1 = R u, R = r√N) and ``split_pair`` (x_1 = R a/√2, x_2 = R b/√2).
    """
    choice("constraint", constraint, CONSTRAINTS)
    N, r = positive_int("N", N), positive_float("r", r)
    _, u, _ = top_pair(W)
    U, _, Vt = np.linalg.svd(np.asarray(W, float))
    a, b = U[:, 0], Vt[0]
    zero = np.zeros_like(u)
    if constraint == "token":
        return {"aligned": (r * u[None, :], np.array([N])),
                "singular_pair": (r * np.stack([a, b]), np.array([(N + 1) // 2, N // 2]))}
    R = r * math.sqrt(N)
    out = {"concentrated": (np.stack([R * u, zero]), np.array([1, N - 1]))}
    if N >= 2:
        out["split_pair"] = (np.stack([R * a / math.sqrt(2), R * b / math.sqrt(2), zero]), np.array([1, 1, N - 2]))
    return out


def witness_input(V: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The (N, D) input with n_k consecutive tokens equal to v_k."""
    return np.repeat(np.atleast_2d(np.asarray(V, float)), np.asarray(n, int), axis=0)


def bracket(p: int, quantity: str, constraint: str, N: int, W: np.ndarray, r: float, c: float = 1.0) -> Bracket:
    """Exact [lower, upper] on max ‖·‖ of c·S^{∘p}, S = XWXᵀ, over ‖x_i‖ = r (token) or ‖X‖_F = r√N (fro).

    ``lower`` is the exact value at the best of :func:`witnesses` (Frobenius quantities, by
    :func:`cluster_norms`) or the closed form of the module docstring (spectral).
    """
    p, N = positive_int("p", p), positive_int("N", N)
    r, c = positive_float("r", r), positive_float("c", c)
    choice("quantity", quantity, QUANTITIES)
    choice("constraint", constraint, CONSTRAINTS)
    lam, u, sig = top_pair(W)
    a = abs(lam)
    if constraint == "token":
        r2 = r * r
        if quantity == "jac_spec":
            k = c * p * r2 ** (p - 1) * 2 * r * math.sqrt(N)
            return Bracket(k * a**p, k * sig**p, "aligned")
        if quantity == "fro":
            upper = c * N * (r2 * sig) ** p
        else:
            upper = c * p * (r2 * sig) ** (p - 1) * r * sig * math.sqrt(2 * N * (N - 1) + 4 * N)
    else:
        R2 = r * r * N
        R = math.sqrt(R2)
        if quantity == "jac_spec":
            k = c * p * R2 ** (p - 1) * 2 * R
            return Bracket(k * a**p, k * sig**p, "concentrated")
        if quantity == "fro":
            upper = c * (R2 * sig) ** p
        elif p == 1:
            upper = c * sig * R * math.sqrt(2 * N + 2)
        else:
            upper = c * p * (sig * R2) ** (p - 1) * 2 * sig * R
    k = 0 if quantity == "fro" else 1
    vals = {name: cluster_norms(W, V, n, p, c)[k] for name, (V, n) in witnesses(constraint, N, W, r).items()}
    best = max(vals, key=vals.get)
    return Bracket(vals[best], upper, best)
