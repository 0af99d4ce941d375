"""Tests for `empirics/expr_norms.py`: exact norms of any audited φ against full autograd Jacobians (float64)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sapa.common.validate import InputError
from sapa.empirics.kernels.expr_norms import LayerOperator, expr_norms, layer_from_qk, layer_from_w
from sapa.empirics.kernels.norms import attention_norms
from sapa.theory.families import power, softmax
from sapa.theory.activation_audit import parse_activation

F64 = torch.float64


def _t_phi(kind: str, S: torch.Tensor, mask: str) -> torch.Tensor:
    """φ(S) written directly in torch (independent of the sympy expression)."""
    N = S.shape[0]
    i = torch.arange(1, N + 1, dtype=F64)[:, None]
    j = torch.arange(1, N + 1, dtype=F64)[None, :]
    vis = torch.ones(N, N, dtype=torch.bool)
    if mask == "causal":
        vis = torch.tril(vis)
    zero = torch.zeros((), dtype=F64)
    if kind == "sigmoid":
        return torch.where(vis, torch.sigmoid(S / 8 - math.log(N)), zero)
    if kind == "relu":
        return torch.where(vis, torch.relu(S) / N, zero)
    if kind == "cube":
        return torch.where(vis, S**3 / math.sqrt(N), zero)
    if kind == "alibi":
        return torch.where(vis, torch.sigmoid(S / 8 - math.log(N) - 0.1 * (i - j).abs()), zero)
    if kind == "softmax":
        return torch.softmax(torch.where(vis, S / 2, torch.tensor(-math.inf, dtype=F64)), dim=1)
    if kind == "quartic-row":
        P = torch.where(vis, (S / 2) ** 4 + 0.5, zero)
        return P / P.sum(dim=1, keepdim=True)
    raise AssertionError(kind)


KINDS = {  # kind -> (expression, normalize)
    "sigmoid": ("sigmoid(x/8 - log(N))", "none"),
    "relu": ("relu(x)/N", "none"),
    "cube": ("x**3/sqrt(N)", "none"),
    "alibi": ("sigmoid(x/8 - log(N) - 0.1*Abs(i - j))", "none"),
    "softmax": ("exp(x/2)", "row"),
    "quartic-row": ("(x/2)**4 + 1/2", "row"),
}
CASES = [(k, m) for k in KINDS for m in ("none", "causal")]


def _weights(seed: int, D: int, H: int, d: int, dv: int, Do: int):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((D, H * d)) * 0.6, rng.standard_normal((D, H * d)) * 0.6,
            rng.standard_normal((D, H * dv)), rng.standard_normal((H * dv, Do)))


def _torch_layer(layer, kind, mask):
    def f(x):
        out = 0
        for h in range(layer.H):
            q, k = torch.from_numpy(layer.Wq[h]), torch.from_numpy(layer.Wk[h])
            P = _t_phi(kind, (x @ q) @ (x @ k).T, mask)
            out = out + P @ x @ torch.from_numpy(layer.Wv[h]) @ torch.from_numpy(layer.Wo[h])
        return out
    return f


@pytest.mark.parametrize("kind,mask", CASES)
def test_head_norms_match_the_autograd_jacobians(kind, mask):
    N, D = 6, 4
    X = np.random.default_rng(1).standard_normal((N, D)) * 1.5
    Wq, Wk, _, _ = _weights(2, D, 1, 3, 2, 3)
    layer = layer_from_qk(Wq, Wk)
    r = expr_norms(X, layer, parse_activation(*KINDS[kind], mask))
    Xt, q, k = torch.from_numpy(X), torch.from_numpy(layer.Wq[0]), torch.from_numpy(layer.Wk[0])
    f = lambda x: _t_phi(kind, (x @ q) @ (x @ k).T, mask)  # noqa: E731
    S = (Xt @ q) @ (Xt @ k).T
    J = torch.autograd.functional.jacobian(f, Xt).reshape(N * N, N * D)
    Js = torch.autograd.functional.jacobian(lambda s: _t_phi(kind, s, mask), S).reshape(N * N, N * N)
    assert r.fro[0] == pytest.approx(float(torch.linalg.norm(f(Xt))), rel=1e-12)
    assert r.jac_fro[0] == pytest.approx(float(torch.linalg.norm(J)), rel=1e-12)
    assert r.jac_s_fro[0] == pytest.approx(float(torch.linalg.norm(Js)), rel=1e-12)
    assert r.layer_jac_fro is None


@pytest.mark.parametrize("kind,mask", CASES)
def test_multi_head_layer_with_values_matches_the_autograd_jacobian(kind, mask):
    N, D, H = 5, 4, 3
    X = np.random.default_rng(3).standard_normal((N, D))
    layer = layer_from_qk(*_weights(4, D, H, 2, 2, 3), heads=H)
    act = parse_activation(*KINDS[kind], mask)
    r = expr_norms(X, layer, act)
    Xt = torch.from_numpy(X)
    f = _torch_layer(layer, kind, mask)
    J = torch.autograd.functional.jacobian(f, Xt).reshape(N * 3, N * D)
    assert r.layer_jac_fro == pytest.approx(float(torch.linalg.norm(J)), rel=1e-12)
    assert len(r.fro) == H
    op = LayerOperator(X, layer, act)
    rng = np.random.default_rng(5)
    E, U = rng.standard_normal((N, D)), rng.standard_normal((N, 3))
    np.testing.assert_allclose(op.matvec(E).ravel(), (J @ torch.from_numpy(E).ravel()).numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.rmatvec(U).ravel(), (J.T @ torch.from_numpy(U).ravel()).numpy(), rtol=1e-12,
                               atol=1e-12)


def test_values_without_w_o_concatenate_the_heads():
    N, D, H = 4, 3, 2
    X = np.random.default_rng(6).standard_normal((N, D))
    Wq, Wk, Wv, _ = _weights(7, D, H, 2, 2, 3)
    cat = expr_norms(X, layer_from_qk(Wq, Wk, Wv, heads=H), parse_activation("x/4"))
    eye = expr_norms(X, layer_from_qk(Wq, Wk, Wv, np.eye(H * 2), heads=H), parse_activation("x/4"))
    assert cat.layer_jac_fro == pytest.approx(eye.layer_jac_fro, rel=1e-14)


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_row_normalised_exp_is_softmax_and_polynomials_match_the_existing_kernel(mask):
    N, D = 7, 5
    rng = np.random.default_rng(8)
    X, W = rng.standard_normal((N, D)), rng.standard_normal((D, D)) * 0.5
    r = expr_norms(X, layer_from_w(W), parse_activation("exp(0.7*x)", "row", mask))
    ref = attention_norms(X, W, softmax(0.7), mask, device="cpu")
    assert (r.fro[0], r.jac_fro[0], r.jac_s_fro[0]) == pytest.approx((ref.fro, ref.jac_fro, ref.jac_s_fro), rel=1e-12)
    r3 = expr_norms(X, layer_from_w(W), parse_activation("0.25*x**3", "none", mask))
    ref3 = attention_norms(X, W, power(3, 0.25), mask, device="cpu")
    assert (r3.fro[0], r3.jac_fro[0], r3.jac_s_fro[0]) == pytest.approx((ref3.fro, ref3.jac_fro, ref3.jac_s_fro),
                                                                       rel=1e-12)


def test_norms_are_scaled_before_squaring():
    # S ≈ 1e-60: x³ ≈ 1e-180 is in float64's range but its square is not; the kernel scales first
    N, D = 5, 3
    rng = np.random.default_rng(9)
    X, W = rng.standard_normal((N, D)) * 1e-30, rng.standard_normal((D, D))
    r = expr_norms(X, layer_from_w(W), parse_activation("x**3"))
    ref = attention_norms(X, W, power(3), device="cpu")
    assert r.fro[0] > 0 and r.fro[0] == pytest.approx(ref.fro, rel=1e-12)
    assert r.jac_fro[0] == pytest.approx(ref.jac_fro, rel=1e-12)
    assert r.log10_fro[0] == pytest.approx(ref.log10_fro, rel=1e-12)


def test_bad_shapes_are_one_line_errors():
    act = parse_activation("x")
    with pytest.raises(InputError, match="D = 4"):
        expr_norms(np.ones((3, 4)), layer_from_w(np.eye(3)), act)
    with pytest.raises(InputError, match="divisible"):
        layer_from_qk(np.ones((3, 4)), np.ones((3, 4)), heads=3)
    with pytest.raises(InputError, match="W_O needs W_V"):
        layer_from_qk(np.ones((3, 4)), np.ones((3, 4)), Wo=np.ones((4, 3)))
    with pytest.raises(InputError, match="NaN"):
        expr_norms(np.full((2, 3), np.nan), layer_from_w(np.eye(3)), act)


def test_query_and_key_biases_as_in_a_real_layer():
    from dataclasses import replace

    N, D, H = 5, 4, 2
    rng = np.random.default_rng(10)
    X = rng.standard_normal((N, D))
    layer = layer_from_qk(*_weights(11, D, H, 2, 2, 3), heads=H)
    layer = replace(layer, bq=rng.standard_normal((H, 2)), bk=rng.standard_normal((H, 2)))
    act = parse_activation("exp(x/2)", "row")
    r = expr_norms(X, layer, act)

    def f(x):
        out = 0
        for h in range(H):
            A = x @ torch.from_numpy(layer.Wq[h]) + torch.from_numpy(layer.bq[h])
            B = x @ torch.from_numpy(layer.Wk[h]) + torch.from_numpy(layer.bk[h])
            out = out + torch.softmax(A @ B.T / 2, dim=1) @ x @ torch.from_numpy(layer.Wv[h]) @ torch.from_numpy(layer.Wo[h])
        return out

    J = torch.autograd.functional.jacobian(f, torch.from_numpy(X)).reshape(N * 3, N * D)
    assert r.layer_jac_fro == pytest.approx(float(torch.linalg.norm(J)), rel=1e-12)
    op = LayerOperator(X, layer, act)
    E = rng.standard_normal((N, D))
    np.testing.assert_allclose(op.matvec(E).ravel(), (J @ torch.from_numpy(E).ravel()).numpy(), rtol=1e-12, atol=1e-12)


def test_requests_are_bounded_before_anything_is_allocated():
    """--heads 8000 with values took 18.9 GB; X 16 384×2 sigmoid 12.9 GB against a "~2 GiB" comment."""
    import time
    import tracemalloc

    from sapa.common.validate import InputError
    from sapa.empirics.kernels.expr_norms import MAX_BYTES, request_bytes

    rng = np.random.default_rng(3)
    D, H = 4, 8000
    lay = layer_from_qk(rng.standard_normal((D, H)), rng.standard_normal((D, H)), rng.standard_normal((D, H)),
                        rng.standard_normal((H, D)), heads=H)
    t0 = time.monotonic()
    with pytest.raises(InputError, match="64,000,000 head pairs"):
        expr_norms(rng.standard_normal((8, D)), lay, parse_activation("exp(x)", "row"))
    with pytest.raises(InputError, match=r"needs about 28\.0 GiB of memory \(at most 4 GiB\)"):
        expr_norms(rng.standard_normal((16384, 2)), layer_from_w(np.eye(2)), parse_activation("sigmoid(x)"))
    assert time.monotonic() - t0 < 5
    # the estimate is an upper bound of the measured peak (numpy's allocations, traced), row-normalised with values
    N, D, H, d = 512, 8, 4, 4
    lay = layer_from_qk(*(rng.standard_normal(s) * 0.3 for s in ((D, H * d), (D, H * d), (D, H * d), (H * d, D))),
                        heads=H)
    X = rng.standard_normal((N, D))
    tracemalloc.start()
    try:
        expr_norms(X, lay, parse_activation("exp(x)", "row"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0.5 * request_bytes(N, D, lay) <= peak <= request_bytes(N, D, lay) < MAX_BYTES
