"""σ₁ ≤ √θ₁/√(1 − ε), ε = (ln(1.648·√n/δ)/(2k − 1))², except with probability ≤ δ over Lanczos's random start.

Kuczyński & Woźniakowski (SIAM J. Matrix Anal. Appl. 13(4), 1992, "Estimating the largest eigenvalue by the power
and Lanczos algorithms with a random start", Thm 4.2): for a symmetric positive semidefinite n × n matrix A and a
start vector uniform on the unit sphere, the Lanczos estimate ξ_k from the Krylov information [b, Ab, …, A^k b]
(k products with A) has relative error (λ₁ − ξ_k)/λ₁ ≥ ε with probability at most 1.648·√n·e^{−(2k − 1)√ε}, for
every A — no eigenvalue gap is assumed. With A = JᵀJ, ξ_k = θ₁ (the top Ritz value) and λ₁ = σ₁(J)², solving for ε
at a failure probability δ turns a Lanczos run into an upper bound that holds except on a set of starts of measure δ.

It is a probabilistic certificate, unlike the deterministic bracket of :mod:`sapa.empirics.kernels.spectral`: what is
random is the start, drawn from a named seeded stream (Gaussian, normalised: uniform on the sphere); the bound
assumes the exact-arithmetic Krylov space, which full reorthogonalisation keeps to round-off. A reading built on
several such bounds adds their δ (a union bound).
"""

from __future__ import annotations

import math

__all__ = ["KW_CONSTANT", "relative_error", "upper_bound"]

KW_CONSTANT = 1.648  # Kuczyński & Woźniakowski (1992), Thm 4.2: the Lanczos failure bound's constant


def relative_error(n: int, k: int, delta: float) -> float:
    """ε with KW_CONSTANT·√n·e^{−(2k − 1)√ε} = δ (capped at 1: no bound): n the dimension, k the products with A."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative integer, got {k!r}")
    if not (0 < delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if n == 1:
        return 0.0  # one dimension: the start is the eigenvector
    if 2 * k - 1 <= 0:
        return 1.0
    root = math.log(KW_CONSTANT * math.sqrt(n) / delta) / (2 * k - 1)
    return min(1.0, max(0.0, root) ** 2)


def upper_bound(estimate: float, lanczos_vectors: int, n: int, delta: float) -> float:
    """σ₁ ≤ estimate/√(1 − ε) except with probability ≤ δ: ``estimate`` = √θ₁ after ``lanczos_vectors`` Lanczos
    vectors on JᵀJ (a Krylov space of that dimension: k = lanczos_vectors − 1 products), n = the input dimension;
    inf when the run is too short for any bound."""
    eps = relative_error(int(n), max(int(lanczos_vectors) - 1, 0), float(delta))
    return math.inf if eps >= 1.0 else float(estimate) / math.sqrt(1.0 - eps)
