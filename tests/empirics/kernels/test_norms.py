"""Tests for `empirics/kernels/norms.py`: exact O(N²D) norm kernels against autograd (arXiv 2410.18613).

Reference: ``torch.func.jacrev`` of vec φ(S) in float64 (``jacobian_autograd``), and for
sharply peaked softmax rows, where autograd itself cancels, an mpmath evaluation of the
Jacobian entry by entry at 50 digits.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sapa.empirics.kernels.norms import (
    NormOverflowError,
    NormResult,
    attention_norms,
    attention_norms_batched,
    default_device,
    jacobian_autograd,
    kernel_family,
    kernel_label,
    linear_fro_gram,
    paper_jacobian_autograd,
    paper_model_norms,
    paper_model_norms_batched,
)
from sapa.theory.families import FAMILIES, power, softmax
from sapa.common.validate import InputError
from tests.tolerances import RTOL as TOLERANCES

RTOL = TOLERANCES["float64"]  # float64 kernel vs float64 autograd at N ≤ 8, D ≤ 4 (observed ≤ 2e-12)
F32_RTOL = TOLERANCES["float32"]  # float32 compute (sums in float64) vs float64 at N = 64, D = 16

ACTIVATIONS = [softmax(t) for t in (0.5, 1.0, 2.0)] + [
    power(p, 0.7) for p in (1, 2, 3, 4, 5)
]
SIZES = [(N, D) for N in (1, 2, 5, 8) for D in (1, 3, 4)]
BATCHED_KEYS = {"fro", "jac_fro", "jac_s_fro", "max_abs", "row_fro", "log10_fro", "log10_jac_fro", "log10_jac_s_fro"}


def _inputs(N: int, D: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X (N, D) ~ N(0, 1), W (D, D) ~ N(0, 1/D), row_scale (N,) in [0.2, 2]."""
    rng = np.random.default_rng(seed + 1000 * N + D)
    return rng.standard_normal((N, D)), rng.standard_normal((D, D)) / math.sqrt(D), rng.uniform(0.2, 2.0, N)


def _phi_direct(X: np.ndarray, W: np.ndarray, act, mask: str, rs) -> np.ndarray:
    """φ(X W Xᵀ) (N, N) built densely in numpy: the forward reference."""
    S = X @ W @ X.T  # (N, D) @ (D, D) @ (D, N)
    N = S.shape[0]
    vis = np.tril(np.ones((N, N), bool)) if mask == "causal" else np.ones((N, N), bool)
    if act.kernel == "softmax":
        t = np.where(vis, act.coef * S, -np.inf)
        e = np.exp(t - t.max(1, keepdims=True))
        P = e / e.sum(1, keepdims=True)
    else:
        P = np.where(vis, act.coef * S**act.p, 0.0)
    return P if rs is None else P * np.asarray(rs)[:, None]


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b) if b != 0 else abs(a)


# ----------------------------------------------------------------------------- vs autograd


@pytest.mark.parametrize("act", ACTIVATIONS, ids=kernel_label)
@pytest.mark.parametrize("mask", ["none", "causal"])
@pytest.mark.parametrize("scaled", [False, True], ids=["c=1", "row_scale"])
def test_kernel_matches_autograd(act, mask, scaled):
    for N, D in SIZES:
        X, W, rs = _inputs(N, D)
        rs = rs if scaled else None
        ref = float(jacobian_autograd(X, W, act, mask, rs).norm())
        got = attention_norms(X, W, act, mask, rs, with_rows=True)
        P = _phi_direct(X, W, act, mask, rs)
        assert _rel(got.jac_fro, ref) <= RTOL, (N, D, got.jac_fro, ref)
        assert _rel(got.fro, float(np.linalg.norm(P))) <= RTOL, (N, D)
        assert _rel(got.max_abs, float(np.abs(P).max())) <= RTOL, (N, D)
        np.testing.assert_allclose(got.row_fro, np.linalg.norm(P, axis=1), rtol=RTOL)


