"""t_exit = min{t : acc(t) > floor + 0.03}: learning curves as curves — censored exits, matched steps, convergence.

A snapshot after a fixed step count cannot tell "learns more slowly" from "does not learn": a run
that sits on its floor (the bigram predictor on text, chance on synthetic tasks) at the last step
may leave it a little later. Every quantity here is therefore a statement *within the step cap*:

* :func:`log_eval_steps` — the evaluation schedule: 0 and ``points`` steps log-spaced up to the cap;
* :func:`exit_step` — t_exit of one curve, ``None`` when the curve never leaves the floor within the cap
  (right-censored at the cap: "not converged within the cap", never "does not learn");
* :func:`censored_exits` — the Kaplan–Meier estimate of the distribution of t_exit over seeds, from
  ``scipy.stats.CensoredData`` and ``scipy.stats.ecdf`` (median, P(t_exit ≤ cap), censored count);
* :func:`flat` — the convergence criterion: the curve gained at most :data:`FLAT_GAIN` over the last
  doubling of steps (acc(T) − acc(at ≈ T/2) ≤ 0.01) — and a run is ``converged`` when it also left the floor;
* :func:`curve_stats` — per (task, N, arm) at one lr: the median curve, per-seed exits, matched-step
  accuracy against softmax and the final accuracy with its converged flag (what the ledger stores);
* :func:`aligned_on_exit` — a per-run series (e.g. ‖φ(S)‖_F) read at the evaluations around its exit.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from sapa.common.validate import InputError

__all__ = ["EXIT_MARGIN", "FLAT_GAIN", "log_eval_steps", "exit_step", "censored_exits", "flat", "curve_stats",
           "aligned_on_exit", "exit_change"]

EXIT_MARGIN = 0.03  # a curve has left its floor at the first evaluation above floor + 0.03
FLAT_GAIN = 0.01  # flat: no more than one accuracy point gained over the last doubling of steps


def log_eval_steps(cap: int, points: int = 16) -> tuple[int, ...]:
    """(0, t_1 < … < t_K = cap): ``points`` steps log-spaced from cap/128 (at least 1) to cap, rounded, deduplicated.

    >>> log_eval_steps(3200, 16)[:4], log_eval_steps(3200, 16)[-1], len(log_eval_steps(3200, 16))
    ((0, 25, 35, 48), 3200, 17)
    """
    if cap < 1 or points < 1:
        raise InputError(f"need a step cap ≥ 1 and ≥ 1 evaluation point, got {cap}, {points}")
    if points == 1:
        return (0, int(cap))
    s = np.unique(np.round(np.geomspace(max(1.0, cap / 128), cap, points)).astype(int))
    return (0, *(int(v) for v in s))


def exit_step(steps: Sequence[int], acc: Sequence[float], floor: float, margin: float = EXIT_MARGIN) -> int | None:
    """The first evaluation step t > 0 with acc(t) > floor + margin; None when there is none (censored at the cap)."""
    for t, a in zip(steps, acc):
        if t > 0 and math.isfinite(a) and a > floor + margin:
            return int(t)
    return None


def censored_exits(times: Sequence[int | None], cap: int) -> dict:
    """Kaplan–Meier summary of exit steps over runs, ``None`` right-censored at ``cap`` (scipy.stats.ecdf).

    Returns {"n", "censored", "median" (the smallest t with F̂(t) ≥ ½; None when F̂ stays below ½ within
    the cap), "p_exit_by_cap" (F̂(cap)), "times" (the input, None kept)}.

    >>> censored_exits([100, 200, None], 400)["median"], censored_exits([None, None], 400)["median"]
    (200, None)
    """
    from scipy import stats

    ts = [None if t is None else int(t) for t in times]
    unc = [t for t in ts if t is not None]
    cens = sum(t is None for t in ts)
    out = {"n": len(ts), "censored": int(cens), "median": None, "p_exit_by_cap": 0.0, "times": ts, "cap": int(cap)}
    if not unc:
        return out
    res = stats.ecdf(stats.CensoredData(uncensored=np.asarray(unc, float), right=np.full(cens, float(cap))))
    q, p = res.cdf.quantiles, res.cdf.probabilities  # F̂ at its jumps
    hit = np.nonzero(p >= 0.5 - 1e-12)[0]
    out["median"] = int(q[hit[0]]) if hit.size else None
    out["p_exit_by_cap"] = round(float(res.cdf.evaluate(float(cap))), 6)
    return out


def flat(steps: Sequence[int], acc: Sequence[float], gain: float = FLAT_GAIN) -> bool:
    """acc(T) − acc(t_h) ≤ gain, T the last step and t_h the last evaluation at or before T/2 (False if none)."""
    s, a = np.asarray(steps, int), np.asarray(acc, float)
    half = np.nonzero((s <= s[-1] / 2) & (s > 0))[0]
    if not half.size or not np.isfinite(a[[half[-1], -1]]).all():
        return False
    return bool(a[-1] - a[half[-1]] <= gain)


def curve_stats(steps: Sequence[int], curves: Mapping[int, Sequence[float]], floor: float,
                softmax: Mapping[int, Sequence[float]] | None = None) -> dict:
    """One (task, N, arm) cell at one lr: curves {seed: (K,) val acc at ``steps``} → the ledger's learning statistics.

    Keys: curve [[step, median acc]], steps_to_leave_floor {seed: t | None}, exits (:func:`censored_exits`),
    final_acc {seed: acc(T)}, final_acc_median, converged {seed: left the floor and :func:`flat`},
    converged_all, and with ``softmax`` (paired seeds, same steps) acc_at_matched_steps
    [[step, arm median, softmax median, median paired gap]].
    """
    steps = [int(t) for t in steps]
    seeds = sorted(curves)
    A = np.array([np.asarray(curves[r], float) for r in seeds])  # (R, K)
    if A.ndim != 2 or A.shape[1] != len(steps):
        raise InputError(f"every curve needs one value per step ({len(steps)}), got shape {A.shape}")
    exits = {r: exit_step(steps, A[k], floor) for k, r in enumerate(seeds)}
    conv = {r: exits[r] is not None and flat(steps, A[k]) for k, r in enumerate(seeds)}
    med = np.median(A, axis=0)
    out = {"floor": round(float(floor), 6), "curve": [[t, round(float(v), 5)] for t, v in zip(steps, med)],
           "steps_to_leave_floor": {str(r): t for r, t in exits.items()},
           "exits": censored_exits([exits[r] for r in seeds], steps[-1]),
           "final_acc": {str(r): round(float(A[k, -1]), 5) for k, r in enumerate(seeds)},
           "final_acc_median": round(float(med[-1]), 5),
           "converged": {str(r): bool(c) for r, c in conv.items()}, "converged_all": bool(all(conv.values()))}
    if softmax is not None:
        paired = [r for r in seeds if r in softmax]
        if paired:
            Sm = np.array([np.asarray(softmax[r], float) for r in paired])  # (R', K)
            Am = np.array([A[seeds.index(r)] for r in paired])
            gap = np.median(Am - Sm, axis=0)
            out["acc_at_matched_steps"] = [[t, round(float(a), 5), round(float(s), 5), round(float(g), 5)]
                                           for t, a, s, g in zip(steps, np.median(Am, 0), np.median(Sm, 0), gap)]
    return out


def aligned_on_exit(steps: Sequence[int], series: Sequence[float], exit_at: int | None,
                    before: int = 3, after: int = 3) -> list[float | None] | None:
    """series at the evaluations exit−before … exit+after (None outside the run); None when the run has no exit."""
    if exit_at is None:
        return None
    k = list(steps).index(int(exit_at))
    return [float(series[j]) if 0 <= j < len(series) and math.isfinite(series[j]) else None
            for j in range(k - before, k + after + 1)]


def exit_change(rows: Sequence[Sequence[float | None]], before: int = 3) -> dict:
    """Across runs aligned on their exit: the log-change of a norm into the exit evaluation against the change before.

    Per run (a row of :func:`aligned_on_exit`): c_exit = log(v[exit]/v[exit − 1]), c_prior = log(v[exit − 1]/
    v[exit − 2]). Returns the median c_exit and c_prior, and a two-sided sign test of c_exit − c_prior
    (scipy.stats.binomtest; a finding with its uncertainty, not a verdict), with the run count.
    """
    from scipy import stats

    d, ce, cp = [], [], []
    for row in rows:
        v = row[before - 2:before + 1] if row is not None and len(row) > before else None
        if v is None or any(x is None or not x > 0 for x in v):
            continue
        c_exit, c_prior = math.log(v[2] / v[1]), math.log(v[1] / v[0])
        ce.append(c_exit)
        cp.append(c_prior)
        d.append(c_exit - c_prior)
    if not d:
        return {"runs": 0, "median_change_at_exit": None, "median_change_before": None, "p_sign_test": None}
    pos = sum(x > 0 for x in d)
    nz = sum(x != 0 for x in d)
    p = float(stats.binomtest(pos, nz, 0.5).pvalue) if nz else 1.0
    return {"runs": len(d), "median_change_at_exit": round(float(np.median(ce)), 5),
            "median_change_before": round(float(np.median(cp)), 5), "larger_at_exit": int(pos),
            "p_sign_test": round(p, 5)}
