"""Worst-case Jacobian norms of attention, beside the typical case of arXiv 2410.18613 Thm 4.1.

Objects: ``f(X) = φ(X W Xᵀ)`` (the attention matrix, N×N; masked/row-scaled as in
``sapa.empirics.kernels.norms``) or, with a value matrix ``V``, the attention output ``φ(X W Xᵀ) X V``.

* :func:`spectral_norm` — ``‖∂f/∂x‖₂`` by power iteration on ``JᵀJ`` using :func:`jvp` and
  ``torch.func.vjp``; the Jacobian is never materialised.
* :func:`jacobian_fro` — ``‖∂f/∂x‖_F² = Σ_j ‖J e_j‖²`` by batched JVPs over chunks of the
  input basis (at most ``chunk`` columns of J exist at a time).
* :func:`maximise_jacobian_norm` — ``max_{‖X‖_F = r} ‖∂f/∂X‖`` (spectral or Frobenius) by
  projected (Riemannian) gradient ascent on the sphere, seeded, best of several restarts.
* :func:`structured_inputs` — adversarial probes: all tokens along the top eigenvector of
  ``W_s = (W + Wᵀ)/2``; two clusters.

Reference points: the softmax Jacobian with respect to its logits, ``diag(p) − p pᵀ``, has
spectral norm ≤ 1/2 (attained by two equal logits and the rest −∞); softmax self-attention's
Lipschitz constant on inputs of bounded token norm grows like √N on adversarial inputs
(Castin, Ablin, Peyré, ICML 2024) — :func:`lipschitz_growth` measures, it does not assert.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch.func import grad, vjp, vmap

from sapa.common.validate import choice, positive_float, positive_int
from sapa.common.seeds import torch_gen_for
from sapa.empirics.kernels.norms import at_length

Fn = Callable[[torch.Tensor], torch.Tensor]


# --------------------------------------------------------------------------- J v by reverse mode


def jvp(f: Fn, primals: tuple[torch.Tensor], tangents: tuple[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(f(x), J v)`` by two reverse passes: ``g(u) = Jᵀu`` is linear in u, so ``J v = (∂g/∂u)ᵀ v`` at any u.

    The same pair as ``torch.func.jvp``, composable with ``vmap`` and ``grad``, but without forward-mode
    AD: that loads torch's JVP decompositions, which are compiled with the deprecated ``torch.jit.script``.
    """
    (x,), (v,) = primals, tangents
    y, pull = vjp(f, x)
    _, pull_t = vjp(lambda u: pull(u)[0], torch.zeros_like(y))
    return y, pull_t(v)[0]


def _jv_columns(f: Fn, x: torch.Tensor):
    """``e ↦ J e`` at x, the reverse passes set up once (vmap it over a chunk of the input basis)."""
    y, pull = vjp(f, x)
    _, pull_t = vjp(lambda u: pull(u)[0], torch.zeros_like(y))
    return lambda e: pull_t(e)[0]


# --------------------------------------------------------------------------- the maps


def softmax_rows(S: torch.Tensor) -> torch.Tensor:
    """Row-wise ``softmax(S)_ij = e^{S_ij} / Σ_k e^{S_ik}``; (…, N, M) -> (…, N, M).

    Written with elementary ops (shifted by the row max, whose derivative cancels) because
    ``torch.func`` forward-mode AD of ``torch.softmax`` is ~10× slower.
    """
    E = torch.exp(S - S.amax(dim=-1, keepdim=True))
    return E / E.sum(dim=-1, keepdim=True)


