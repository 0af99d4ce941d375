"""Tests for `empirics/layer_lipschitz.py`: real and random layers as `expr_norms` layers, brackets against autograd."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sapa.empirics.realmodel import real_model as rm
from sapa.empirics.realmodel.layer_lipschitz import LayerLipschitzResult, measure_layer, minilm_layer, run_layer_lipschitz, vit_layer

needs_model = pytest.mark.skipif(not rm.available(), reason="optional extra 'real' not installed")


@needs_model
def test_minilm_layer_is_the_models_attention_block():
    # F(X) + biases of V and O = the model's attention output before the residual and LayerNorm
    w = rm.load_weights()
    ids = rm.encode(rm.load_tokenizer(), "the quick brown fox jumps over the lazy dog")
    hs = rm.forward(w, ids, dtype=torch.float64)
    X = hs[2].numpy()
    lay = minilm_layer(w, 2)
    pre = "encoder.layer.2."
    t = lambda n: w.t(pre + n).double()  # noqa: E731
    N, H, d = X.shape[0], 12, 32
    Xt = torch.from_numpy(X)
    q = torch.nn.functional.linear(Xt, t("attention.self.query.weight"), t("attention.self.query.bias"))
    k = torch.nn.functional.linear(Xt, t("attention.self.key.weight"), t("attention.self.key.bias"))
    v = torch.nn.functional.linear(Xt, t("attention.self.value.weight"), t("attention.self.value.bias"))
    q, k, v = (z.view(N, H, d).transpose(0, 1) for z in (q, k, v))
    ctx = (torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), -1) @ v).transpose(0, 1).reshape(N, H * d)
    ref = torch.nn.functional.linear(ctx, t("attention.output.dense.weight"), t("attention.output.dense.bias"))
    out = 0
    for h in range(H):
        A = X @ lay.Wq[h] + lay.bq[h]
        B = X @ lay.Wk[h] + lay.bk[h]
        S = A @ B.T
        P = np.exp(S - S.max(1, keepdims=True))
        out = out + (P / P.sum(1, keepdims=True)) @ X @ lay.Wv[h] @ lay.Wo[h]
    bias = (t("attention.self.value.bias") @ t("attention.output.dense.weight").T + t("attention.output.dense.bias"))
    np.testing.assert_allclose(out + bias.numpy(), ref.numpy(), rtol=1e-9, atol=1e-9)


def _layer_in_torch(lay, heads: int):
    """F(X) = Σ_h softmax(X W_Q^h (X W_K^h)ᵀ) X W_V^h W_O^h written directly in torch: autograd's reference."""
    def f(x):
        out = 0
        for h in range(heads):
            S = (x @ torch.from_numpy(lay.Wq[h])) @ (x @ torch.from_numpy(lay.Wk[h])).T
            out = out + torch.softmax(S, 1) @ x @ torch.from_numpy(lay.Wv[h]) @ torch.from_numpy(lay.Wo[h])
        return out
    return f


def test_bracket_of_a_small_random_layer_contains_sigma_one():
    lay = vit_layer(0, D=6, H=2, d=3)
    X = np.random.default_rng(1).standard_normal((4, 6))
    r = measure_layer(X, lay, max_steps=24, seed=0)
    J = torch.autograd.functional.jacobian(_layer_in_torch(lay, 2), torch.from_numpy(X)).reshape(24, 24)
    s = float(torch.linalg.svdvals(J)[0])
    assert r["sigma_lower"] <= s <= r["sigma_upper"] and r["converged"]
    assert r["jac_fro"] == pytest.approx(float(torch.linalg.norm(J)), rel=1e-12)
    assert s <= r["sigma_upper_prob"] <= r["sigma_upper"]  # converged: the certified bracket is the tighter


def test_the_random_start_bound_contains_sigma_one_where_the_bracket_is_wide():
    """A short Lanczos run on a 96-dimensional layer: the deterministic upper bound stays near ‖J‖_F, the random-start
    bound (each fails with probability ≤ KW_DELTA) is far tighter, and σ₁ from autograd's dense Jacobian lies in
    [σ_lower, σ_upper_prob]; the stored value is min(certified, estimate/√(1 − ε))."""
    from sapa.empirics.kernels.lanczos_random_start import upper_bound
    from sapa.empirics.realmodel.layer_lipschitz import KW_DELTA

    lay = vit_layer(3, D=8, H=2, d=4)
    X = 2.0 * np.random.default_rng(5).standard_normal((12, 8))
    r = measure_layer(X, lay, max_steps=12, seed=0)
    J = torch.autograd.functional.jacobian(_layer_in_torch(lay, 2), torch.from_numpy(X)).reshape(96, 96)
    s = float(torch.linalg.svdvals(J)[0])
    assert r["sigma_lower"] <= s <= r["sigma_upper_prob"] < r["sigma_upper"]
    assert r["sigma_upper_prob"] == min(r["sigma_upper"], upper_bound(r["sigma_estimate"], r["steps"], 96, KW_DELTA))
    assert r["kw_delta"] == KW_DELTA


def test_result_round_trips_through_stored_figure_data(tmp_path):
    from sapa.common import figdata

    res = run_layer_lipschitz((8,), (4,), minilm_layers=(0,), max_steps=6)
    figdata.write(tmp_path / "data" / "real.json", res.to_json(), "stem")
    back = LayerLipschitzResult.from_json(figdata.read(tmp_path / "data" / "real.json")[0])
    assert back.rows == res.rows and "not computed" in back.published_bound
