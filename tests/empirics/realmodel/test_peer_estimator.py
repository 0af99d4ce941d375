"""Tests for `empirics/realmodel/peer_estimator.py`: the published loop returns √‖JᵀF(X)‖, which is not σ₁."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sapa.empirics.kernels.expr_norms import LayerOperator
from sapa.empirics.realmodel.layer_lipschitz import measure_layer, vit_layer
from sapa.empirics.realmodel.peer_estimator import (layer_function, published_from_operator, published_iteration,
                                               published_quantity)
from sapa.theory.activation_audit import parse_activation

SOFTMAX = parse_activation("exp(x)", "row")


def _small(seed: int = 1):
    """A 2-head layer (D = 6, d = 3) and 4 tokens: its 24 × 24 Jacobian is formed densely by autograd."""
    lay = vit_layer(0, D=6, H=2, d=3)
    X = np.random.default_rng(seed).standard_normal((4, 6))
    return lay, X


def _dense_sigma(F, X: np.ndarray) -> float:
    J = torch.autograd.functional.jacobian(F, torch.from_numpy(X))  # (N, D_out, N, D)
    n = X.size
    return float(torch.linalg.svdvals(J.reshape(n, n))[0])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_loop_returns_the_closed_form_after_two_steps(seed):
    lay, X = _small(seed)
    F, Xt = layer_function(lay), torch.from_numpy(X)
    got, steps = published_iteration(F, Xt, torch.Generator().manual_seed(seed))
    assert got == pytest.approx(published_quantity(F, Xt), rel=1e-12) and steps == 2


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sapas_operator_and_autograd_give_the_same_quantity(seed):
    lay, X = _small(seed)
    F = layer_function(lay)
    with torch.no_grad():
        FX = F(torch.from_numpy(X)).numpy()
    op = LayerOperator(X, lay, SOFTMAX)
    assert published_from_operator(op, FX) == pytest.approx(published_quantity(F, torch.from_numpy(X)), rel=1e-12)
    assert measure_layer(X, lay, max_steps=24, seed=0)["published_estimator"] == pytest.approx(
        published_quantity(F, torch.from_numpy(X)), rel=1e-12)


def test_the_layer_function_is_the_operators_layer():
    """F's Jacobian (autograd) is sapa's closed-form operator: J·E agrees for a random direction."""
    lay, X = _small(4)
    E = np.random.default_rng(5).standard_normal(X.shape)
    _, JE = torch.func.jvp(layer_function(lay), (torch.from_numpy(X),), (torch.from_numpy(E),))
    np.testing.assert_allclose(LayerOperator(X, lay, SOFTMAX).matvec(E), JE.numpy(), rtol=1e-10, atol=1e-12)


def test_it_is_not_sigma_one_and_moves_with_a_constant_output_offset():
    lay, X = _small(1)
    F = layer_function(lay)
    Xt = torch.from_numpy(X)
    sigma = _dense_sigma(F, X)
    peer = published_quantity(F, Xt)
    assert abs(peer / sigma - 1) > 0.05, (peer, sigma)
    shifted = lambda x: F(x) + 3.0  # noqa: E731 - a value/output bias: J unchanged, F(X) moved
    assert _dense_sigma(shifted, X) == pytest.approx(sigma, rel=1e-12)
    assert abs(published_quantity(shifted, Xt) / peer - 1) > 0.05
    # bounded by √(σ₁‖F(X)‖) (Cauchy–Schwarz), the output's size mixed in
    with torch.no_grad():
        size = float(torch.linalg.vector_norm(F(Xt)))
    assert peer <= math.sqrt(sigma * size) * (1 + 1e-12)


def test_a_layer_without_values_is_refused():
    from sapa.empirics.kernels.expr_norms import layer_from_qk

    lay = layer_from_qk(np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match="no values"):
        layer_function(lay)
