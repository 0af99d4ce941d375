"""Tiny transformers with a pluggable attention activation φ(S), S = X W_Q W_Kᵀ Xᵀ/√d (arXiv 2410.18613, §5).

The paper replaces row-softmax by element-wise polynomials c·x^p (x/√N, x³/√N) and argues
that 1/√N-scaled polynomials regularize ‖φ(S)‖_F as softmax does. The models here make that
testable in training:

* the activation is a family row of :mod:`sapa.theory.families` with an exact kernel (:data:`ARMS`): row softmax
  of S, or ``c·S^p`` with c = 1/√N, a constant, or the dynamic causal row scale c_i = 1/√i (row i sees i tokens),
  applied by :meth:`sapa.theory.families.Family.apply`. Polynomial families set masked entries to exactly 0 and do
  not normalise.
* :class:`TinyViT` — 8×8 images cut into 2×2 patches (N = 16 tokens), pre-LayerNorm blocks,
  mean-pooled head.
* :class:`TinyCharLM` — causal character model over a context of N characters.

Every attention projection is bias-free, so for head h with W_h = W_Q,h W_K,hᵀ (D, D) the
scores are exactly S_h = X W_h Xᵀ/√d, X = LayerNorm(block input) (N, D): the input of the
exact kernels of :mod:`sapa.empirics.kernels.norms` (:func:`head_W`, the model's family).
Parameters are initialised from an explicit ``torch.Generator`` (:func:`init_params`); torch's
default initialisers run inside a forked global RNG state, so building a model leaves the global
generator as it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from sapa.theory.families import Family, family
from sapa.common.validate import InputError, choice, positive_int

__all__ = ["ARMS", "REFERENCE_ARMS", "TinyModelConfig", "TinyViT", "TinyCharLM", "build_model", "init_params",
           "head_W", "w_invariants"]

PATCHES = (1, 2, 4, 8)  # divisors of 8: N = 64, 16, 4, 1 tokens per 8×8 image
REFERENCE_ARMS = ("softmax", "x_sqrtN", "x3_sqrtN", "x_16", "x3", "x3_sqrti")  # the one-at-a-time models' activations
ARMS: dict[str, Family] = {a: family(a) for a in REFERENCE_ARMS}


def _exact(f: Family) -> Family:
    """``f`` when it has an exact kernel (softmax or c·x^p: what the reference models apply), else InputError."""
    if not isinstance(f, Family) or f.kernel is None:
        what = f"{f.id} ({f.label})" if isinstance(f, Family) else repr(f)
        raise InputError(f"{what} is no softmax or c·x^p family of the reference models")
    return f


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of a tiny transformer."""

    width: int = 32  # D, residual width
    layers: int = 2
    heads: int = 2  # d = D / heads per head
    mlp_ratio: int = 2  # hidden width of the MLP = mlp_ratio·D
    init_std: float = 0.02  # N(0, init_std²) for every matrix and embedding (ViT / GPT convention)

    def __post_init__(self) -> None:
        positive_int("width", self.width)
        positive_int("layers", self.layers)
        positive_int("heads", self.heads)
        if self.width % self.heads:
            raise InputError(f"width {self.width} must be a multiple of heads {self.heads}")


def step_flops(model: TinyModelConfig, B: int, N: int) -> float:
    """≈ 6·B·N·L·((4 + 2r)·D² + 2·N·D): forward and backward flops of one optimiser step (what a progress ETA weighs).

    Per layer and token, forward: the four D×D projections 4D² and the MLP 2rD² multiply-adds, the two N×N products
    2ND; backward costs twice the forward, and a multiply-add is two flops (so 3 × 2 = 6). Embedding, norms and the
    activation itself are left out: a weight for progress, not a measurement.
    """
    D, L, r = model.width, model.layers, model.mlp_ratio
    return 6.0 * B * N * L * ((4 + 2 * r) * D * D + 2 * N * D)


