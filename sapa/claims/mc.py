"""The Monte Carlo side of the ledger: one seeded sweep per ``sapa verify`` run, shared by the claims.

The sweep of the budget (``empirics/configs/<budget>.toml``, seed from ``--seed``) runs once,
resumably, into ``OUT/sweep``; growth exponents of the RMS norms are fitted from it and set
beside the exact predictions of ``theory.moments`` (arXiv 2410.18613, Thm 4.2 – Cor 4.5).
"""

from __future__ import annotations

import math
import sys
import zlib
from dataclasses import replace

import numpy as np
import pandas as pd

from sapa.ledger import Context

LEVEL = 0.99  # two-sided level of the bootstrap interval used for MC-vs-exact agreement


def sweep_frame(ctx: Context) -> tuple[pd.DataFrame, object]:
    """Run (or resume) the budget's sweep into ``OUT/sweep`` once; return (tidy rows, config)."""
    if "sweep" not in ctx.cache:
        from empirics.sweep import builtin_config, load_config, run_sweep, with_overrides

        cfg = with_overrides(load_config(builtin_config(ctx.budget.sweep)), seed=ctx.budget.seed)
        df = run_sweep(cfg, ctx.out_dir / "sweep", progress=sys.stderr.isatty())
        ctx.cache["sweep"] = (df, cfg)
    return ctx.cache["sweep"]


def sweep_summary(ctx: Context) -> pd.DataFrame:
    """Per-cell summary with exact E‖·‖² and z-scores attached (cached)."""
    if "summary" not in ctx.cache:
        from empirics.sweep import attach_exact, summarise

        df, cfg = sweep_frame(ctx)
        ctx.cache["summary"] = attach_exact(summarise(df), cfg)
    return ctx.cache["summary"]


def rms_exponent(N: list[int], sq_samples: list[np.ndarray], seed: tuple) -> dict:
    """Exponent of √E‖·‖² vs N: half the OLS slope of log mean(‖·‖²), with a bootstrap CI at LEVEL."""
    from empirics.stats import fit_exponent

    fit = fit_exponent(N, sq_samples, level=LEVEL, n_boot=1000, seed=np.random.SeedSequence(list(seed)))
    return {"slope": fit.slope / 2, "ci": [fit.ci[0] / 2, fit.ci[1] / 2], "level": LEVEL,
            "local": [s / 2 for s in fit.local]}


def exact_rms_slope(N: list[int], expected_sq: list[float]) -> float:
    """OLS slope of ½·log E‖·‖² on log N over the same grid (the exact analogue of the MC fit)."""
    x, y = np.log(np.asarray(N, float)), 0.5 * np.log(np.asarray(expected_sq, float))
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc * xc).sum())


RERUN_MIN_FACTOR = 2  # a series that disagrees is rerun once on fresh samples, with at least 2× the trials
RERUN_MAX_TRIALS = 4_096  # equal-cost design: T(N) = T·(N_max/N)², at least 2T, capped here


def _coefficient(scale_policy: str, c: float | None, N: int) -> float:
    """The coefficient of c·x^p for a scale policy at length N (1/√N or the constant)."""
    return 1 / math.sqrt(N) if scale_policy == "inv_sqrt_n" else float(c)


