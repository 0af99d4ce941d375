"""The Monte Carlo side of the ledger: one seeded sweep per ``sapa verify`` run, shared by the claims.

The sweep of the budget (``empirics/configs/<budget>.toml``, seed from ``--seed``) runs once,
resumably, into ``OUT/sweep``; growth exponents of the RMS norms are fitted from it and set
beside the exact predictions of ``theory.moments`` (arXiv 2410.18613, Thm 4.2 – Cor 4.5).

Agreement is judged once, on the first pass: trials per cell are fixed in advance by the sweep
config (``empirics.stats.design_trials`` for the heavy-tailed x^p, p ≥ 2), each series gets one
interval at LEVEL from ``empirics.stats.rms_exponent_interval``, and every comparison is logged
with :func:`record`; :func:`monte_carlo_summary` reports the first-pass coverage (nominal LEVEL).
There is no rerun on disagreement: a miss stays a miss.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sapa.ledger import Context

LEVEL = 0.99  # two-sided level of the interval used for MC-vs-exact agreement


def sweep_frame(ctx: Context) -> tuple[pd.DataFrame, object]:
    """Run (or resume) the budget's sweep into ``OUT/sweep`` once; return (tidy rows, config)."""
    if "sweep" not in ctx.cache:
        from empirics.sweep import builtin_config, load_config, run_sweep, with_overrides

        cfg = with_overrides(load_config(builtin_config(ctx.budget.sweep)), seed=ctx.budget.seed)
        df = run_sweep(cfg, ctx.out_dir / "sweep", progress=True)  # a bar on a terminal, periodic lines in a log
        ctx.cache["sweep"] = (df, cfg)
    return ctx.cache["sweep"]


def sweep_summary(ctx: Context) -> pd.DataFrame:
    """Per-cell summary with exact E‖·‖² and z-scores attached (cached)."""
    if "summary" not in ctx.cache:
        from empirics.sweep import attach_exact, summarise

        df, cfg = sweep_frame(ctx)
        ctx.cache["summary"] = attach_exact(summarise(df), cfg)
    return ctx.cache["summary"]


def rms_exponent(N: list[int], sq_samples: list[np.ndarray]) -> dict:
    """Exponent of √E‖·‖² vs N with its LEVEL interval (``empirics.stats.rms_exponent_interval``) and local slopes."""
    from empirics.stats import local_slopes, rms_exponent_interval

    fit = rms_exponent_interval(N, sq_samples, level=LEVEL)
    means = [float(np.mean(v)) for v in sq_samples]
    return {"slope": fit.estimate, "ci": [fit.lo, fit.hi], "level": LEVEL,
            "local": [s / 2 for s in local_slopes(N, means)]}


def exact_rms_slope(N: list[int], expected_sq: list[float]) -> float:
    """OLS slope of ½·log E‖·‖² on log N over the same grid (the exact analogue of the MC fit)."""
    x, y = np.log(np.asarray(N, float)), 0.5 * np.log(np.asarray(expected_sq, float))
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc * xc).sum())


def _coefficient(scale_policy: str, c: float | None, N: int) -> float:
    """The coefficient of c·x^p for a scale policy at length N (1/√N or the constant)."""
    return 1 / math.sqrt(N) if scale_policy == "inv_sqrt_n" else float(c)


def _fit_vs_exact(g: pd.DataFrame, s: pd.DataFrame) -> dict:
    """MC RMS exponent of the rows ``g`` beside the exact slope from summary rows ``s`` (sorted by N)."""
    Ns = sorted(int(n) for n in g["N"].unique())
    sq = [g.loc[g["N"] == n, "value"].to_numpy() ** 2 for n in Ns]
    fit = rms_exponent(Ns, sq)
    exp_sq = s["expected_sq"].to_numpy(float)
    exact = exact_rms_slope(list(s["N"]), list(exp_sq)) if len(exp_sq) and np.all(np.isfinite(exp_sq)) else math.nan
    agree = bool(fit["ci"][0] <= exact <= fit["ci"][1]) if math.isfinite(exact) else None
    return {"N": Ns, "trials": [len(v) for v in sq], "mc_exponent": fit["slope"], "mc_ci": fit["ci"],
            "exact_exponent_on_grid": exact, "agree": agree}


def _label(p: int, scale_policy: str, c: float | None) -> str:
    """x^3/sqrt(N), 0.0625*x^1 … (the sweep's activation labels)."""
    return f"x^{p}/sqrt(N)" if scale_policy == "inv_sqrt_n" else f"{float(c):g}*x^{p}"


