"""Tests for `empirics/spectral.py` (certified σ₁ bracket) and the Ritz-residual `converged` of `empirics/kernels/lipschitz.py`."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from empirics.kernels.expr_norms import LayerOperator, expr_norms, layer_from_qk, layer_from_w
from empirics.kernels.lipschitz import spectral_norm
from empirics.kernels.spectral import certified_spectral_norm
from theory.audit import parse_activation
from tests.empirics.kernels.test_expr_norms import KINDS, _t_phi, _torch_layer, _weights

F64 = torch.float64


def _exact_sigma(J: torch.Tensor) -> tuple[float, float]:
    s = torch.linalg.svdvals(J)
    return float(s[0]), float(s[1] / s[0])


@pytest.mark.parametrize("kind,mask", [("sigmoid", "none"), ("alibi", "causal"), ("cube", "none"),
                                       ("softmax", "causal"), ("relu", "none"), ("quartic-row", "none")])
def test_bracket_of_one_head_contains_the_exact_top_singular_value(kind, mask):
    N, D = 6, 3
    X = np.random.default_rng(11).standard_normal((N, D)) * 1.5
    Wq, Wk, _, _ = _weights(12, D, 1, 3, 2, 3)
    layer = layer_from_qk(Wq, Wk)
    act = parse_activation(*KINDS[kind], mask)
    q, k = torch.from_numpy(layer.Wq[0]), torch.from_numpy(layer.Wk[0])
    J = torch.autograd.functional.jacobian(lambda x: _t_phi(kind, (x @ q) @ (x @ k).T, mask),
                                           torch.from_numpy(X)).reshape(N * N, N * D)
    sigma, _ = _exact_sigma(J)
    op = LayerOperator(X, layer, act, head=0)
    b = certified_spectral_norm(op.matvec, op.rmatvec, op.in_shape, expr_norms(X, layer, act).jac_fro[0] ** 2,
                                tol=1e-10, max_steps=N * D)
    assert b.lower <= sigma <= b.upper
    assert b.converged  # the Krylov space can span all N·D directions here
    assert abs(b.lower - sigma) <= 1e-8 * sigma and abs(b.upper - sigma) <= 1e-8 * sigma


@pytest.mark.parametrize("kind", ["softmax", "alibi"])
def test_bracket_of_the_multi_head_layer_contains_the_exact_top_singular_value(kind):
    N, D, H = 5, 4, 2
    X = np.random.default_rng(13).standard_normal((N, D))
    layer = layer_from_qk(*_weights(14, D, H, 2, 2, 3), heads=H)
    act = parse_activation(*KINDS[kind], "causal")
    J = torch.autograd.functional.jacobian(_torch_layer(layer, kind, "causal"), torch.from_numpy(X)).reshape(N * 3,
                                                                                                         N * D)
    sigma, _ = _exact_sigma(J)
    op = LayerOperator(X, layer, act)
    for steps in (3, 8, 40):  # early stops too: the bracket must hold whether or not it has closed
        b = certified_spectral_norm(op.matvec, op.rmatvec, op.in_shape, expr_norms(X, layer, act).layer_jac_fro ** 2,
                                    tol=1e-10, max_steps=steps, check_every=1)
        assert b.lower <= sigma <= b.upper
        if b.converged:
            assert abs(b.upper - sigma) <= 1e-8 * sigma


def _ratio_097_case():
    """N = 4, D = 3, sigmoid(S/2 − log N): a seed whose Jacobian has σ₂/σ₁ ≈ 0.97 (found by scanning seeds)."""
    g = torch.Generator().manual_seed(64)
    N = 4
    X = torch.randn(N, 3, generator=g, dtype=F64)
    W = torch.randn(3, 3, generator=g, dtype=F64) * 0.7
    f = lambda x: torch.sigmoid((x @ W @ x.T) / 2 - math.log(N))  # noqa: E731
    return X, W, f


def test_bracket_with_close_top_singular_values():
    X, W, f = _ratio_097_case()
    J = torch.autograd.functional.jacobian(f, X).reshape(16, 12)
    sigma, ratio = _exact_sigma(J)
    assert 0.96 < ratio < 0.98
    layer, act = layer_from_w(W.numpy()), parse_activation("sigmoid(x/2 - log(N))")
    op = LayerOperator(X.numpy(), layer, act, head=0)
    fro2 = expr_norms(X.numpy(), layer, act).jac_fro[0] ** 2
    assert fro2 == pytest.approx(float(torch.linalg.norm(J)) ** 2, rel=1e-12)
    for steps in range(1, 13):
        b = certified_spectral_norm(op.matvec, op.rmatvec, op.in_shape, fro2, tol=1e-9, max_steps=steps, check_every=1)
        assert b.lower <= sigma <= b.upper
        if b.converged:
            assert abs(b.lower - sigma) <= 1e-8 * sigma


def test_power_iteration_converged_means_the_error_is_within_tol_at_close_singular_values():
    # the old criterion (gap between ‖Jv‖ and √‖JᵀJv‖) reported convergence with errors far beyond tol here
    X, _, f = _ratio_097_case()
    sigma, _ = _exact_sigma(torch.autograd.functional.jacobian(f, X).reshape(16, 12))
    for tol in (1e-4, 1e-6, 1e-8):
        for seed in range(5):
            res = spectral_norm(f, X, tol=tol, max_iter=20000, seed=seed)
            assert res.converged and res.residual <= tol
            assert abs(res.sigma - sigma) <= tol * sigma


def test_bracket_holds_when_lanczos_has_not_found_the_top_direction():
    # a spread spectrum in 400 dimensions, 5 Lanczos steps: the Ritz value is low, the trace term keeps the bound
    rng = np.random.default_rng(15)
    n = 400
    s = np.concatenate([[1.0, 0.97], rng.uniform(0.0, 0.95, n - 2)])
    Q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    Q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    J = (Q1 * s) @ Q2.T
    for steps in (1, 5, 40):
        b = certified_spectral_norm(lambda v: J @ v, lambda u: J.T @ u, (n,), float(np.sum(s**2)), max_steps=steps)
        assert b.lower <= 1.0 <= b.upper and not b.converged
        assert b.upper <= b.upper_frobenius * (1 + 1e-12)


def test_bracket_closes_on_a_low_rank_operator_in_a_large_space():
    rng = np.random.default_rng(16)
    n = 3000
    U, _ = np.linalg.qr(rng.standard_normal((n, 3)))
    Vt, _ = np.linalg.qr(rng.standard_normal((n, 3)))
    s = np.array([2.0, 1.94, 0.5])  # σ₂/σ₁ = 0.97
    b = certified_spectral_norm(lambda v: U @ (s * (Vt.T @ v)), lambda u: Vt @ (s * (U.T @ u)), (n,),
                                float(np.sum(s**2)), tol=1e-10, max_steps=50)
    assert b.converged and b.lower <= 2.0 <= b.upper and b.steps <= 10


def test_zero_jacobian_and_bad_arguments():
    from common.validate import InputError

    b = certified_spectral_norm(lambda v: 0 * v, lambda u: 0 * u, (3,), 0.0)
    assert b.converged and b.upper == 0.0
    with pytest.raises(InputError):
        certified_spectral_norm(lambda v: v, lambda u: u, (3,), math.nan)
    with pytest.raises(InputError):
        certified_spectral_norm(lambda v: v, lambda u: u, (3,), 3.0, tol=0)
