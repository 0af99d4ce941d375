"""g_r(N) = acc(arm at its best lr, seed r) − acc(softmax at its best lr, seed r): the training study, arm by arm.

Pure functions over the ``runs`` table of :func:`sapa.empirics.training.train_study.run_study` (one row per
trained member; schema in the study's docstring): learning-rate selection, the paired gaps to
softmax per (task, arm, N) cell, their trend in log2 N (the evidence of ``stability-trend`` in
:mod:`sapa.rules.stability`), divergence counts, the learning-rate sensitivity table and the
accuracy-vs-N table of the report (arXiv 2410.18613, §5: x^p/√N "trains like softmax" as N grows).

Design the functions respect: at a given (task, N) replicate r shares its initial weights and
minibatches across arms and learning rates, so arm − softmax at the same r is **paired**; different
N are independent models. Only rows with ``in_study`` count. A diverged member enters every
accuracy at chance (``chance_acc``): a failure, never a missing value.

* :func:`best_lr` — per (task, N, arm): the lr maximising the median over seeds of ``val_acc_final``
  (ties → the smaller lr), and whether it sits at an edge of that arm's grid;
* :func:`paired_gaps` — per (task, arm, N, seed): test-accuracy gap to softmax, both at their best lr;
* :func:`gap_trend` — Δ = OLS slope of the cell means on log2 N × log2(N_max/N_min), its standard
  error from the pooled within-cell variance and Σ(n_N − 1) degrees of freedom (:class:`GapTrend`);
* :func:`stability_gaps` — per seed, the fraction of softmax's lr grid that diverged minus the arm's
  (a stability gap: negative = the arm diverges on more of its grid), the divergence reading's data;
* :func:`divergence_counts`, :func:`lr_sensitivity`, :func:`accuracy_table` — the report's tables;
* :func:`flattening` — per (task, N), the evaluation step at which an arm's validation curve stops
  rising (softmax's: did the study train past it?).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from sapa.common.validate import InputError

__all__ = ["REQUIRED", "study_rows", "best_lr", "at_best", "paired_gaps", "GapTrend", "gap_trend", "accuracy_trends",
           "stability_gaps", "divergence_trends", "divergence_counts", "lr_sensitivity", "median_interval",
           "accuracy_table", "cells", "FLAT_TOL", "flattening"]

REQUIRED = ("task", "N", "arm", "p", "scale", "lr", "seed", "in_study", "diverged", "chance_acc", "val_acc_final",
            "test_acc")
CELL = ["task", "N", "arm"]


def study_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows with ``in_study``, accuracies of diverged members set to chance (copy; column check)."""
    missing = [c for c in REQUIRED if c not in runs.columns]
    if missing:
        raise InputError(f"runs table lacks column(s) {', '.join(missing)}")
    r = runs[runs["in_study"].astype(bool)].copy()
    div = r["diverged"].astype(bool).to_numpy()
    for q in ("val_acc_final", "val_acc_best", "test_acc", "test_acc_at_best_val"):
        if q in r:
            r[q] = np.where(div, r["chance_acc"].to_numpy(float), r[q].to_numpy(float))
    r["N"] = r["N"].astype(int)
    r["seed"] = r["seed"].astype(int)
    return r.reset_index(drop=True)


