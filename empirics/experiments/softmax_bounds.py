"""max ‖softmax(S)‖_F/√N and ‖∂softmax(S)/∂S‖_F/√N over random and adversarial S (arXiv 2410.18613, Thm 4.1, Eq. 4.2).

The numerical side of the Theorem 4.1 checks, beside the exact derivation of :mod:`sapa.theory.softmax`:

* :func:`adversarial_logits` — Gaussian logit rows at temperatures 1e-3…1e4, two-way near-ties (the
  sharp maximiser of the row Jacobian) and near-one-hot rows;
* :func:`norm_search` — the largest ‖P‖_F/√N over N×N matrices assembled from such rows;
* :func:`row_jacobian_search` — the largest row Jacobian ‖diag(s) − ssᵀ‖_F over adversarial and
  Dirichlet rows; :func:`autograd_jacobian_search` — the full (N², N²) Jacobian from torch autograd;
* :func:`jacobian_wrt_x_growth` — ‖∂softmax(XWXᵀ)/∂X‖_F/√N grows with the weight scale (no bound in X);
* :func:`lipschitz_search` — softmax attention's Lipschitz constant w.r.t. X against N.

All float64, randomness only through the seeds given (``sapa.common.seeds.rng_for``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from sapa.common.seeds import rng_for, torch_gen_for

__all__ = [
    "adversarial_logits",
    "autograd_jacobian_ratio",
    "autograd_jacobian_search",
    "jacobian_wrt_x_growth",
    "lipschitz_search",
    "norm_search",
    "row_jacobian_search",
    "softmax_rows",
]


def adversarial_logits(N: int, rng: np.random.Generator, rows: int) -> np.ndarray:
    """Random and adversarial logit rows (rows + rows // 8, N): Gaussian at many temperatures, near-ties, near-one-hot."""
    temps = np.array([1e-3, 0.1, 1.0, 3.0, 10.0, 100.0, 1e4])
    z = rng.standard_normal((rows, N)) * temps[rng.integers(0, len(temps), rows)][:, None]  # (rows, N)
    if N >= 2:
        tie = np.full((max(rows // 8, 1), N), -np.inf)
        tie[:, :2] = rng.standard_normal((len(tie), 1)) * 1e-9  # two-way ties: the maximiser
        z = np.vstack([z, np.where(np.isinf(tie), -40.0, tie)])
    return z


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """Row softmax, stable: exp(z − max z) / Σ exp(z − max z); (R, N) -> (R, N).

    >>> softmax_rows(np.array([[0.0, 0.0], [1000.0, 0.0]])).round(12).tolist()
    [[0.5, 0.5], [1.0, 0.0]]
    """
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def autograd_jacobian_ratio(S: torch.Tensor) -> float:
    """‖∂softmax(S)/∂S‖_F / √N with the full (N², N²) Jacobian from torch autograd (float64)."""
    N = S.shape[0]
    J = torch.func.jacrev(lambda s: torch.softmax(s, dim=-1))(S)  # (N, N, N, N)
    return float(torch.linalg.vector_norm(J)) / math.sqrt(N)


def norm_search(Ns: Sequence[int], random_rows: int, seed: int) -> tuple[list[dict], float]:
    """(per-N records, largest ‖P‖_F/√N found) over N×N matrices assembled from adversarial rows.

    Per N: 64 matrices whose rows are drawn from max(random_rows // 4, 16) adversarial rows
    (‖P‖²_F = Σ_i ‖P_i‖²), and the one-hot limit √p2 of rows with one logit ahead by g = 1, 10, 30, 700.
    """
    rng = rng_for(seed, "softmax-norm-rows")
    per_n = []
    worst = 0.0
    for N in Ns:
        rows = max(random_rows // 4, 16)
        P = softmax_rows(adversarial_logits(N, rng, rows))
        p2 = (P**2).sum(axis=1)
        # Random N×N matrices assembled from these rows: ‖P‖_F² = Σ_i p2_i.
        idx = rng.integers(0, len(p2), size=(64, N))
        ratio = np.sqrt(p2[idx].sum(axis=1) / N)
        # The supremum: rows tending to one-hot (logit gap g) give ratio → 1.
        gaps = np.array([1.0, 10.0, 30.0, 700.0])
        gap_rows = np.hstack([gaps[:, None], np.zeros((len(gaps), N - 1))])  # (4, N): one logit ahead by g
        near_one_hot = np.sqrt((softmax_rows(gap_rows) ** 2).sum(axis=1))  # every row alike: ratio = √p2
        worst = max(worst, float(ratio.max()))
        per_n.append({
            "N": N,
            "max_ratio_fro_over_sqrtN": float(ratio.max()),
            "median_ratio": float(np.median(ratio)),
            "one_hot_limit_ratio_at_gaps_1_10_30_700": near_one_hot.tolist(),
        })
    return per_n, worst


def row_jacobian_search(Ns: Sequence[int], random_rows: int, seed: int) -> tuple[int, float]:
    """(rows checked, largest row Jacobian ‖diag(s) − ssᵀ‖_F) over adversarial rows and Dirichlet rows (α = 0.01…100)."""
    from sapa.theory.softmax import row_jacobian_fro

    rng = rng_for(seed, "softmax-jacobian-rows")
    rows_checked = 0
    worst_row = 0.0
    for N in Ns:
        P = softmax_rows(adversarial_logits(N, rng, random_rows))
        if N >= 2:
            # Dirichlet rows from near-vertices (α = 0.01) to near-centroid (α = 100).
            alpha = rng.choice([0.01, 0.1, 1.0, 10.0, 100.0], size=256)
            P = np.vstack([P, np.array([rng.dirichlet(np.full(N, a)) for a in alpha])])
        vals = row_jacobian_fro(P)
        rows_checked += len(P)
        worst_row = max(worst_row, float(np.max(vals)))
    return rows_checked, worst_row


def autograd_jacobian_search(seed: int) -> tuple[list[dict], float]:
    """(per-N records, largest ‖∂softmax(S)/∂S‖_F/√N) from autograd at random S (scales 0.01…50) and two-point rows."""
    gen = torch_gen_for(seed, "softmax_bounds")
    autograd = []
    worst_matrix = 0.0
    for N in (2, 3, 4, 8):
        for scale in (0.01, 1.0, 5.0, 50.0):
            S = torch.randn(N, N, generator=gen, dtype=torch.float64) * scale
            worst_matrix = max(worst_matrix, autograd_jacobian_ratio(S))
        two_point = torch.full((N, N), -60.0, dtype=torch.float64)
        two_point[:, :2] = 0.0
        autograd.append({"N": N, "ratio_at_two_point_rows": autograd_jacobian_ratio(two_point),
                         "max_ratio_random": worst_matrix})
    return autograd, worst_matrix


def jacobian_wrt_x_growth(seed: int) -> dict:
    """‖∂softmax(XWXᵀ)/∂X‖_F / √N grows without bound in the scale of W: no bound C√N holds for all X, W.

    Random inputs at weight scales 0.1…3, and a witness that keeps every row at the sharp two-point
    maximiser of ‖∂softmax/∂S‖ while ∂S/∂X grows: tokens 1 and 2 equal (x₁ = x₂ = 2e₁) and every other
    token leaning on e₁, so each row's two largest logits stay tied as W = t·I grows; the ratio grows like t.
    """
    from sapa.empirics.kernels.norms import attention_norms
    from sapa.theory.families import softmax

    rng = rng_for(seed, "softmax-jacobian-wrt-X")
    N, D = 16, 8
    X = rng.standard_normal((N, D))
    W0 = rng.standard_normal((D, D)) / D
    out = []
    for t in (0.1, 0.3, 1.0, 3.0):
        r = attention_norms(X, t * W0, softmax())
        out.append({"weight_scale": t, "jac_fro_over_sqrtN": r.jac_fro / math.sqrt(N)})
    Xw = 0.1 * rng.standard_normal((N, D))  # (N, D): tied-pair witness
    Xw[:, 0] = 0.5 + 0.1 * rng.random(N)
    Xw[0] = Xw[1] = 2.0 * np.eye(D)[0]
    witness = []
    for t in (1.0, 10.0, 100.0):
        r = attention_norms(Xw, t * np.eye(D), softmax())
        witness.append({"weight_scale": t, "jac_fro_over_sqrtN": r.jac_fro / math.sqrt(N)})
    best = max(o["jac_fro_over_sqrtN"] for o in out + witness)
    return {
        "N": N, "D": D, "series": out, "tied_pair_witness": witness, "max_ratio": best,
        "exceeds_2sqrtN": best > 2.0,
        "note": "with respect to X the Jacobian norm scales with ‖X‖·‖W‖ (the witness keeps every row at the sharp "
                "two-point maximiser while W = t·I grows), so Eq. 4.2 can only hold for S.",
    }


def lipschitz_search(Ns: Sequence[int], seed: int, steps: int, restarts: int) -> dict:
    """Softmax attention's Lipschitz constant ‖∂(softmax(XWXᵀ)X)/∂X‖₂ vs N, D = 4, tokens of norm r = 2.

    Power iteration (jvp/vjp) at random, structured and gradient-ascent inputs (:mod:`sapa.empirics.kernels.lipschitz`).
    Castin, Ablin, Peyré (ICML 2024) show adversarial growth like √N: the Jacobian of softmax
    attention w.r.t. X has no N-independent bound even though ‖∂softmax(S)/∂S‖₂ ≤ 1/2.
    """
    from sapa.empirics.kernels.lipschitz import lipschitz_growth
    from sapa.theory.families import softmax
    from sapa.empirics.montecarlo.stats import loglog_slope

    Ns = list(Ns)
    lip = lipschitz_growth(Ns, 4, softmax(), token_radius=2.0, seed=seed,
                           steps=steps, restarts=restarts, constraint="token")
    per_input = {name: g.sort_values("N")["sigma"].tolist() for name, g in lip.groupby("input")}
    worst = lip.groupby("N")["sigma"].max()
    return {"N": Ns, "D": 4, "token_norm": 2.0, "sigma_by_input": per_input,
            "slope_of_worst_found": loglog_slope(worst.index.to_numpy(float), worst.to_numpy()),
            "slope_of_random": loglog_slope(Ns, per_input["random"]),
            "reference": "Castin, Ablin, Peyré (ICML 2024): adversarial growth like √N"}
