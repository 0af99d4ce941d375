"""max_{X ∈ B_R^n} σ₁(∂f/∂X), B_R^n = {X : ‖x_i‖ ≤ R ∀i}: seeded projected ascent on certified lower bounds of σ₁.

For any unit v, ‖J(X) v‖ ≤ σ₁(J(X)) ≤ sup_{B_R^n} σ₁ = Lip(f on B_R^n) (the ball is convex), so every value this
module returns is a certified lower bound of the Lipschitz constant on the ball, up to float64 round-off. The
ascent (all restarts batched on a leading axis) alternates ``power_iters`` warm-started power iterations
v ← JᵀJv/‖JᵀJv‖ with one step along ∇_X ⟨u, J(X) v⟩, u = Jv/‖Jv‖ (the gradient of σ₁ at a simple top singular
value, by the envelope theorem), normalised per restart to ``lr·R·√n`` (``lr`` decaying like 1/√(1 + k/10)),
then projects each token back into its ball. The best iterate of each restart is polished by up to
``polish_iters`` more power iterations, stopping once every restart's residual is below ``polish_tol``.
Starts: every token R·u₁ (u₁ the top eigenvector of (W + Wᵀ)/2),
"one key" (token 0 at R·a, the others at R·b, (b, a) the top singular pair of W: every query's largest logit
is the key's, the mechanism of softmax's √n growth), the same with token 0 at −R·a, then seeded random tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sapa.common.validate import positive_float, positive_int
from sapa.empirics.kernels.head_jacobian import At, Head, at, jvp, vjp

__all__ = ["AscentConfig", "AscentResult", "project_ball", "power_lower", "starts", "tiled", "maximise_sigma"]


@dataclass(frozen=True)
class AscentConfig:
    """Ascent budget: restarts (batched, ≥ 3 structured + random), steps, power iterations per step, polish."""

    restarts: int = 8
    steps: int = 80
    power_iters: int = 3
    lr: float = 0.08
    polish_iters: int = 300
    polish_tol: float = 1e-14  # the polish stops once every restart's ‖JᵀJv − θv‖/θ is at most this (0: never early)


@dataclass(frozen=True)
class AscentResult:
    """Best certified lower bound of sup_{B_R^n} σ₁ and where it was found."""

    lower: float                 # max over restarts of ‖J v‖, ‖v‖ = 1, at a point of the ball
    X: torch.Tensor              # (n, D) the winning input
    per_restart: tuple[float, ...]
    winner: int                  # index of the winning start (0, 1, 2: structured; ≥ 3 random)
    residual: float              # ‖JᵀJv − θv‖/θ at the winner after polishing (θ = ‖Jv‖²)


def project_ball(X: torch.Tensor, R: float) -> torch.Tensor:
    """Each token into ‖x_i‖ ≤ R (rows with a larger norm scaled to R); (…, n, D) -> same."""
    nrm = torch.linalg.vector_norm(X, dim=-1, keepdim=True)
    return X * torch.clamp(R / nrm.clamp_min(1e-300), max=1.0)


def _unit(v: torch.Tensor) -> torch.Tensor:
    """Each batch member at unit Frobenius norm; (B, …) -> same."""
    return v / torch.linalg.vector_norm(v.flatten(1), dim=1).clamp_min(1e-300).reshape(-1, *([1] * (v.dim() - 1)))


def power_lower(h: Head, X: torch.Tensor | At, v: torch.Tensor, iters: int, tol: float = 0.0
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """At most ``iters`` power iterations on JᵀJ from v, then ‖Jv‖ (unit v): (lower (B,), v (B, n, D)); X (B, n, D)
    or its :func:`~sapa.empirics.kernels.head_jacobian.at`.

    With ``tol`` > 0 the iteration stops as soon as every batch member's residual ‖JᵀJv − θv‖/θ (θ = vᵀJᵀJv, from
    the product the step computes anyway) is at most ``tol``: v is then an eigenvector to that accuracy and θ has
    converged to about tol² (the Rayleigh quotient's error is quadratic in the residual). Any unit v gives a
    certified lower bound ‖Jv‖ ≤ σ₁, so stopping early never makes the bound invalid.
    """
    v, a = _unit(v), X if isinstance(X, At) else at(h, X)  # S, P, XW, XW_V once for every product at X
    for _ in range(iters):
        w = vjp(h, a, jvp(h, a, v))  # JᵀJv
        if tol > 0:
            theta = (v * w).flatten(1).sum(1)  # (B,)
            res = torch.linalg.vector_norm((w - theta.reshape(-1, *([1] * (w.dim() - 1))) * v).flatten(1), dim=1)
            if bool((res <= tol * theta).all()):
                break
        v = _unit(w)
    return torch.linalg.vector_norm(jvp(h, a, v).flatten(1), dim=1), v


def starts(h: Head, n: int, R: float, restarts: int, gen: torch.Generator) -> torch.Tensor:
    """Structured starts (aligned, one key at ±a) then seeded random tokens of norm R; (restarts, n, D)."""
    D = h.W.shape[0]
    _, Q = torch.linalg.eigh((h.W + h.W.T) / 2)
    u1 = Q[:, -1]
    U, _, Vh = torch.linalg.svd(h.W)
    a, b = Vh[0], U[:, 0]  # bᵀ W a = ‖W‖₂
    out = [R * u1.expand(n, D)]
    for sign in (1.0, -1.0):
        X = (R * b).expand(n, D).clone()
        X[0] = sign * R * a
        out.append(X)
    k = max(0, restarts - len(out))
    rand = torch.randn(k, n, D, generator=gen, dtype=h.W.dtype)
    X = torch.cat([torch.stack(out)[:restarts], R * _rows_unit(rand)]) if k else torch.stack(out)[:restarts]
    return X


def _rows_unit(X: torch.Tensor) -> torch.Tensor:
    return X / torch.linalg.vector_norm(X, dim=-1, keepdim=True).clamp_min(1e-300)


def tiled(X: torch.Tensor, n: int) -> torch.Tensor:
    """X (m, D) repeated along the tokens and cut to n rows (a start at n from a winner at m < n); (n, D)."""
    reps = -(-n // X.shape[0])
    return X.repeat(reps, 1)[:n].clone()


def maximise_sigma(h: Head, n: int, R: float, cfg: AscentConfig, gen: torch.Generator,
                   extra: tuple[torch.Tensor, ...] = ()) -> AscentResult:
    """Seeded projected ascent of σ₁(J(X)) over B_R^n from :func:`starts` (+ ``extra`` starts, each (n, D), replacing
    the last random ones); certified lower bound (module docstring)."""
    n, R = positive_int("n", n), positive_float("R", R)
    X = starts(h, n, R, positive_int("restarts", cfg.restarts), gen)  # (B, n, D)
    for j, x0 in enumerate(extra[: max(0, X.shape[0] - 3)]):
        X[X.shape[0] - 1 - j] = project_ball(x0.to(X.dtype), R)
    v = torch.randn(X.shape, generator=gen, dtype=X.dtype)
    best_val = torch.full((X.shape[0],), -math.inf, dtype=X.dtype)
    best_X = X.clone()
    for k in range(cfg.steps + 1):
        a = at(h, X)  # shared by the power iterations and the step direction u
        lower, v = power_lower(h, a, v, cfg.power_iters)
        better = lower > best_val
        best_val = torch.where(better, lower, best_val)
        best_X[better] = X[better]
        if k == cfg.steps:
            break
        u = _unit(jvp(h, a, v))
        Xg = X.detach().requires_grad_(True)
        (G,) = torch.autograd.grad((u * jvp(h, Xg, v)).sum(), Xg)  # ∇_X ⟨u, J(X) v⟩ per restart
        step = cfg.lr / math.sqrt(1 + k / 10) * R * math.sqrt(n)
        X = project_ball(X + step * _unit(G), R).detach()
    lower, vb = power_lower(h, best_X, v, cfg.polish_iters, cfg.polish_tol)
    final = torch.maximum(lower, best_val)
    i = int(torch.argmax(final))
    Jv = jvp(h, best_X[i : i + 1], vb[i : i + 1])
    theta = float((Jv**2).sum())
    res = float(torch.linalg.vector_norm(vjp(h, best_X[i : i + 1], Jv) - theta * vb[i : i + 1])) / max(theta, 1e-300)
    return AscentResult(lower=float(final[i]), X=best_X[i].clone(), per_restart=tuple(float(x) for x in final),
                        winner=i, residual=res)
