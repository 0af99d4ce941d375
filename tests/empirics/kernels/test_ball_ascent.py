"""Tests for `empirics/kernels/ball_ascent.py`: certified lower bounds against the dense SVD, the ball, seeding."""

from __future__ import annotations

import math

import pytest
import torch

from sapa.common.seeds import torch_gen_for
from sapa.empirics.kernels.ball_ascent import AscentConfig, maximise_sigma, power_lower, project_ball, starts, tiled
from sapa.empirics.kernels.head_jacobian import Head, forward


def _head(act: str, D: int = 4) -> Head:
    g = torch_gen_for(0, "test_ball_ascent", D)
    WQ, WK, WV = (torch.randn(D, D, generator=g, dtype=torch.float64) / math.sqrt(D) for _ in range(3))
    return Head(WQ @ WK.T, WV, D, act)


def _sigma_dense(h: Head, X: torch.Tensor) -> float:
    n, D = X.shape
    J = torch.autograd.functional.jacobian(lambda Y: forward(h, Y[None])[0], X).reshape(-1, n * D)
    return float(torch.linalg.matrix_norm(J, 2))


def test_power_lower_converges_to_the_dense_sigma_from_below():
    h = _head("softmax")
    X = torch.randn(3, 5, 4, generator=torch_gen_for(1, "test_ball_ascent"), dtype=torch.float64)
    v0 = torch.randn(X.shape, generator=torch_gen_for(2, "test_ball_ascent"), dtype=torch.float64)
    few, _ = power_lower(h, X, v0, 2)
    many, _ = power_lower(h, X, v0, 500)
    for b in range(3):
        s = _sigma_dense(h, X[b])
        assert few[b] <= s * (1 + 1e-12) and many[b] <= s * (1 + 1e-12)
        assert many[b] >= s * (1 - 1e-6)


def test_power_lower_stops_once_every_residual_is_below_tol_at_the_converged_value(monkeypatch):
    """The early stop saves iterations, not accuracy: the bound equals 500 iterations' to about tol² and stays
    below the dense σ₁; tol = 0 never stops early."""
    import sapa.empirics.kernels.ball_ascent as ba

    calls = []
    real_vjp = ba.vjp
    monkeypatch.setattr(ba, "vjp", lambda *a: calls.append(1) or real_vjp(*a))
    h = _head("poly3")
    X = torch.randn(3, 5, 4, generator=torch_gen_for(3, "test_ball_ascent"), dtype=torch.float64)
    v0 = torch.randn(X.shape, generator=torch_gen_for(4, "test_ball_ascent"), dtype=torch.float64)
    full, _ = power_lower(h, X, v0, 500)
    assert len(calls) == 500
    calls.clear()
    early, v = power_lower(h, X, v0, 500, tol=1e-12)
    assert 0 < len(calls) < 500
    torch.testing.assert_close(early, full, rtol=1e-14, atol=0)
    w = real_vjp(h, X, ba.jvp(h, X, v))
    theta = (v * w).flatten(1).sum(1)
    res = torch.linalg.vector_norm((w - theta[:, None, None] * v).flatten(1), dim=1) / theta
    assert bool((res <= 1e-12).all())  # the returned v is the one whose residual stopped the iteration
    for b in range(3):
        assert early[b] <= _sigma_dense(h, X[b]) * (1 + 1e-12)


def test_projection_keeps_inner_tokens_and_clips_outer_ones():
    X = torch.tensor([[[0.3, 0.4], [3.0, 4.0]]], dtype=torch.float64)
    Y = project_ball(X, 1.0)
    torch.testing.assert_close(Y[0, 0], X[0, 0])
    torch.testing.assert_close(Y[0, 1], torch.tensor([0.6, 0.8], dtype=torch.float64))


def test_starts_and_tiles_lie_in_the_ball():
    h = _head("softmax")
    S = starts(h, 6, 2.0, 5, torch_gen_for(3, "test_ball_ascent"))
    assert S.shape == (5, 6, 4)
    assert float(torch.linalg.vector_norm(S, dim=-1).max()) <= 2.0 * (1 + 1e-12)
    assert tiled(S[0, :4], 6).shape == (6, 4) and torch.equal(tiled(S[0, :4], 6)[4], S[0, 0])


def test_ascent_value_is_a_certified_lower_bound_at_a_point_of_the_ball_and_seeded():
    for act in ("softmax", "poly1", "poly3"):
        h = _head(act)
        cfg = AscentConfig(restarts=4, steps=25, polish_iters=200)
        a = maximise_sigma(h, 5, 1.5, cfg, torch_gen_for(4, "test_ball_ascent", act))
        b = maximise_sigma(h, 5, 1.5, cfg, torch_gen_for(4, "test_ball_ascent", act))
        assert a.lower == b.lower and torch.equal(a.X, b.X)
        assert float(torch.linalg.vector_norm(a.X, dim=-1).max()) <= 1.5 * (1 + 1e-12)
        s = _sigma_dense(h, a.X)
        assert a.lower <= s * (1 + 1e-10)
        assert a.lower >= s * (1 - 1e-6)  # polished: the top singular value at the winner
        assert a.lower >= max(a.per_restart) * (1 - 1e-12)


@pytest.mark.parametrize("act", ["expr:Max(x, 0)**2/N", "row:x**4"])
def test_ascent_of_an_expression_is_a_certified_lower_bound(act):
    """An expression φ: the ascent's value is σ₁ of autograd's dense Jacobian at its winner (float64)."""
    h = _head(act)
    a = maximise_sigma(h, 5, 1.5, AscentConfig(restarts=4, steps=10, polish_iters=200),
                       torch_gen_for(5, "test_ball_ascent", act))
    s = _sigma_dense(h, a.X)
    assert s * (1 - 1e-6) <= a.lower <= s * (1 + 1e-10)


def test_ascent_of_the_cube_expression_is_that_of_poly3():
    """expr:x**3/sqrt(N) climbs as poly3 does from the same starts (derivative by autograd vs closed form)."""
    cfg = AscentConfig(restarts=4, steps=10, polish_iters=50)
    a, b = (maximise_sigma(_head(act), 5, 1.5, cfg, torch_gen_for(6, "test_ball_ascent")) for act in
            ("poly3", "expr:x**3/sqrt(N)"))
    assert b.lower == pytest.approx(a.lower, rel=1e-9)


def test_ascent_beats_random_inputs_of_the_ball():
    h = _head("softmax")
    a = maximise_sigma(h, 6, 2.0, AscentConfig(restarts=4, steps=40), torch_gen_for(5, "test_ball_ascent"))
    g = torch_gen_for(6, "test_ball_ascent")
    rand = [project_ball(torch.randn(6, 4, generator=g, dtype=torch.float64), 2.0) for _ in range(20)]
    assert a.lower >= max(_sigma_dense(h, X) for X in rand)