def phi(S: torch.Tensor, activation, mask: str = "none", row_scale: torch.Tensor | None = None) -> torch.Tensor:
    """``φ(S)``: row-wise ``softmax(τ S)`` or element-wise ``c S^p``, masked, row i times ``c_i``; (N, N) -> (N, N).

    ``activation`` is a family with an exact kernel (``family(id)``, ``power(p, c)``, ``softmax(τ)``), its scale
    taken at N (:func:`sapa.empirics.kernels.norms.at_length`: ``coef`` = τ or c, a per-row rule's c_i as the row
    scale); under the causal mask entries ``j > i`` are −∞ before softmax and 0 for polynomials;
    ``row_scale`` (N,) multiplies row i of the result (as in ``sapa.empirics.kernels.norms``).
    """
    choice("mask", mask, ("none", "causal"))
    N = S.shape[-1]
    act, row_scale = at_length(activation, N, row_scale)
    scale = float(act.coef)
    causal = torch.ones(N, N, dtype=torch.bool, device=S.device).tril() if mask == "causal" else None
    if act.kernel == "softmax":
        Z = scale * S
        P = softmax_rows(Z if causal is None else torch.where(causal, Z, Z.new_tensor(-math.inf)))
    else:
        P = scale * S ** int(act.p)
        P = P if causal is None else torch.where(causal, P, P.new_zeros(()))
    return P if row_scale is None else P * row_scale.to(S.dtype).reshape(-1, 1)


def attention_map(
    W: torch.Tensor,
    activation,
    mask: str = "none",
    row_scale: torch.Tensor | None = None,
    V: torch.Tensor | None = None,
) -> Fn:
    """``X ↦ φ(X W Xᵀ)`` (N, D) -> (N, N), or ``X ↦ φ(X W Xᵀ) X V`` (N, D) -> (N, D_v) if V given."""

    def f(X: torch.Tensor) -> torch.Tensor:
        P = phi(X @ W @ X.T, activation, mask, row_scale)  # (N, D)@(D, D)@(D, N) -> (N, N)
        return P if V is None else P @ (X @ V)  # (N, N)@(N, D_v)

    return f


# --------------------------------------------------------------------------- norms


@dataclass(frozen=True)
class SpectralResult:
    """Power-iteration estimate of ‖J‖₂ and the top right singular vector.

    ``converged`` means the Ritz pair has converged: ‖JᵀJv − θv‖ ≤ tol·θ with θ = ‖Jv‖², so θ lies within
    tol·θ of an eigenvalue of JᵀJ (for a symmetric matrix every Rayleigh quotient θ with residual r has an
    eigenvalue in [θ − ‖r‖, θ + ‖r‖]). It does not certify that this eigenvalue is the largest (a start
    vector orthogonal to the top singular vector never finds it): for a certified bracket use
    :func:`sapa.empirics.kernels.spectral.certified_spectral_norm` (``sapa norms --spectral``). Before this criterion,
    ``converged`` compared two lower bounds (‖Jv‖ and √‖JᵀJv‖), whose gap shrinks like the square of the
    residual: at σ₂/σ₁ ≈ 0.97 it reported convergence while the error was 37× tol.
    """

    sigma: float  # √‖JᵀJ v‖ at the last iterate (≤ ‖J‖₂)
    lower: float  # ‖J v‖ (≤ sigma)
    iters: int
    converged: bool  # ‖JᵀJv − ‖Jv‖²v‖ ≤ tol·‖Jv‖² (Ritz residual)
    v: torch.Tensor  # shape of x, unit Frobenius norm
    residual: float = math.nan  # ‖JᵀJv − θv‖/θ at the last iterate