def series(ctx: Context, *, p: int, scale_policy: str, c: float | None = None) -> list[dict]:
    """One record per (weight model, rho, D, d, quantity) for poly cells of degree p with this scale.

    Each record holds the MC RMS exponent with its LEVEL interval, the exact slope on the same grid,
    whether the interval covers it (judged once, on the first and only pass), and the cell
    z-scores of mean ‖·‖² against the exact E‖·‖². Every comparison is logged with :func:`record`
    (family ``growth``); series with the same draws (x^p/√N and c·x^p differ by a coefficient)
    share a ``draws`` key, so the summary can count independent comparisons.
    """
    df, _ = sweep_frame(ctx)
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
        first = _fit_vs_exact(g, s)
        z = s["z"].to_numpy(float)
        c_rec = None if scale_policy != "const" else float(cc)
        rec = {"weight_model": wm, "rho": float(rho), "D": int(D), "d": int(d), "quantity": q, "c": c_rec, **first,
               "max_abs_z": float(np.nanmax(np.abs(z))) if z.size else math.nan,
               "cells": int(len(z)), "cells_abs_z_gt_4": int(np.sum(np.abs(z) > 4))}
        if first["agree"] is not None:
            name = f"growth/{_label(p, scale_policy, c_rec)}/{wm}/rho={float(rho):g}/D={int(D)}/d={int(d)}/{q}"
            record(ctx, name, covered=first["agree"], nominal=LEVEL,
                   detail={"draws": f"p={p}/{wm}/rho={float(rho):g}/D={int(D)}/d={int(d)}/{q}",
                           "mc_exponent": first["mc_exponent"], "mc_ci": first["mc_ci"],
                           "exact": first["exact_exponent_on_grid"], "trials": first["trials"], "N": first["N"]})
        out.append(rec)
    return out


def record(ctx: Context, name: str, covered: bool, nominal: float, detail: dict | None = None) -> None:
    """Log one first-pass Monte Carlo-vs-exact comparison: did an interval at ``nominal`` hold the exact value?

    ``name`` is ``family/…`` (family: ``growth``, ``fig1``, ``causal`` …). A name logged again
    (the same check asked for by two claims) replaces its earlier entry, so each comparison counts
    once. ``detail["draws"]``, if given, names the Monte Carlo sample the interval came from:
    comparisons with equal ``draws`` are one independent comparison.
    """
    checks = ctx.cache.setdefault("mc_checks", [])
    entry = {"name": str(name), "covered": bool(covered), "nominal": float(nominal), "detail": dict(detail or {})}
    for i, old in enumerate(checks):
        if old["name"] == entry["name"]:
            checks[i] = entry
            return
    checks.append(entry)


def monte_carlo_summary(ctx: Context) -> dict:
    """Coverage = covered / series over every recorded first-pass comparison, overall and per family.

    ``{"first_pass_coverage", "nominal", "series", "missed": [names], "by_family": {family:
    {"series", "missed", "coverage", "nominal"}}, "independent": {"series", "missed", "coverage"}, "reruns": 0}``;
    ``independent`` counts comparisons sharing Monte Carlo draws once (missed if any of them missed).
    ``nominal`` is LEVEL (every ledger interval is at LEVEL; a differing one is listed in ``nominal_levels``).
    """
    checks = list(ctx.cache.get("mc_checks", []))
    n = len(checks)

    def cov(k: int, m: int) -> float | None:
        return (m - k) / m if m else None

    fam: dict[str, dict] = {}
    for c in checks:
        f = fam.setdefault(c["name"].split("/")[0], {"series": 0, "missed": 0, "nominal": c["nominal"]})
        f["series"] += 1
        f["missed"] += int(not c["covered"])
        if f["nominal"] != c["nominal"]:
            f["nominal"] = min(f["nominal"], c["nominal"])  # mixed levels: the lowest
    for f in fam.values():
        f["coverage"] = cov(f["missed"], f["series"])
    draws: dict[str, bool] = {}
    for c in checks:
        key = c["detail"].get("draws", c["name"])
        draws[key] = draws.get(key, True) and c["covered"]
    missed = [c["name"] for c in checks if not c["covered"]]
    k_ind = sum(not v for v in draws.values())
    out = {"first_pass_coverage": cov(len(missed), n), "nominal": LEVEL, "series": n, "missed": missed,
           "by_family": fam,
           "independent": {"series": len(draws), "missed": k_ind, "coverage": cov(k_ind, len(draws))},
           "reruns": 0}
    levels = sorted({c["nominal"] for c in checks} - {LEVEL})
    if levels:
        out["nominal_levels"] = levels
    return out