@pytest.mark.parametrize("act", ACTIVATIONS, ids=kernel_label)
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_paper_model_matches_autograd(act, mask):
    for N, D in SIZES:
        rng = np.random.default_rng(7 * N + D)
        A, B, rs = rng.standard_normal((N, D)), rng.standard_normal((N, D)), rng.uniform(0.5, 2.0, N)
        for r in (None, rs):
            ref = float(paper_jacobian_autograd(A, B, act, mask, r).norm())
            got = paper_model_norms(A, B, act, mask, r)
            assert _rel(got.jac_fro, ref) <= RTOL, (N, D, r is None)


def test_paper_model_poly_closed_form():
    """c² p² Σ_ij S_ij^{2p−2} (‖b_j‖² + ‖a_i‖²), the formula in the docstring, summed densely."""
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((6, 4)), rng.standard_normal((6, 4))
    S = A @ B.T  # (N, d) @ (d, N)
    for p, c in [(1, 1.0), (3, 0.25)]:
        expect = c * c * p * p * np.sum(S ** (2 * p - 2) * ((B**2).sum(1)[None, :] + (A**2).sum(1)[:, None]))
        assert _rel(paper_model_norms(A, B, power(p, c)).jac_fro ** 2, expect) <= 1e-12


def test_poly_closed_form_shared_x():
    """Brief's formula c²p²[Σ_{i≠j} S^{2p−2}(‖Wx_j‖² + ‖Wᵀx_i‖²) + Σ_i S_ii^{2p−2}‖(W+Wᵀ)x_i‖²]."""
    X, W, _ = _inputs(7, 3)
    S, Y, Z = X @ W @ X.T, X @ W.T, X @ W
    p, c = 3, 0.5
    R = S ** (2 * p - 2)
    off = R * ((Y**2).sum(1)[None, :] + (Z**2).sum(1)[:, None])
    expect = c * c * p * p * (off.sum() - np.trace(off) + np.sum(np.diag(R) * ((Y + Z) ** 2).sum(1)))
    assert _rel(attention_norms(X, W, power(p, c)).jac_fro ** 2, expect) <= 1e-12


def test_softmax_one_token_and_causal_first_row_have_zero_jacobian():
    X, W, _ = _inputs(1, 3)
    r = attention_norms(X, W, softmax(2.0))
    assert (r.fro, r.jac_fro, r.max_abs) == (1.0, 0.0, 1.0)
    X, W, _ = _inputs(2, 3)
    rows = attention_norms(X[:1], W, softmax(), "causal")
    assert rows.jac_fro == 0.0


def _mp_softmax_jac_fro(X: np.ndarray, W: np.ndarray, tau: float) -> float:
    """‖∂softmax(τ X W Xᵀ)/∂X‖_F entry by entry at 50 digits (mpmath)."""
    with mp.workdps(50):
        Xm, Wm = mp.matrix(X.tolist()), mp.matrix(W.tolist())
        S, Y, Z = Xm * Wm * Xm.T, Xm * Wm.T, Xm * Wm
        N, D = X.shape
        total = mp.mpf(0)
        for i in range(N):
            m = max(S[i, j] for j in range(N))
            e = [mp.exp(tau * (S[i, j] - m)) for j in range(N)]
            P = [v / sum(e) for v in e]
            for j in range(N):
                for k in range(N):
                    for a in range(D):
                        # ∂P_ij/∂X_ka = τ Σ_l J_jl ∂S_il/∂X_ka, ∂S_il/∂x_k = δ_ik y_l + δ_lk z_i
                        dS = [(Y[l, a] if k == i else 0) + (Z[i, a] if k == l else 0) for l in range(N)]
                        v = sum(((P[j] if j == l else 0) - P[j] * P[l]) * dS[l] for l in range(N))
                        total += (tau * v) ** 2
        return float(mp.sqrt(total))


@pytest.mark.parametrize("tau", [1.0, 30.0, 100.0, 300.0])
def test_softmax_keeps_relative_accuracy_on_peaked_rows(tau):
    """At τ = 100 the Jacobian is ~1e-31 and autograd is off by ~10%; the kernel stays at 1e-12."""
    rng = np.random.default_rng(1)
    X, W = rng.standard_normal((5, 3)), rng.standard_normal((3, 3))
    ref = _mp_softmax_jac_fro(X, W, tau)
    assert _rel(attention_norms(X, W, softmax(tau)).jac_fro, ref) <= 1e-12