def spectral_norm(
    f: Fn,
    x: torch.Tensor,
    *,
    tol: float = 1e-10,
    max_iter: int = 1000,
    seed: int = 0,
    v0: torch.Tensor | None = None,
    key: tuple = (),
) -> SpectralResult:
    """``‖∂f/∂x‖₂`` by power iteration ``v ← JᵀJv/‖JᵀJv‖`` with ``jvp``/``vjp`` (no Jacobian built).

    Both ``‖Jv‖`` and ``√‖JᵀJv‖`` are lower bounds of σ₁ (Cauchy–Schwarz). Iteration stops when the
    Ritz residual ‖JᵀJv − θv‖ (θ = ‖Jv‖²) is ≤ ``tol``·θ or after ``max_iter`` steps (see
    :class:`SpectralResult` for what that does and does not certify). ``v0`` warm-starts; otherwise v is
    Gaussian from ``torch_gen_for(seed, "spectral_norm", *key)``.
    """
    positive_float("tol", tol)
    positive_int("max_iter", max_iter)
    _, pullback = vjp(f, x)
    jv = _jv_columns(f, x)  # v ↦ J v with its reverse passes set up once, not at every iteration
    if v0 is None:
        g = torch_gen_for(int(seed), "spectral_norm", *key)
        v = torch.randn(x.shape, generator=g, dtype=torch.float64).to(x.dtype)
    else:
        v = v0.detach().clone().to(x.dtype)
    v = v / torch.linalg.vector_norm(v)
    sigma = lower = 0.0
    rel = math.inf
    for it in range(1, max_iter + 1):
        Jv = jv(v)
        w = pullback(Jv)[0]  # JᵀJv
        lower = float(torch.linalg.vector_norm(Jv))
        wn = float(torch.linalg.vector_norm(w))
        sigma = math.sqrt(wn)
        if wn == 0.0:
            return SpectralResult(0.0, 0.0, it, True, v, 0.0)
        theta = lower * lower
        rel = float(torch.linalg.vector_norm(w - theta * v)) / theta if theta > 0 else math.inf
        v = w / wn
        if rel <= tol:
            return SpectralResult(sigma, lower, it, True, v, rel)
    return SpectralResult(sigma, lower, max_iter, False, v, rel)


def _basis_chunks(n: int, chunk: int, like: torch.Tensor):
    for start in range(0, n, chunk):
        idx = torch.arange(start, min(n, start + chunk))
        E = torch.zeros(idx.numel(), n, dtype=like.dtype, device=like.device)
        E[torch.arange(idx.numel()), idx] = 1.0
        yield E.reshape(idx.numel(), *like.shape)  # (c, *x.shape)


def jacobian_fro_sq(f: Fn, x: torch.Tensor, *, chunk: int = 64) -> torch.Tensor:
    """``‖∂f/∂x‖_F² = Σ_j ‖J e_j‖²`` over the input basis, ``chunk`` JVPs at a time (differentiable)."""
    total = x.new_zeros(())
    jv = _jv_columns(f, x)
    for E in _basis_chunks(x.numel(), positive_int("chunk", chunk), x):
        cols = vmap(jv)(E)  # (c, *f(x).shape)
        total = total + (cols**2).sum()
    return total


def jacobian_fro(f: Fn, x: torch.Tensor, *, chunk: int = 64) -> float:
    """``‖∂f/∂x‖_F`` (see :func:`jacobian_fro_sq`)."""
    return math.sqrt(float(jacobian_fro_sq(f, x, chunk=chunk)))


# --------------------------------------------------------------------------- adversarial inputs