def best_lr(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, N, arm): lr* = argmax_lr median_r val_acc_final (ties → the smaller lr); edge of the grid.

    Returns columns task, N, arm, p, scale, lr, val_median, n_lrs, lr_min, lr_max, edge ("low" | "high" |
    "" — lr* is the smallest / largest rate tried; "" also when only one rate was tried).
    """
    r = study_rows(runs)
    med = r.groupby(CELL + ["lr"], sort=True)["val_acc_final"].median().reset_index(name="val_median")
    med = med.sort_values(CELL + ["val_median", "lr"], ascending=[True, True, True, False, True], kind="mergesort")
    best = med.groupby(CELL, sort=True).head(1).reset_index(drop=True)
    grid = r.groupby(CELL, sort=True)["lr"].agg(n_lrs="nunique", lr_min="min", lr_max="max").reset_index()
    kind = r.groupby(CELL, sort=True)[["p", "scale"]].first().reset_index()
    out = best.merge(grid, on=CELL).merge(kind, on=CELL)
    out["edge"] = np.where(out["n_lrs"] < 2, "", np.where(out["lr"] == out["lr_min"], "low",
                                                           np.where(out["lr"] == out["lr_max"], "high", "")))
    return out[CELL + ["p", "scale", "lr", "val_median", "n_lrs", "lr_min", "lr_max", "edge"]]


def at_best(runs: pd.DataFrame, best: pd.DataFrame | None = None) -> pd.DataFrame:
    """The study rows of each (task, N, arm) at its best lr (one row per seed)."""
    best = best_lr(runs) if best is None else best
    return study_rows(runs).merge(best[CELL + ["lr"]], on=CELL + ["lr"], how="inner")


def paired_gaps(runs: pd.DataFrame, best: pd.DataFrame | None = None, q: str = "test_acc") -> pd.DataFrame:
    """Per (task, arm ≠ softmax, N, seed): gap = q(arm, r) − q(softmax, r), both at their best lr.

    Pairs are matched on (task, N, seed); a seed missing on either side is dropped. Columns: task, arm, N,
    seed, gap, arm_value, softmax_value, arm_diverged, softmax_diverged.
    """
    b = at_best(runs, best)
    soft = b[b["arm"] == "softmax"][["task", "N", "seed", q, "diverged"]].rename(
        columns={q: "softmax_value", "diverged": "softmax_diverged"})
    arms = b[b["arm"] != "softmax"][["task", "arm", "N", "seed", q, "diverged"]].rename(
        columns={q: "arm_value", "diverged": "arm_diverged"})
    g = arms.merge(soft, on=["task", "N", "seed"], how="inner")
    g["gap"] = g["arm_value"].astype(float) - g["softmax_value"].astype(float)
    return g.sort_values(["task", "arm", "N", "seed"], kind="mergesort").reset_index(drop=True)[
        ["task", "arm", "N", "seed", "gap", "arm_value", "softmax_value", "arm_diverged", "softmax_diverged"]]


@dataclass(frozen=True)
class GapTrend:
    """Δ = b·log2(N_max/N_min), b = OLS slope of the cell means ḡ(N) on log2 N; se from the pooled within-cell sd.

    The unit is the (arm, N) cell, seeds nested inside: Var(b) = s_p² Σ_k (x_k − x̄)²/n_k / (Σ_k (x_k − x̄)²)²,
    x_k = log2 N_k, s_p² = Σ_k Σ_r (g_kr − ḡ_k)² / Σ_k (n_k − 1) (Student t with that many degrees of freedom).
    """

    task: str
    arm: str
    quantity: str                 # "test_acc" (accuracy gap) or "stable_fraction" (divergence reading)
    N: tuple[int, ...]            # the cells' N, ascending
    n: tuple[int, ...]            # paired seeds per cell
    cell_mean: tuple[float, ...]  # ḡ(N)
    slope: float                  # b, change of the gap per doubling of N
    delta: float                  # Δ = b·log2(N_max/N_min): predicted change over the studied range
    se: float                     # standard error of Δ (nan when df = 0)
    df: int                       # Σ(n_N − 1)
    pooled_sd: float              # s_p
    diverged: tuple[int, ...] = ()  # arm members diverged per cell (at the best lr; divergence reading: over the grid)

    def as_dict(self) -> dict:
        """Plain-JSON form (rounded; undefined as None)."""
        j = lambda v, nd=5: None if v is None or not math.isfinite(v) else round(float(v), nd)  # noqa: E731
        return {"task": self.task, "arm": self.arm, "quantity": self.quantity, "N": list(self.N), "n": list(self.n),
                "cell_mean": [j(v) for v in self.cell_mean], "slope_per_doubling": j(self.slope), "delta": j(self.delta),
                "se": j(self.se), "df": self.df, "pooled_sd": j(self.pooled_sd), "diverged": list(self.diverged)}


def gap_trend(Ns: Sequence[int], gaps: Sequence[Sequence[float]], *, task: str = "", arm: str = "",
              quantity: str = "test_acc", diverged: Sequence[int] = ()) -> GapTrend:
    """The :class:`GapTrend` of per-cell paired gaps.

    Args:
      Ns: (K,) distinct sequence lengths; gaps: K arrays, gaps[k] of shape (n_k,) (finite), one per seed.
    A cell with no seed is dropped; fewer than 2 cells left gives Δ = nan; df = 0 gives se = nan.

    >>> ev = gap_trend((16, 64), ([0.0, 0.02], [-0.1, -0.08]))
    >>> round(ev.delta, 3), ev.df, round(ev.se, 4)  # Δ = −0.09 − 0.01; se = s_p·√(1/2 + 1/2), s_p = 0.0141
    (-0.1, 2, 0.0141)
    """
    if len(Ns) != len(gaps):
        raise InputError(f"need one gap array per N, got {len(Ns)} N and {len(gaps)} arrays")
    cells = sorted(((int(N), np.asarray(g, dtype=float).ravel()) for N, g in zip(Ns, gaps) if np.size(g)),
                   key=lambda c: c[0])
    if len({N for N, _ in cells}) != len(cells) or any(N < 1 for N, _ in cells):
        raise InputError("N values must be distinct positive integers")
    if any(not np.isfinite(g).all() for _, g in cells):
        raise InputError("gaps must be finite (a diverged member enters at chance accuracy)")
    N = tuple(N for N, _ in cells)
    n = np.array([g.size for _, g in cells], dtype=float)  # (K,)
    m = np.array([g.mean() for _, g in cells])  # (K,)
    df = int(sum(g.size - 1 for _, g in cells))
    ss = float(sum(((g - g.mean()) ** 2).sum() for _, g in cells))
    sp = math.sqrt(ss / df) if df > 0 else math.nan
    slope = delta = se = math.nan
    if len(cells) >= 2:
        x = np.log2(np.array(N, dtype=float))
        xc = x - x.mean()
        sxx = float(xc @ xc)
        slope = float(xc @ m / sxx)
        L = float(x[-1] - x[0])
        delta = slope * L
        se = L * sp * math.sqrt(float((xc**2 / n).sum())) / sxx if df > 0 else math.nan
    return GapTrend(task=str(task), arm=str(arm), quantity=quantity, N=N, n=tuple(int(v) for v in n),
                    cell_mean=tuple(float(v) for v in m), slope=slope, delta=delta, se=se, df=df, pooled_sd=sp,
                    diverged=tuple(int(v) for v in diverged))


def cells(gaps: pd.DataFrame, task: str, arm: str, col: str = "gap") -> tuple[list[int], list[np.ndarray]]:
    """(N values ascending, per-N arrays of ``col``) of one (task, arm) from a gaps table."""
    g = gaps[(gaps["task"] == task) & (gaps["arm"] == arm)]
    Ns = sorted(int(v) for v in pd.unique(g["N"]))
    return Ns, [g[g["N"] == N][col].to_numpy(float) for N in Ns]


def accuracy_trends(runs: pd.DataFrame, best: pd.DataFrame | None = None) -> dict[tuple[str, str], GapTrend]:
    """{(task, arm): GapTrend of the test-accuracy gap to softmax} for every arm ≠ softmax."""
    g = paired_gaps(runs, best)
    out = {}
    for (task, arm), _ in g.groupby(["task", "arm"], sort=False):
        Ns, vals = cells(g, task, arm)
        div = [int(g[(g["task"] == task) & (g["arm"] == arm) & (g["N"] == N)]["arm_diverged"].sum()) for N in Ns]
        out[(str(task), str(arm))] = gap_trend(Ns, vals, task=task, arm=arm, diverged=div)
    return out


def stability_gaps(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, arm ≠ softmax, N, seed): gap = f_softmax(r) − f_arm(r), f = fraction of the lr grid that diverged.

    Columns task, arm, N, seed, gap, arm_diverged (members of the arm's grid that diverged at that seed), arm_runs.
    """
    r = study_rows(runs)
    f = r.groupby(["task", "N", "arm", "seed"], sort=True)["diverged"].agg(frac="mean", div="sum", runs="size")
    f = f.reset_index()
    soft = f[f["arm"] == "softmax"][["task", "N", "seed", "frac"]].rename(columns={"frac": "softmax_frac"})
    arms = f[f["arm"] != "softmax"].merge(soft, on=["task", "N", "seed"], how="inner")
    arms["gap"] = arms["softmax_frac"].astype(float) - arms["frac"].astype(float)
    arms = arms.rename(columns={"div": "arm_diverged", "runs": "arm_runs"})
    return arms.sort_values(["task", "arm", "N", "seed"], kind="mergesort").reset_index(drop=True)[
        ["task", "arm", "N", "seed", "gap", "arm_diverged", "arm_runs"]]