def _rerun_cells(ctx: Context, cfg, *, p: int, scale_policy: str, c: float | None, wm: str, rho: float, D: int, d: int):
    """Fresh-seed rerun of one series, equal cost per N: T(N) = min(MAX, max(2T, T·(N_max/N)²)) (cached).

    The cost of a trial is O(N²D), so small N get many more trials; that is where the squared
    norms of x^p are most heavy-tailed (fewest entries averaged) and small-sample means most biased.
    Draws are computed once per (p, model, D, d) with coefficient 1; every scale policy is that
    draw times its coefficient (‖c·φ‖ = c‖φ‖ for the norm and the Jacobian norm alike).
    """
    from empirics.sweep import cells, run_cell, with_overrides

    key = ("rerun", p, wm, rho, D, d)  # one set of draws serves the theorem and its corollary
    if key not in ctx.cache:
        base = with_overrides(cfg, seed=cfg.seed + 1_000_003)
        n_max = max(cfg.N)
        todo = [cl for cl in cells(base) if cl.activation == "poly" and cl.p == p and cl.weight_model == wm
                and math.isclose(cl.rho, rho) and cl.D == D and cl.d == d and cl.mask == "none" and cl.x_model == "iso"]
        unit = {cl.N: replace(cl, scale_policy="const", c=1.0) for cl in todo}  # one unit-coefficient cell per N
        frames = []
        for N, cl in sorted(unit.items()):
            t = min(RERUN_MAX_TRIALS, max(RERUN_MIN_FACTOR * cfg.trials, cfg.trials * (n_max // N) ** 2))
            frames.append(run_cell(with_overrides(base, trials=t), cl))
        ctx.cache[key] = pd.concat(frames, ignore_index=True)
    rows = ctx.cache[key].copy()
    rows["value"] = rows["value"] * rows["N"].map(lambda n: _coefficient(scale_policy, c, int(n)))
    return rows


def _fit_vs_exact(g: pd.DataFrame, s: pd.DataFrame, seed: tuple) -> dict:
    """MC RMS exponent of the rows ``g`` beside the exact slope from summary rows ``s`` (sorted by N)."""
    Ns = sorted(int(n) for n in g["N"].unique())
    sq = [g.loc[g["N"] == n, "value"].to_numpy() ** 2 for n in Ns]
    fit = rms_exponent(Ns, sq, seed)
    exp_sq = s["expected_sq"].to_numpy(float)
    exact = exact_rms_slope(list(s["N"]), list(exp_sq)) if len(exp_sq) and np.all(np.isfinite(exp_sq)) else math.nan
    agree = bool(fit["ci"][0] <= exact <= fit["ci"][1]) if math.isfinite(exact) else None
    return {"N": Ns, "trials": [len(v) for v in sq], "mc_exponent": fit["slope"], "mc_ci": fit["ci"],
            "exact_exponent_on_grid": exact, "agree": agree}


def series(ctx: Context, *, p: int, scale_policy: str, c: float | None = None) -> list[dict]:
    """One record per (weight model, rho, D, d, quantity) for poly cells of degree p with this scale.

    Each record holds the MC RMS exponent with its interval, the exact slope on the same grid,
    whether they agree, and the cell z-scores of mean ‖·‖² against the exact E‖·‖². A series
    whose interval misses the exact slope is rerun once on fresh samples with RERUN_FACTOR ×
    the trials (squared norms of x^p, p ≥ 2, are heavy-tailed: small-sample means sit below
    the expectation, more so at small N) and judged on the rerun; both fits are reported.
    """
    df, cfg = sweep_frame(ctx)
    summ = sweep_summary(ctx)
    sel = (df["activation"] == "poly") & (df["p"] == p) & (df["scale_policy"] == scale_policy) & (df["row"] == -1)
    sel &= (df["mask"] == "none") & (df["x_model"] == "iso")
    if c is not None:
        sel &= np.isclose(df["c"].astype(float), c)
    sub = df[sel]
    out = []
    for (wm, rho, D, d, cc, q), g in sub.groupby(["weight_model", "rho", "D", "d", "c", "quantity"], sort=True, dropna=False):
        if q not in ("fro", "jac_fro"):
            continue
        s = summ[(summ["activation"] == "poly") & (summ["p"] == p) & (summ["scale_policy"] == scale_policy)
                 & (summ["weight_model"] == wm) & (summ["rho"] == rho) & (summ["D"] == D) & (summ["d"] == d)
                 & (summ["quantity"] == q) & (summ["row"] == -1) & (summ["mask"] == "none")]
        if scale_policy == "const":
            s = s[np.isclose(s["c"].astype(float), float(cc))]
        s = s.sort_values("N")
        key = zlib.crc32(f"{wm}|{rho}|{q}|{scale_policy}|{c}".encode())  # stable across processes
        first = _fit_vs_exact(g, s, (ctx.budget.seed, p, int(D), int(d), key))
        z = s["z"].to_numpy(float)
        rec = {"weight_model": wm, "rho": float(rho), "D": int(D), "d": int(d), "quantity": q,
               "c": None if scale_policy != "const" else float(cc), **first,
               "max_abs_z": float(np.nanmax(np.abs(z))) if z.size else math.nan,
               "cells": int(len(z)), "cells_abs_z_gt_4": int(np.sum(np.abs(z) > 4)), "rerun": None}
        if first["agree"] is False:
            c_eff = float(cc) if scale_policy == "const" else None
            big = _rerun_cells(ctx, cfg, p=p, scale_policy=scale_policy, c=c_eff, wm=wm, rho=float(rho), D=int(D), d=int(d))
            second = _fit_vs_exact(big[(big["quantity"] == q) & (big["row"] == -1)], s,
                                   (ctx.budget.seed + 1, p, int(D), int(d), key))
            rec.update(agree=second["agree"], rerun=second)
        out.append(rec)
    return out
