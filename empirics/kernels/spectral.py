"""σ₁(J) as a certified bracket [lower, upper] from Lanczos on JᵀJ with Jacobian products only (J never formed).

A = JᵀJ is symmetric positive semi-definite with tr A = ‖J‖²_F (known exactly: :mod:`empirics.kernels.expr_norms`).
Lanczos with full reorthogonalisation builds an orthonormal basis V = [v_1 … v_k] (restarted with a fresh
seeded vector orthogonal to V when the Krylov space becomes invariant), keeps AV, and forms
T = VᵀAV and the residual block R = AV − TV (k × n, rows A v_j − Σ_l T_jl v_l: in the orthogonal
complement of span V).

* **Lower bound.** For the top Ritz vector x = V y₁: σ₁ ≥ ‖Jx‖/‖x‖ (a Rayleigh quotient; J applied once more).
* **Upper bound (theorem used).** Write a unit vector as x = Vc + b with b ⊥ span V. Then
  xᵀAx = cᵀTc + 2cᵀRb + bᵀAb, and bᵀAb ≤ ‖(I−VVᵀ)A(I−VVᵀ)‖ ‖b‖² ≤ t_⊥‖b‖² with
  t_⊥ = tr A − tr T (A is positive semi-definite, so the largest eigenvalue of the compressed rest is at
  most its trace; this is what keeps a top eigenvector that the Krylov space missed from escaping the
  bound). With R = UΣWᵀ (thin SVD; U and Σ from the eigen-decomposition of the k×k matrix RRᵀ),
  cᵀRb = (ΣUᵀc)·(Wᵀb) and ‖Wᵀb‖ ≤ ‖b‖, hence
  λ₁(A) ≤ λ_max [[T, UΣ], [ΣUᵀ, t_⊥ I]]  (and ≤ t_⊥),
  a symmetric 2k×2k eigenproblem. So σ₁ ≤ √ of it, and also σ₁ ≤ ‖J‖_F. Once the Krylov space holds the
  top singular direction and t_⊥ < θ₁, the bound is θ₁ + O(‖residual of the top Ritz pair‖²/(θ₁ − t_⊥)),
  i.e. as tight as the Ritz value; while the unexplored trace t_⊥ exceeds θ₁ (a spread-out spectrum in a
  space much larger than k) it is ≈ t_⊥ and the bracket stays open — not converged, honestly.
* Rounding: V is orthonormal to ~1e-15 (reorthogonalised twice); t_⊥ carries a margin of
  64·ε·(tr A + Σ|θ| + k max|θ|) so that float64 round-off in the two traces cannot make it too small,
  and both ends are widened by 64·ε·k relative (≈ 1.4e-12 at k = 100): the certificate is exact
  arithmetic's, up to that round-off allowance, not interval arithmetic.

``converged`` is (upper − lower) ≤ tol·upper: the bracket's relative width, not a gap between two
lower bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from common.validate import InputError, positive_float, positive_int

__all__ = ["SpectralBracket", "certified_spectral_norm", "MAX_BASIS_BYTES"]

MAX_BASIS_BYTES = 2 * 2**30  # V and AV together
EPS = np.finfo(np.float64).eps
ROUND = 64 * EPS  # per Lanczos vector: relative widening of the bracket for float64 round-off


@dataclass(frozen=True)
class SpectralBracket:
    """lower ≤ σ₁(J) ≤ upper, certified (module docstring); ``estimate`` = √θ₁ (top Ritz value)."""

    lower: float
    upper: float
    estimate: float
    upper_frobenius: float   # ‖J‖_F, the trivial bound
    rel_width: float         # (upper − lower)/upper
    converged: bool          # rel_width ≤ tol
    steps: int               # Lanczos vectors (= Jacobian product pairs)
    residual: float          # ‖R‖₂ of the basis
    trace_rest: float        # t_⊥ = ‖J‖²_F − tr T (with its round-off margin)
    tol: float
    v: np.ndarray            # top right singular vector estimate (input shape, unit norm)

    def as_dict(self) -> dict:
        return {"sigma_lower": float(self.lower), "sigma_upper": float(self.upper),
                "sigma_estimate": float(self.estimate), "sigma_upper_frobenius": float(self.upper_frobenius),
                "rel_width": float(self.rel_width), "converged": bool(self.converged), "lanczos_steps": int(self.steps),
                "residual": float(self.residual), "trace_rest": float(self.trace_rest), "tol": float(self.tol)}


def _bracket(V: np.ndarray, AV: np.ndarray, trA: float) -> tuple[float, float, np.ndarray, float, float]:
    """(θ₁, λ upper bound, y₁, ‖R‖₂, t_⊥) from the basis V (k, n), AV (k, n) and tr A."""
    k = V.shape[0]
    T = V @ AV.T  # (k, n) @ (n, k)
    T = 0.5 * (T + T.T)
    theta, Yv = np.linalg.eigh(T)
    R = AV - T @ V  # rows: A v_j − Σ_l T_jl v_l, in the complement of span V
    RR = R @ R.T
    s2, U = np.linalg.eigh(0.5 * (RR + RR.T))
    s = np.sqrt(np.maximum(s2, 0.0))
    margin = 64 * EPS * (abs(trA) + float(np.sum(np.abs(theta))) + k * float(np.max(np.abs(theta), initial=0.0)))
    t_rest = max(trA - float(np.trace(T)), 0.0) + margin
    M = np.zeros((2 * k, 2 * k))
    M[:k, :k] = T
    M[:k, k:] = U * s[None, :]
    M[k:, :k] = M[:k, k:].T
    M[k:, k:] = t_rest * np.eye(k)
    lam_up = max(float(np.linalg.eigvalsh(M)[-1]), t_rest)
    return float(theta[-1]), lam_up, Yv[:, -1], float(s[-1]) if s.size else 0.0, t_rest


def certified_spectral_norm(
    matvec: Callable[[np.ndarray], np.ndarray],   # v (input shape) -> J v
    rmatvec: Callable[[np.ndarray], np.ndarray],  # u (output shape) -> Jᵀ u
    shape: tuple,                                 # input shape
    fro2: float,                                  # ‖J‖²_F = tr JᵀJ, exact
    *,
    tol: float = 1e-8,
    max_steps: int = 200,
    seed: int = 0,
    check_every: int = 5,
    on_step: Callable[[int, int, "SpectralBracket | None"], None] | None = None,
) -> SpectralBracket:
    """Bracket σ₁(J) by Lanczos on JᵀJ (full reorthogonalisation), stopping when the bracket is within ``tol``.

    ``on_step(k, k_max, bracket)``: called after each Lanczos vector with the latest bracket (None before the
    first check), for progress lines; it never changes the numbers.

    >>> M = np.diag([3.0, 2.0, 1.0])
    >>> b = certified_spectral_norm(lambda v: M @ v, lambda u: M.T @ u, (3,), 14.0)
    >>> b.converged, round(b.lower, 12), round(b.upper, 12)
    (True, 3.0, 3.0)
    """
    from common.seeds import rng_for

    tol = positive_float("tol", tol)
    max_steps = positive_int("max_steps", max_steps)
    check_every = positive_int("check_every", check_every)
    fro2 = float(fro2)
    if not math.isfinite(fro2) or fro2 < 0:
        raise InputError(f"‖J‖²_F must be finite and ≥ 0, got {fro2}")
    n = int(np.prod(shape))
    k_max = min(max_steps, n)
    if 2 * k_max * n * 8 > MAX_BASIS_BYTES:
        k_max = max(1, MAX_BASIS_BYTES // (16 * n))
    rng = rng_for(int(seed), "certified_spectral_norm", n)
    V = np.zeros((k_max, n))
    AV = np.zeros((k_max, n))

    def apply(q):
        return rmatvec(matvec(q.reshape(shape))).reshape(-1)

    def fresh(k):
        for _ in range(3):
            q = rng.standard_normal(n)
            for _ in range(2):
                q -= V[:k].T @ (V[:k] @ q)
            nq = float(np.linalg.norm(q))
            if nq > 1e-8:
                return q / nq
        return None

    if fro2 == 0.0:
        return SpectralBracket(0.0, 0.0, 0.0, 0.0, 0.0, True, 0, 0.0, 0.0, tol, np.zeros(shape))
    q = fresh(0)
    beta_prev, k, next_check = 0.0, 0, check_every
    result = None
    while k < k_max:
        V[k] = q
        w = apply(q)
        AV[k] = w
        k += 1
        alpha = float(q @ w)
        w = w - alpha * q - (beta_prev * V[k - 2] if k >= 2 else 0.0)
        for _ in range(2):
            w -= V[:k].T @ (V[:k] @ w)
        beta = float(np.linalg.norm(w))
        scale = max(abs(alpha), math.sqrt(fro2) * 1e-300, 1e-300)
        if k >= next_check or k == k_max or beta <= 1e-10 * scale:
            next_check = k + max(check_every, k // 4)  # the bracket costs O(k²n): check on a geometric schedule
            th, lam_up, y, res, t_rest = _bracket(V[:k], AV[:k], fro2)
            x = (V[:k].T @ y).reshape(shape)
            xn = float(np.linalg.norm(x))
            lower = float(np.linalg.norm(matvec(x))) / xn if xn > 0 else 0.0
            slack = ROUND * k  # relative round-off of the products and of the basis' orthonormality
            upper = float(min(math.sqrt(lam_up), math.sqrt(fro2)) * (1 + slack))
            lower = float(min(max(lower, 0.0) * (1 - slack), upper))
            width = (upper - lower) / upper if upper > 0 else 0.0
            result = SpectralBracket(lower, upper, math.sqrt(max(th, 0.0)), math.sqrt(fro2), width, bool(width <= tol), k,
                                     res, t_rest, tol, x / xn if xn > 0 else x)
            if result.converged:
                if on_step is not None:
                    on_step(k, k_max, result)
                return result
        if on_step is not None:
            on_step(k, k_max, result)
        if k >= k_max:
            break
        if beta <= 1e-10 * scale:  # invariant Krylov space: continue with a fresh direction orthogonal to V
            q = fresh(k)
            beta_prev = 0.0
            if q is None:
                break
        else:
            q, beta_prev = w / beta, beta
    return result
