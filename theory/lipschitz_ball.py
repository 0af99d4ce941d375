r"""Lip(f; B_R^n) ≤ U_φ(n): softmax v[√κ + β + β√min(n/2, κ)], s^p/√n v√n β^p (1 + 2p), κ = n/(1 + (n−1)e^{−2β}).

The layer is f(X) = φ(S) X W_V, S = c·X W Xᵀ, c = 1/√d, W = W_Q W_Kᵀ, X ∈ R^{n×D} with every token in the ball
‖x_i‖ ≤ R (the set B_R^n, convex). φ is the row softmax or the element-wise s ↦ s^p/√n (p ≥ 1). Write
w = ‖W‖₂, v = ‖W_V‖₂ and β = c·w·R², the largest logit: |S_ij| ≤ c‖x_i‖‖W‖₂‖x_j‖ ≤ β. The Lipschitz constant
of f on B_R^n (Frobenius norms) is sup_{X ∈ B_R^n} σ₁(J(X)) (the set is convex), so it suffices to bound
‖J dX‖_F = ‖df‖_F for every X ∈ B_R^n and unit ‖dX‖_F. Differentiating,

    df = dP · X W_V + P · dX W_V,     dS = c(dX W Xᵀ + X W dXᵀ),

so ‖df‖_F ≤ ‖dP X‖_F·v + ‖P‖₂·v (term 1, term 2). Two facts are used throughout:
(F1) ‖X‖₂ ≤ ‖X‖_F ≤ √n R; (F2) ‖A B‖_F ≤ ‖A‖_F ‖B‖₂ and ‖A B‖_F ≤ ‖A‖₂ ‖B‖_F.

**Softmax.** Row i: dP_i = dS_i J_i with J_i = diag(p_i) − p_i p_iᵀ (p_i the i-th row of P), symmetric PSD.

* (L1) ‖J_i‖₂ ≤ ½. Gershgorin: row j of J_i has diagonal p_j(1 − p_j) and off-diagonal absolute sum
  p_j Σ_{k≠j} p_k = p_j(1 − p_j), so every eigenvalue is ≤ 2p_j(1 − p_j) = ½ − ½(2p_j − 1)² ≤ ½.
* (L2) ‖J_i^{1/2} X‖₂ ≤ R. Xᵀ J_i X = Σ_j p_ij x_j x_jᵀ − x̄_i x̄_iᵀ (x̄_i = Σ_j p_ij x_j) is the covariance of the
  tokens under p_i, ≼ Σ_j p_ij x_j x_jᵀ, whose norm is ≤ Σ_j p_ij ‖x_j‖² ≤ R².
* (L3) Column sums. For logits in [−β, β], p_ij = e^{S_ij}/Σ_k e^{S_ik} ≤ e^β/(e^β + (n − 1)e^{−β}) =
  1/(1 + (n − 1)e^{−2β}), so every column sum Σ_i p_ij ≤ κ := n/(1 + (n − 1)e^{−2β}) ≤ min(n, n e^{2β}/(n − 1)).
  Rows sum to 1, so ‖P‖₂ ≤ (‖P‖₁‖P‖_∞)^{1/2} ≤ √κ: **term 2 ≤ v√κ**.
* Term 1, row i: (dP X)_i = (dS_i J_i^{1/2})(J_i^{1/2} X), so by (L2) ‖(dP X)_i‖ ≤ R ‖J_i^{1/2} dS_iᵀ‖, with
  dS_iᵀ = c(X Wᵀ dx_i + dX Wᵀ x_i). By (L2), ‖J_i^{1/2} X Wᵀ dx_i‖ ≤ R w ‖dx_i‖. For the second part, two bounds
  on Q := Σ_i ‖J_i^{1/2} dX Wᵀ x_i‖²: by (L1), Q ≤ ½ ‖dX Wᵀ Xᵀ‖²_F ≤ ½ w² ‖X‖₂² ≤ ½ n w² R² (F1, F2); and as
  ‖J_i^{1/2} y‖² = Var_{p_i}(y) ≤ Σ_j p_ij y_j² with y_j = dx_jᵀ Wᵀ x_i, |y_j| ≤ w R ‖dx_j‖, Q ≤ w² R² Σ_j ‖dx_j‖²
  Σ_i p_ij ≤ κ w² R² (L3). Minkowski over rows: ‖dP X‖_F ≤ c R (R w + w R √min(n/2, κ)), so
  **term 1 ≤ v β (1 + √min(n/2, κ))**.

Hence U_softmax(n) = v[√κ + β + β√min(n/2, κ)]. It is ≤ v[√n + β + β√(n/2)] (the √n rate) and tends, as
n → ∞, to the n-independent v[e^β + β + βe^β] (κ → e^{2β}): the mean-field regime sets in near n ≈ e^{2β}.

**s^p/√n.** dP = (p/√n) S^{∘(p−1)} ∘ dS. Entries |P_ij| ≤ β^p/√n, so ‖P‖₂ ≤ ‖P‖_F ≤ √n β^p: **term 2 ≤ v√n β^p**.
‖dS‖_F ≤ c(‖dX W Xᵀ‖_F + ‖X W dXᵀ‖_F) ≤ 2 c w ‖X‖₂ ≤ 2 c w √n R (F1, F2) and ‖dP‖_F ≤ (p/√n) β^{p−1} ‖dS‖_F, so
‖dP X‖_F ≤ ‖dP‖_F ‖X‖₂ ≤ (p/√n) β^{p−1} · 2 c w √n R · √n R = 2p √n β^p: **term 1 ≤ 2p v√n β^p**. Hence
U_poly(n) = v√n β^p (1 + 2p): the √n rate at every n, no mean-field saturation. (Every token at R·u, u the top
eigenvector of (W + Wᵀ)/2, gives σ₁ ∝ √n exactly, so the rate is attained.)

Each step is checked in ``tests/theory/test_lipschitz_ball.py``: (L1) symbolically and on random simplices, (L2)
and (L3) against sampled rows, the term bounds and U against σ₁ of autograd's dense Jacobian, and the local
exponent n U'(n)/U(n) of :func:`local_exponent` against sympy's derivative. Castin, Ablin & Peyré (ICML 2024,
arXiv 2312.14820) state the softmax rates (√n up to a constant, n-independent bounds in the mean-field regime);
their constants are not used here.
"""

