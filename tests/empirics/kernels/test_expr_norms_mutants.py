"""Mutation-testing additions for `empirics/kernels/expr_norms.py`: input checks (empty, wrong rank, one token, the
number of heads), homogeneous degrees that are not positive integers, a row-normalised homogeneous φ at extreme
scales, batched Jacobian products, and the memory estimate against the traced peak in each regime.

Each test names the mutants of ``tools/mutation_sample.py`` (line, change) it kills (line numbers of the code as
it is now, after request_bytes was fixed: 430–434 there were 427–430, 556 was 552). References: 60-digit mpmath
sums from the chain rule, dense autograd Jacobians (torch), numpy allocations traced by tracemalloc."""

from __future__ import annotations

import math
import tracemalloc

import mpmath
import numpy as np
import pytest
import torch

from sapa.common.validate import InputError
from sapa.empirics.kernels.expr_norms import (
    LayerOperator,
    expr_norms,
    homogeneous_degree,
    layer_from_qk,
    layer_from_w,
    request_bytes,
)
from sapa.theory.activation_audit import parse_activation

mpmath.mp.dps = 60
F64 = torch.float64


def test_inputs_are_non_empty_arrays_of_their_rank_and_one_token_is_enough():
    """Kills expr_norms.py line 78 ``arr.ndim != ndim or 0 in arr.shape`` → ``and`` and ``0 in`` → ``1 in``.

    One token x (1 × 3) with φ = x: S = xWxᵀ is a number, so ‖φ‖_F = |S|, ‖∂φ/∂S‖_F = 1 and ‖∂φ/∂X‖_F = ‖(W + Wᵀ)xᵀ‖."""
    W = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [3.0, 0.0, 2.0]])
    act = parse_activation("x")
    for bad in (np.ones((0, 3)), np.ones(3), np.ones((1, 3, 1))):
        with pytest.raises(InputError, match="non-empty 2-D array"):
            expr_norms(bad, layer_from_w(W), act)
    x = np.array([[0.5, -1.0, 2.0]])
    r = expr_norms(x, layer_from_w(W), act)
    S = float((x @ W @ x.T)[0, 0])
    assert r.fro[0] == pytest.approx(abs(S), rel=1e-14) and r.jac_s_fro[0] == 1.0
    assert r.jac_fro[0] == pytest.approx(float(np.linalg.norm((W + W.T) @ x[0])), rel=1e-14)


@pytest.mark.parametrize("heads", [0, -2, 2.5, "2"])
def test_heads_must_be_a_positive_integer(heads):
    """Kills expr_norms.py line 101 ``not isinstance(heads, int) or heads < 1`` → ``and`` (0 and −2 are integers,
    2.5 and "2" are not: each alone must be refused)."""
    with pytest.raises(InputError, match="heads must be a positive integer"):
        layer_from_qk(np.ones((3, 4)), np.ones((3, 4)), heads=heads)
    assert layer_from_qk(np.ones((3, 4)), np.ones((3, 4)), heads=np.int64(2)).H == 2


@pytest.mark.parametrize("text", ["Abs(x)**(3/2)", "Abs(x)**(5/2)/N", "1/x", "sqrt(Abs(x))"])
def test_a_non_integer_or_negative_degree_is_not_homogeneous(text):
    """Kills expr_norms.py line 213 ``not (p integer and p ≥ 1) or φ(λx) ≠ λ^p φ(x)`` → ``and``: for these φ(λx) is
    exactly λ^p φ(x) with p = 3/2, 5/2, −1, 1/2 (by hand), which the scaled path (integer p ≥ 1) cannot use."""
    assert homogeneous_degree(parse_activation(text)) is None


def _mp_row_norms(X, W, f, fp):
    """log10 of ‖P‖_F, ‖∂P/∂S‖_F, ‖∂P/∂X‖_F for P_ik = f(S_ik)/Σ_l f(S_il), S = XWXᵀ, every entry in mpmath."""
    N, D = X.shape
    Xm, Wm = mpmath.matrix(X.tolist()), mpmath.matrix(W.tolist())
    S = Xm * Wm * Xm.T
    WX, WtX = Wm * Xm.T, Wm.T * Xm.T
    fro2 = js2 = jx2 = mpmath.mpf(0)
    for i in range(N):
        s = mpmath.fsum(f(S[i, l]) for l in range(N))
        P = [f(S[i, k]) / s for k in range(N)]
        g = [fp(S[i, l]) / s for l in range(N)]
        fro2 += mpmath.fsum(p * p for p in P)
        dP = [[(g[k] if k == l else 0) - P[k] * g[l] for l in range(N)] for k in range(N)]  # ∂P_ik/∂S_il
        js2 += mpmath.fsum(v * v for row in dP for v in row)
        for k in range(N):
            for a in range(N):
                for c in range(D):
                    v = mpmath.fsum(dP[k][l] * ((WX[c, l] if i == a else 0) + (WtX[c, i] if l == a else 0))
                                    for l in range(N))
                    jx2 += v * v
    return [float(mpmath.log10(v) / 2) for v in (fro2, js2, jx2)]


