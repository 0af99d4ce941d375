"""An ensemble member trains exactly like the same model alone (nn.Module + torch.optim.AdamW), to float32 round-off."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sapa.common.validate import InputError
from sapa.empirics.training.ensemble import (AdamWState, EnsembleSpec, adamw_step, attention_inputs, build_member,
                               clip_per_member, ensemble_forward, expression_family, head_Ws, member_losses,
                               stack_members)
from sapa.empirics.training.tiny_models import TinyModelConfig, build_model, head_W
from sapa.theory.families import CONST, INV_SQRT_I, INV_SQRT_N, NONE, Family, family, power, softmax

CFG = TinyModelConfig(width=8, layers=2, heads=2)
VOCAB = 20
# The two computations sum the same products in different orders (batched vs single GEMMs), so
# they differ by float32 round-off that Adam's normalised steps carry forward: we ask for agreement
# to half of float32's digits, √eps, relative to the tensor's scale, after STEPS steps.
TOL = math.sqrt(np.finfo(np.float32).eps)
STEPS = 10


def _spec(task: str, N: int, family: Family) -> EnsembleSpec:
    return EnsembleSpec(task, N, CFG, family, vocab=VOCAB if task == "text" else 0)


def _data(task: str, N: int, E: int, steps: int, seed: int = 5):
    g = torch.Generator().manual_seed(seed)
    B = 4
    if task == "digits":
        return ([torch.rand(E, B, 8, 8, generator=g) for _ in range(steps)],
                [torch.randint(0, 10, (E, B), generator=g) for _ in range(steps)])
    return ([torch.randint(0, VOCAB, (E, B, N), generator=g) for _ in range(steps)],
            [torch.randint(0, VOCAB, (E, B, N), generator=g) for _ in range(steps)])


def _train_ensemble(spec, rowc, lrs, xs, ys, wd, seeds):
    prm = stack_members(spec, [torch.Generator().manual_seed(s) for s in seeds])
    st = AdamWState.zeros(prm)
    lr = torch.tensor(lrs)
    for x, y in zip(xs, ys):
        L = member_losses(ensemble_forward(prm, x, spec, rowc), y)
        grads = dict(zip(prm, torch.autograd.grad(L.sum(), list(prm.values()))))
        clip_per_member(grads, 1.0)
        adamw_step(prm, grads, st, lr, weight_decay=wd)
    return prm


def _train_alone(task, N, arm, lr, xs, ys, wd, seed):
    m = build_model(task, arm, CFG, torch.Generator().manual_seed(seed), vocab=VOCAB, context=N,
                    patch=8 // math.isqrt(N) if task == "digits" else 2)
    decay = [p for p in m.parameters() if p.ndim >= 2]
    keep = [p for p in m.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": keep, "weight_decay": 0.0}], lr=lr,
                            betas=(0.9, 0.95))
    for x, y in zip(xs, ys):
        out = m(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
    return dict(m.named_parameters())


def _assert_same(prm, e, alone):
    for k, p in alone.items():
        ref = p.detach()
        got = prm[k][e].detach()
        assert torch.isfinite(got).all()
        scale = float(ref.abs().max()) or 1.0
        assert float((got - ref).abs().max()) <= TOL * scale, k


CASES = [
    # task, N, family, per-member arms (the reference) and their row coefficients r_i
    ("digits", 16, power(1), [(INV_SQRT_N, 0.25), (CONST, 1 / 16), (CONST, 1.0)], 0.0),
    ("digits", 64, power(3), [(INV_SQRT_N, 0.125), (CONST, 1.0)], 0.05),
    ("digits", 16, softmax(), [None, None], 0.0),
    ("text", 12, power(3), [(INV_SQRT_I, None), (INV_SQRT_N, 1 / math.sqrt(12))], 0.0),
    ("text", 12, softmax(), [None, None], 0.05),
]


def _reference(p: int, scale: str, c: float | None) -> Family:
    """The one-at-a-time model's family: c·x^p (a constant), or the table's row x^p/√N, x^p/√i."""
    if scale == CONST:
        return power(p, c)
    return family(("x" if p == 1 else f"x{p}") + ("_sqrti" if scale == INV_SQRT_I else "_sqrtN"))


@pytest.mark.parametrize("task,N,family,arms,wd", CASES, ids=lambda v: str(v)[:12])
def test_each_member_equals_one_at_a_time_training(task, N, family, arms, wd):
    E = len(arms)
    seeds = [100 + e for e in range(E)]
    lrs = [1e-3 * 3 ** e for e in range(E)]
    xs, ys = _data(task, N, E, STEPS)
    if family.kernel == "softmax":
        rowc, ref_arms = None, [softmax()] * E
    else:
        rows, ref_arms = [], []
        for scale, c in arms:
            if scale == INV_SQRT_I:
                rows.append(torch.arange(1, N + 1, dtype=torch.float32).rsqrt())
            else:
                rows.append(torch.full((N,), c, dtype=torch.float32))
            ref_arms.append(_reference(family.p, scale, c))
        rowc = torch.stack(rows)
    prm = _train_ensemble(_spec(task, N, family), rowc, lrs, xs, ys, wd, seeds)
    for e in range(E):
        alone = _train_alone(task, N, ref_arms[e], lrs[e], [x[e] for x in xs], [y[e] for y in ys], wd, seeds[e])
        _assert_same(prm, e, alone)


def test_a_diverging_member_does_not_touch_the_others():
    """Member 1 (unscaled x³, huge lr) blows up; members 0 and 2 equal their training in a 2-member ensemble."""
    task, N, fam = "text", 12, power(3)
    xs, ys = _data(task, N, 3, STEPS)
    rowc = torch.tensor([[0.3] * N, [30.0] * N, [0.1] * N])
    spec = _spec(task, N, fam)
    prm = stack_members(spec, [torch.Generator().manual_seed(s) for s in (1, 2, 3)])
    st = AdamWState.zeros(prm)
    alive = torch.ones(3, dtype=torch.bool)
    lr = torch.tensor([1e-3, 10.0, 3e-3])
    for x, y in zip(xs, ys):
        L = member_losses(ensemble_forward(prm, x, spec, rowc), y)
        alive &= torch.isfinite(L)
        grads = dict(zip(prm, torch.autograd.grad(torch.where(alive, L, 0.0).sum(), list(prm.values()))))
        for g in grads.values():
            g.copy_(torch.where(alive.reshape(-1, *([1] * (g.ndim - 1))), g, 0.0))
        clip_per_member(grads, 1.0)
        adamw_step(prm, grads, st, lr * alive)
    assert alive.tolist() == [True, False, True], "member 1 was meant to blow up"
    pair = _train_ensemble(spec, rowc[[0, 2]], [1e-3, 3e-3], [x[[0, 2]] for x in xs], [y[[0, 2]] for y in ys], 0.0,
                           [1, 3])
    for k in prm:
        for e, e2 in ((0, 0), (2, 1)):
            ref = pair[k][e2].detach()
            assert torch.allclose(prm[k][e].detach(), ref, rtol=TOL, atol=TOL * float(ref.abs().max()))


def test_clip_per_member_is_clip_grad_norm_member_by_member():
    g = torch.Generator().manual_seed(0)
    grads = {"a": torch.randn(3, 4, 5, generator=g) * torch.tensor([0.1, 5.0, 50.0])[:, None, None],
             "b": torch.randn(3, 7, generator=g)}
    ref = {k: v.clone() for k, v in grads.items()}
    norms = clip_per_member(grads, 1.0)
    for e in range(3):
        ps = [torch.nn.Parameter(torch.zeros_like(ref[k][e])) for k in ref]
        for p, k in zip(ps, ref):
            p.grad = ref[k][e].clone()
        n = torch.nn.utils.clip_grad_norm_(ps, 1.0)
        assert float(norms[e]) == pytest.approx(float(n), rel=1e-6)
        for p, k in zip(ps, ref):
            assert torch.allclose(grads[k][e], p.grad, rtol=1e-6, atol=0)


def test_head_Ws_give_the_scores_of_the_module():
    """S_h = X W_h Xᵀ with X the captured attention input and W_h from head_Ws equals the module's own scores."""
    spec = _spec("text", 10, power(1))
    gens = [torch.Generator().manual_seed(s) for s in (7, 8)]
    prm = stack_members(spec, gens)
    x = torch.randint(0, VOCAB, (2, 3, 10), generator=torch.Generator().manual_seed(1))
    rowc = torch.ones(2, 10)
    Xs = attention_inputs(prm, x, spec, rowc)
    for e, s in enumerate((7, 8)):
        m = build_member(spec, torch.Generator().manual_seed(s))
        for layer, blk in enumerate(m.blocks):
            X = m.attention_inputs(x[e])[layer].double()  # (B, N, D)
            assert torch.allclose(Xs[layer][e].double(), X, rtol=1e-5, atol=1e-5)
            S_mod = blk.attn.scores(X.float()).double()  # (B, H, N, N)
            W = head_Ws(prm, layer, spec)[e]  # (H, D, D)
            for h in range(spec.model.heads):
                assert torch.allclose(W[h], head_W(blk.attn, h), rtol=1e-12, atol=0)
                assert torch.allclose(X @ W[h] @ X.transpose(-1, -2), S_mod[:, h], rtol=1e-4, atol=1e-6)


