"""Analysis of a sweep's tidy rows: summaries, growth exponents in N, exact moments, z-scores.

Also :func:`softmax_typical_norm`, the typical ‖softmax(A Bᵀ/√d)‖_F against its bound √N (Thm 4.1).
"""

from __future__ import annotations

import json
import math
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from sapa.common.validate import InputError, positive_int
from sapa.common.seeds import seed_sequence, trial_generator
from sapa.theory.families import PER_ROW, canonical_rule, scale_factor
from sapa.empirics.montecarlo.stats import QUANTILES, classify_regime, fit_exponent
from sapa.empirics.montecarlo.sweep.cells import KEY_COLS, SCHEMA
from sapa.empirics.montecarlo.sweep.config import SweepConfig


def summarise(df: pd.DataFrame, quantiles: Sequence[float] = QUANTILES) -> pd.DataFrame:
    """Per (cell, quantity, row): n, mean, std, se, quantiles, and mean/se of the squared values."""
    keys = [c for c in (*KEY_COLS, "label") if c in df.columns] + ["quantity", "row"]
    g = df.assign(value_sq=df["value"] ** 2).groupby(keys, dropna=False, sort=False)
    agg = g.agg(
        n=("value", "size"),
        mean=("value", "mean"),
        std=("value", "std"),
        mean_sq=("value_sq", "mean"),
        std_sq=("value_sq", "std"),
    )
    agg["se"] = agg["std"] / np.sqrt(agg["n"])
    agg["se_sq"] = agg["std_sq"] / np.sqrt(agg["n"])
    qs = g["value"].quantile(list(quantiles)).unstack()
    qs.columns = [f"q{round(100 * q):02d}" for q in quantiles]
    return agg.join(qs).reset_index()


def fit_exponents(
    df: pd.DataFrame,
    quantities: Iterable[str] = ("fro", "jac_fro"),
    *,
    level: float = 0.9,
    n_boot: int = 1000,
    seed: int = 0,
    N_min: int = 1,
) -> pd.DataFrame:
    """Growth exponent of mean(value) vs N per series (all cell keys but N) and quantity.

    Each series gets its own bootstrap seed ``SeedSequence(seed, sha256(series key))``;
    columns: series keys, quantity, slope, ci_lo, ci_hi, regime, local_slopes (JSON), evidence (JSON).
    """
    keys = [c for c in (*KEY_COLS, "label") if c in df.columns and c != "N"] + ["quantity"]
    sel = df[df["quantity"].isin(list(quantities)) & (df["row"] == -1) & (df["N"] >= N_min)]
    out = []
    for gkey, g in sel.groupby(keys, dropna=False, sort=False):
        Ns = sorted(g["N"].unique())
        if len(Ns) < 2:
            continue
        samples = [g.loc[g["N"] == n, "value"].to_numpy() for n in Ns]
        if any(np.any(s <= 0) for s in samples):
            continue
        key = {k: (None if isinstance(v, float) and math.isnan(v) else (v.item() if hasattr(v, "item") else v)) for k, v in zip(keys, gkey)}
        fit = fit_exponent(Ns, samples, level=level, n_boot=n_boot, seed=seed_sequence(seed, key))
        regime, evidence = classify_regime(fit)
        out.append(
            {
                **dict(zip(keys, gkey)),
                "slope": fit.slope,
                "ci_lo": fit.ci[0],
                "ci_hi": fit.ci[1],
                "level": level,
                "regime": regime,
                "N_min": int(Ns[0]),
                "N_max": int(Ns[-1]),
                "last_local_slope": fit.local[-1],
                "local_slopes": json.dumps([round(s, 4) for s in fit.local]),
                "evidence": json.dumps(evidence),
            }
        )
    return pd.DataFrame(out)


def attach_exact(summary: pd.DataFrame, config: SweepConfig | None = None) -> pd.DataFrame:
    """Add ``expected_sq`` = exact E‖·‖² (``sapa.theory.moments``) and ``z`` = (mean_sq − E)/se_sq.

    Exact moments exist for polynomial cells without mask or row scale, isotropic zero-mean
    inputs with σ_x = 1; weights have std σ_w (default 1/√D), the paper model σ_ab; and
    E‖c φ‖² = c² E‖φ‖² with c = 1/√N, 1/√d or the constant. Other rows get NaN.
    """
    from sapa.theory.moments import exact_moments

    sigma_w = None if config is None else config.sigma_w
    sigma_ab = 1.0 if config is None else config.sigma_ab
    if config is not None and config.sigma_x != 1.0:
        raise InputError("attach_exact supports sigma_x = 1 only")
    out = summary.copy()
    out["expected_sq"] = np.nan
    cache: dict = {}
    for i, r in out.iterrows():
        if r["quantity"] not in ("fro", "jac_fro") or r["row"] != -1 or r["activation"] != "poly":
            continue
        rule = canonical_rule(r["scale_policy"])  # a stored "dynamic_causal" is "inv_sqrt_i"
        if r["mask"] != "none" or rule in PER_ROW or r["x_model"] != "iso" or r["mean_norm"] != 0:
            continue
        p, wm, N, D, d = int(r["p"]), r["weight_model"], int(r["N"]), int(r["D"]), int(r["d"])
        sigma = sigma_ab if wm == "paper" else (sigma_w if sigma_w is not None else 1 / math.sqrt(D))
        key = (p, wm, float(r["rho"]), N, D, d, sigma)
        if key not in cache:
            cache[key] = exact_moments(p, wm, N, D, d, rho=key[2], sigma=sigma)
        m = cache[key]
        c = scale_factor(rule, N, c=r["c"], d=d)
        e = m.expected_fro2 if r["quantity"] == "fro" else m.expected_jac_fro2
        out.at[i, "expected_sq"] = float(e) * c * c
    out["z"] = (out["mean_sq"] - out["expected_sq"]) / out["se_sq"]
    return out


def softmax_typical_norm(N_grid: Sequence[int], d: int, trials: int, seed: int = 0, *, chunk: int = 1024) -> pd.DataFrame:
    """``‖softmax(A Bᵀ/√d)‖_F`` for A, B (N, d) i.i.d. N(0, 1) vs the bound √N (Thm 4.1).

    Returns rows (N, trial, fro, bound = √N, ratio = fro/√N). Always 1 ≤ ‖P‖_F ≤ √N; the
    bound is reached only by one-hot rows.
    """
    d, trials = positive_int("d", d), positive_int("trials", trials)
    rows = []
    for N in N_grid:
        N = positive_int("N", N)
        for t in range(trials):
            g = trial_generator(seed, {"softmax_typical": SCHEMA, "N": N, "d": d}, t)
            A = torch.randn(N, d, generator=g, dtype=torch.float64)
            B = torch.randn(N, d, generator=g, dtype=torch.float64)
            sq = 0.0
            for s in range(0, N, chunk):
                P = torch.softmax(A[s : s + chunk] @ B.T / math.sqrt(d), dim=-1)  # (c, d)@(d, N)
                sq += float((P * P).sum())
            fro = math.sqrt(sq)
            rows.append({"N": N, "trial": t, "fro": fro, "bound": math.sqrt(N), "ratio": fro / math.sqrt(N)})
    return pd.DataFrame(rows)
