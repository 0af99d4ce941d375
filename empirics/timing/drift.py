"""σ_b² = mean over cells of [Var_runs(m̄_run) − mean_runs(s²_run)/R]: the between-run drift of a timing ratio.

One timing run measures each cell (p, mask, pass, N) in R interleaved rounds; its rounds agree with each other
more closely than two runs in two processes agree, because a run has one memory layout, one CPU state and one
moment of the machine's life. In log ratios, x_{j,i} = μ + b_j + e_{j,i} (run j, round i) with b_j ~ (0, σ_b²) and
e ~ (0, σ_w²). The one-way random-effects moment estimator of σ_b² per cell is the variance of the run means minus
the mean within-run variance over R; pooled over cells (the mean of the unbiased per-cell estimates, negative ones
included), with a percentile-bootstrap upper bound over cells.

The drift depends on what else the machine does. A compute neighbour (a busy loop) costs wall time, hardly CPU
time; a memory-bandwidth neighbour (a loop copying arrays far larger than any cache) costs CPU time too, and
unequally: the form that streams an N×N matrix stalls on memory while the fused kernel keeps its tiles in cache.
So the runs are stored in series (``empirics/data/overhead_repeat_runs.json``): seven on a quiet machine, and five
in each of three machine states (quiet, compute load, memory-bandwidth load; ``sapa.empirics.timing.contention``),
interleaved, in which a run's state is part of its drift b_j. ``sapa.rules.timing`` declares the drift across
states as its σ_b and the quiet machine's beside it; a test recomputes both from the stored runs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sapa.common.seeds import rng_for

RUNS_FILE = Path(__file__).resolve().parent.parent / "data" / "overhead_repeat_runs.json"
CLOCKS = ("process", "wall")


@dataclass(frozen=True)
class Drift:
    """Pooled between-run (σ_b) and within-run (σ_w) log-ratio sd, with σ_b's bootstrap upper bound."""

    sigma_b: float        # √max(0, mean of per-cell σ_b² estimates)
    sigma_b_upper: float  # the same at the bootstrap's ``level`` quantile of the mean (resampling cells)
    sigma_w: float        # √(mean within-run variance), one round
    cells: int
    runs: int
    rounds: int
    level: float


def stored_runs(path: Path = RUNS_FILE, *, series: str | None = None, state: str | None = None,
                threads: int | None = None) -> list[dict]:
    """The stored runs: [{"process": {cell: [round ratio, …]}, "wall": {…}, "series", "state", "threads",
    provenance…}, …], optionally only those of one ``series`` (:data:`QUIET_SERIES`, :data:`STATES_SERIES`,
    :data:`PLATFORM_SERIES`), machine ``state`` and torch ``threads``."""
    runs = json.loads(Path(path).read_text())["runs"]
    return [r for r in runs if (series is None or r.get("series") == series)
            and (state is None or r.get("state") == state) and (threads is None or r.get("threads") == threads)]


QUIET_SERIES = "quiet-7"            # 7 runs on an otherwise idle machine (2026-12-05): the quiet machine's drift
STATES_SERIES = "machine-states"    # 5 runs in each of quiet, compute, memory, interleaved: the drift across states
PLATFORM_SERIES = "default-threads"  # torch's default thread count, quiet: the platform row


def state_shift(runs: list[dict], clock: str = "process", reference: str = "quiet") -> dict[str, dict]:
    """Per machine state: how far its runs move a cell's mean log ratio from the ``reference`` state's runs,
    {state: {"mean": mean over cells, "min", "max", "cells", "runs"}} (log ratio; exp(mean) is the typical factor)."""
    states = sorted({r["state"] for r in runs})
    if reference not in states:
        raise ValueError(f"no run of the reference state {reference!r} among {states}")
    names = sorted(set.intersection(*(set(r[clock]) for r in runs)))

    def cell_means(state: str) -> np.ndarray:  # (C,) mean over the state's runs and rounds of the log ratio
        return np.array([np.mean([np.mean(np.log(r[clock][c])) for r in runs if r["state"] == state])
                         for c in names])

    ref = cell_means(reference)
    out = {}
    for st in states:
        d = cell_means(st) - ref
        out[st] = {"mean": float(d.mean()), "min": float(d.min()), "max": float(d.max()), "cells": len(names),
                   "runs": sum(r["state"] == st for r in runs)}
    return out


def per_cell(runs: list[dict], clock: str = "process") -> tuple[np.ndarray, np.ndarray, int]:
    """(per-cell σ_b² estimates (C,), per-cell mean within-run variances (C,), rounds R) over the cells every run has
    with the same number of rounds R ≥ 2."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {CLOCKS}, got {clock!r}")
    if len(runs) < 2:
        raise ValueError(f"the drift between runs needs at least 2 runs, got {len(runs)}")
    names = sorted(set.intersection(*(set(r[clock]) for r in runs)))
    sizes = {len(r[clock][c]) for r in runs for c in names}
    if len(sizes) != 1 or min(sizes) < 2:
        raise ValueError(f"every run must have the same number (≥ 2) of rounds per cell, got {sorted(sizes)}")
    R = sizes.pop()
    X = np.log(np.array([[r[clock][c] for r in runs] for c in names], dtype=float))  # (C, J, R)
    within = X.var(axis=2, ddof=1).mean(axis=1)                                    # (C,)
    between = X.mean(axis=2).var(axis=1, ddof=1) - within / R                        # (C,)
    return between, within, R


def drift(runs: list[dict], clock: str = "process", level: float = 0.95, boot: int = 4000, seed: int = 0) -> Drift:
    """The pooled between-run drift σ_b of ``runs`` on ``clock``, its bootstrap upper bound and σ_w."""
    between, within, R = per_cell(runs, clock)
    rng = rng_for(seed, "timing-drift", clock)
    means = between[rng.integers(0, len(between), size=(boot, len(between)))].mean(axis=1)  # (boot,)
    return Drift(sigma_b=math.sqrt(max(float(between.mean()), 0.0)),
                 sigma_b_upper=math.sqrt(max(float(np.quantile(means, level)), 0.0)),
                 sigma_w=math.sqrt(float(within.mean())), cells=len(between), runs=len(runs), rounds=R, level=level)
