"""σ₁(J(Xₙ)) ≥ √(n−1)·σ_max(M), M = ½W_V + ¼c·(uW)ᵀ((v−u)W_V): inputs on which softmax attention's σ₁ grows like √n.

The family (softmax head f(X) = softmax(c·X W Xᵀ) X W_V, c = 1/√d, tokens on the ball ‖x‖ ≤ R, row vectors):
n − 1 tokens sit at one point u and the last at v, placed so that every query u gives the far token exactly half
its attention. With s = c·uWuᵀ and s' = c·uWvᵀ, query u weighs v by p = e^a/(n − 1 + e^a), a = s' − s = c·uW(v − u);
a = log(n − 1) makes p = ½. Moving the far token by w (a row of norm 1) moves each of the n − 1 outputs y_i by

    ∂y_i = p·w W_V + p(1 − p)·c(uW wᵀ)·(v − u) W_V = w·M,   M = p·W_V + p(1 − p)·c·(uW)ᵀ((v − u) W_V)   (D, d_v),

the same for every i < n; the far token's own output moves too. So for the unit perturbation E that moves only the
far token, by the top left singular vector w of M,

    σ₁(J(Xₙ)) ≥ ‖J E‖ ≥ √(n − 1)·σ_max(M),

a certified lower bound of Lip(f; B_Rⁿ) that grows like √(n − 1) as long as the gap a = log(n − 1) is reachable on
the ball: a ≤ a_max = max over ‖u‖, ‖v‖ ≤ R of c·uW(v − u) ≤ 2c‖W‖₂R² (= 2β for the balls of
:mod:`sapa.empirics.experiments.lipschitz_ball`). Beyond n = 1 + e^{a_max} the largest gap leaves p < ½ and the family's
bound falls like e^{a_max}/√n: it shows the √n rate for lengths up to about e^{a_max} (Castin et al.'s "tight for
reasonable lengths"), not for all n.

``a_max`` is found by a seeded projected ascent over u on the sphere ‖u‖ = R with v = R·uW/‖uW‖ (the best v for a
given u); any u found gives a valid construction, so the search need only be good, not optimal. The family point at
n takes v(t) = u + t(v* − u), t = log(n − 1)/a_max ∈ (0, 1] (inside the ball by convexity), so the gap is exactly
log(n − 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sapa.common.seeds import torch_gen_for
from sapa.common.validate import InputError
from sapa.empirics.kernels.head_jacobian import Head, jvp

__all__ = ["Gap", "FamilyPoint", "largest_gap", "family_point", "family_series", "MAX_N"]

MAX_N = 8192  # J·E at n tokens holds a few (n, n) float64 matrices: 0.5 GiB each at this n


@dataclass(frozen=True)
class Gap:
    """The construction's two points: u (D,) and v* (D,) on the sphere of radius R, and a_max = c·uW(v* − u)."""

    u: torch.Tensor
    v: torch.Tensor
    a_max: float
    R: float


@dataclass(frozen=True)
class FamilyPoint:
    """The family at n: the input X (n, D), the unit perturbation E (n, D), ‖J E‖ (a certified lower bound of σ₁ and
    of the Lipschitz constant on the ball), the closed form √(n − 1)·σ_max(M), the far token's weight p, the gap."""

    n: int
    X: torch.Tensor
    E: torch.Tensor
    sigma_lower: float
    closed_form: float
    p: float
    gap: float
    in_regime: bool  # the gap log(n − 1) is reachable (p = ½); else the largest gap is used and p < ½


def _gap_of(h: Head, u: torch.Tensor, R: float) -> tuple[float, torch.Tensor]:
    """(a(u) = c(R‖uW‖ − uWuᵀ), v = R·uW/‖uW‖) for one u on the sphere."""
    uW = u @ h.W
    v = R * uW / uW.norm()
    return float(h.c * (uW @ (v - u))), v