def test_bad_specs_are_refused():
    with pytest.raises(InputError):
        EnsembleSpec("digits", 32, CFG, power(1))  # 8×8 images give N ∈ {1, 4, 16, 64}
    with pytest.raises(InputError):
        EnsembleSpec("text", 8, CFG, power(1))  # no vocabulary
    with pytest.raises(InputError):
        expression_family("bad", "x +")  # an expression that does not parse
    with pytest.raises(InputError):
        EnsembleSpec("text", 8, CFG, Family("bad", "x +", "x +", NONE, "a test"), vocab=VOCAB)
    with pytest.raises(InputError):
        stack_members(_spec("digits", 16, power(1)), [])


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("causal", [False, True])
def test_masked_power_matches_autograd_of_the_formula(p, causal):
    """_MaskedPower's forward and hand-written backward equal autograd of r_i·S^p with masked_fill (float64)."""
    from sapa.empirics.training.ensemble import _phi

    g = torch.Generator().manual_seed(p + 10 * causal)
    E, B, H, N = 2, 3, 2, 5
    spec = EnsembleSpec("text" if causal else "digits", N if causal else 16, CFG, power(p), vocab=VOCAB)
    N = spec.N
    S = torch.randn(E, B, H, N, N, generator=g, dtype=torch.float64, requires_grad=True)
    rowc = torch.rand(E, N, generator=g, dtype=torch.float64) + 0.5
    up = torch.randn(E, B, H, N, N, generator=g, dtype=torch.float64)
    P = _phi(S, spec, rowc)
    (dS,) = torch.autograd.grad((P * up).sum(), S)
    ref = S.pow(p) * rowc[:, None, None, :, None]
    if causal:
        ref = ref.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), 0.0)
    (dref,) = torch.autograd.grad((ref * up).sum(), S)
    eps = np.finfo(np.float64).eps
    assert torch.allclose(P, ref, rtol=8 * eps, atol=0)
    assert torch.allclose(dS, dref, rtol=16 * eps, atol=16 * eps * float(dref.abs().max()))
    if causal:
        hidden = ~torch.ones(N, N, dtype=torch.bool).tril()
        assert bool((P.detach()[..., hidden] == 0).all()) and bool((dS[..., hidden] == 0).all())
    # fast mode: uᵀJv for random u, v against finite differences. A wrong backward shows there for almost every
    # u, v; the full 3072 × 3072 Jacobian (N = 16) cost ~1.5 CPU-s a case.
    assert torch.autograd.gradcheck(lambda s: _phi(s, spec, rowc), (S,), fast_mode=True)


