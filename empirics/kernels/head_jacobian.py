"""f(X) = φ(c·X W Xᵀ) X W_V, c = 1/√d, W = W_Q W_Kᵀ: the single-head layer, its J·dX and Jᵀ·G in closed form.

Batched over a leading axis (restarts): X (B, n, D), W (D, D), W_V (D, d_v), f(X) (B, n, d_v). ``φ`` is
``"softmax"`` (row-wise) or ``"poly<p>"``: the element-wise s^p/√n on the logits S = c·X W Xᵀ. With
dS = c(dX W Xᵀ + X W dXᵀ) and dP = φ'(S)[dS],

    J·dX  = dP · X W_V + P · dX W_V,
    Jᵀ·G  = c(G_S X Wᵀ + G_Sᵀ X W) + Pᵀ G W_Vᵀ,   G_P = G (X W_V)ᵀ,  G_S = φ'(S)ᵀ[G_P],

where φ'(S)[E] = P ∘ (E − rowsum(P ∘ E)) for softmax (self-adjoint) and (p/√n)·S^{∘(p−1)} ∘ E for s^p/√n.
No Jacobian is built: each product costs O(B n² (D + d_v)). Checked against autograd's dense Jacobian in
``tests/empirics/kernels/test_head_jacobian.py``.

Any other activation is an expression φ(x, N, i, j) (``"expr:<text>"``, element-wise: φ'(S)[E] = φ'(S) ∘ E,
self-adjoint) or a row-normalised ψ (``"row:<text>"``: P = ψ(S)/r, r = rowsum ψ(S); φ'(S)[E] = D∘E − P∘rowsum(D∘E)
with D = ψ'(S)/r, whose adjoint is D∘(G − rowsum(P∘G)), not the same map). The element-wise derivative ψ' comes from
torch autograd of the lambdified expression (:func:`sapa.empirics.kernels.activation_fns.torch_activation`), computed
once per X (:func:`at`) with a graph, so the ascent can differentiate J(X)·v in X.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sapa.common.validate import InputError

__all__ = ["Head", "At", "ACTIVATIONS", "power_of", "expr_of", "logits", "attention", "forward", "at", "jvp", "vjp"]

ACTIVATIONS = ("softmax", "poly1", "poly3")


EXPR_PREFIXES = {"expr:": "none", "row:": "row"}  # an expression activation: element-wise, or row-normalised


def expr_of(activation: str) -> tuple[str, str] | None:
    """(text, normalize) of ``"expr:<text>"`` ("none") or ``"row:<text>"`` ("row"); None for any other name."""
    for prefix, normalize in EXPR_PREFIXES.items():
        if activation.startswith(prefix) and activation[len(prefix):].strip():
            return activation[len(prefix):], normalize
    return None


def power_of(activation: str) -> int | None:
    """p of ``"poly<p>"`` (None for softmax and expressions); InputError for anything else."""
    if activation == "softmax" or expr_of(activation) is not None:
        return None
    if activation.startswith("poly") and activation[4:].isdigit() and int(activation[4:]) >= 1:
        return int(activation[4:])
    raise InputError(f"activation must be 'softmax', 'poly<p>' with p ≥ 1, 'expr:<φ>' or 'row:<ψ>', got "
                     f"{activation!r}")


def _psi(text: str, S: torch.Tensor, normalize: str = "none") -> torch.Tensor:
    """ψ(S, N, i, j) element-wise (i, j 1-based row and column), broadcast to S's shape; (B, n, n) -> (B, n, n)."""
    from sapa.empirics.kernels.activation_fns import torch_activation

    n = S.shape[-1]
    i = torch.arange(1, n + 1, dtype=S.dtype, device=S.device)[:, None]  # (n, 1)
    return torch_activation(text, normalize)(S, torch.tensor(float(n), dtype=S.dtype), i, i.reshape(1, n)) * torch.ones_like(S)


def _psi_and_slope(text: str, S: torch.Tensor, normalize: str = "none") -> tuple[torch.Tensor, torch.Tensor]:
    """(ψ(S), ψ'(S)) element-wise by autograd; differentiable in S when S carries a graph (the ascent's step)."""
    with torch.enable_grad():
        Sg = S if S.requires_grad else S.detach().requires_grad_(True)
        Y = _psi(text, Sg, normalize)
        (D,) = torch.autograd.grad(Y.sum(), Sg, create_graph=S.requires_grad)
    return (Y if S.requires_grad else Y.detach()), D


@dataclass(frozen=True)
class Head:
    """One attention head: W = W_Q W_Kᵀ (D, D), W_V (D, d_v), logit scale c = 1/√d, activation name."""

    W: torch.Tensor      # (D, D)
    W_V: torch.Tensor    # (D, d_v)
    d: int               # key width: logits are X W Xᵀ/√d
    activation: str      # "softmax" | "poly<p>" | "expr:<φ>" | "row:<ψ>"

    @property
    def c(self) -> float:
        return 1.0 / math.sqrt(self.d)