def divergence_trends(runs: pd.DataFrame) -> dict[tuple[str, str], GapTrend]:
    """{(task, arm): GapTrend of the stability gap f_softmax − f_arm over the lr grid} for every arm ≠ softmax."""
    g = stability_gaps(runs)
    out = {}
    for (task, arm), _ in g.groupby(["task", "arm"], sort=False):
        Ns, vals = cells(g, task, arm)
        _, div = cells(g, task, arm, "arm_diverged")
        out[(str(task), str(arm))] = gap_trend(Ns, vals, task=task, arm=arm, quantity="stable_fraction",
                                               diverged=[int(d.sum()) for d in div])
    return out


def divergence_counts(runs: pd.DataFrame, best: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (task, N, arm): seeds and diverged members at the best lr; members and diverged over the whole grid."""
    best = best_lr(runs) if best is None else best
    r = study_rows(runs)
    grid = r.groupby(CELL, sort=True)["diverged"].agg(grid_runs="size", grid_diverged="sum").reset_index()
    b = at_best(runs, best).groupby(CELL, sort=True)["diverged"].agg(seeds="size", best_diverged="sum").reset_index()
    out = grid.merge(b, on=CELL, how="left").merge(best[CELL + ["lr"]], on=CELL, how="left")
    for c in ("grid_runs", "grid_diverged", "seeds", "best_diverged"):
        out[c] = out[c].fillna(0).astype(int)
    return out[CELL + ["lr", "seeds", "best_diverged", "grid_runs", "grid_diverged"]]


def lr_sensitivity(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, N, arm, lr): median / min / max over seeds of val_acc_final, median test_acc, diverged members."""
    r = study_rows(runs)
    g = r.groupby(CELL + ["lr"], sort=True)
    out = g["val_acc_final"].agg(val_median="median", val_min="min", val_max="max").reset_index()
    out["test_median"] = g["test_acc"].median().to_numpy()
    out["seeds"] = g.size().to_numpy()
    out["diverged"] = g["diverged"].sum().astype(int).to_numpy()
    return out


def median_interval(values) -> tuple[float, float, float, float]:
    """(median, min, max, coverage): [min, max] of n seeds is a distribution-free interval for the median.

    P(min ≤ median ≤ max) = 1 − 2·2^−n for a continuous distribution (75 % at n = 3, 93.75 % at n = 5).
    """
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0:
        return math.nan, math.nan, math.nan, math.nan
    return float(np.median(v)), float(v.min()), float(v.max()), 1.0 - 2.0 ** (1 - v.size)


def accuracy_table(runs: pd.DataFrame, best: pd.DataFrame | None = None, q: str = "test_acc") -> pd.DataFrame:
    """Per (task, arm, N): best lr, seeds, median of ``q`` over seeds, [min, max] interval and its coverage, diverged."""
    best = best_lr(runs) if best is None else best
    b = at_best(runs, best)
    rows = []
    for (task, arm, N), g in b.groupby(["task", "arm", "N"], sort=True):
        med, lo, hi, cov = median_interval(g[q])
        e = best[(best["task"] == task) & (best["N"] == N) & (best["arm"] == arm)]
        rows.append({"task": task, "arm": arm, "N": int(N), "lr": float(g["lr"].iloc[0]), "seeds": int(len(g)),
                     "median": med, "lo": lo, "hi": hi, "coverage": cov, "diverged": int(g["diverged"].sum()),
                     "edge": str(e["edge"].iloc[0]) if len(e) else ""})
    return pd.DataFrame(rows, columns=["task", "arm", "N", "lr", "seeds", "median", "lo", "hi", "coverage", "diverged",
                                       "edge"])


FLAT_TOL = 0.01  # a curve has flattened at t when no later evaluation is more than one accuracy point above it


def flattening(history: pd.DataFrame, best: pd.DataFrame, arm: str = "softmax", tol: float = FLAT_TOL) -> pd.DataFrame:
    """t_flat = min{t : max_{t' ≥ t} c(t') − c(t) ≤ tol}, c(t) = median over seeds of ``arm``'s val_acc at its best lr.

    Per (task, N) where ``arm`` was trained: columns task, N, lr, flat_step (t_flat), steps (T, the last
    evaluation), final (c(T)), last_gain (c(T) − c at the evaluation before T) and past (t_flat < T:
    training went on after the curve flattened; False = still rising by more than ``tol`` at the end).
    """
    h = history[(history["arm"] == arm) & (history["quantity"] == "val_acc")]
    b = best[best["arm"] == arm][["task", "N", "lr"]]
    rows = []
    for r in b.itertuples(index=False):
        g = h[(h["task"] == r.task) & (h["N"] == r.N) & np.isclose(h["lr"], r.lr)]
        if g.empty:
            continue
        c = g.groupby("step")["value"].median().sort_index()  # (evaluations,) c(t)
        steps, v = c.index.to_numpy(int), c.to_numpy(float)
        ahead = np.maximum.accumulate(v[::-1])[::-1]  # max_{t' ≥ t} c(t')
        t_flat = int(steps[np.argmax(ahead - v <= tol)])
        rows.append({"task": r.task, "N": int(r.N), "lr": float(r.lr), "flat_step": t_flat, "steps": int(steps[-1]),
                     "final": float(v[-1]), "last_gain": float(v[-1] - v[-2]) if len(v) > 1 else math.nan,
                     "past": bool(t_flat < steps[-1])})
    return pd.DataFrame(rows, columns=["task", "N", "lr", "flat_step", "steps", "final", "last_gain", "past"])
