"""Tests for `theory/polynomial.py`: Jacobians of c·S^{∘p} (arXiv 2410.18613, Thms 4.2–4.5)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
import torch

from sapa.theory.polynomial import (
    poly_attention_symbolic,
    poly_fro2,
    poly_jacobian_fro2_closed_form,
    poly_jacobian_fro2_sympy,
    poly_jacobian_wrt_AB_fro2,
    poly_jacobian_wrt_S_fro2,
)
from sapa.common.validate import InputError


@pytest.fixture(autouse=True, scope="module")
def _torch_single_thread():
    # tiny Jacobians: intra-op threads only contend (≈ 50x slower on a loaded 2-core box)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _mask(N: int, causal: bool) -> torch.Tensor:
    ones = torch.ones(N, N, dtype=torch.float64)
    return ones.tril() if causal else ones


def _row_c(c, N: int) -> torch.Tensor:
    return torch.as_tensor(np.broadcast_to(np.asarray(c, float), (N,)).copy())[:, None]  # (N, 1)


def _torch_fro2(fn, *inputs) -> float:
    """Σ of squares of the full Jacobian of fn w.r.t. all inputs, float64 autograd."""
    tensors = tuple(torch.tensor(a, dtype=torch.float64) for a in inputs)
    jac = torch.autograd.functional.jacobian(fn, tensors, vectorize=True)
    return float(sum(torch.sum(j**2) for j in jac))


def _rel_close(got: float, want: float, rel: float = 1e-10) -> bool:
    return abs(got - want) <= rel * abs(want) or got == want


# ---------------------------------------------------------------- exact, sympy


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("D", [1, 2])
@pytest.mark.parametrize("N", [1, 2, 3])
def test_closed_form_equals_sympy_jacobian(N, D, p, causal):
    X, W, _ = poly_attention_symbolic(N, D, p, causal=causal)
    assert W != W.T or D == 1  # a generic, non-symmetric W
    brute = poly_jacobian_fro2_sympy(N, D, p, causal)
    closed = poly_jacobian_fro2_closed_form(X, W, p, causal=causal)
    assert sp.expand(brute - closed) == 0


@pytest.mark.parametrize("causal", [False, True])
def test_closed_form_with_per_row_coefficients_equals_sympy_jacobian(causal):
    c = sp.symbols("c1:4", positive=True)  # e.g. the dynamic causal scale c_i = 1/√i
    X, W, _ = poly_attention_symbolic(3, 2, 2, c=c, causal=causal)
    brute = poly_jacobian_fro2_sympy(3, 2, 2, causal, c=c)
    closed = poly_jacobian_fro2_closed_form(X, W, 2, c=c, causal=causal)
    assert sp.expand(brute - closed) == 0


def test_diagonal_term_is_needed_when_W_is_not_symmetric():
    # negative control: treating S_ii like an off-diagonal entry (‖Wx_i‖² + ‖Wᵀx_i‖²)
    # misses the cross term 2 (W x_i)ᵀ(Wᵀ x_i).
    X, W, P = poly_attention_symbolic(2, 2, 2)
    S = X * W * X.T
    Y, Z = X * W.T, X * W  # rows (W x_j)ᵀ, (Wᵀ x_i)ᵀ
    naive = 4 * sum(
        S[i, j] ** 2 * (Y.row(j).dot(Y.row(j)) + Z.row(i).dot(Z.row(i)))
        for i in range(2)
        for j in range(2)
    )
    assert sp.expand(naive - poly_jacobian_fro2_sympy(2, 2, 2, False)) != 0


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_jacobian_wrt_S_equals_sympy_jacobian(p, causal):
    N = 3
    S = sp.Matrix(N, N, lambda i, j: sp.Symbol(f"s_{i}{j}", real=True))
    c = sp.Symbol("c", positive=True)
    vis = np.tril(np.ones((N, N), bool)) if causal else np.ones((N, N), bool)
    P = sp.Matrix(N, N, lambda i, j: c * S[i, j] ** p if vis[i, j] else 0)
    brute = sum(e**2 for e in P.reshape(N * N, 1).jacobian(S.reshape(N * N, 1)))
    assert sp.expand(brute - poly_jacobian_wrt_S_fro2(S, p, c, causal)) == 0


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_jacobian_wrt_AB_equals_sympy_jacobian(p, causal):
    N, d = 3, 2
    A = sp.Matrix(N, d, lambda i, a: sp.Symbol(f"a_{i}{a}", real=True))
    B = sp.Matrix(N, d, lambda i, a: sp.Symbol(f"b_{i}{a}", real=True))
    S = A * B.T
    vis = np.tril(np.ones((N, N), bool)) if causal else np.ones((N, N), bool)
    P = sp.Matrix(N, N, lambda i, j: S[i, j] ** p if vis[i, j] else 0)
    AB = sp.Matrix.vstack(A.reshape(N * d, 1), B.reshape(N * d, 1))
    brute = sum(e**2 for e in P.reshape(N * N, 1).jacobian(AB))
    assert sp.expand(brute - poly_jacobian_wrt_AB_fro2(A, B, p, 1, causal)) == 0


def test_fro2_symbolic():
    S = sp.Matrix(2, 2, sp.symbols("s1:5", real=True))
    assert poly_fro2(S, 3, 2, causal=True) == 4 * (S[0, 0] ** 6 + S[1, 0] ** 6 + S[1, 1] ** 6)


# ---------------------------------------------------------------- numpy vs torch autograd


SIZES = [(1, 1, 1), (2, 3, 2), (4, 2, 3), (5, 4, 4), (6, 3, 5), (3, 5, 5)]  # (N, D, p)
CASES = [(N, D, p, causal) for N, D, p in SIZES for causal in (False, True)]


@pytest.mark.parametrize("N, D, p, causal", CASES)
def test_numpy_closed_form_matches_torch_jacobian(N, D, p, causal):
    rng = np.random.default_rng(1000 * N + 10 * D + p)
    X, W = rng.normal(size=(N, D)), rng.normal(size=(D, D)) / np.sqrt(D)
    for c in (1 / np.sqrt(N), 1.0 / np.sqrt(np.arange(1, N + 1))):  # static, dynamic causal scale
        c_t = _row_c(c, N)
        W_t = torch.tensor(W)
        want = _torch_fro2(lambda X_t: c_t * (X_t @ W_t @ X_t.T) ** p * _mask(N, causal), X)
        got = poly_jacobian_fro2_closed_form(X, W, p, c, causal)
        assert _rel_close(got, want), (got, want)


@pytest.mark.parametrize("N, D, p, causal", CASES)
def test_numpy_wrt_S_and_AB_match_torch_jacobian(N, D, p, causal):
    rng = np.random.default_rng(7 + N + p)
    A, B = rng.normal(size=(N, D)), rng.normal(size=(N, D))
    c = 0.5
    mask = _mask(N, causal)
    want_AB = _torch_fro2(lambda A_t, B_t: c * (A_t @ B_t.T) ** p * mask, A, B)
    assert _rel_close(poly_jacobian_wrt_AB_fro2(A, B, p, c, causal), want_AB)
    S = A @ B.T
    want_S = _torch_fro2(lambda S_t: c * S_t**p * mask, S)
    assert _rel_close(poly_jacobian_wrt_S_fro2(S, p, c, causal), want_S)
    want_P = float(np.sum((c * S**p * mask.numpy()) ** 2))
    assert _rel_close(poly_fro2(S, p, c, causal), want_P)


def test_numpy_and_sympy_closed_forms_agree():
    rng = np.random.default_rng(5)
    X_num, W_num = rng.integers(-3, 4, size=(3, 2)), rng.integers(-3, 4, size=(2, 2))
    X, W, _ = poly_attention_symbolic(3, 2, 3)
    exact = poly_jacobian_fro2_closed_form(X, W, 3, c=sp.Rational(1, 3), causal=True)
    values = dict(zip(list(X) + list(W), list(X_num.ravel()) + list(W_num.ravel())))
    got = poly_jacobian_fro2_closed_form(X_num, W_num, 3, c=1 / 3, causal=True)
    assert _rel_close(got, float(exact.subs(values)), 1e-14)


def test_input_errors():
    X, W = np.ones((3, 2)), np.ones((2, 2))
    with pytest.raises(InputError):
        poly_jacobian_fro2_closed_form(X, np.ones((3, 3)), 2)
    with pytest.raises(InputError):
        poly_jacobian_fro2_closed_form(X, W, 0)
    with pytest.raises(InputError):
        poly_jacobian_fro2_closed_form(X, W, 2.5)
    with pytest.raises(InputError):
        poly_jacobian_fro2_closed_form(X, W, 2, c=[1.0, 2.0])
    with pytest.raises(InputError):
        poly_jacobian_fro2_closed_form(np.full((3, 2), np.nan), W, 2)
    with pytest.raises(InputError):
        poly_jacobian_wrt_S_fro2(np.ones((2, 3)), 2)
    with pytest.raises(InputError):
        poly_jacobian_wrt_AB_fro2(X, np.ones((3, 3)), 2)
    with pytest.raises(InputError):
        poly_attention_symbolic(0, 2, 2)


def test_symbolic_causal_attention_masks_to_zero():
    # the docstring's promise: masked entries (j > i when causal) are exactly 0, the visible ones c·S_ij^p
    from sapa.theory.polynomial import poly_attention_symbolic

    X, W, P = poly_attention_symbolic(3, 2, 2, causal=True)
    S = X * W * X.T
    for i in range(3):
        for j in range(3):
            assert P[i, j] == (0 if j > i else S[i, j] ** 2)
