"""σ₁(J(X_peer)) at the peers' adversarial inputs beside sapa's ascent: X_peer = R·[u; u/2; …; u/2] (or R·[−u; u; …]).

Castin, Ablin & Peyré (github vcastin/how-smooth-is-attention, ``adversarial_data/toolbox.py``, ``adversarial_data``)
build their adversarial sequences from the head's A = K_hᵀQ_h/√d (scores x_jᵀ A x_i) and its real eigenvalues: when
λ_max > −8·λ_min they take u, the unit eigenvector of λ_max, and place one token at R·u and the other n − 1 at
R·u/2; otherwise u of λ_min, one token at −R·u and n − 1 at R·u. In sapa's row convention the logits are
s_ij = c·x_i W x_jᵀ = x_jᵀ (c·Wᵀ) x_i, so their A is c·Wᵀ: its eigenvalues are W's (times c) and its right
eigenvectors W's left ones. Nothing here is the peers' code; :func:`peer_inputs` restates the construction.

:func:`compare` evaluates σ₁ at their inputs exactly (the dense Jacobian, built column by column from sapa's closed-form
J·dX, and its largest singular value; float64) and divides by the certified lower bound sapa's ascent found at the same
(β, n) on the same head: a ratio above 1 would mean the construction beats the ascent there.
"""

from __future__ import annotations

import numpy as np
import torch

from sapa.empirics.kernels.head_jacobian import Head, jvp

__all__ = ["peer_direction", "peer_inputs", "dense_sigma", "compare"]


def peer_direction(h: Head) -> tuple[np.ndarray, str] | None:
    """(u (D,) unit, "max" | "min"): the eigenvector of A = c·Wᵀ the construction uses; None without a real eigenvalue."""
    A = h.c * h.W.T.detach().cpu().numpy().astype(np.float64)
    val, vec = np.linalg.eig(A)
    real = np.isreal(val)
    if not real.any():
        return None
    val, vec = val[real].real, vec[:, real].real
    lmax, lmin = float(val.max()), float(val.min())
    if lmax > -8 * lmin:
        u, which = vec[:, int(np.argmax(val))], "max"
    else:
        u, which = vec[:, int(np.argmin(val))], "min"
    return u / np.linalg.norm(u), which


def peer_inputs(h: Head, n: int, R: float) -> torch.Tensor | None:
    """X (n, D) of the construction (module docstring), every token in the ball ‖x‖ ≤ R; None without a real
    eigenvalue."""
    got = peer_direction(h)
    if got is None:
        return None
    u, which = got
    u = torch.as_tensor(u, dtype=torch.float64)
    first, rest = (u, u / 2) if which == "max" else (-u, u)
    return R * torch.cat([first[None], rest.expand(n - 1, -1)], dim=0)


def dense_sigma(h: Head, X: torch.Tensor) -> float:
    """σ₁ of the dense Jacobian at X (n, D): every column J·e_k from the closed-form product, then the 2-norm."""
    n, D = X.shape
    E = torch.eye(n * D, dtype=torch.float64).reshape(n * D, n, D)           # (nD, n, D): one basis input each
    cols = jvp(h, X.expand(n * D, n, D), E).reshape(n * D, -1)             # (nD, n·d_v): row k is J·e_k
    return float(torch.linalg.matrix_norm(cols, 2))


def compare(res, seed: int, D: int, d: int, d_v: int) -> dict:
    """Per ball β and length n of the ascent's softmax rows: σ₁ at the peers' inputs, the ascent's σ̲ and their
    ratio; the largest ratio per β. ``res``: a :class:`sapa.empirics.experiments.lipschitz_ball.BallResult`."""
    from sapa.empirics.experiments.lipschitz_ball import make_head

    h = make_head(seed, D, d, d_v, "softmax")
    got = peer_direction(h)
    if got is None:
        return {"constructed": False, "why": "A = c·Wᵀ has no real eigenvalue", "rows": []}
    rows = []
    for r in (r for r in res.rows if r["activation"] == "softmax"):
        X = peer_inputs(h, int(r["n"]), float(r["R"]))
        s = dense_sigma(h, X)
        rows.append({"beta": r["beta"], "n": r["n"], "sigma_peer": s, "sigma_ascent": r["sigma_lower"],
                     "ratio": s / r["sigma_lower"]})
    best = {f"{b:g}": max(x["ratio"] for x in rows if x["beta"] == b) for b in sorted({x["beta"] for x in rows})}
    return {"constructed": True, "eigenvector": got[1], "rows": rows, "largest_ratio": best}