# ----------------------------------------------------------------------------- routes agree


@pytest.mark.parametrize("act", [softmax(1.5), power(3, 0.5)], ids=kernel_label)
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_chunked_equals_unchunked(act, mask):
    X, W, rs = _inputs(11, 4)
    full = attention_norms(X, W, act, mask, rs, with_rows=True)
    for chunk in (1, 3, 100):
        part = attention_norms(X, W, act, mask, rs, chunk=chunk, with_rows=True)
        assert _rel(part.jac_fro, full.jac_fro) <= 1e-13 and _rel(part.fro, full.fro) <= 1e-13
        # max|φ(S)| is order-free, but S's entries come from differently blocked matmuls: equal only to round-off.
        assert _rel(part.max_abs, full.max_abs) <= 1e-13
        np.testing.assert_allclose(part.row_fro, full.row_fro, rtol=1e-13)


@pytest.mark.parametrize("act", [softmax(0.8), power(2, 1.0)], ids=kernel_label)
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_batched_equals_unbatched(act, mask):
    rng = np.random.default_rng(5)
    T, N, D = 4, 9, 3
    X, Ws, rs = rng.standard_normal((T, N, D)), rng.standard_normal((T, D, D)) / 2, rng.uniform(0.5, 2, (T, N))
    for W, r in [(Ws, None), (Ws[0], None), (Ws, rs), (Ws, rs[0])]:
        out = attention_norms_batched(X, W, act, mask, r, chunk=4, with_rows=True)
        assert set(out) == BATCHED_KEYS and out["row_fro"].shape == (T, N)
        for t in range(T):
            Wt = W if W.ndim == 2 else W[t]
            rt = None if r is None else (r if r.ndim == 1 else r[t])
            one = attention_norms(X[t], Wt, act, mask, rt, with_rows=True)
            assert _rel(float(out["jac_fro"][t]), one.jac_fro) <= 1e-13
            assert _rel(float(out["fro"][t]), one.fro) <= 1e-13
            assert _rel(float(out["jac_s_fro"][t]), one.jac_s_fro) <= 1e-13
            assert _rel(float(out["max_abs"][t]), one.max_abs) <= 1e-13
            np.testing.assert_allclose(out["row_fro"][t].numpy(), one.row_fro, rtol=1e-13)


@pytest.mark.parametrize("act", [softmax(0.8), power(3, 1.0)], ids=kernel_label)
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_paper_model_batched_equals_one_trial_at_a_time(act, mask, monkeypatch):
    """The sweep's paper-model cells run batched: each trial as :func:`paper_model_norms` gives it alone (its own
    powers of two even when the trials' scales differ by 2^±40), whatever the trial grouping."""
    import sapa.empirics.kernels.norms as norms

    rng = np.random.default_rng(9)
    T, N, d = 5, 7, 3
    scale = 2.0 ** rng.integers(-40, 41, (T, 1, 1))  # trials far apart in size: per-trial scaling must hold
    A, B, r = rng.standard_normal((T, N, d)) * scale, rng.standard_normal((T, N, d)), rng.uniform(0.5, 2, N)
    if act.kernel == "poly":
        A = A / scale  # x³ of 2^40-sized logits overflows float64 (refused, tested elsewhere)
    for rs in (None, r):
        out = paper_model_norms_batched(A, B, act, mask, rs, chunk=3, with_rows=True)
        assert set(out) == BATCHED_KEYS and out["row_fro"].shape == (T, N)
        for t in range(T):
            one = paper_model_norms(A[t], B[t], act, mask, rs, with_rows=True)
            for q in ("fro", "jac_fro", "jac_s_fro", "max_abs"):
                assert _rel(float(out[q][t]), getattr(one, q)) <= 1e-13, (q, t)
            np.testing.assert_allclose(out["row_fro"][t].numpy(), one.row_fro, rtol=1e-13)
    whole = paper_model_norms_batched(A, B, act, mask)
    monkeypatch.setattr(norms, "CHUNK_BYTES", 8 * N * 2)  # two trials per group
    grouped = paper_model_norms_batched(A, B, act, mask)
    torch.testing.assert_close(grouped["jac_fro"], whole["jac_fro"], rtol=1e-13, atol=0)
    with pytest.raises(InputError):
        paper_model_norms_batched(A, B[:, :-1], act)