from __future__ import annotations

import math

__all__ = ["logit_bound", "column_sum_bound", "softmax_bound", "poly_bound", "ball_bound", "local_exponent",
           "asymptotic_exponent", "mean_field_limit"]


def logit_bound(w: float, R: float, d: int) -> float:
    """β = ‖W_Q W_Kᵀ‖₂ R²/√d: |S_ij| ≤ β on B_R^n."""
    return float(w) * float(R) ** 2 / math.sqrt(d)


def column_sum_bound(n: float, beta: float) -> float:
    """κ = n/(1 + (n − 1)e^{−2β}): every column sum of softmax(S) with |S_ij| ≤ β (L3)."""
    return n / (1.0 + (n - 1.0) * math.exp(-2.0 * beta))


def softmax_bound(n: float, beta: float, v: float) -> float:
    """U_softmax(n) = v[√κ + β + β√min(n/2, κ)] (module docstring)."""
    k = column_sum_bound(n, beta)
    return v * (math.sqrt(k) + beta + beta * math.sqrt(min(n / 2.0, k)))


def poly_bound(n: float, p: int, beta: float, v: float) -> float:
    """U_poly(n) = v √n β^p (1 + 2p) for φ(s) = s^p/√n (module docstring)."""
    if p < 1:
        raise ValueError(f"need p ≥ 1, got {p}")
    return v * math.sqrt(n) * beta**p * (1 + 2 * p)


def _power(activation: str) -> int | None:
    if activation == "softmax":
        return None
    if activation.startswith("poly") and activation[4:].isdigit():
        return int(activation[4:])
    raise ValueError(f"activation must be 'softmax' or 'poly<p>', got {activation!r}")


def ball_bound(activation: str, n: float, beta: float, v: float) -> float:
    """U_φ(n) for ``"softmax"`` or ``"poly<p>"``."""
    p = _power(activation)
    return softmax_bound(n, beta, v) if p is None else poly_bound(n, p, beta, v)


def local_exponent(activation: str, n: float, beta: float) -> float:
    """e(n) = n U'(n)/U(n) in closed form (v cancels); the min's branch switches at n = 1 + e^{2β}.

    With ε_κ = n κ'/κ = (1 − e^{−2β})/(1 + (n − 1)e^{−2β}): softmax e = ½[√κ ε_κ + β√m ε_m]/(√κ + β + β√m), where
    m = n/2, ε_m = 1 below the switch and m = κ, ε_m = ε_κ above; s^p/√n: e = ½.
    """
    if _power(activation) is not None:
        return 0.5
    q = math.exp(-2.0 * beta)
    k = column_sum_bound(n, beta)
    eps_k = (1.0 - q) / (1.0 + (n - 1.0) * q)
    m, eps_m = (n / 2.0, 1.0) if n / 2.0 <= k else (k, eps_k)
    return 0.5 * (math.sqrt(k) * eps_k + beta * math.sqrt(m) * eps_m) / (math.sqrt(k) + beta + beta * math.sqrt(m))


def asymptotic_exponent(activation: str) -> float:
    """lim_{n→∞} e(n): 0 for softmax (U → the mean-field limit), ½ for s^p/√n."""
    return 0.0 if _power(activation) is None else 0.5


def mean_field_limit(beta: float, v: float) -> float:
    """lim_{n→∞} U_softmax(n) = v[e^β + β + βe^β] (κ → e^{2β})."""
    return v * (math.exp(beta) + beta + beta * math.exp(beta))