def _sym_eig(W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigen-decomposition of ``W_s = (W + Wᵀ)/2``, eigenvalues descending."""
    lam, Q = torch.linalg.eigh((W + W.T) / 2)
    return lam.flip(0), Q.flip(1)


def structured_inputs(W: torch.Tensor, N: int, radius: float, kind: str) -> torch.Tensor:
    """Adversarial probes with ``‖X‖_F = radius``; (N, D).

    ``"aligned"``: every token ``(r/√N) u₁`` (u₁ top eigenvector of W_s);
    ``"two_cluster"``: first ⌈N/2⌉ tokens ``+(r/√N) u₁``, the rest ``−(r/√N) u₁``;
    ``"two_cluster_orth"``: halves at ``(r/√N) u₁`` and ``(r/√N) u₂``;
    ``"one_vs_rest"``: token 0 at ``(r/√N) u₂``, the rest at ``(r/√N) u₁``.
    """
    choice("kind", kind, ("aligned", "two_cluster", "two_cluster_orth", "one_vs_rest"))
    N, radius = positive_int("N", N), positive_float("radius", radius)
    _, Q = _sym_eig(W)
    u1 = Q[:, 0]
    u2 = Q[:, 1] if Q.shape[1] > 1 else -u1
    a = radius / math.sqrt(N)
    X = a * u1.expand(N, -1).clone()
    h = (N + 1) // 2
    if kind == "two_cluster":
        X[h:] = -X[h:]
    elif kind == "two_cluster_orth":
        X[h:] = a * u2
    elif kind == "one_vs_rest":
        X[0] = a * u2
    return X


@dataclass(frozen=True)
class AscentResult:
    """Best Jacobian norm found by projected gradient ascent on ``‖X‖_F = radius``."""

    value: float
    X: torch.Tensor  # (N, D) maximiser found
    history: tuple[float, ...]  # best value after each step, best restart
    restart: int  # index of the winning restart (−1: a given init)


def _project(X: torch.Tensor, radius: float, constraint: str = "fro") -> torch.Tensor:
    """Onto ‖X‖_F = radius (``fro``) or onto ‖x_i‖ = radius for every row (``token``)."""
    if constraint == "token":
        return X * (radius / torch.linalg.vector_norm(X, dim=-1, keepdim=True).clamp_min(1e-300))
    return X * (radius / torch.linalg.vector_norm(X))


def _tangent(G: torch.Tensor, X: torch.Tensor, constraint: str = "fro") -> torch.Tensor:
    """G minus its component normal to the constraint set at X (whole X, or row by row)."""
    if constraint == "token":
        return G - (G * X).sum(-1, keepdim=True) / (X * X).sum(-1, keepdim=True) * X
    return G - (G * X).sum() / (X * X).sum() * X


def maximise_jacobian_norm(
    f: Fn,
    N: int,
    D: int,
    radius: float,
    *,
    norm: str = "spectral",
    constraint: str = "fro",
    steps: int = 100,
    lr: float = 0.1,
    restarts: int = 3,
    seed: int = 0,
    inits: Sequence[torch.Tensor] = (),
    power_iters: int = 10,
) -> AscentResult:
    """``max_{X ∈ C} ‖∂f/∂X‖`` (or ``‖f(X)‖_F``) by seeded projected gradient ascent.

    ``C`` is ``‖X‖_F = radius`` (``constraint="fro"``) or ``‖x_i‖ = radius`` for every token
    (``"token"``, a product of spheres, as after LayerNorm); ``norm`` is ``"spectral"``,
    ``"fro"`` (of the Jacobian) or ``"value"`` (``‖f(X)‖_F`` itself). Each step moves ``X``
    by ``lr·‖X‖_F`` along the normalised tangent gradient and projects back onto ``C``;
    ``lr`` decays like 1/√(1 + k/10). The spectral gradient is that of ``uᵀ J(X) v`` with
    ``(u, v)`` the current top singular pair (warm-started power iteration; envelope
    theorem); the others are exact. Restarts start from seeded Gaussians, plus any
    ``inits``; the best value over all iterates is returned.
    """
    choice("norm", norm, ("spectral", "fro", "value"))
    choice("constraint", constraint, ("fro", "token"))
    N, D, radius = positive_int("N", N), positive_int("D", D), positive_float("radius", radius)
    step_len = radius * (math.sqrt(N) if constraint == "token" else 1.0)  # ‖X‖_F on C
    gen = torch_gen_for(int(seed), "ascent", "starts")
    starts = [(-1, _project(x0.to(torch.float64), radius, constraint)) for x0 in inits]
    starts += [(k, _project(torch.randn(N, D, generator=gen, dtype=torch.float64), radius, constraint))
               for k in range(restarts)]
    best: AscentResult | None = None
    for k, X in starts:
        val, X_best, hist, v = -math.inf, X, [], None
        for step in range(steps + 1):
            if norm == "spectral":
                res = spectral_norm(f, X, max_iter=power_iters, v0=v, seed=seed, key=("ascent", k, step),
                                    tol=1e-8)
                cur, v = res.sigma, res.v
            elif norm == "value":
                cur = float(torch.linalg.vector_norm(f(X)))
            else:
                cur = math.sqrt(float(jacobian_fro_sq(f, X)))
            if cur > val:
                val, X_best = cur, X.clone()
            hist.append(val)
            if step == steps:
                break
            if norm == "spectral":
                u = jvp(f, (X,), (v,))[1]
                u = u / torch.linalg.vector_norm(u).clamp_min(1e-300)
                G = grad(lambda Y: (vjp(f, Y)[1](u)[0] * v).sum())(X)  # ∇_X uᵀ J(X) v
            elif norm == "value":
                G = grad(lambda Y: (f(Y) ** 2).sum())(X)
            else:
                G = grad(lambda Y: jacobian_fro_sq(f, Y))(X)
            G = _tangent(G, X, constraint)
            gn = torch.linalg.vector_norm(G)
            if not torch.isfinite(gn) or gn == 0:
                break
            X = _project(X + (lr / math.sqrt(1 + step / 10)) * step_len * G / gn, radius, constraint)
        if norm == "spectral":  # certify the best iterate with a tight power iteration
            val = max(val, spectral_norm(f, X_best, tol=1e-10, max_iter=2000, seed=seed).sigma)
        if best is None or val > best.value:
            best = AscentResult(val, X_best, tuple(hist), k)
    return best


# --------------------------------------------------------------------------- growth report


def lipschitz_growth(
    N_grid: Sequence[int],
    D: int,
    activation,
    *,
    W: torch.Tensor | None = None,
    token_radius: float = 1.0,
    value: bool = True,
    seed: int = 0,
    steps: int = 40,
    restarts: int = 2,
    constraint: str = "fro",
):
    """``‖∂f/∂X‖₂`` vs N at random, structured and ascent-found inputs with ``‖X‖_F = r√N`` (or every ``‖x_i‖ = r``).

    ``f`` is the attention output ``φ(XWXᵀ) X`` (``value=True``, V = I) or the attention
    matrix. ``W`` defaults to a seeded ``W_Q W_Kᵀ`` (d = D, entries N(0, 1/D)). ``constraint``
    ``"token"`` restricts the random start and the ascent to tokens of norm r (the structured
    probes already have it). Returns a long DataFrame (N, input, sigma) for
    :func:`sapa.empirics.montecarlo.stats.fit_exponent`; nothing is asserted.
    """
    import pandas as pd

    choice("constraint", constraint, ("fro", "token"))
    gen = torch_gen_for(int(seed), "lipschitz_growth", "W")
    if W is None:
        wq, wk = (torch.randn(D, D, generator=gen, dtype=torch.float64) / math.sqrt(D) for _ in range(2))
        W = wq @ wk.T
    V = torch.eye(D, dtype=torch.float64) if value else None
    rows = []
    for N in N_grid:
        r = token_radius * math.sqrt(N)
        f = attention_map(W, activation, V=V)
        rand = torch.randn(N, D, generator=gen, dtype=torch.float64)
        probes = {"random": _project(rand, token_radius, "token") if constraint == "token" else _project(rand, r)}
        for kind in ("aligned", "two_cluster", "one_vs_rest"):
            probes[kind] = structured_inputs(W, N, r, kind)
        for name, X in probes.items():
            rows.append({"N": N, "input": name, "sigma": spectral_norm(f, X, seed=seed).sigma})
        asc = maximise_jacobian_norm(f, N, D, token_radius if constraint == "token" else r, constraint=constraint,
                                     steps=steps, restarts=restarts, seed=seed, inits=list(probes.values()))
        rows.append({"N": N, "input": "ascent", "sigma": asc.value})
    return pd.DataFrame(rows)
