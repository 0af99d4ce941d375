"""Tests for `empirics/kernels/head_jacobian.py`: J·dX and Jᵀ·G against autograd's dense Jacobian of f."""

from __future__ import annotations

import math

import pytest
import torch

from sapa.common.seeds import torch_gen_for
from sapa.common.validate import InputError
from sapa.empirics.kernels.head_jacobian import Head, at, attention, forward, jvp, power_of, vjp


def _head(act: str, D: int = 5, d: int = 3, dv: int = 4) -> Head:
    g = torch_gen_for(0, "test_head_jacobian", D, d, dv)
    WQ, WK = (torch.randn(D, d, generator=g, dtype=torch.float64) for _ in range(2))
    return Head(WQ @ WK.T / math.sqrt(D), torch.randn(D, dv, generator=g, dtype=torch.float64), d, act)


def _dense(h: Head, X: torch.Tensor) -> torch.Tensor:
    """Autograd's Jacobian of f at X (n, D) as a (n·d_v, n·D) matrix."""
    n, D = X.shape
    J = torch.autograd.functional.jacobian(lambda Y: forward(h, Y[None])[0], X)  # (n, d_v, n, D)
    return J.reshape(n * h.W_V.shape[1], n * D)


EXPRS = ["expr:Max(x, 0)**2/N", "expr:x/(1 + Abs(x))", "expr:x**3/sqrt(i)", "row:x**4", "row:1/(1 + exp(-x))"]


@pytest.mark.parametrize("act", ["softmax", "poly1", "poly3", *EXPRS])
def test_jvp_and_vjp_are_the_dense_jacobian_and_its_transpose(act):
    h = _head(act)
    g = torch_gen_for(1, "test_head_jacobian", act)
    X = torch.randn(2, 6, 5, generator=g, dtype=torch.float64)
    dX = torch.randn(2, 6, 5, generator=g, dtype=torch.float64)
    G = torch.randn(2, 6, 4, generator=g, dtype=torch.float64)
    for b in range(2):
        J = _dense(h, X[b])
        torch.testing.assert_close(jvp(h, X, dX)[b].reshape(-1), J @ dX[b].reshape(-1), rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(vjp(h, X, G)[b].reshape(-1), J.T @ G[b].reshape(-1), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("act", ["softmax", "poly1", "poly3", *EXPRS])
def test_products_at_a_cached_point_are_those_at_the_point(act):
    """``at(h, X)`` only saves recomputing S, P, XW, XW_V: the products are the same bits, after any use of it."""
    h = _head(act)
    g = torch_gen_for(2, "test_head_jacobian", act)
    X, dX = (torch.randn(3, 7, 5, generator=g, dtype=torch.float64) for _ in range(2))
    G = torch.randn(3, 7, 4, generator=g, dtype=torch.float64)
    a = at(h, X)
    for _ in range(2):
        assert torch.equal(jvp(h, a, dX), jvp(h, X, dX)) and torch.equal(vjp(h, a, G), vjp(h, X, G))
    assert torch.equal(a.P, attention(h, a.S)) and torch.equal(a.XWV, X @ h.W_V)


def test_attention_is_row_softmax_and_scaled_power():
    h = _head("softmax")
    S = torch.randn(1, 4, 4, generator=torch_gen_for(2, "test_head_jacobian"), dtype=torch.float64)
    torch.testing.assert_close(attention(h, S), torch.softmax(S, dim=-1))
    h3 = Head(h.W, h.W_V, h.d, "poly3")
    torch.testing.assert_close(attention(h3, S), S**3 / 2.0)  # √n = 2


def test_expression_forms_are_the_named_ones():
    """expr:x**3/sqrt(N) is poly3, row:x is S/rowsum S: the same products as the built-in form, to round-off."""
    g = torch_gen_for(3, "test_head_jacobian", "expr")
    X, dX = (torch.randn(2, 6, 5, generator=g, dtype=torch.float64) for _ in range(2))
    G = torch.randn(2, 6, 4, generator=g, dtype=torch.float64)
    h3, he = _head("poly3"), _head("expr:x**3/sqrt(N)")
    torch.testing.assert_close(jvp(he, X, dX), jvp(h3, X, dX), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(vjp(he, X, G), vjp(h3, X, G), rtol=1e-12, atol=1e-12)
    S = torch.rand(1, 4, 4, generator=g, dtype=torch.float64) + 0.5
    torch.testing.assert_close(attention(_head("row:x"), S), S / S.sum(-1, keepdim=True))


def test_a_row_normalised_expression_has_its_own_adjoint():
    """Jᵀ·G of a row-normalised ψ is not J·G's map transposed blindly: ⟨J dX, G⟩ = ⟨dX, Jᵀ G⟩ (float64)."""
    h = _head("row:x**4")
    g = torch_gen_for(4, "test_head_jacobian", "adjoint")
    X, dX = (torch.randn(1, 6, 5, generator=g, dtype=torch.float64) for _ in range(2))
    G = torch.randn(1, 6, 4, generator=g, dtype=torch.float64)
    assert math.isclose(float((jvp(h, X, dX) * G).sum()), float((dX * vjp(h, X, G)).sum()), rel_tol=1e-11)


def test_power_of_refuses_unknown_activations():
    assert power_of("softmax") is None and power_of("poly3") == 3 and power_of("expr:x") is None
    for bad in ("poly0", "relu", "polyx", "expr:", "row: "):
        with pytest.raises(InputError):
            power_of(bad)