def test_batched_trial_groups(monkeypatch):
    """Many trials are processed in groups; the result does not depend on the grouping."""
    import sapa.empirics.kernels.norms as norms

    rng = np.random.default_rng(8)
    X, W = torch.tensor(rng.standard_normal((5, 6, 2))), torch.tensor(rng.standard_normal((2, 2)))
    act = softmax()
    whole = attention_norms_batched(X, W, act)
    monkeypatch.setattr(norms, "CHUNK_BYTES", 8 * 6 * 2)  # two trials of one row each per group
    grouped = attention_norms_batched(X, W, act)
    torch.testing.assert_close(grouped["jac_fro"], whole["jac_fro"], rtol=1e-13, atol=0)
    assert "row_fro" not in whole


@pytest.mark.parametrize("c", [1.0, 0.125])
def test_linear_gram_route_equals_direct(c):
    for N, D in [(1, 1), (6, 3), (40, 7)]:
        X, W, _ = _inputs(N, D)
        gram = linear_fro_gram(X, W, c)
        assert _rel(gram, attention_norms(X, W, power(1, c)).fro) <= 1e-12
        assert _rel(gram, c * float(np.linalg.norm(X @ W @ X.T))) <= 1e-12


def test_numpy_and_torch_inputs_agree():
    X, W, rs = _inputs(6, 3)
    act = power(2, 0.5)
    a = attention_norms(X, W, act, "causal", rs)
    b = attention_norms(torch.tensor(X), torch.tensor(W), act, "causal", torch.tensor(rs), device="cpu")
    assert _rel(a.jac_fro, b.jac_fro) <= 1e-15 and isinstance(a, NormResult) and a.row_fro is None


# ----------------------------------------------------------------------------- float32, overflow


@pytest.mark.parametrize("act", [softmax(1.0), power(3, 1 / 8)], ids=kernel_label)
def test_float32_is_labelled_and_close(act):
    rng = np.random.default_rng(2)
    X, W = rng.standard_normal((64, 16)), rng.standard_normal((16, 16)) / 16
    r64 = attention_norms(X, W, act)
    r32 = attention_norms(X, W, act, dtype=torch.float32)
    assert (r64.dtype, r32.dtype) == ("float64", "float32")
    assert _rel(r32.jac_fro, r64.jac_fro) <= F32_RTOL and _rel(r32.fro, r64.fro) <= F32_RTOL
    assert r32.jac_fro != r64.jac_fro  # really computed in float32


def test_poly_overflow_names_p_n_d_and_dtype():
    X = np.full((4, 2), 1e5)  # S = 2e10: S^5 = 3.2e51 overflows float32, but rows are scaled before powers
    r32 = attention_norms(X, np.eye(2), power(5), dtype=torch.float32)
    ok = attention_norms(X, np.eye(2), power(5))
    assert math.isfinite(ok.jac_fro) and _rel(r32.fro, ok.fro) <= F32_RTOL and _rel(r32.jac_fro, ok.jac_fro) <= F32_RTOL
    with pytest.raises(NormOverflowError, match=r"x\^4 .*float64 at N=3, D=2") as info:  # the true norm is 1e321
        attention_norms(np.full((3, 2), 1e40), np.eye(2), power(4))
    assert isinstance(info.value, InputError) and isinstance(info.value, OverflowError)


def test_softmax_is_stable_for_huge_scores():
    X = np.array([[30.0, 0.0], [0.0, 30.0], [20.0, 20.0]])
    r = attention_norms(X, np.eye(2), softmax(10.0))
    assert math.isfinite(r.jac_fro) and abs(r.fro - math.sqrt(3)) < 1e-12
    X = np.full((3, 2), 1e20)  # S = 2e40 overflows float32; logits are formed as τ(S_ij − max_j S_ij) from scaled X
    r32 = attention_norms(X, np.eye(2), softmax(), dtype=torch.float32)
    r64 = attention_norms(X, np.eye(2), softmax())
    assert _rel(r32.jac_fro, r64.jac_fro) <= F32_RTOL and abs(r64.fro - 1.0) < 1e-15  # tied rows: uniform P