class Attention(nn.Module):
    """Multi-head attention y = φ(S) V W_O, S_h = X W_Q,h W_K,hᵀ Xᵀ/√d, all projections bias-free."""

    def __init__(self, D: int, heads: int, family: Family, causal: bool) -> None:
        super().__init__()
        self.D, self.H, self.d = D, heads, D // heads
        self.family, self.causal = family, causal
        self.q = nn.Linear(D, D, bias=False)  # weight (D_out, D_in): rows h·d..(h+1)·d−1 are W_Q,hᵀ
        self.k = nn.Linear(D, D, bias=False)
        self.v = nn.Linear(D, D, bias=False)
        self.o = nn.Linear(D, D, bias=False)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """S (B, H, N, N) = X W_Q,h W_K,hᵀ Xᵀ/√d for x (B, N, D)."""
        B, N, _ = x.shape
        q = self.q(x).view(B, N, self.H, self.d).transpose(1, 2)  # (B, H, N, d)
        k = self.k(x).view(B, N, self.H, self.d).transpose(1, 2)  # (B, H, N, d)
        return q @ k.transpose(-1, -2) / math.sqrt(self.d)  # (B, H, N, d) @ (B, H, d, N) -> (B, H, N, N)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, D = x.shape
        P = self.family.apply(self.scores(x), mask="causal" if self.causal else "none")  # (B, H, N, N)
        v = self.v(x).view(B, N, self.H, self.d).transpose(1, 2)  # (B, H, N, d)
        y = (P @ v).transpose(1, 2).reshape(B, N, D)  # (B, H, N, N) @ (B, H, N, d) -> (B, N, D)
        return self.o(y)


class Block(nn.Module):
    """Pre-LayerNorm block: x + Attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, cfg: TinyModelConfig, family: Family, causal: bool) -> None:
        super().__init__()
        D = cfg.width
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = Attention(D, cfg.heads, family, causal)
        self.mlp = nn.Sequential(nn.Linear(D, cfg.mlp_ratio * D), nn.GELU(), nn.Linear(cfg.mlp_ratio * D, D))

    def forward(self, x: torch.Tensor, capture: list | None = None) -> torch.Tensor:
        a = self.ln1(x)  # (B, N, D): the attention input X of the exact kernels
        if capture is not None:
            capture.append(a)
        x = x + self.attn(a)
        return x + self.mlp(self.ln2(x))


class _Tiny(nn.Module):
    def __init__(self, cfg: TinyModelConfig, family: Family, causal: bool) -> None:
        super().__init__()
        self.cfg, self.family, self.causal = cfg, _exact(family), causal
        self.blocks = nn.ModuleList(Block(cfg, family, causal) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.width)

    def _trunk(self, h: torch.Tensor, capture: list | None) -> torch.Tensor:
        for blk in self.blocks:
            h = blk(h, capture)
        return self.ln_f(h)

    def attention_inputs(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Per layer, the attention input X = LN(block input) (B, N, D), without gradients."""
        cap: list[torch.Tensor] = []
        with torch.no_grad():
            self.forward(x, cap)
        return cap


