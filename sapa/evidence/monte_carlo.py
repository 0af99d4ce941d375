"""The Monte Carlo side of the ledger: one seeded sweep per ``sapa verify`` run, shared by the claims.

The sweep of the budget (``empirics/configs/<budget>.toml``, seed from ``--seed``) runs once,
resumably, into ``OUT/sweep``; growth exponents of the RMS norms are fitted from it and set
beside the exact predictions of ``sapa.theory.moments`` (arXiv 2410.18613, Thm 4.2 – Cor 4.5).

Agreement is judged once, on the first pass: trials per cell are fixed in advance by the sweep
config (``sapa.empirics.montecarlo.stats.design_trials`` for the heavy-tailed x^p, p ≥ 2), each series gets one
interval at LEVEL from ``sapa.empirics.montecarlo.stats.rms_exponent_interval``, and every comparison is logged
with :func:`record`; :func:`monte_carlo_summary` reports the first-pass coverage (nominal LEVEL).
There is no rerun on disagreement: a miss stays a miss.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from sapa.empirics.montecarlo.growth_series import exact_rms_slope  # noqa: F401  (re-exported: the exact side of a series)
from sapa.ledger import Context

LEVEL = 0.99  # two-sided level of the interval used for MC-vs-exact agreement


def sweep_frame(ctx: Context) -> tuple[pd.DataFrame, object]:
    """Run (or resume) the budget's sweep into ``OUT/sweep`` once; return (tidy rows, config)."""
    if "sweep" not in ctx.cache:
        from sapa.empirics.montecarlo.sweep import (
            builtin_config,
            load_config,
            run_sweep,
            with_overrides,
        )

        cfg = with_overrides(load_config(builtin_config(ctx.budget.sweep)), seed=ctx.budget.seed)
        # cells are pure and seeded per trial: the numbers do not depend on the pool
        df = run_sweep(cfg, ctx.out_dir / "sweep", progress=True, executor=run_pool(ctx))  # bar on a TTY, log lines
        ctx.cache["sweep"] = (df, cfg)
    return ctx.cache["sweep"]


def run_pool(ctx: Context):
    """The run's pool of ``ctx.workers`` processes (``sapa.common.pool``), started on first use and shared by the sweep's
    cells and the worst-case search (one start-up instead of two: ~2.5 CPU-s a worker); ``None`` when serial.

    :func:`close_run_pool` ends it (on an interrupt with ``now=True``: its workers are terminated).
    """
    import os

    if "pool" not in ctx.cache:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        n = min(int(ctx.workers), cores)
        if n <= 1:
            ctx.cache["pool"] = None
        else:
            from sapa.common.pool import process_pool

            ctx.cache["pool"] = process_pool(n)
    return ctx.cache["pool"]


def close_run_pool(ctx: Context, now: bool = False) -> None:
    """Shut the run's pool down: between checks no work is in flight; ``now`` (an interrupt) terminates its workers
    first, so the run does not wait for the cells in flight."""
    ex = ctx.cache.pop("pool", None)
    if ex is not None:
        if now:
            from sapa.common.pool import stop_pool

            stop_pool(ex)
        else:
            ex.shutdown(wait=True, cancel_futures=True)


def sweep_summary(ctx: Context) -> pd.DataFrame:
    """Per-cell summary with exact E‖·‖² and z-scores attached (cached)."""
    if "summary" not in ctx.cache:
        from sapa.empirics.montecarlo.sweep import attach_exact, summarise

        df, cfg = sweep_frame(ctx)
        ctx.cache["summary"] = attach_exact(summarise(df), cfg)
    return ctx.cache["summary"]


def rms_exponent(N: list[int], sq_samples: list[np.ndarray]) -> dict:
    """Exponent of √E‖·‖² vs N with its LEVEL interval (``sapa.empirics.montecarlo.growth_series.rms_exponent``)."""
    from sapa.empirics.montecarlo.growth_series import rms_exponent as fit

    return fit(N, sq_samples, LEVEL)


