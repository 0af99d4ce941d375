"""Tests for `empirics/experiments/peer_adversarial.py`: the peers' construction restated (eigenvector of A = c·Wᵀ,
tokens in the ball), its σ₁ against autograd's dense Jacobian, and the comparison with the ascent."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sapa.empirics.experiments import peer_adversarial as pa
from sapa.empirics.experiments.lipschitz_ball import BallConfig, make_head, radius_for, run_ball
from sapa.empirics.kernels.ball_ascent import AscentConfig
from sapa.empirics.kernels.head_jacobian import Head, forward


def test_the_direction_is_an_eigenvector_of_the_peers_a_by_their_rule():
    h = make_head(0, 8, 8, 8, "softmax")
    u, which = pa.peer_direction(h)
    A = h.c * h.W.T.numpy()                                  # scores x_jᵀ A x_i = c·x_i W x_jᵀ
    lam = float(u @ A @ u)                                   # u unit: its Rayleigh quotient is its eigenvalue
    assert np.allclose(A @ u, lam * u, atol=1e-12) and abs(np.linalg.norm(u) - 1) < 1e-12
    val = np.linalg.eigvals(A)
    real = val[np.abs(val.imag) < 1e-12].real
    lmax, lmin = real.max(), real.min()
    assert which == ("max" if lmax > -8 * lmin else "min")
    assert lam == pytest.approx(lmax if which == "max" else lmin, abs=1e-12)


def test_the_inputs_lie_in_the_ball_and_have_the_two_positions():
    h = make_head(0, 8, 8, 8, "softmax")
    R = radius_for(h, 4.0)
    X = pa.peer_inputs(h, 9, R)
    u, which = pa.peer_direction(h)
    first, rest = (R * u, R * u / 2) if which == "max" else (-R * u, R * u)
    assert X.shape == (9, 8) and float(X.norm(dim=1).max()) <= R * (1 + 1e-12)
    assert np.allclose(X[0].numpy(), first, atol=1e-12) and np.allclose(X[1:].numpy(), rest, atol=1e-12)


def test_a_head_without_real_eigenvalues_builds_nothing():
    W = torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64)  # a rotation: eigenvalues ±i
    h = Head(W, torch.eye(2, dtype=torch.float64), 2, "softmax")
    assert pa.peer_direction(h) is None and pa.peer_inputs(h, 4, 1.0) is None


@pytest.mark.parametrize("n", [2, 5, 12])
def test_dense_sigma_equals_autograds_dense_jacobian(n):
    h = make_head(0, 8, 8, 8, "softmax")
    X = pa.peer_inputs(h, n, radius_for(h, 4.0))
    J = torch.autograd.functional.jacobian(lambda Y: forward(h, Y[None])[0], X).reshape(n * 8, n * 8)
    assert pa.dense_sigma(h, X) == pytest.approx(float(torch.linalg.matrix_norm(J, 2)), rel=1e-12)


def test_the_comparison_divides_by_the_ascents_bound_at_the_same_ball_and_length():
    res = run_ball(BallConfig(ns=(2, 4, 8), betas=(4.0,), activations=("softmax",), D=4, d=4, d_v=4,
                              ascent=AscentConfig(restarts=2, steps=10)))
    got = pa.compare(res, 0, 4, 4, 4)
    assert got["constructed"] and [r["n"] for r in got["rows"]] == [2, 4, 8]
    for r, a in zip(got["rows"], res.rows):
        assert r["sigma_ascent"] == a["sigma_lower"] and r["ratio"] == pytest.approx(r["sigma_peer"] / a["sigma_lower"])
    assert got["largest_ratio"] == {"4": max(r["ratio"] for r in got["rows"])}
