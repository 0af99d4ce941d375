"""Tests for `empirics/training/tiny_models.py`: the model's scores are X W_Q W_Kᵀ Xᵀ/√d, its φ is the family's, and the
exact kernels of `empirics/kernels/norms.py` on the tracked head agree with torch.func.jacrev through the model's own code."""

from __future__ import annotations

import math

import pytest
import torch

from sapa.empirics.kernels.norms import attention_norms
from sapa.empirics.training.tiny_models import ARMS, TinyModelConfig, build_model, head_W, w_invariants
from sapa.common.validate import InputError
from sapa.theory.families import family

CFG = TinyModelConfig(width=8, layers=2, heads=2, init_std=0.3)  # a larger init: scores far from 0


def _model(task: str, arm: str, seed: int = 0, context: int = 6):
    g = torch.Generator().manual_seed(seed)
    return build_model(task, ARMS[arm], CFG, g, vocab=11, context=context).double()


def _inputs(task: str, B: int = 3, context: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(123)
    if task == "digits":
        return torch.rand(B, 8, 8, generator=g, dtype=torch.float64)
    return torch.randint(0, 11, (B, context), generator=g)


@pytest.mark.parametrize("task", ["digits", "text"])
def test_scores_are_x_wq_wkT_xT_over_sqrt_d(task):
    m = _model(task, "softmax")
    xs = m.attention_inputs(_inputs(task))  # per layer (B, N, D)
    for layer, (blk, X) in enumerate(zip(m.blocks, xs)):
        S = blk.attn.scores(X)  # (B, H, N, N)
        for h in range(blk.attn.H):
            d = blk.attn.d
            Wq = blk.attn.q.weight[h * d:(h + 1) * d].T  # (D, d)
            Wk = blk.attn.k.weight[h * d:(h + 1) * d].T
            want = X @ Wq @ Wk.T @ X.transpose(1, 2) / math.sqrt(d)
            torch.testing.assert_close(S[:, h], want, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(S[:, h], X @ head_W(blk.attn, h) @ X.transpose(1, 2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("arm", ["x_sqrtN", "x3_sqrtN", "x_16", "x3", "x3_sqrti"])
def test_polynomial_arms_are_c_S_to_the_p_and_zero_above_the_diagonal(arm):
    a = ARMS[arm]
    N = 7
    S = torch.randn(2, 3, N, N, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    P = a.apply(S, mask="causal")
    rows = torch.arange(1, N + 1, dtype=torch.float64)
    c = {"x_sqrtN": 1 / math.sqrt(N), "x3_sqrtN": 1 / math.sqrt(N), "x_16": 1 / 16, "x3": 1.0}.get(arm)
    scale = rows.rsqrt()[:, None] if arm == "x3_sqrti" else torch.full((N, 1), c, dtype=torch.float64)
    want = scale * S ** a.p
    tril = torch.ones(N, N, dtype=torch.bool).tril()
    torch.testing.assert_close(P[..., tril], want[..., tril], rtol=1e-15, atol=0)
    assert bool((P[..., ~tril] == 0).all())
    if arm != "x3_sqrti":  # no mask: every entry c·S^p
        torch.testing.assert_close(a.apply(S), want, rtol=1e-15, atol=0)


def test_softmax_arm_causal_rows_sum_to_one_and_see_the_past_only():
    S = torch.randn(4, 5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    P = ARMS["softmax"].apply(S, mask="causal")
    torch.testing.assert_close(P.sum(-1), torch.ones(4, 5, dtype=torch.float64))
    assert bool((P.triu(1) == 0).all())


@pytest.mark.parametrize("task,arm", [("digits", "softmax"), ("digits", "x3"), ("digits", "x_sqrtN"),
                                      ("text", "softmax"), ("text", "x3_sqrtN"), ("text", "x3_sqrti")])
def test_exact_kernel_norms_of_a_head_match_jacrev_through_the_model(task, arm):
    """‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F of head (1, 1) from sapa.empirics.kernels.norms equal those of jacrev through Attention."""
    m = _model(task, arm)
    X = m.attention_inputs(_inputs(task, B=1))[1][0]  # (N, D) layer 1, first sample
    attn = m.blocks[1].attn
    h = 1

    mask = "causal" if m.causal else "none"

    def phi(x: torch.Tensor) -> torch.Tensor:  # the model's own φ(S_h) as a function of its attention input
        return m.family.apply(attn.scores(x[None])[0, h], mask=mask)

    J = torch.func.jacrev(phi)(X).detach()  # (N, N, N, D)
    r = attention_norms(X, head_W(attn, h), m.family, mask)  # the kernels resolve the row's scale at N
    assert r.fro == pytest.approx(float(phi(X).detach().norm()), rel=1e-10)
    assert r.jac_fro == pytest.approx(float(J.norm()), rel=1e-9)


def test_init_is_seeded_and_leaves_the_global_generator_alone():
    before = torch.get_rng_state()
    a = build_model("digits", ARMS["softmax"], CFG, torch.Generator().manual_seed(5))
    b = build_model("digits", ARMS["x3"], CFG, torch.Generator().manual_seed(5))
    assert torch.equal(torch.get_rng_state(), before)
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):  # same weights for every arm
        assert na == nb and torch.equal(pa, pb)
    assert all(bool((blk.ln1.weight == 1).all()) for blk in a.blocks)


def test_w_invariants():
    W = torch.tensor([[1.0, 2.0], [0.0, 3.0]], dtype=torch.float64)
    inv = w_invariants(W)
    assert inv["w_trace"] == 4.0
    assert inv["w_fro"] == pytest.approx(math.sqrt(14))
    assert inv["w_sym_fro"] ** 2 + inv["w_anti_fro"] ** 2 == pytest.approx(14)
    assert inv["w_anti_fro"] == pytest.approx(math.sqrt(2))
    assert inv["w_spec"] == pytest.approx(float(torch.linalg.svdvals(W)[0]))


def test_bad_arms():
    with pytest.raises(InputError, match="no softmax or c·x\\^p family"):
        build_model("digits", family("relu_N"), CFG, torch.Generator())  # no exact kernel
    with pytest.raises(InputError):
        build_model("digits", ARMS["x3_sqrti"], CFG, torch.Generator())
    with pytest.raises(InputError):
        TinyModelConfig(width=9, heads=2)


@pytest.mark.parametrize("width, heads, mlp_ratio, B, N", [(32, 1, 2, 4, 16), (16, 2, 4, 2, 64)])
def test_step_flops_counts_the_blocks_matmuls_forward_and_backward(width, heads, mlp_ratio, B, N):
    # torch's FlopCounterMode counts 2·m·n·k per matmul; the formula must equal its count over the blocks' matmuls
    from torch.utils.flop_counter import FlopCounterMode

    from sapa.empirics.training.tiny_models import Block, step_flops

    cfg = TinyModelConfig(width=width, layers=1, heads=heads, mlp_ratio=mlp_ratio)
    blk = Block(cfg, ARMS["x3_sqrtN"], causal=False).double()
    x = torch.randn(B, N, width, dtype=torch.float64, requires_grad=True)
    with FlopCounterMode(display=False) as count:
        blk(x).sum().backward()
    assert count.get_total_flops() == step_flops(cfg, B, N)
    assert step_flops(TinyModelConfig(width=width, layers=3, heads=heads, mlp_ratio=mlp_ratio), B, N) == 3 * step_flops(cfg, B, N)
