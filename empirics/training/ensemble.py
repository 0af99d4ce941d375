"""E tiny transformers as one: θ_e ← AdamW(θ_e, ∇_θe ℓ_e, lr_e), all members in one batched forward/backward.

Tiny models on a CPU are dominated by per-operation overhead, so the training study
trains seeds × learning rates × scale rules of one shape together: every parameter carries a
leading ensemble dimension E, every matrix product is a batched one, and the loss is the sum of
the members' losses (member e's gradient is exactly ∇ℓ_e: no operation mixes members).

A member is a model of :mod:`sapa.empirics.training.tiny_models` (same parameter names, same initialisation
from its own ``torch.Generator``), an activation φ_e(S) = r_e,i · S^p (row i; r_e,i = c_e for a
global scale, c_e/√i for the causal row scale) or the row softmax (one family per ensemble), and
a peak learning rate lr_e. Optimiser, clipping and schedule are those of one-at-a-time training:
per-member global gradient-norm clipping (``clip_grad_norm_``'s formula), then AdamW with the
decoupled weight decay, written out on stacked tensors with per-member learning rates
(``torch.optim.AdamW``'s update order). Training one member alone with ``nn.Module`` +
``torch.optim.AdamW`` gives the same trajectory to float32 round-off (tested).

Float32 for speed; the norms of :mod:`sapa.empirics.training.train_study` are measured in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from sapa.common.validate import InputError, choice, positive_int
from sapa.empirics.kernels.activation_fns import torch_activation
from sapa.empirics.training.tiny_models import TinyModelConfig, build_model
from sapa.theory import families  # the row families.Family is the ensemble's activation (no class of its own here)

__all__ = ["EnsembleSpec", "expression_family", "row_coefficients", "stack_members", "ensemble_forward",
           "member_losses", "AdamWState", "adamw_step", "clip_per_member", "attention_inputs", "head_Ws",
           "torch_activation", "phi"]

LN_EPS = 1e-5  # nn.LayerNorm's default


def expression_family(id: str, text: str, normalize: str = "none") -> families.Family:
    """φ(x, N, i) = ``text`` as an unlisted family (no exact kernel; its scale sits inside φ, rule "none"), parsed and
    translated to torch now: one clear :class:`InputError` if it cannot train (the study's ``expr:<φ>`` arms, the
    mechanism study's ``expr`` arm). ``normalize="row"``: each row of ψ(S) divided by its sum (``row:<ψ>`` arms)."""
    torch_activation(text, normalize)
    label = f"φ = {text}" if normalize == "none" else f"φ = row-normalised {text}"
    return families.Family(id, text, label, families.NONE, "an expression given at run time", normalize=normalize)


def row_coefficients(f: families.Family, N: int, value: float = math.nan) -> torch.Tensor:
    """(N,) float32 r_i of a member of family row ``f`` at length N: the rule's factor in float64
    (:meth:`sapa.theory.families.Family.row_scale`; ``value``: α, c or τ of a grid rule, r = 1/value), then float32."""
    return torch.from_numpy(f.row_scale(N, value=value)).to(torch.float32)


@dataclass(frozen=True)
class EnsembleSpec:
    """Architecture shared by every member: task, sequence length N, model shape, vocabulary / classes."""

    task: str  # "digits" | "text"
    N: int  # tokens per sequence (digits: (8 / patch)²; text: the context)
    model: TinyModelConfig
    family: families.Family  # a row of sapa.theory.families (or an expression_family): its kernel, p and expr are read
    vocab: int = 0  # text: characters; digits: 0
    classes: int = 10  # digits: classes; text: = vocab

    def __post_init__(self) -> None:
        choice("task", self.task, ("digits", "text"))
        positive_int("N", self.N)
        if self.task == "digits" and self.N not in (1, 4, 16, 64):
            raise InputError(f"digits take N = (8/patch)² ∈ {{1, 4, 16, 64}}, got {self.N}")
        if self.task == "text":
            positive_int("vocab", self.vocab)
        if self.family.kernel is None:
            torch_activation(self.family.expr, self.family.normalize)  # parse now: a bad expression is one clear error

    @property
    def patch(self) -> int:
        return 8 // math.isqrt(self.N)

    @property
    def causal(self) -> bool:
        return self.task == "text"


def _template(f: families.Family) -> families.Family:
    """The family the member's module is built with (its scale is not used by the ensemble: r_e carries it; parameters
    do not depend on it)."""
    return families.power(f.p) if f.kernel == "poly" else families.softmax()


def build_member(spec: EnsembleSpec, gen: torch.Generator) -> torch.nn.Module:
    """Member e's float32 module of :mod:`sapa.empirics.training.tiny_models`, initialised from ``gen`` (the one-at-a-time model)."""
    return build_model(spec.task, _template(spec.family), spec.model, gen, vocab=spec.vocab, context=spec.N,
                       patch=spec.patch if spec.task == "digits" else 2)


def stack_members(spec: EnsembleSpec, gens: list[torch.Generator]) -> dict[str, torch.Tensor]:
    """{name: (E, *shape)} leaf tensors with requires_grad, member e initialised from ``gens[e]``."""
    if not gens:
        raise InputError("an ensemble needs at least one member")
    states = [dict(build_member(spec, g).named_parameters()) for g in gens]
    return {k: torch.stack([s[k].detach() for s in states]).requires_grad_(True) for k in states[0]}


# --------------------------------------------------------------------------- forward


def _linear(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """y = x Wᵀ + b per member: x (E, ..., Din), W (E, Dout, Din), b (E, Dout)."""
    E, Din = x.shape[0], x.shape[-1]
    flat = x.reshape(E, -1, Din)  # (E, M, Din)
    y = torch.bmm(flat, W.transpose(1, 2)) if b is None else torch.baddbmm(b[:, None, :], flat, W.transpose(1, 2))
    return y.reshape(*x.shape[:-1], W.shape[1])  # (E, M, Din) @ (E, Din, Dout) -> (E, ..., Dout)


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """LayerNorm over the last axis with per-member gain and bias: x (E, B, N, D), w, b (E, D)."""
    y = F.layer_norm(x, x.shape[-1:], eps=LN_EPS)
    shape = (x.shape[0],) + (1,) * (x.ndim - 2) + (x.shape[-1],)
    return y * w.reshape(shape) + b.reshape(shape)


class _MaskedPower(torch.autograd.Function):
    """P = M ⊙ S^p, dL/dS = p·M ⊙ S^(p−1) ⊙ dL/dP, M = r_i·[j visible]: p passes each way over (…, N, N).

    Autograd of ``S.pow(p) * r`` and ``masked_fill`` makes about ten passes over the largest tensor
    of the model (``pow`` is slow for an integer exponent). Here M (E, 1, 1, N, N or 1) multiplies
    first, so a masked entry is 0·S·S… = 0 exactly in P and in dL/dS whenever S is finite (an
    infinite score, reached only by a member whose q·k overflowed float32, gives NaN there).
    """

    @staticmethod
    def forward(ctx, S: torch.Tensor, M: torch.Tensor, p: int) -> torch.Tensor:
        P = S * M
        for _ in range(p - 1):
            P.mul_(S)
        ctx.save_for_backward(S if p > 1 else None, M)
        ctx.p = p
        return P

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        S, M = ctx.saved_tensors
        dS = g * (M * ctx.p)
        for _ in range(ctx.p - 1):
            dS.mul_(S)
        return dS, None, None


def _phi(S: torch.Tensor, spec: EnsembleSpec, rowc: torch.Tensor | None) -> torch.Tensor:
    """φ_e(S) for S (E, B, H, N, N): softmax(r_e,i·S_i) rows (rowc None: r = 1), r_e,i·S^p (rowc (E, N)) or φ(S, N, i);
    causal: j > i masked."""
    N = S.shape[-1]
    vis = torch.ones(N, N, dtype=torch.bool, device=S.device).tril() if spec.causal else None  # (N, N)
    if spec.family.kernel == "softmax":
        if rowc is not None:  # softmax(r_e,i·S_i): a member's inverse temperature 1/τ (the study's temperature sweep)
            S = S * rowc[:, None, None, :, None]
        if vis is not None:
            S = S.masked_fill(~vis, -math.inf)
        return torch.softmax(S, dim=-1)
    if spec.family.kernel is None:  # any other φ: its expression
        f = torch_activation(spec.family.expr, spec.family.normalize)
        i = torch.arange(1, N + 1, dtype=S.dtype, device=S.device)[:, None]  # (N, 1) row index
        j = i.reshape(1, N)  # (1, N) column index
        P = f(S, torch.tensor(float(N), dtype=S.dtype, device=S.device), i, j) * torch.ones_like(S)  # (E, B, H, N, N)
        P = P if vis is None else torch.where(vis, P, torch.zeros((), dtype=P.dtype, device=P.device))
        return P / P.sum(-1, keepdim=True) if spec.family.normalize == "row" else P  # row-normalised ψ: rows sum to 1
    M = rowc[:, None, None, :, None]  # (E, 1, 1, N, 1): row i of member e times r_e,i
    if vis is not None:
        M = M * vis  # (E, 1, 1, N, N): and 0 where j > i
    return _MaskedPower.apply(S, M, spec.family.p)


def phi(S: torch.Tensor, spec: EnsembleSpec, rowc: torch.Tensor | None) -> torch.Tensor:
    """φ_e(S) of the ensemble's family for S (E, B, H, N, N) (public: the offset profiles read it in float64)."""
    return _phi(S, spec, rowc)


def _attention(prm: dict, pre: str, a: torch.Tensor, spec: EnsembleSpec, rowc) -> torch.Tensor:
    """Multi-head φ(S) V W_O for a (E, B, N, D), S_h = X W_Q,h W_K,hᵀ Xᵀ/√d (bias-free projections).

    One product for Q, K, V: [W_Q/√d; W_K; W_V] (E, 3D, D), so that S needs no pass of its own for 1/√d.
    """
    E, B, N, D = a.shape
    H = spec.model.heads
    d = D // H
    W = torch.cat([prm[f"{pre}.q.weight"] / math.sqrt(d), prm[f"{pre}.k.weight"], prm[f"{pre}.v.weight"]], 1)
    qkv = _linear(a, W).reshape(E, B, N, 3, H, d).permute(3, 0, 1, 4, 2, 5).contiguous()  # (3, E, B, H, N, d)
    q, k, v = qkv.unbind(0)
    S = q @ k.transpose(-1, -2)  # (E, B, H, N, d) @ (E, B, H, d, N) -> (E, B, H, N, N)
    y = (_phi(S, spec, rowc) @ v).transpose(2, 3).reshape(E, B, N, D)  # (E, B, H, N, d) -> (E, B, N, D)
    return _linear(y, prm[f"{pre}.o.weight"])


def _trunk(prm: dict, h: torch.Tensor, spec: EnsembleSpec, rowc, capture: list | None = None) -> torch.Tensor:
    for layer in range(spec.model.layers):
        pre = f"blocks.{layer}"
        a = _layer_norm(h, prm[f"{pre}.ln1.weight"], prm[f"{pre}.ln1.bias"])  # (E, B, N, D): the attention input X
        if capture is not None:
            capture.append(a)
        h = h + _attention(prm, f"{pre}.attn", a, spec, rowc)
        m = _layer_norm(h, prm[f"{pre}.ln2.weight"], prm[f"{pre}.ln2.bias"])
        m = F.gelu(_linear(m, prm[f"{pre}.mlp.0.weight"], prm[f"{pre}.mlp.0.bias"]))
        h = h + _linear(m, prm[f"{pre}.mlp.2.weight"], prm[f"{pre}.mlp.2.bias"])
    return _layer_norm(h, prm["ln_f.weight"], prm["ln_f.bias"])


def ensemble_forward(prm: dict, x: torch.Tensor, spec: EnsembleSpec, rowc: torch.Tensor | None,
                     capture: list | None = None) -> torch.Tensor:
    """Logits of every member: digits x (E, B, 8, 8) -> (E, B, classes); text ids x (E, B, N) -> (E, B, N, vocab).

    ``rowc`` (E, N) holds r_e,i of the poly family, or each softmax member's inverse temperature (None: softmax at
    τ = 1); ``capture`` collects each
    layer's attention input X = LN(h) (E, B, N, D).
    """
    E, B = x.shape[:2]
    D = spec.model.width
    if spec.task == "digits":
        p = spec.patch
        t = x.reshape(E, B, 8 // p, p, 8 // p, p).permute(0, 1, 2, 4, 3, 5).reshape(E, B, spec.N, p * p)
        h = _linear(t, prm["embed.weight"], prm["embed.bias"]) + prm["pos"][:, None]  # (E, B, N, D)
        return _linear(_trunk(prm, h, spec, rowc, capture).mean(dim=2), prm["head.weight"], prm["head.bias"])
    N = x.shape[2]
    V = prm["tok.weight"].shape[1]
    ids = x + (torch.arange(E, device=x.device) * V)[:, None, None]  # member e's ids index rows e·V .. e·V + V − 1
    h = F.embedding(ids, prm["tok.weight"].reshape(E * V, D)) + prm["pos"][:, None, :N]  # (E, B, N, D)
    return _linear(_trunk(prm, h, spec, rowc, capture), prm["head.weight"], prm["head.bias"])


def member_losses(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(E,) mean cross-entropy of each member: logits (E, ..., C), targets y (E, ...)."""
    E, C = logits.shape[0], logits.shape[-1]
    ce = F.cross_entropy(logits.reshape(-1, C), y.reshape(-1), reduction="none")  # (E·M,)
    return ce.reshape(E, -1).mean(dim=1)


def attention_inputs(prm: dict, x: torch.Tensor, spec: EnsembleSpec, rowc) -> list[torch.Tensor]:
    """Per layer, X = LN(block input) (E, P, N, D) of every member on the probe batch, without gradients."""
    cap: list[torch.Tensor] = []
    with torch.no_grad():
        ensemble_forward(prm, x, spec, rowc, cap)
    return cap


def head_Ws(prm: dict, layer: int, spec: EnsembleSpec) -> torch.Tensor:
    """W_h = W_Q,h W_K,hᵀ/√d (E, H, D, D) in float64, so that S_h = X W_h Xᵀ exactly."""
    H, D = spec.model.heads, spec.model.width
    d = D // H
    Wq = prm[f"blocks.{layer}.attn.q.weight"].detach().to(torch.float64).reshape(-1, H, d, D)  # rows: W_Q,hᵀ
    Wk = prm[f"blocks.{layer}.attn.k.weight"].detach().to(torch.float64).reshape(-1, H, d, D)
    return Wq.transpose(-1, -2) @ Wk / math.sqrt(d)  # (E, H, D, d) @ (E, H, d, D) -> (E, H, D, D)


# --------------------------------------------------------------------------- optimiser


def clip_per_member(grads: dict[str, torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale member e's gradients by min(1, max_norm/(‖g_e‖ + 1e-6)) in place; return the pre-clip ‖g_e‖ (E,).

    ‖g_e‖ is the 2-norm over all of member e's parameters (``torch.nn.utils.clip_grad_norm_``'s formula).
    """
    per = torch.stack([torch.linalg.vector_norm(g.reshape(g.shape[0], -1), dim=1) for g in grads.values()], 1)
    total = torch.linalg.vector_norm(per, dim=1)  # (E,) float32, as clip_grad_norm_ computes it
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)  # (E,)
    for g in grads.values():
        g.mul_(coef.reshape(-1, *([1] * (g.ndim - 1))))
    return total.to(torch.float64)


@dataclass
class AdamWState:
    """First and second moments of every stacked parameter, and the step count (shared by all members)."""

    exp_avg: dict[str, torch.Tensor]
    exp_avg_sq: dict[str, torch.Tensor]
    step: int = 0

    @classmethod
    def zeros(cls, prm: dict[str, torch.Tensor]) -> "AdamWState":
        return cls({k: torch.zeros_like(v, requires_grad=False) for k, v in prm.items()},
                   {k: torch.zeros_like(v, requires_grad=False) for k, v in prm.items()})


def adamw_step(prm: dict, grads: dict, st: AdamWState, lr: torch.Tensor, *, betas=(0.9, 0.95), eps: float = 1e-8,
               weight_decay: float = 0.0) -> None:
    """θ ← θ(1 − lr_e·λ) − lr_e/(1−β₁ᵗ) · m/(√v/√(1−β₂ᵗ) + ε), m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², per member.

    ``lr`` (E,) per-member learning rates (0 freezes a member); λ applies to matrices and embeddings
    (member ndim ≥ 2), never to LayerNorm gains or biases, as in one-at-a-time training.
    """
    b1, b2 = betas
    st.step += 1
    bc1, bc2 = 1 - b1 ** st.step, 1 - b2 ** st.step
    with torch.no_grad():
        for k, p in prm.items():
            g = grads[k]
            shape = (-1,) + (1,) * (p.ndim - 1)
            lr_e = lr.to(p.dtype).reshape(shape)  # (E, 1, ...)
            if weight_decay and p.ndim >= 3:
                p.mul_(1 - lr_e * weight_decay)
            m, v = st.exp_avg[k], st.exp_avg_sq[k]
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (v.sqrt() / math.sqrt(bc2)).add_(eps)
            p.sub_((lr_e / bc1) * m / denom)  # addcdiv_(m, denom, value=−lr/(1−β₁ᵗ)) with a per-member lr