def logits(h: Head, X: torch.Tensor) -> torch.Tensor:
    """S = c·X W Xᵀ; (B, n, D) -> (B, n, n)."""
    return h.c * (X @ h.W @ X.transpose(-1, -2))


def attention(h: Head, S: torch.Tensor) -> torch.Tensor:
    """P = φ(S): row softmax, S^{∘p}/√n, φ(S) or ψ(S)/rowsum ψ(S); (B, n, n) -> (B, n, n)."""
    p, ex = power_of(h.activation), expr_of(h.activation)
    if ex is not None:
        Y = _psi(ex[0], S, ex[1])
        return Y if ex[1] == "none" else Y / Y.sum(dim=-1, keepdim=True)
    if p is None:
        E = torch.exp(S - S.amax(dim=-1, keepdim=True))
        return E / E.sum(dim=-1, keepdim=True)
    return S**p / math.sqrt(S.shape[-1])


def _dphi(h: Head, S: torch.Tensor, P: torch.Tensor, E: torch.Tensor, D: torch.Tensor | None = None,
          adjoint: bool = False) -> torch.Tensor:
    """φ'(S)[E], or its adjoint φ'(S)ᵀ[E]; all (B, n, n). Self-adjoint for softmax, s^p and element-wise φ; for a
    row-normalised ψ, ``D`` = ψ'(S)/rowsum ψ(S) and the adjoint differs (module docstring)."""
    ex = expr_of(h.activation)
    if ex is not None:
        if ex[1] == "none":
            return D * E
        if adjoint:
            return D * (E - (P * E).sum(dim=-1, keepdim=True))
        DE = D * E
        return DE - P * DE.sum(dim=-1, keepdim=True)
    p = power_of(h.activation)
    if p is None:
        PE = P * E
        return PE - P * PE.sum(dim=-1, keepdim=True)
    return (p / math.sqrt(S.shape[-1])) * S ** (p - 1) * E


def forward(h: Head, X: torch.Tensor) -> torch.Tensor:
    """f(X) = φ(c X W Xᵀ) X W_V; (B, n, D) -> (B, n, d_v)."""
    return attention(h, logits(h, X)) @ (X @ h.W_V)


@dataclass(frozen=True)
class At:
    """What J(X) reuses at one X: S = c·X W Xᵀ, P = φ(S) (B, n, n); X W (B, n, D); X W_V (B, n, d_v).

    Each product keeps the association order of the uncached formulas, so J·dX and Jᵀ·G are bit-for-bit the same.
    """

    X: torch.Tensor
    S: torch.Tensor
    P: torch.Tensor
    XW: torch.Tensor
    XWV: torch.Tensor
    D: torch.Tensor | None = None  # expressions: φ'(S) (element-wise) or ψ'(S)/rowsum ψ(S) (row-normalised)


def at(h: Head, X: torch.Tensor) -> At:
    """The products J(X) needs at X, computed once (power iterations apply J and Jᵀ many times at one X)."""
    XW = X @ h.W
    S = h.c * (XW @ X.transpose(-1, -2))
    ex = expr_of(h.activation)
    if ex is None:
        return At(X, S, attention(h, S), XW, X @ h.W_V)
    Y, D = _psi_and_slope(ex[0], S, ex[1])
    if ex[1] == "none":
        return At(X, S, Y, XW, X @ h.W_V, D)
    r = Y.sum(dim=-1, keepdim=True)  # (B, n, 1)
    return At(X, S, Y / r, XW, X @ h.W_V, D / r)


def jvp(h: Head, X: torch.Tensor | At, dX: torch.Tensor) -> torch.Tensor:
    """J(X)·dX = dP X W_V + P dX W_V; X (B, n, D) or its :func:`at`, dX (B, n, D) -> (B, n, d_v)."""
    a = X if isinstance(X, At) else at(h, X)
    dS = h.c * (dX @ h.W @ a.X.transpose(-1, -2) + a.XW @ dX.transpose(-1, -2))  # (B, n, n)
    return _dphi(h, a.S, a.P, dS, a.D) @ a.XWV + a.P @ (dX @ h.W_V)


def vjp(h: Head, X: torch.Tensor | At, G: torch.Tensor) -> torch.Tensor:
    """J(X)ᵀ·G = c(G_S X Wᵀ + G_Sᵀ X W) + Pᵀ G W_Vᵀ; X (B, n, D) or its :func:`at`, G (B, n, d_v) -> (B, n, D)."""
    a = X if isinstance(X, At) else at(h, X)
    G_S = _dphi(h, a.S, a.P, G @ a.XWV.transpose(-1, -2), a.D, adjoint=True)  # (B, n, n)
    return h.c * (G_S @ a.X @ h.W.T + G_S.transpose(-1, -2) @ a.X @ h.W) + a.P.transpose(-1, -2) @ G @ h.W_V.T
