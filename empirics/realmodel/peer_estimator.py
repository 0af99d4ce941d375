"""√‖J(X)ᵀ F(X)‖₂ — the quantity the published "local Lipschitz" power iteration returns, beside σ₁(J(X)).

Castin, Ablin & Peyré's code (github vcastin/how-smooth-is-attention, ``adversarial_data/toolbox.py``,
``loc_lipschitz``; the same step is in their five compute scripts) estimates σ₁ of J = ∂F/∂X at X by a power
iteration on JᵀJ. Its step forms v ← Jᵀ(first output of ``torch.func.jvp(F, (X,), (u,))``); but ``jvp`` returns
the pair (F(X), J·u), and the first of the pair is the **output** F(X), not J·u. So, read as arithmetic:

* every step computes the same vector g = Jᵀ F(X), whatever u is;
* after the first step u = g/‖g‖, so μ = ⟨u, g⟩ = ‖g‖ at every later step, the stopping test |μ − μ_prev| is met at
  the second step, and the returned μ^½ is √‖Jᵀ F(X)‖₂.

That is not σ₁. It mixes in the size of the output, √‖JᵀF‖ ≤ √(σ₁·‖F(X)‖), so it grows with ‖F(X)‖ (which grows
with n as rows are added) and moves with the value and output biases, which leave J unchanged. sapa reports it beside
the certified σ₁ on the same inputs so that a reading about the real-input rate tests σ₁'s rate and says what the
published number measures.

Nothing here is the peers' code: :func:`published_iteration` restates the loop's arithmetic (a unit Gaussian
start, v = Jᵀ F(X), μ = ⟨u, v⟩, u ← v/‖v‖, stop when μ moves by ≤ ``threshold`` or after ``max_iter`` steps,
return μ^½) and :func:`published_quantity` its closed form; the tests check that the two agree, and that neither is σ₁.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

__all__ = ["layer_function", "published_quantity", "published_iteration", "published_from_operator"]


def layer_function(layer) -> Callable[[torch.Tensor], torch.Tensor]:
    """F(X) = Σ_h softmax((XW_Q^h + b_Q^h)(XW_K^h + b_K^h)ᵀ) X W_V^h W_O^h in float64 torch: (N, D) -> (N, D_out).

    ``layer``: an :class:`sapa.empirics.kernels.expr_norms.Layer` with values (1/√d folded into W_Q and b_Q, as
    :func:`sapa.empirics.realmodel.layer_lipschitz.minilm_layer` builds it). The value and output biases, constant in X,
    are left out, as in sapa's Jacobian (they move F(X), hence the published quantity, but not J).
    """
    if not layer.has_values:
        raise ValueError("the layer has no values (W_V, W_O): F(X) is the attention matrix, not a layer output")
    t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    Wq, Wk, Wv, Wo = t(layer.Wq), t(layer.Wk), t(layer.Wv), t(layer.Wo)  # (H, D, d) ×3, (H, d, D_out)
    bq = t(layer.bq) if layer.bq is not None else torch.zeros(Wq.shape[0], Wq.shape[2], dtype=torch.float64)
    bk = t(layer.bk) if layer.bk is not None else torch.zeros(Wk.shape[0], Wk.shape[2], dtype=torch.float64)

    def F(X: torch.Tensor) -> torch.Tensor:
        A = torch.einsum("nd,hde->hne", X, Wq) + bq[:, None, :]  # (H, N, d)
        B = torch.einsum("nd,hde->hne", X, Wk) + bk[:, None, :]  # (H, N, d)
        P = torch.softmax(A @ B.transpose(1, 2), dim=-1)        # (H, N, N)
        V = torch.einsum("nd,hde,hef->hnf", X, Wv, Wo)         # (H, N, D_out)
        return (P @ V).sum(dim=0)                               # (N, D_out)

    return F


def published_quantity(F: Callable[[torch.Tensor], torch.Tensor], X: torch.Tensor) -> float:
    """√‖J(X)ᵀ F(X)‖₂: one vector–Jacobian product of F at X with F(X) itself (torch.func.vjp)."""
    out, vjp = torch.func.vjp(F, X)
    (g,) = vjp(out)
    return math.sqrt(float(torch.linalg.vector_norm(g)))


def published_iteration(F: Callable[[torch.Tensor], torch.Tensor], X: torch.Tensor, generator: torch.Generator,
                        threshold: float = 1e-4, max_iter: int = 100) -> tuple[float, int]:
    """The published loop's arithmetic, restated (module docstring): (μ^½ at the stop, steps taken)."""
    _, vjp = torch.func.vjp(F, X)
    u = torch.randn(X.shape, generator=generator, dtype=X.dtype)
    u = u / torch.linalg.vector_norm(u)
    previous, steps = 0.0, 0
    while True:
        first, _ = torch.func.jvp(F, (X,), (u,))  # (F(X), J·u): the loop keeps the first, F(X)
        (v,) = vjp(first)
        mu = float(torch.dot(u.flatten(), v.flatten()))
        u = v / torch.linalg.vector_norm(v)
        if abs(mu - previous) <= threshold or steps >= max_iter:
            return math.sqrt(mu), steps
        previous, steps = mu, steps + 1


def published_from_operator(op, FX: np.ndarray) -> float:
    """√‖J(X)ᵀ F(X)‖₂ from sapa's closed-form operator (``op.rmatvec``: u ↦ Jᵀu) and the output F(X) (N, D_out)."""
    return math.sqrt(float(np.linalg.norm(op.rmatvec(np.asarray(FX, dtype=np.float64)))))