# ----------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(X=np.ones(3)), "X must have 2 dimensions"),
        (dict(X=np.ones((0, 2))), "X is empty"),
        (dict(W=np.ones((2, 3))), r"W has shape \(2, 3\); axis 0 must be 3"),
        (dict(W=np.ones((3, 3, 3))), "W must have 2 dimensions"),
        (dict(X=np.array([[1.0, np.nan, 0.0]])), "X contains NaN or inf"),
        (dict(W=torch.full((3, 3), math.inf)), "W contains NaN or inf"),
        (dict(X=[["a", "b", "c"]]), "X must be a numeric array"),
        (dict(mask="diagonal"), "mask must be one of none, causal"),
        (dict(row_scale=np.ones(5)), "row_scale has shape"),
        (dict(row_scale=[1.0, np.nan]), "row_scale contains NaN"),
        (dict(chunk=0), "chunk must be a positive integer"),
        (dict(dtype=torch.float16), "dtype must be torch.float64 or torch.float32"),
        (dict(device="abacus"), "device must be a torch device"),
        (dict(activation="softmax"), "activation must be a family"),
        (dict(activation=FAMILIES["relu_N"]), "no exact kernel"),
        (dict(activation=FAMILIES["x3_sqrti"], row_scale=np.ones(2)), "has its own row scale"),
    ],
)
def test_bad_inputs_raise_input_error(kwargs, message):
    args = dict(X=np.ones((2, 3)), W=np.eye(3), activation=softmax())
    args.update(kwargs)
    X, W, act = args.pop("X"), args.pop("W"), args.pop("activation")
    with pytest.raises(InputError, match=message):
        attention_norms(X, W, act, **args)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(kind="relu"), "activation kind must be one of softmax, poly"),
        (dict(kind="poly", p=0), "p must be a positive integer"),
        (dict(kind="poly", p=2.5), "p must be a positive integer"),
        (dict(kind="poly", scale=0.0), "scale must be a positive finite number"),
        (dict(kind="poly", scale=-1.0), "scale must be a positive finite number"),
        (dict(kind="softmax", scale=math.nan), "scale must be a positive finite number"),
        (dict(kind="softmax", p=3), "p applies to poly activations only"),
    ],
)
def test_bad_activation_raises_input_error(kwargs, message):
    with pytest.raises(InputError, match=message):
        kernel_family(**kwargs)


def test_other_entry_points_validate():
    act = power(2)
    with pytest.raises(InputError, match=r"B has shape \(3, 2\); axis 0 must be 2"):
        paper_model_norms(np.ones((2, 2)), np.ones((3, 2)), act)
    with pytest.raises(InputError, match=r"W has shape \(3, 2, 2\); axis 0 must be 4"):
        attention_norms_batched(np.ones((4, 5, 2)), np.ones((3, 2, 2)), act)
    with pytest.raises(InputError, match="row_scale has shape"):
        attention_norms_batched(np.ones((4, 5, 2)), np.eye(2), act, row_scale=np.ones((3, 5)))
    with pytest.raises(InputError, match="c must be a positive finite number"):
        linear_fro_gram(np.ones((2, 2)), np.eye(2), c=-1.0)
    with pytest.raises(InputError, match="jacobian_autograd is for small sizes"):
        jacobian_autograd(np.ones((300, 64)), np.eye(64), act)
    assert kernel_family("poly", 2.0).p == 2 and kernel_label(power(3, 0.5)) == "0.5·x^3"
    assert default_device("cpu") == torch.device("cpu")


# ----------------------------------------------------------------------------- hypothesis

_values = st.floats(-1.5, 1.5, allow_nan=False, allow_infinity=False)  # subnormals and tiny values included


@st.composite
def _cases(draw):
    N, D = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    X = draw(hnp.arrays(np.float64, (N, D), elements=_values))
    W = draw(hnp.arrays(np.float64, (D, D), elements=_values))
    kind = draw(st.sampled_from(["softmax", "poly"]))
    act = kernel_family(kind, p=draw(st.integers(1, 5)) if kind == "poly" else 1, scale=draw(st.floats(0.1, 2.0)))
    mask = draw(st.sampled_from(["none", "causal"]))
    rs = draw(st.none() | hnp.arrays(np.float64, (N,), elements=st.floats(0.1, 3.0)))
    return X, W, act, mask, rs