def series(ctx: Context, *, p: int, scale_policy: str, c: float | None = None) -> list[dict]:
    """One record per (weight model, rho, D, d, quantity) for poly cells of degree p with this scale.

    Each record holds the MC RMS exponent with its LEVEL interval, the exact slope on the same grid,
    whether the interval covers it (judged once, on the first and only pass), and the cell
    z-scores of mean ‖·‖² against the exact E‖·‖². Every comparison is logged with :func:`record`
    (family ``growth``); series with the same draws (x^p/√N and c·x^p differ by a coefficient)
    share a ``draws`` key, so the summary can count independent comparisons.
    """
    from sapa.empirics.montecarlo.growth_series import poly_series, series_label

    df, _ = sweep_frame(ctx)
    out = []
    for rec in poly_series(df, sweep_summary(ctx), p=p, scale_policy=scale_policy, c=c, level=LEVEL):
        if rec["agree"] is not None:
            wm, rho, D, d, q = rec["weight_model"], rec["rho"], rec["D"], rec["d"], rec["quantity"]
            name = f"growth/{series_label(p, scale_policy, rec['c'])}/{wm}/rho={rho:g}/D={D}/d={d}/{q}"
            record(ctx, name, covered=rec["agree"], nominal=LEVEL,
                   detail={"draws": f"p={p}/{wm}/rho={rho:g}/D={D}/d={d}/{q}",
                           "mc_exponent": rec["mc_exponent"], "mc_ci": rec["mc_ci"],
                           "exact": rec["exact_exponent_on_grid"], "trials": rec["trials"], "N": rec["N"]})
        out.append(rec)
    return out


def agreement_gate(covered: Iterable[bool], nominal: float) -> tuple[str, int, int]:
    """(``mc-agreement`` verdict, comparisons, missed) over first-pass comparisons (True: the interval held the exact
    value). Pass one flag per *independent* comparison (see ``sapa.rules.agreement``)."""
    from sapa.rules.agreement import AgreementEvidence, decide

    flags = [bool(c) for c in covered]
    missed = sum(not c for c in flags)
    return decide(AgreementEvidence(n=len(flags), missed=missed, nominal=nominal)), len(flags), missed


def gate(ctx: Context, family: str, comparisons: dict[str, dict], nominal: float) -> tuple[str, int, int]:
    """Log each comparison ``{key: {"agree": bool, …}}`` as ``family/key`` (:func:`record`), then :func:`agreement_gate`."""
    for key, a in comparisons.items():
        record(ctx, f"{family}/{key}", covered=a["agree"], nominal=nominal, detail=a)
    return agreement_gate((a["agree"] for a in comparisons.values()), nominal)


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
    return summary_of(list(ctx.cache.get("mc_checks", [])))


def _scalars(d: dict) -> dict:
    """The JSON-plain scalar entries of a comparison's detail (numbers as float, for the summary)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, (bool, str)):
            out[k] = v
        elif isinstance(v, (int, float, np.integer, np.floating)):
            out[k] = float(v)
    return out


def summary_of(checks: list[dict]) -> dict:
    """:func:`monte_carlo_summary` of a list of logged comparisons (also used to merge ledgers of ``--only`` runs).

    The summary keeps the comparisons themselves under ``"checks"`` (name, covered, nominal, draws) so that a
    partial rerun can replace its own and recount the whole ledger.
    """
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
           "reruns": 0,
           "missed_detail": {c["name"]: _scalars(c["detail"]) for c in checks if not c["covered"]},
           "checks": [{"name": c["name"], "covered": c["covered"], "nominal": c["nominal"],
                       "detail": {"draws": c["detail"]["draws"]} if "draws" in c["detail"] else {}} for c in checks]}
    levels = sorted({c["nominal"] for c in checks} - {LEVEL})
    if levels:
        out["nominal_levels"] = levels
    return out