@pytest.mark.parametrize("causal", [False, True])
def test_a_row_normalised_expression_arm_is_its_rows_divided_by_their_sums(causal):
    """``row:<ψ>`` arms (expression_family(…, "row")): ψ = exp(x) gives torch's own softmax, and ψ = x⁴ gives
    S⁴ / (row sums of S⁴), under the causal mask over the visible entries only (float64, independent forms)."""
    from sapa.empirics.training.ensemble import phi

    gen = torch.Generator().manual_seed(5)
    S = torch.randn(2, 3, 2, 6, 6, generator=gen, dtype=torch.float64)  # (E, B, H, N, N)
    vis = torch.ones(6, 6, dtype=torch.bool).tril()
    task = "text" if causal else "digits"
    spec = lambda f: EnsembleSpec(task, 6 if causal else 4, CFG, f, vocab=VOCAB if causal else 0)  # noqa: E731
    if not causal:
        S = S[..., :4, :4]
    for text, want in (("exp(x)", torch.softmax(S.masked_fill(~vis, -math.inf) if causal else S, -1)),
                       ("x**4", (lambda P: P / P.sum(-1, keepdim=True))(S.pow(4) * vis if causal else S.pow(4)))):
        f = expression_family(f"row:{text}", text, "row")
        assert f.normalize == "row" and f.label == f"φ = row-normalised {text}"
        got = phi(S, spec(f), None)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)
        torch.testing.assert_close(got.sum(-1), torch.ones_like(got.sum(-1)), rtol=1e-12, atol=1e-12)