@settings(max_examples=40, deadline=None)
@given(_cases())
def test_hypothesis_kernel_matches_reference(case):
    """Norms agree with the 50-digit mpmath reference to 1e-9 relative, or 1e-12 of the natural scale.

    Nothing is rounded to zero: values down to subnormals are drawn, and the reference (exact
    conversion of the float64 inputs, unbounded exponent) never underflows. The natural scale is
    (c·p·max|S|^{p−1} or τ)·(max‖y_j‖ + max‖z_i‖)·N·max c_i for the Jacobian and c·max|S|^p·N·max c_i
    for φ (computed in mpmath); it only matters where rounding of S = X W Xᵀ itself dominates
    (e.g. an exact 0 that float64 computes as 1e-17).
    """
    from tests.empirics.kernels.test_norms_range import mp_norms

    X, W, act, mask, rs = case
    got = attention_norms(X, W, act, mask, rs)
    ref = mp_norms(X, W, act, mask, rs)
    with mp.workdps(50):
        Xm, Wm = mp.matrix(X.tolist()), mp.matrix(W.tolist())
        S, Y, Z = Xm * Wm * Xm.T, Xm * Wm.T, Xm * Wm
        smax = max(abs(v) for v in S)
        rmax = mp.mpf(1) if rs is None else mp.mpf(float(rs.max()))
        lead = act.coef if act.kernel == "softmax" else act.coef * act.p * max(smax, 1) ** (act.p - 1)
        ynorm = max(mp.norm(Y[i, :]) for i in range(Y.rows)) + max(mp.norm(Z[i, :]) for i in range(Z.rows))
        jscale = lead * ynorm * len(X) * rmax
        fscale = (1 if act.kernel == "softmax" else act.coef * smax**act.p) * len(X) * rmax
        sub = 1e-320  # true values below float64's range round to 0 or a subnormal
        assert abs(got.jac_fro - ref["jac_fro"]) <= 1e-9 * ref["jac_fro"] + 1e-12 * jscale + sub, (got.jac_fro, ref["jac_fro"])
        assert abs(got.fro - ref["fro"]) <= 1e-12 * ref["fro"] + 1e-12 * fscale + sub, (got.fro, ref["fro"])
        if ref["fro"] > 0:  # log₁₀ stays exact where the value itself underflows
            assert abs(got.log10_fro - float(mp.log10(ref["fro"]))) <= 1e-9 + float(1e-12 * fscale / ref["fro"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu():
    X, W, rs = _inputs(50, 8)
    for act in ACTIVATIONS[:2] + ACTIVATIONS[-2:]:
        cpu = attention_norms(X, W, act, "causal", rs, device="cpu")
        gpu = attention_norms(X, W, act, "causal", rs, device="cuda")
        assert _rel(gpu.jac_fro, cpu.jac_fro) <= 1e-12 and _rel(gpu.fro, cpu.fro) <= 1e-12


@pytest.mark.parametrize("coef", [1.0, 2.0, 0.3])
@pytest.mark.parametrize("fid", ["x3_sqrti", "x3_sqrtN", "x_N"])
def test_a_bound_coefficient_counts_once_against_the_row_itself(fid, coef):
    """A family row with a run-time coefficient (with_coef) gives the kernels' ‖φ(S)‖_F = ‖Family.apply(S)‖_F, and
    the Jacobian autograd finds: coef multiplies φ once, per-row rules (c_i = coef/√i) included."""
    from sapa.theory.families import family

    f = family(fid).with_coef(coef)
    mask = f.mask
    rng = np.random.default_rng(11)
    X, W = rng.standard_normal((9, 5)), rng.standard_normal((5, 5)) / 3
    got = attention_norms(X, W, f, mask)
    direct = np.linalg.norm(f.apply(X @ W @ X.T, mask=mask))
    assert _rel(got.fro, float(direct)) <= RTOL
    assert _rel(got.jac_fro, float(jacobian_autograd(X, W, f, mask).norm())) <= RTOL
