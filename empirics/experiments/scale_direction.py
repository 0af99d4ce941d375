"""Which way should the scale c of c·x^p move with N? The Figure 1 question of arXiv 2410.18613.

The paper (L240–245) says that as the sequence length N decreases the scale applied to x^p
should decrease; a reviewer notes that 1/√N *increases* as N decreases. Here the scale is the
coefficient c of φ(x) = c·x^p, and c(N) is chosen so that the E-RMS norm
√E‖c·S^{∘p}‖²_F equals a softmax reference at the same N:

(a) ``typical``: softmax's typical norm E‖softmax(S/√d)‖_F (Monte Carlo, same draws):
    c_a(N) = E‖softmax(S/√d)‖_F / √M_p(N);
(b) ``bound``: softmax's worst-case bound √N (Theorem 4.1): c_b(N) = √N / √M_p(N);

with M_p(N) = E‖S^{∘p}‖²_F = N(N−1)·m_off + N·m_diag exact (:func:`sapa.theory.moments.exact_moments`).
Because ‖softmax‖_F is nearly flat in N (≈ √e in the i.i.d. model), c_a ∝ N^{−1} once the N²
term dominates, and c_b ∝ N^{−1/2}: both *increase* as N decreases, as 1/√N does.

The Monte Carlo side (:func:`sample_norms`) draws S = X W_Q W_Kᵀ Xᵀ (or S = A Bᵀ for the
paper's model) and computes ‖softmax(τS)‖_F and ‖S^{∘p}‖²_F from the same draws with a
norm-only kernel (:func:`row_norms2`, no Jacobian), checked against ``sapa.empirics.kernels.norms``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from sapa.empirics.montecarlo.samplers import RandomnessModel, sample_paper_ab, sample_trials
from sapa.common.seeds import rng_for, trial_generator
from sapa.empirics.montecarlo.stats import ols_slopes
from sapa.common.validate import InputError, choice, positive_int
from sapa.theory.families import INV_SQRT_N

__all__ = [
    "MODELS",
    "row_norms2",
    "sample_factors",
    "trials_per_n",
    "sample_norms",
    "exact_fro2",
    "matching_scales",
    "fit_scale_exponents",
    "REVIEWER_NS",
    "bound_exponent",
    "polynomial_agreement",
    "PS",
    "ScaleDirectionResult",
    "run_scale_direction",
]

MODELS = ("paper", "iid", "tied")
REVIEWER_NS = (256, 64, 16, 8)  # the reviewer's example: 1/√N = 0.0625, 0.125, 0.25, 0.354
CHUNK_ENTRIES = 2**23  # one (T, B, N) score buffer ≈ 64 MB in float64
Z95 = 1.959963984540054


# --------------------------------------------------------------------------- kernel


def row_norms2(
    L: torch.Tensor,  # (T, N, k) left factors: S = L Rᵀ
    R: torch.Tensor,  # (T, N, k) right factors
    *,
    tau: float,
    ps: Sequence[int] = (1, 3),
    mask: str = "none",
) -> dict:
    """Per-row squared norms ‖softmax(τS)_i‖² and ‖(S^{∘p})_i‖² of S = L Rᵀ; no Jacobian.

    Args:
      L, R: (T, N, k) float64 factors (shared X: L = X W, R = X; paper: L = A, R = B).
      tau: softmax temperature (1/√d in a transformer).
      ps: polynomial degrees (coefficient 1; a coefficient c multiplies the result by c²).
      mask: "none" or "causal" (row i sees columns j ≤ i; softmax normalises over them).

    Returns:
      {"softmax": (T, N), p: (T, N) for p in ps}, float64 CPU tensors.
    """
    mask = choice("mask", mask, ("none", "causal"))
    T, N, _ = L.shape
    B = max(1, min(N, CHUNK_ENTRIES // max(1, T * N)))
    out = {"softmax": torch.empty(T, N, dtype=torch.float64)}
    for p in ps:
        out[int(p)] = torch.empty(T, N, dtype=torch.float64)
    for r0 in range(0, N, B):
        r1 = min(N, r0 + B)
        M = r1 if mask == "causal" else N  # causal rows r0..r1−1 see columns < r1 only
        S = L[:, r0:r1] @ R[:, :M].transpose(-1, -2)  # (T, B, k) @ (T, k, M) -> (T, B, M)
        vis = None
        if mask == "causal":
            vis = torch.arange(M)[None, :] <= torch.arange(r0, r1)[:, None]  # (B, M)
        S2 = S * S  # (T, B, M)
        if vis is not None:
            S2.masked_fill_(~vis, 0.0)
        for p in ps:  # Σ_j S_ij^{2p} = Σ_j (S_ij²)^p
            if int(p) == 1:
                out[1][:, r0:r1] = S2.sum(-1).cpu()
            else:
                Sp = S2.pow(int(p) - 1) if int(p) != 3 else S2 * S2
                out[int(p)][:, r0:r1] = torch.linalg.vecdot(Sp, S2).cpu()
        del S2
        t = S.mul_(tau)
        if vis is not None:
            t.masked_fill_(~vis, -math.inf)
        e = t.sub_(t.amax(-1, keepdim=True)).exp_()  # (T, B, M), the row maximum maps to 1
        out["softmax"][:, r0:r1] = (torch.linalg.vecdot(e, e) / e.sum(-1).square()).cpu()  # Σ P² = Σe²/(Σe)²
    return out


def sample_factors(model: str, N: int, D: int, d: int, T: int, seed: int, key: object) -> tuple[torch.Tensor, torch.Tensor]:
    """(L, R), each (T, N, ·) float64, with S = L Rᵀ under ``model``; a pure function of (seed, key, T).

    ``iid`` / ``tied``: x_i ~ N(0, I_D), W_Q, W_K ~ N(0, 1/D)^{D×d}, L = X W_Q W_Kᵀ, R = X.
    ``paper``: A, B ~ N(0, 1)^{N×d} independent, L = A, R = B.
    """
    model = choice("model", model, MODELS)
    gens = trial_generator(seed, key)  # one generator for the cell (per-trial generators cost ~0.5 ms each)
    if model == "paper":
        return sample_paper_ab(RandomnessModel(weights="paper"), T, N, d, gens)
    X, W = sample_trials(RandomnessModel(weights=model), N, D, d, T, gens)  # (T, N, D), (T, D, D)
    return X @ W, X  # (T, N, D) @ (T, D, D): rows Wᵀx_i, so S_ij = (XW)_i · x_j


def trials_per_n(Ns: Sequence[int], trials: int, max_trials: int = 2048) -> dict[int, int]:
    """Equal-cost design T(N) = clip(trials·(N_max/N)², trials, max_trials): a trial costs O(N²).

    Small N get many trials, which is where ‖S^{∘p}‖²_F is most heavy-tailed (fewest entries).
    """
    n_max = max(Ns)
    return {int(N): int(min(max(max_trials, trials), max(trials, round(trials * (n_max / N) ** 2)))) for N in Ns}


def sample_norms(
    Ns: Sequence[int],
    model: str,
    D: int,
    d: int,
    trials: int,
    seed: int,
    ps: Sequence[int] = (1, 3),
    *,
    max_trials: int = 2048,
) -> pd.DataFrame:
    """Long-form Monte Carlo rows (model, D, d, N, trial, quantity, value), no mask.

    Quantities: ``softmax_fro`` = ‖softmax(S/√d)‖_F and ``poly{p}_fro2`` = ‖S^{∘p}‖²_F, from
    the same draws; ``trials`` trials at the largest N and more at small N (:func:`trials_per_n`).
    """
    D, d, trials = positive_int("D", D), positive_int("d", d), positive_int("trials", trials)
    Ns = [positive_int("N", n) for n in Ns]
    tau = 1.0 / math.sqrt(d)
    rows = []
    for N, T in trials_per_n(Ns, trials, max_trials).items():
        L, R = sample_factors(model, N, D, d, T, seed, {"study": "scale_direction", "model": model, "N": N, "D": D, "d": d})
        r2 = row_norms2(L, R, tau=tau, ps=ps)
        base = {"model": model, "D": D, "d": d, "N": N}
        q = {"softmax_fro": r2["softmax"].sum(-1).sqrt().numpy()}
        q.update({f"poly{p}_fro2": r2[int(p)].sum(-1).numpy() for p in ps})
        for name, v in q.items():
            rows.append(pd.DataFrame({**base, "trial": np.arange(T), "quantity": name, "value": v}))
    return pd.concat(rows, ignore_index=True)


# --------------------------------------------------------------------------- exact side


def exact_fro2(p: int, model: str, N: int, D: int, d: int) -> float:
    """M_p(N) = E‖S^{∘p}‖²_F exactly (σ_w² = 1/D for the shared-X models, σ_ab = 1 for the paper's)."""
    from sapa.theory.moments import exact_moments

    sigma = 1.0 if model == "paper" else 1.0 / math.sqrt(D)
    return exact_moments(p, model, N, D, d, sigma=sigma).expected_fro2


def _per_n(samples: pd.DataFrame, quantity: str) -> dict[int, np.ndarray]:
    s = samples[samples["quantity"] == quantity]
    return {int(N): g.sort_values("trial")["value"].to_numpy(float) for N, g in s.groupby("N")}


def matching_scales(
    Ns: Sequence[int],
    p: int,
    model: str = "iid",
    d: int = 64,
    D: int = 64,
    trials: int = 32,
    seed: int = 0,
    *,
    samples: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per N: the coefficients c_a (typical-norm match), c_b (bound match) and 1/√N.

    c_a(N) = E‖softmax(S/√d)‖_F / √M_p(N) (MC mean, 95% normal interval from its standard error);
    c_b(N) = √N / √M_p(N) exact; ``*_mc`` columns replace M_p by the MC mean of ‖S^{∘p}‖²_F, and
    ``poly_z`` = (MC mean − M_p)/se is the agreement of the two. Pass ``samples`` (from
    :func:`sample_norms`) to reuse draws; otherwise they are drawn here.

    Returns one row per N with columns model, p, D, d, N, trials, softmax_mean, softmax_se,
    softmax_lo, softmax_hi, poly_rms_exact, poly_ms_mc, poly_ms_se, poly_z, c_typical,
    c_typical_lo, c_typical_hi, c_typical_mc, c_bound, c_bound_mc, and the paper's 1/√N (column ``INV_SQRT_N``).
    """
    p = positive_int("p", p)
    if samples is None:
        samples = sample_norms(Ns, model, D, d, trials, seed, ps=(p,))
    soft, poly = _per_n(samples, "softmax_fro"), _per_n(samples, f"poly{p}_fro2")
    out = []
    for N in sorted(int(n) for n in Ns):
        s, q = soft[N], poly[N]
        m2 = exact_fro2(p, model, N, D, d)
        sm, sse = float(s.mean()), float(s.std(ddof=1) / math.sqrt(s.size))
        qm, qse = float(q.mean()), float(q.std(ddof=1) / math.sqrt(q.size))
        root = math.sqrt(m2)
        out.append({
            "model": model, "p": p, "D": D, "d": d, "N": N, "trials": int(s.size),
            "softmax_mean": sm, "softmax_se": sse, "softmax_lo": sm - Z95 * sse, "softmax_hi": sm + Z95 * sse,
            "poly_rms_exact": root, "poly_ms_mc": qm, "poly_ms_se": qse, "poly_z": (qm - m2) / qse,
            "c_typical": sm / root, "c_typical_lo": (sm - Z95 * sse) / root, "c_typical_hi": (sm + Z95 * sse) / root,
            "c_typical_mc": sm / math.sqrt(qm),
            "c_bound": math.sqrt(N) / root, "c_bound_mc": math.sqrt(N / qm),
            INV_SQRT_N: 1.0 / math.sqrt(N),
        })
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- exponents


def fit_scale_exponents(
    samples: pd.DataFrame,
    p: int,
    model: str = "iid",
    d: int = 64,
    D: int = 64,
    *,
    level: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
    n_range: tuple[int, int] | None = None,
) -> pd.DataFrame:
    """Exponent b of c(N) ∝ N^b (OLS of log c on log N) per criterion, with percentile-bootstrap CIs.

    Criteria: ``typical`` (c_a, softmax MC / exact poly), ``typical_mc`` (both MC), ``bound``
    (c_b exact: a deterministic slope, CI of zero width), ``bound_mc`` (√N / MC poly RMS) and
    the paper's 1/√N (−½, the reference). The bootstrap resamples trials within each N, jointly
    for the softmax and polynomial norms of a trial (they share one draw). ``n_range`` limits
    the fit to N in [lo, hi].

    Returns one row per criterion: criterion, slope, ci_lo, ci_hi, level, n_boot, exact_slope
    (the exact counterpart for MC criteria), local (list of neighbour slopes), N (list).
    """
    soft, poly = _per_n(samples, "softmax_fro"), _per_n(samples, f"poly{p}_fro2")
    Ns = sorted(soft)
    if n_range is not None:
        Ns = [n for n in Ns if n_range[0] <= n <= n_range[1]]
    if len(Ns) < 2:
        raise InputError(f"need at least 2 sequence lengths to fit an exponent, got {Ns}")
    x = np.log(np.asarray(Ns, float))  # (K,)
    half_logM = 0.5 * np.log([exact_fro2(p, model, n, D, d) for n in Ns])  # (K,) ½ log M_p exact
    rng = rng_for(seed, "scale_direction", p, len(Ns))
    bs, bq = np.empty((n_boot, len(Ns))), np.empty((n_boot, len(Ns)))  # bootstrap means (B, K)
    for k, n in enumerate(Ns):
        T = soft[n].size  # joint resampling of trials, as multinomial counts (B, T): mean = counts @ v / T
        w = rng.multinomial(T, np.full(T, 1.0 / T), size=n_boot).astype(np.float64) / T
        bs[:, k], bq[:, k] = w @ soft[n], w @ poly[n]
    ms = np.log([soft[n].mean() for n in Ns])
    mq = 0.5 * np.log([poly[n].mean() for n in Ns])
    half_x = 0.5 * x
    logc = {  # criterion -> (point log c (K,), bootstrap log c (B, K) or None, exact counterpart log c)
        "typical": (ms - half_logM, np.log(bs) - half_logM, ms - half_logM),
        "typical_mc": (ms - mq, np.log(bs) - 0.5 * np.log(bq), ms - half_logM),
        "bound": (half_x - half_logM, None, half_x - half_logM),
        "bound_mc": (half_x - mq, half_x - 0.5 * np.log(bq), half_x - half_logM),
        INV_SQRT_N: (-half_x, None, -half_x),
    }
    a = (1 - level) / 2
    rows = []
    for name, (pt, boot, ex) in logc.items():
        slope = float(ols_slopes(x, pt[None])[0])
        lo, hi = (slope, slope) if boot is None else tuple(float(v) for v in np.quantile(ols_slopes(x, boot), [a, 1 - a]))
        rows.append({"model": model, "p": p, "D": D, "d": d, "criterion": name, "slope": slope, "ci_lo": lo,
                     "ci_hi": hi, "level": level, "n_boot": 0 if boot is None else n_boot,
                     "exact_slope": float(ols_slopes(x, ex[None])[0]),
                     "local": [float(v) for v in np.diff(pt) / np.diff(x)], "N": list(Ns)})
    return pd.DataFrame(rows)


def bound_exponent(p: int, model: str, Ns: Sequence[int], D: int, d: int) -> float:
    """Exponent b of c_b(N) = √N/√M_p(N) ∝ N^b: OLS of log c_b on log N over ``Ns`` (exact, no sampling).

    >>> round(bound_exponent(1, "paper", [8, 64, 512], 4, 4), 12)  # M_p = N²·d under the paper's model
    -0.5
    """
    x = np.log(np.asarray(Ns, float))  # (K,)
    y = 0.5 * x - 0.5 * np.log([exact_fro2(p, model, int(n), D, d) for n in Ns])  # (K,) log c_b
    return float(ols_slopes(x, y[None])[0])


def polynomial_agreement(table: pd.DataFrame, fit: pd.DataFrame, family: float) -> dict:
    """Monte Carlo vs exact for the polynomial side of one (model, p): t-tests of mean ‖S^{∘p}‖²_F per N against
    M_p(N) (``poly_z`` of :func:`matching_scales`; Bonferroni over N at ``family``) and the ``bound_mc`` exponent
    interval of :func:`fit_scale_exponents` holding the exact ``bound`` slope. ``agree`` when both hold."""
    from scipy import stats

    crit = [float(stats.t.ppf(1 - family / (2 * len(table)), max(1, int(T) - 1))) for T in table["trials"]]
    z = table["poly_z"].to_numpy(float)
    f = fit.set_index("criterion")
    lo, hi, ex = f.loc["bound_mc", "ci_lo"], f.loc["bound_mc", "ci_hi"], f.loc["bound", "slope"]
    ok_z = bool(np.all(np.abs(z) <= crit))
    ok_slope = bool(lo <= ex <= hi)
    return {"agree": ok_z and ok_slope, "max_abs_z": float(np.max(np.abs(z))), "t_crit": [round(c, 3) for c in crit],
            "trials": [int(t) for t in table["trials"]], "bound_mc_ci": [float(lo), float(hi)], "exact_slope": float(ex)}


# --------------------------------------------------------------------------- the experiment


PS = (1, 3)  # the degrees of Figure 1


@dataclass(frozen=True)
class ScaleDirectionResult:
    """Draws, c(N) tables and fitted exponents of the scale-direction experiment (:func:`run_scale_direction`).

    ``tables[(model, p)]``: :func:`matching_scales` rows; ``fits[(model, p)]``: :func:`fit_scale_exponents`
    rows; ``samples[model]``: :func:`sample_norms` draws. ``models`` lists the models to show (a subset of
    the keys may be drawn: see :meth:`showing`).
    """

    Ns: tuple[int, ...]
    models: tuple[str, ...]
    D: int
    d: int
    trials: int
    seed: int
    level: float
    tables: dict  # {(model, p): DataFrame}
    fits: dict  # {(model, p): DataFrame}
    samples: dict  # {model: DataFrame}

    def showing(self, models: Sequence[str]) -> ScaleDirectionResult:
        """The same result with only ``models`` listed for drawing (the data of the others is kept)."""
        return replace(self, models=tuple(models))

    def to_json(self) -> dict:
        """A mapping of plain values, arrays and DataFrames that ``sapa.common.figdata`` stores as JSON."""
        return {"Ns": list(self.Ns), "models": list(self.models), "D": self.D, "d": self.d, "trials": self.trials,
                "seed": self.seed, "tables": dict(self.tables), "fits": dict(self.fits),
                "samples": dict(self.samples), "level": self.level}

    @classmethod
    def from_json(cls, data: dict) -> ScaleDirectionResult:
        """The result :meth:`to_json` stored."""
        return cls(Ns=tuple(int(n) for n in data["Ns"]), models=tuple(data["models"]), D=int(data["D"]),
                   d=int(data["d"]), trials=int(data["trials"]), seed=int(data["seed"]), level=float(data["level"]),
                   tables=dict(data["tables"]), fits=dict(data["fits"]), samples=dict(data["samples"]))


def run_scale_direction(Ns: Sequence[int], models: Sequence[str] = ("iid", "tied"), D: int = 64, d: int = 64,
                        trials: int = 4, seed: int = 0, max_trials: int = 2048, level: float = 0.99,
                        n_boot: int = 1000) -> ScaleDirectionResult:
    """Per model: one set of draws (:func:`sample_norms`), then per p ∈ PS the c(N) table and exponent fits."""
    tables, fits, samples = {}, {}, {}
    for m in models:
        samples[m] = sample_norms(Ns, m, D, d, trials, seed, ps=PS, max_trials=max_trials)
        for p in PS:
            tables[(m, p)] = matching_scales(Ns, p, m, d, D, samples=samples[m])
            fits[(m, p)] = fit_scale_exponents(samples[m], p, m, d=d, D=D, level=level, n_boot=n_boot, seed=seed)
    return ScaleDirectionResult(Ns=tuple(int(n) for n in Ns), models=tuple(models), D=D, d=d, trials=trials,
                                seed=seed, level=level, tables=tables, fits=fits, samples=samples)