@pytest.mark.parametrize("scale", [1e-100, 1.0, 1e30])
def test_a_row_normalised_homogeneous_phi_keeps_its_norms_at_any_scale(scale):
    """Kills expr_norms.py line 230 ``eP, eg = (0, −s) if row`` → ``(0, s)``: row-normalised, P does not scale and
    φ'(S)/Σφ scales by 2^{−s}. φ = x² (degree 2), X ~ 10⁻¹⁰⁰ … 10³⁰, against 60-digit mpmath."""
    rng = np.random.default_rng(31)
    X = rng.standard_normal((4, 3)) * scale
    W = rng.standard_normal((3, 3))
    act = parse_activation("x**2", "row")
    assert homogeneous_degree(act) == 2
    want = _mp_row_norms(X, W, lambda s: s * s, lambda s: 2 * s)
    r = expr_norms(X, layer_from_w(W), act)
    got = [r.log10_fro[0], r.log10_jac_s_fro[0], r.log10_jac_fro[0]]
    for g, w in zip(got, want):
        assert g == pytest.approx(w, abs=1e-12 * max(1.0, abs(w)))


def test_batched_products_are_the_dense_jacobian_applied_to_each_direction():
    """Kills expr_norms.py line 556 (``rmatvec``'s ``U.shape[:-2]`` → ``[:-3]``: a batch of cotangents collapsed
    onto one): J E_b and Jᵀ U_b for a batch of three, with values (softmax heads) and for one head's attention
    matrix, against the dense autograd Jacobian of the same map written in torch."""
    rng = np.random.default_rng(32)
    N, D, H, d, dv, Do = 4, 3, 2, 2, 2, 3
    Wq, Wk, Wv, Wo = (rng.standard_normal(s) * 0.7 for s in ((D, H * d), (D, H * d), (D, H * dv), (H * dv, Do)))
    layer = layer_from_qk(Wq, Wk, Wv, Wo, heads=H)
    act = parse_activation("exp(x/2)", "row")
    X = rng.standard_normal((N, D))

    def head(x, h):
        q, k = torch.from_numpy(layer.Wq[h]), torch.from_numpy(layer.Wk[h])
        return torch.softmax((x @ q) @ (x @ k).T / 2, dim=1)

    def f_layer(x):
        return sum(head(x, h) @ x @ torch.from_numpy(layer.Wv[h]) @ torch.from_numpy(layer.Wo[h]) for h in range(H))

    for op, f, out in ((LayerOperator(X, layer, act), f_layer, (N, Do)),
                       (LayerOperator(X, layer, act, head=1), lambda x: head(x, 1), (N, N))):
        J = torch.autograd.functional.jacobian(f, torch.from_numpy(X)).reshape(math.prod(out), N * D).numpy()
        E = rng.standard_normal((3, N, D))
        U = rng.standard_normal((3, *out))
        JE, JtU = op.matvec(E), op.rmatvec(U)
        assert JE.shape == (3, *out) and JtU.shape == (3, N, D)
        for b in range(3):
            np.testing.assert_allclose(JE[b].ravel(), J @ E[b].ravel(), rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(JtU[b].ravel(), J.T @ U[b].ravel(), rtol=1e-12, atol=1e-13)


OVERHEAD = 256 * 2**10  # what the trace holds besides the arrays (sympy's and lambdify's objects, small arrays)


@pytest.mark.parametrize("N,D,H,d,dv,what", [
    (4, 10_000, 8, 2, 2, "(N, D): each head's y_k, z_i and one head's row-normalised Jacobian rows"),
    (8, 4, 1, 150, 150, "(N, d_v, d): the C_i of each head"),
    (4, 4, 8, 48, 48, "(H·d)²: the weight Gram matrices and Z W_Q, Z W_V"),
    (384, 4, 1, 2, 2, "(N, N): P, g and the norms' temporaries"),
], ids=["tokens-by-D", "C_i", "gram", "N-by-N"])
def test_the_memory_estimate_bounds_the_traced_peak_in_each_regime(N, D, H, d, dv, what):
    """Kills expr_norms.py line 430 ``H·N·(2d + 2D)`` → ``H·N/(2d + 2D)`` and the values' terms of lines 433–434
    (``+`` → ``−``, ``*`` → ``/``): in the regime where each term dominates, request_bytes is at least the peak tracemalloc sees while
    expr_norms runs (row-normalised φ with values: the largest), and at most four times it.

    These regimes found the estimate 3–6× below the peak (no Gram matrices, one head's (N, D) temporaries and the
    C_i being formed were not counted): a request under the 4 GiB limit could allocate several times that."""
    rng = np.random.default_rng(33)
    layer = layer_from_qk(*(rng.standard_normal(s) * 0.3 for s in ((D, H * d), (D, H * d), (D, H * dv), (H * dv, 3))),
                          heads=H)
    X = rng.standard_normal((N, D))
    act = parse_activation("exp(x/2)", "row")
    expr_norms(X[:2], layer, act)  # the expression's functions are built once, outside the trace
    tracemalloc.start()
    try:
        expr_norms(X, layer, act)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    est = request_bytes(N, D, layer)
    assert peak <= est + OVERHEAD, (what, peak, est)
    assert est <= 4 * peak, (what, peak, est)


@pytest.mark.parametrize("values", [False, True])
def test_the_estimate_is_the_documented_inventory_of_arrays(values):
    """Kills every coefficient mutant of request_bytes (lines 430–434) that the traced peaks above cannot resolve
    (a term smaller than another's slack, or a more conservative coefficient): the estimate is 8 bytes times the
    arrays its docstring lists, summed here from that list. Shapes are distinct primes, so every term shows.

    The tests above check that this inventory bounds what numpy actually allocates; this one pins the inventory."""
    N, D, H, d, dv, Do = 5, 7, 3, 11, 13, 17
    rng = np.random.default_rng(34)
    Wq, Wk = rng.standard_normal((D, H * d)), rng.standard_normal((D, H * d))
    layer = layer_from_qk(Wq, Wk, rng.standard_normal((D, H * dv)), rng.standard_normal((H * dv, Do)), heads=H) \
        if values else layer_from_qk(Wq, Wk, heads=H)
    arrays = {
        "P and g of every head (N, N)": 2 * H * N * N,
        "one head's norm temporaries, 12 (N, N)": 12 * N * N,
        "a_i, b_k (N, d) and y_k, z_i (N, D) of every head": H * (2 * N * d + 2 * N * D),
        "one head's row-normalised Jacobian rows, 14 (N, D)": 14 * N * D,
    }
    if values:
        arrays.update({
            "C_i (N, d_v, d) of every head and 3 while one is formed": (H + 3) * N * dv * d,
            "v, c, ω_ii (N, d_v) of every head": 3 * H * N * dv,
            "Z W_Q, Z W_V (N, H·d), (N, H·d_v) of every head": H * N * (H * d + H * dv),
            "a head pair's temporaries, 8 (N, N)": 8 * N * N,
            "W_O W_Oᵀ, W_VᵀW_V (H·d_v)², W_QᵀW_Q (H·d)², W_VᵀW_Q (H·d_v × H·d)": 2 * (H * dv) ** 2 + (H * d) ** 2
            + (H * dv) * (H * d),
            "the stacked W_Q, W_V (D, H·d), (D, H·d_v) and W_O (H·d_v, D_out)": D * H * d + D * H * dv + H * dv * Do,
        })
    assert request_bytes(N, D, layer) == 8 * sum(arrays.values())


def test_too_many_heads_name_both_limits():
    """Kills expr_norms.py line 442 ``MAX_HEADS_WITH_VALUES ** 2`` → ``** 3`` in the refusal: 257 heads with values
    are refused, naming 257² = 66,049 pairs and the limit, 256 heads = 65,536 pairs."""
    rng = np.random.default_rng(35)
    H = 257
    lay = layer_from_qk(*(rng.standard_normal(s) for s in ((2, H), (2, H), (2, H), (H, 2))), heads=H)
    with pytest.raises(InputError) as ei:
        expr_norms(rng.standard_normal((3, 2)), lay, parse_activation("x"))
    assert str(ei.value) == ("257 heads with values: the layer's Jacobian norm sums over 66,049 head pairs "
                             "(at most 256 heads, 65,536 pairs)")
