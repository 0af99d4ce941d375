"""Mutation-testing additions for `empirics/kernels/lipschitz.py`: the tangent projections, power iteration's first
step, its stopping rule at the boundary and an underflowing Rayleigh quotient, the second eigenvector of a 2-D W,
and the documented defaults of the ascent and of the growth report.

Each test names the mutants of ``tools/mutation_sample.py`` (line, change) it kills. References: inner products and
numpy's own eigen-decomposition, dense Jacobians (torch.func.jacrev) and their SVD, exact σ₁ of diagonal maps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.func import jacrev

from sapa.empirics.kernels import lipschitz
from sapa.empirics.kernels.lipschitz import (
    _project,
    _tangent,
    attention_map,
    lipschitz_growth,
    maximise_jacobian_norm,
    spectral_norm,
    structured_inputs,
)
from sapa.theory.families import power

F64 = torch.float64


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _sigma1(f, x) -> float:
    J = jacrev(f)(x).reshape(f(x).numel(), x.numel()).numpy()
    return float(np.linalg.svd(J, compute_uv=False)[0])


def test_tangent_removes_exactly_the_normal_component():
    """Kills lipschitz.py line 253 ``G − (G·X)/(X·X) X``: ``−`` → ``+``, ``/`` → ``*``, ``*`` → ``/``; line 252 the same
    row by row (``token``). The tangent is orthogonal to X (per row for ``token``) and differs from G along X only."""
    G, X = _rand(5, 3, seed=1), 3.0 * _rand(5, 3, seed=2)
    Gn, Xn = G.numpy(), X.numpy()
    T = _tangent(G, X, "fro").numpy()
    ref = Gn - (np.sum(Gn * Xn) / np.sum(Xn * Xn)) * Xn  # projection onto the orthogonal complement of X
    assert abs(np.sum(T * Xn)) <= 1e-12 * np.linalg.norm(Gn) * np.linalg.norm(Xn)
    np.testing.assert_allclose(T, ref, rtol=1e-12, atol=1e-14)
    Tt = _tangent(G, X, "token").numpy()
    for i in range(5):
        g, x = Gn[i], Xn[i]
        assert abs(Tt[i] @ x) <= 1e-12 * np.linalg.norm(g) * np.linalg.norm(x)
        np.testing.assert_allclose(Tt[i], g - (g @ x) / (x @ x) * x, rtol=1e-12, atol=1e-14)


def test_power_iteration_from_the_top_singular_vector_stops_after_one_step():
    """Kills lipschitz.py line 159 ``range(1, max_iter + 1)`` → ``range(2, …)``: started on the top right singular
    vector of J = diag(3, 2, 1) the Ritz residual is 0 at the first step (iters = 1, σ = 3 exactly); with
    max_iter = 1 that step must still run."""
    d = torch.tensor([3.0, 2.0, 1.0], dtype=F64)
    f = lambda x: d * x  # noqa: E731
    e1 = torch.tensor([1.0, 0.0, 0.0], dtype=F64)
    for max_iter in (1, 50):
        r = spectral_norm(f, torch.ones(3, dtype=F64), v0=e1, max_iter=max_iter)
        assert r.iters == 1 and r.converged and r.sigma == 3.0 and r.lower == 3.0 and r.residual == 0.0


def test_the_stopping_rule_accepts_a_residual_equal_to_tol():
    """Kills lipschitz.py line 170 ``rel <= tol`` → ``<``: the documented criterion is ‖JᵀJv − θv‖ ≤ tol·θ.

    One step from a fixed v0 gives residual r (checked against numpy: ‖AᵀA v − θ v‖/θ, v = v0/‖v0‖, θ = ‖Av‖²); with
    tol = r exactly the same step is accepted."""
    A = _rand(4, 4, seed=3)
    f = lambda x: A @ x  # noqa: E731
    v0 = _rand(4, seed=4)
    x = torch.zeros(4, dtype=F64)
    first = spectral_norm(f, x, v0=v0, max_iter=1, tol=1e-300)
    An, v = A.numpy(), (v0 / torch.linalg.vector_norm(v0)).numpy()
    theta = float(np.sum((An @ v) ** 2))
    assert first.residual == pytest.approx(np.linalg.norm(An.T @ (An @ v) - theta * v) / theta, rel=1e-10)
    assert not first.converged and first.residual > 0
    again = spectral_norm(f, x, v0=v0, max_iter=1, tol=first.residual)
    assert again.converged and again.iters == 1


def test_an_underflowing_rayleigh_quotient_is_no_division_by_zero():
    """Kills lipschitz.py line 168 ``… / θ if θ > 0`` → ``θ >= 0``: J = [10²⁰, 10⁻¹⁶⁵] (1 × 2) from v0 = e₂ gives
    ‖Jv‖ = 10⁻¹⁶⁵, whose square θ underflows to 0 while JᵀJv = (10⁻¹⁴⁵, 0) is not 0; the iteration must go on to
    σ₁ = √(10⁴⁰ + 10⁻³³⁰) = 10²⁰ (float64) at the second step, not divide by θ."""
    J = torch.tensor([[1e20, 1e-165]], dtype=F64)
    r = spectral_norm(lambda x: J @ x, torch.zeros(2, dtype=F64), v0=torch.tensor([0.0, 1.0], dtype=F64))
    assert r.converged and r.iters == 2
    assert r.sigma == pytest.approx(1e20, rel=1e-15) and r.lower == pytest.approx(1e20, rel=1e-15)


def test_two_dimensional_w_uses_its_second_eigenvector():
    """Kills lipschitz.py line 219 ``Q.shape[1] > 1`` → ``> 2``: with D = 2 the second eigenvector of W_s exists
    (numpy's eigh of (W + Wᵀ)/2 is the reference); ``two_cluster_orth`` puts the halves on u₁ and u₂ (orthogonal)."""
    W = _rand(2, 2, seed=5)
    lam, Q = np.linalg.eigh(0.5 * (W.numpy() + W.numpy().T))
    u2 = Q[:, 0]  # eigh: ascending, so the second largest of two is the first column
    X = structured_inputs(W, 4, 2.0, "two_cluster_orth").numpy()
    assert abs(X[0] @ X[-1]) <= 1e-12
    assert abs(X[-1] @ u2) == pytest.approx(1.0, rel=1e-12)  # radius/√N = 1
    Y = structured_inputs(W, 4, 2.0, "one_vs_rest").numpy()
    assert abs(Y[0] @ u2) == pytest.approx(1.0, rel=1e-12) and abs(Y[0] @ Y[1]) <= 1e-12


def test_ascent_defaults_three_restarts_and_ten_power_steps(monkeypatch):
    """Kills lipschitz.py line 266 ``restarts = 3`` → 4 and line 269 ``power_iters = 10`` → 11 (the signature's
    defaults): with steps = 0 each restart evaluates its start once, with at most 10 power steps."""
    W = _rand(3, 3, seed=6)
    f = attention_map(W, power(1, 1.0))
    calls = []
    real = lipschitz.spectral_norm

    def spy(*a, **kw):
        calls.append(kw.get("max_iter"))
        return real(*a, **kw)

    monkeypatch.setattr(lipschitz, "spectral_norm", spy)
    res = maximise_jacobian_norm(f, 4, 3, 1.0, steps=0)
    assert calls == [10, 2000] * 3  # per restart: the start's power iteration, then the certifying one
    assert res.restart in (0, 1, 2)
    vals = []
    res_v = maximise_jacobian_norm(lambda X: (vals.append(1), f(X))[1], 4, 3, 1.0, norm="value", steps=0)
    assert len(vals) == 3 and res_v.restart in (0, 1, 2)


def test_growth_report_defaults_to_tokens_of_norm_one():
    """Kills lipschitz.py line 336 ``token_radius = 1.0`` → 2.0: the aligned probe is every token = u₁ (unit, the
    top eigenvector of W_s from numpy), and its σ₁ is the dense Jacobian's (jacrev + SVD)."""
    W = _rand(3, 3, seed=7)
    act = power(1, 0.5)
    df = lipschitz_growth([4], 3, act, W=W, steps=0, restarts=1)
    lam, Q = np.linalg.eigh(0.5 * (W.numpy() + W.numpy().T))
    X = torch.tensor(np.tile(Q[:, -1], (4, 1)))
    ref = _sigma1(attention_map(W, act, V=torch.eye(3, dtype=F64)), X)
    got = float(df[df["input"] == "aligned"]["sigma"].iloc[0])
    assert got == pytest.approx(ref, rel=1e-8)
    assert math.isclose(float(np.linalg.norm(X.numpy())), 2.0, rel_tol=1e-12)  # r√N with r = 1


def test_the_ascent_takes_every_step_it_is_given():
    """Kills lipschitz.py line 305 ``if step == steps: break`` → ``!=`` (stops after evaluating the start): the history
    holds the best value after each of the steps + 1 evaluations, never decreasing, and the ascent improves on its
    random start (‖∂f/∂X‖_F of a cubic attention map, whose gradient on the sphere is not 0)."""
    W = _rand(3, 3, seed=8)
    f = attention_map(W, power(3, 0.5))
    res = maximise_jacobian_norm(f, 4, 3, 2.0, norm="fro", steps=6, restarts=1)
    assert len(res.history) == 7
    assert all(b >= a for a, b in zip(res.history, res.history[1:]))
    assert res.history[-1] > res.history[0] and res.value == res.history[-1]
    dense = float(np.linalg.norm(jacrev(f)(res.X).reshape(16, 12).numpy()))  # the value is the maximiser's
    assert res.value == pytest.approx(dense, rel=1e-10)


def test_a_zero_jacobian_has_sigma_zero_and_no_residual():
    """Kills lipschitz.py line 166 ``SpectralResult(0.0, 0.0, it, True, v, 0.0)`` → 1.0 in any place: JᵀJv = 0 exactly
    (f ≡ 0 on a 2×3 input), σ = ‖Jv‖ = 0 and the Ritz residual 0, at the first step."""
    r = spectral_norm(lambda x: 0.0 * x, _rand(2, 3, seed=9))
    assert (r.sigma, r.lower, r.iters, r.converged, r.residual) == (0.0, 0.0, 1, True, 0.0)


def test_token_projection_puts_every_row_on_its_sphere():
    """Kills lipschitz.py line 245 ``clamp_min(1e-300)`` → ``clamp_min(1.0)``: rows of norm 10⁻³ and 10³ both end at
    norm r (numpy row norms), a zero row stays 0 (no 0/0)."""
    X = _rand(4, 3, seed=10)
    X[0] *= 1e-3 / float(torch.linalg.vector_norm(X[0]))
    X[1] *= 1e3 / float(torch.linalg.vector_norm(X[1]))
    X[3] = 0.0
    P = _project(X, 2.5, "token").numpy()
    np.testing.assert_allclose(np.linalg.norm(P[:3], axis=1), 2.5, rtol=1e-14)
    np.testing.assert_allclose(P[:3] / 2.5, X[:3].numpy() / np.linalg.norm(X[:3].numpy(), axis=1, keepdims=True),
                               rtol=1e-14)
    assert np.all(P[3] == 0.0)


def _expected_iterates(objective, X0, radius, constraint, lr, steps):
    """The ascent written out from its docstring: the gradient of ``objective`` (torch.func.grad, dense), its tangent
    part (whole X, or row by row), a step of lr/√(1 + k/10)·(‖X‖_F on C) along it normalised, the projection back."""
    from torch.func import grad

    N = X0.shape[0]
    step_len = radius * (math.sqrt(N) if constraint == "token" else 1.0)
    Xs = [X0]
    for k in range(steps):
        X = Xs[-1]
        G = grad(objective)(X)
        if constraint == "token":
            T = G - (G * X).sum(1, keepdim=True) / (X * X).sum(1, keepdim=True) * X
        else:
            T = G - (G * X).sum() / (X * X).sum() * X
        Y = X + lr / math.sqrt(1 + k / 10) * step_len * T / torch.linalg.vector_norm(T)
        Y = Y * (radius / torch.linalg.vector_norm(Y, dim=1, keepdim=True)) if constraint == "token" \
            else Y * (radius / torch.linalg.vector_norm(Y))
        Xs.append(Y)
    return Xs


@pytest.mark.parametrize("norm", ["value", "fro"])
@pytest.mark.parametrize("constraint", ["fro", "token"])
def test_ascent_iterates_follow_the_documented_step(norm, constraint):
    """Kills lipschitz.py line 311 ``norm == "value"`` → ``!=`` (the other objective's gradient) and line 319, every
    operator of ``X + lr/√(1 + step/10) · step_len · G/‖G‖`` (``+`` → ``−`` twice, ``/`` ↔ ``*``): three iterates from
    a given start are recomputed from dense autograd gradients (‖f(X)‖_F, or ‖J‖_F from jacrev) and must match.

    lr = 0.02: small steps, so each iterate improves on the last and is the one returned (best = last)."""
    W = _rand(3, 3, seed=11)
    f = attention_map(W, power(2, 0.5))
    N, D, radius, lr, steps = 4, 3, 1.5, 0.02, 2
    X0 = _project(_rand(N, D, seed=12), radius, constraint)
    if norm == "value":
        obj = lambda X: torch.linalg.vector_norm(f(X))  # noqa: E731
    else:
        obj = lambda X: torch.linalg.vector_norm(jacrev(f)(X))  # noqa: E731
    Xs = _expected_iterates(obj, X0, radius, constraint, lr, steps)
    vals = [float(obj(X)) for X in Xs]
    assert vals[0] < vals[1] < vals[2]
    res = maximise_jacobian_norm(f, N, D, radius, norm=norm, constraint=constraint, steps=steps, lr=lr, restarts=0,
                                 inits=[X0])
    assert res.restart == -1
    assert res.history == pytest.approx(tuple(vals), rel=1e-10)
    torch.testing.assert_close(res.X, Xs[-1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("constraint", ["fro", "token"])
def test_spectral_ascent_iterates_follow_the_top_singular_pair(constraint):
    """Kills lipschitz.py line 310 ``(vjp(f, Y)[1](u)[0] * v).sum()`` → ``/ v`` (not the gradient of uᵀJ(X)v) and line
    309 as far as it changes the direction: by the envelope theorem that gradient is ∇σ₁(J(X)), here from autograd
    through the SVD of the dense Jacobian (jacrev). W, X₀ are chosen with σ₂/σ₁ ≤ 0.27 at the start, so ten warm
    power steps give (u, v) to ~10⁻¹¹ and the iterates agree to 10⁻⁸."""
    W = _rand(3, 3, seed=18)
    f = attention_map(W, power(3, 0.5))
    N, D, radius, lr, steps = 4, 3, 1.5, 0.02, 2
    X0 = _project(_rand(N, D, seed=13), radius, constraint)
    obj = lambda X: torch.linalg.matrix_norm(jacrev(f)(X).reshape(N * N, N * D), 2)  # noqa: E731
    Xs = _expected_iterates(obj, X0, radius, constraint, lr, steps)
    vals = [float(obj(X)) for X in Xs]
    assert vals[0] < vals[1] < vals[2]
    res = maximise_jacobian_norm(f, N, D, radius, norm="spectral", constraint=constraint, steps=steps, lr=lr,
                                 restarts=0, inits=[X0])
    assert res.history == pytest.approx(tuple(vals), rel=1e-8)
    torch.testing.assert_close(res.X, Xs[-1], rtol=1e-8, atol=1e-10)
    assert res.value == pytest.approx(vals[-1], rel=1e-10)  # the certified value of the best iterate
