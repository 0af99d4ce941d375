"""Growth exponent of √E‖c·S^{∘p}‖² against N from a sweep, Monte Carlo beside exact (arXiv 2410.18613, Thm 4.2 – Cor 4.5).

A *series* is the sweep's polynomial cells of one degree p and scale rule that differ only in N
(per weight model, ρ, D, d, quantity). Its Monte Carlo exponent is the OLS slope of ½ log of the
mean squared norm on log N with a LEVEL interval (``sapa.empirics.montecarlo.stats.rms_exponent_interval``); the
exact exponent is the same OLS statistic of ½ log E‖·‖² (``sapa.theory.moments``, attached to the
sweep summary by ``sapa.empirics.montecarlo.sweep.attach_exact``). The two agree when the interval holds the exact slope.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from sapa.theory.families import INV_SQRT_N

__all__ = ["exact_rms_slope", "fit_vs_exact", "poly_series", "rms_exponent", "series_label"]


def rms_exponent(N: Sequence[int], sq_samples: Sequence[np.ndarray], level: float) -> dict:
    """Exponent of √E‖·‖² vs N with its ``level`` interval (``sapa.empirics.montecarlo.stats.rms_exponent_interval``) and local slopes."""
    from sapa.empirics.montecarlo.stats import local_slopes, rms_exponent_interval

    fit = rms_exponent_interval(N, sq_samples, level=level)
    means = [float(np.mean(v)) for v in sq_samples]
    return {"slope": fit.estimate, "ci": [fit.lo, fit.hi], "level": level,
            "local": [s / 2 for s in local_slopes(N, means)]}


def exact_rms_slope(N: Sequence[int], expected_sq: Sequence[float]) -> float:
    """OLS slope of ½·log E‖·‖² on log N over the grid (the exact analogue of the Monte Carlo fit).

    >>> round(exact_rms_slope([8, 64, 512], [3.0 * n**1.4 for n in (8, 64, 512)]), 12)
    0.7
    """
    from sapa.empirics.montecarlo.stats import loglog_slope

    return 0.5 * loglog_slope(N, expected_sq)  # the RMS exponent of squared norms


def fit_vs_exact(g: pd.DataFrame, s: pd.DataFrame, level: float) -> dict:
    """Monte Carlo RMS exponent of the sweep rows ``g`` beside the exact slope from summary rows ``s`` (sorted by N)."""
    Ns = sorted(int(n) for n in g["N"].unique())
    sq = [g.loc[g["N"] == n, "value"].to_numpy() ** 2 for n in Ns]
    fit = rms_exponent(Ns, sq, level)
    exp_sq = s["expected_sq"].to_numpy(float)
    exact = exact_rms_slope(list(s["N"]), list(exp_sq)) if len(exp_sq) and np.all(np.isfinite(exp_sq)) else math.nan
    agree = bool(fit["ci"][0] <= exact <= fit["ci"][1]) if math.isfinite(exact) else None
    return {"N": Ns, "trials": [len(v) for v in sq], "mc_exponent": fit["slope"], "mc_ci": fit["ci"],
            "exact_exponent_on_grid": exact, "agree": agree}


def series_label(p: int, scale_policy: str, c: float | None) -> str:
    """x^3/sqrt(N), 0.0625*x^1 … (the sweep's activation labels)."""
    return f"x^{p}/sqrt(N)" if scale_policy == INV_SQRT_N else f"{float(c):g}*x^{p}"


def poly_series(df: pd.DataFrame, summ: pd.DataFrame, *, p: int, scale_policy: str, c: float | None,
                level: float) -> Iterator[dict]:
    """One record per (weight model, ρ, D, d, quantity ∈ {fro, jac_fro}) of the unmasked iso-X poly cells of degree p.

    ``df``: the sweep's tidy rows; ``summ``: its per-cell summary with exact E‖·‖² and z-scores. Each record
    holds the Monte Carlo exponent and interval, the exact slope on the same grid, whether the interval
    covers it (``agree``; None without an exact value), and the cells' z-scores of mean ‖·‖² against E‖·‖².
    """
    sel = (df["activation"] == "poly") & (df["p"] == p) & (df["scale_policy"] == scale_policy) & (df["row"] == -1)
    sel &= (df["mask"] == "none") & (df["x_model"] == "iso")
    if c is not None:
        sel &= np.isclose(df["c"].astype(float), c)
    sub = df[sel]
    for (wm, rho, D, d, cc, q), g in sub.groupby(["weight_model", "rho", "D", "d", "c", "quantity"], sort=True, dropna=False):
        if q not in ("fro", "jac_fro"):
            continue
        s = summ[(summ["activation"] == "poly") & (summ["p"] == p) & (summ["scale_policy"] == scale_policy)
                 & (summ["weight_model"] == wm) & (summ["rho"] == rho) & (summ["D"] == D) & (summ["d"] == d)
                 & (summ["quantity"] == q) & (summ["row"] == -1) & (summ["mask"] == "none")]
        if scale_policy == "const":
            s = s[np.isclose(s["c"].astype(float), float(cc))]
        s = s.sort_values("N")
        first = fit_vs_exact(g, s, level)
        z = s["z"].to_numpy(float)
        c_rec = None if scale_policy != "const" else float(cc)
        yield {"weight_model": wm, "rho": float(rho), "D": int(D), "d": int(d), "quantity": q, "c": c_rec, **first,
               "max_abs_z": float(np.nanmax(np.abs(z))) if z.size else math.nan,
               "cells": int(len(z)), "cells_abs_z_gt_4": int(np.sum(np.abs(z) > 4))}