class TinyViT(_Tiny):
    """Vision transformer on 8×8 images: p×p patches (N = (8/p)² tokens of p² pixels), mean-pooled head.

    ``patch`` 2 gives N = 16 (the default), 1 gives N = 64 (one token per pixel).
    """

    def __init__(self, cfg: TinyModelConfig, family: Family, classes: int = 10, patch: int = 2) -> None:
        if "none" not in _exact(family).masks:
            raise InputError(f"arm {family.id} needs a causal mask; the vision model has none")
        choice("patch", patch, PATCHES)
        super().__init__(cfg, family, causal=False)
        self.PATCH = int(patch)
        self.N = (8 // self.PATCH) ** 2
        self.embed = nn.Linear(self.PATCH * self.PATCH, cfg.width)
        self.pos = nn.Parameter(torch.empty(self.N, cfg.width))
        self.head = nn.Linear(cfg.width, classes)

    def forward(self, x: torch.Tensor, capture: list | None = None) -> torch.Tensor:
        """Logits (B, classes) for images x (B, 8, 8)."""
        B = x.shape[0]
        p = self.PATCH
        t = x.reshape(B, 8 // p, p, 8 // p, p).permute(0, 1, 3, 2, 4).reshape(B, self.N, p * p)  # (B, 16, 4)
        h = self.embed(t) + self.pos  # (B, N, D)
        return self.head(self._trunk(h, capture).mean(dim=1))  # (B, D) -> (B, classes)


class TinyCharLM(_Tiny):
    """Causal character model: token + position embeddings, causal blocks, logits for the next character."""

    def __init__(self, cfg: TinyModelConfig, family: Family, vocab: int, context: int) -> None:
        super().__init__(cfg, family, causal=True)
        self.N = positive_int("context", context)
        self.tok = nn.Embedding(vocab, cfg.width)
        self.pos = nn.Parameter(torch.empty(context, cfg.width))
        self.head = nn.Linear(cfg.width, vocab)

    def forward(self, x: torch.Tensor, capture: list | None = None) -> torch.Tensor:
        """Logits (B, N, vocab) for token ids x (B, N), N ≤ context."""
        N = x.shape[1]
        h = self.tok(x) + self.pos[:N]  # (B, N, D)
        return self.head(self._trunk(h, capture))


def init_params(model: nn.Module, gen: torch.Generator, std: float) -> nn.Module:
    """Materialise ``model`` on the CPU: matrices and embeddings N(0, std²), biases 0, LayerNorm (1, 0)."""
    model.to_empty(device="cpu")
    with torch.no_grad():
        for name, prm in model.named_parameters():  # named_parameters is in registration order: deterministic
            leaf = name.rsplit(".", 1)[-1]
            if ".ln" in f".{name}" and leaf == "weight":
                prm.fill_(1.0)
            elif leaf == "bias":
                prm.zero_()
            else:
                prm.normal_(0.0, std, generator=gen)
    return model


def build_model(task: str, family: Family, cfg: TinyModelConfig, gen: torch.Generator, *, vocab: int = 0,
                context: int = 0, patch: int = 2) -> _Tiny:
    """A float32 TinyViT (task "digits", p×p patches) or TinyCharLM (task "text") applying ``family`` (a row with an
    exact kernel: :data:`ARMS`, ``power(p, c)``, ``softmax(τ)``), initialised from ``gen``."""
    choice("task", task, ("digits", "text"))
    # torch's default initialisers draw from the global generator: fork it, so building leaves it unchanged. (Not
    # the meta device: constructing under `torch.device("meta")` imports torch._dynamo, 1.5–2.4 CPU-s per process.)
    with torch.random.fork_rng(devices=[]):
        model = TinyViT(cfg, family, patch=patch) if task == "digits" else TinyCharLM(cfg, family, vocab, context)
    return init_params(model, gen, cfg.init_std)


def head_W(attn: Attention, h: int, *, scaled: bool = True) -> torch.Tensor:
    """W_h = W_Q,h W_K,hᵀ (D, D) in float64, divided by √d when ``scaled`` (then S_h = X W_h Xᵀ exactly)."""
    d = attn.d
    Wq = attn.q.weight[h * d:(h + 1) * d].detach().to(torch.float64).T  # (D, d) = W_Q,h
    Wk = attn.k.weight[h * d:(h + 1) * d].detach().to(torch.float64).T  # (D, d) = W_K,h
    W = Wq @ Wk.T  # (D, d) @ (d, D) -> (D, D)
    return W / math.sqrt(d) if scaled else W


def w_invariants(W: torch.Tensor) -> dict[str, float]:
    """‖W‖_F, ‖W‖_2, tr W, ‖(W+Wᵀ)/2‖_F, ‖(W−Wᵀ)/2‖_F of a (D, D) matrix (float64; all NaN if W is not finite)."""
    W = W.to(torch.float64)
    if not bool(torch.isfinite(W).all()):  # a run that is blowing up: no SVD of NaN
        return dict.fromkeys(("w_fro", "w_spec", "w_trace", "w_sym_fro", "w_anti_fro"), math.nan)
    return {
        "w_fro": float(torch.linalg.matrix_norm(W, "fro")),
        "w_spec": float(torch.linalg.matrix_norm(W, 2)),
        "w_trace": float(torch.trace(W)),
        "w_sym_fro": float(torch.linalg.matrix_norm((W + W.T) / 2, "fro")),
        "w_anti_fro": float(torch.linalg.matrix_norm((W - W.T) / 2, "fro")),
    }