def largest_gap(h: Head, R: float, restarts: int = 16, steps: int = 400, seed: int = 0) -> Gap:
    """a_max over u on the sphere ‖u‖ = R (v = R·uW/‖uW‖), by projected gradient ascent from seeded starts and from
    the singular vectors of W (module docstring); float64."""
    if h.activation != "softmax":
        raise InputError(f"the half-attention family is a softmax construction, got {h.activation!r}")
    if not (math.isfinite(R) and R > 0):
        raise InputError(f"R must be a positive finite number, got {R!r}")
    D = h.W.shape[0]
    g = torch_gen_for(int(seed), "half_attention_family", D)
    U, _, Vh = torch.linalg.svd(h.W.to(torch.float64))
    starts = torch.cat([U.T, -U.T, Vh, -Vh, torch.randn(restarts, D, generator=g, dtype=torch.float64)])
    u = R * starts / starts.norm(dim=1, keepdim=True)                      # (K, D)
    W, c = h.W.to(torch.float64), h.c
    for k in range(steps):
        u = u.detach().requires_grad_(True)
        a = c * (R * (u @ W).norm(dim=1) - ((u @ W) * u).sum(dim=1))        # (K,)
        (grad,) = torch.autograd.grad(a.sum(), u)
        step = 0.1 * R / (1 + k / 50)
        u = u.detach() + step * grad / grad.norm(dim=1, keepdim=True).clamp_min(1e-300)
        u = R * u / u.norm(dim=1, keepdim=True)
    best = max(range(u.shape[0]), key=lambda i: _gap_of(h, u[i], R)[0])
    a_max, v = _gap_of(h, u[best], R)
    return Gap(u=u[best].detach(), v=v.detach(), a_max=a_max, R=R)


def family_point(h: Head, gap: Gap, n: int) -> FamilyPoint:
    """X: n − 1 tokens at u, the far token at v(t) with gap min(log(n − 1), a_max); E moves only the far token, by
    the top left singular vector of M; ‖J E‖ by the closed-form J·dX of :mod:`sapa.empirics.kernels.head_jacobian`."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise InputError(f"n must be an integer ≥ 2, got {n!r}")
    if n > MAX_N:
        raise InputError(f"n = {n} > {MAX_N}: J·E materialises n × n logits ({8 * n * n / 2**30:.1f} GiB each)")
    u, v_star = gap.u, gap.v
    want = math.log(n - 1)
    t = 1.0 if want >= gap.a_max else want / gap.a_max
    v = u + t * (v_star - u)                                                # (D,), in the ball by convexity
    a = float(h.c * ((u @ h.W) @ (v - u)))                                  # = t·a_max
    p = 1.0 / (1.0 + (n - 1) * math.exp(-a))                                # e^a / (n − 1 + e^a)
    M = p * h.W_V + p * (1 - p) * h.c * torch.outer(u @ h.W, (v - u) @ h.W_V)  # (D, d_v)
    Um, Sm, _ = torch.linalg.svd(M)
    w = Um[:, 0]                                                             # (D,), unit
    X = torch.cat([u.expand(n - 1, -1), v[None]], dim=0)                     # (n, D)
    E = torch.zeros_like(X)
    E[-1] = w
    JE = jvp(h, X[None], E[None])[0]                                         # (n, d_v)
    return FamilyPoint(n=n, X=X, E=E, sigma_lower=float(JE.norm()), closed_form=math.sqrt(n - 1) * float(Sm[0]),
                       p=p, gap=a, in_regime=want <= gap.a_max)


def family_series(h: Head, R: float, ns, seed: int = 0) -> dict:
    """{"n", "sigma_lower", "closed_form", "p", "gap", "in_regime"} lists over ``ns`` and the construction's a_max."""
    gap = largest_gap(h, R, seed=seed)
    pts = [family_point(h, gap, int(n)) for n in ns]
    return {"a_max": gap.a_max, "R": R, "n_regime_end": 1 + math.exp(gap.a_max),
            "n": [q.n for q in pts], "sigma_lower": [q.sigma_lower for q in pts],
            "closed_form": [q.closed_form for q in pts], "p": [q.p for q in pts], "gap": [q.gap for q in pts],
            "in_regime": [q.in_regime for q in pts]}
