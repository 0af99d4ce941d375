"""Per (task, N, arm): curve, interval-censored exits, acc at matched steps, final acc; slowdown trends over N.

Pure functions over the stored study (``history`` of :func:`sapa.empirics.training.train_study.run_study`, long
form) and the mechanism runs (:func:`sapa.empirics.training.mechanism.run_mechanisms`), built on
:mod:`sapa.empirics.training.learning_curves` and :mod:`sapa.empirics.training.censored_trend`:

* :func:`study_learning` — the text / digits cells at each arm's best lr (paired with softmax at its best lr);
  per seed the exit interval at floor + 0.03 (``intervals["floor"]``);
* :func:`mechanism_learning` — the mechanism cells (one lr): per seed the exit intervals at accuracy 0.5
  (:data:`sapa.empirics.training.mechanism.HALF`, the main measure) and 0.9 (``SOLVED``), the solved fraction, the
  softmax gate (``decidable``: softmax solves the cell in ≥ GATE of its seeds) and the offset-mass profile at
  the end and at the 0.5 exit (median over seeds);
* :func:`slowdown_trends` — {(task, arm): :class:`censored_trend.IntervalTrend`} of the paired log2 slowdown over
  the decidable N, from the intervals of one threshold;
* :func:`norms_at_exit` — norm trajectories aligned on each run's exit, and the change into the exit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sapa.empirics.training import learning_curves as LC
from sapa.empirics.training.censored_trend import exit_interval, interval_trend, paired_log2_intervals

__all__ = ["study_learning", "mechanism_learning", "slowdown_trends", "norms_at_exit", "cell_key"]



def cell_key(c: dict) -> str:
    return f"{c['task']}/N{c['N']}/{c['arm']}"


def _curves(h: pd.DataFrame, quantity: str = "val_acc") -> tuple[list[int], dict[int, np.ndarray]]:
    g = h[h["quantity"] == quantity].pivot_table(index="step", columns="seed", values="value", aggfunc="first")
    g = g.sort_index()
    return [int(s) for s in g.index], {int(r): g[r].to_numpy(float) for r in g.columns}


def study_learning(runs: pd.DataFrame, history: pd.DataFrame, best: pd.DataFrame, floors: dict) -> list[dict]:
    """One dict per (task, N, arm) at the arm's best lr: :func:`learning_curves.curve_stats` plus identifiers.

    ``floors`` {(task, N): floor accuracy} (text: the bigram predictor on the validation windows; digits: chance); cells without a
    floor are skipped. Diverged members are in the history with chance accuracy after they diverged.
    """
    out = []
    key = ["task", "N", "arm", "lr"]
    from sapa.empirics.training.study_analysis import study_rows

    ids = study_rows(runs)[["task", "N", "arm", "alpha", "lr", "seed"]]  # α* only, not the α grid
    hist = history[history["quantity"].isin(("val_acc", "attn_fro", "jac_x_fro"))].merge(ids, how="inner")
    by = {k: g for k, g in hist.groupby(key, sort=False)}
    for r in best.itertuples(index=False):
        floor = floors.get((r.task, int(r.N)))
        if floor is None:
            continue
        h = next((g for k, g in by.items() if k[:3] == (r.task, r.N, r.arm) and np.isclose(k[3], r.lr)), None)
        if h is None:
            continue
        steps, curves = _curves(h)
        soft = None
        if r.arm != "softmax":
            sb = best[(best["task"] == r.task) & (best["N"] == r.N) & (best["arm"] == "softmax")]
            if len(sb):
                sk = (r.task, r.N, "softmax", float(sb["lr"].iloc[0]))
                sh = next((g for k, g in by.items() if k[:3] == sk[:3] and np.isclose(k[3], sk[3])), None)
                if sh is not None:
                    s_steps, soft = _curves(sh)
                    if s_steps != steps:
                        soft = None
        st = LC.curve_stats(steps, curves, floor, soft)
        norms = {q: _curves(h, q)[1] for q in ("attn_fro", "jac_x_fro")}
        iv = {str(s): list(exit_interval(steps, list(v), floor + LC.EXIT_MARGIN)) for s, v in curves.items()}
        out.append({"task": r.task, "N": int(r.N), "arm": r.arm, "lr": float(r.lr), "steps": steps, **st,
                    "intervals": {"floor": iv}, "exit_at": st["steps_to_leave_floor"], "decidable": True,
                    "_curves": curves, "_norms": norms})
    return out


def _held(v: np.ndarray) -> np.ndarray:
    """A curve with the evaluations after the member stopped (NaN) held at its last value (for medians and figures)."""
    out = np.asarray(v, float).copy()
    for k in range(1, len(out)):
        if np.isnan(out[k]):
            out[k] = out[k - 1]
    return out


def mechanism_learning(mech: dict) -> list[dict]:
    """One dict per (task, N, arm) of the mechanism runs: exit intervals at 0.5 and 0.9, solved fraction, the softmax
    gate, curve statistics (curves held at their last value after a member stopped) and offset profiles."""
    from sapa.empirics.training.mechanism import GATE, HALF, SOLVED

    roles = {p["task"]: p.get("role", "probe") for p in mech["config"].get("probes", ())}
    rows = []
    for c, res in zip(mech["chunks"], mech["results"]):
        if res is None:
            continue
        steps = [int(t) for t in res["steps"]]
        acc = np.asarray(res["val_acc"], float)  # (K, E), None (after a member stopped) → NaN
        prof = np.asarray(res["profile"], float)  # (K, E, bins)
        fro = np.asarray(res["attn_fro"], float)  # (K, E)
        members = [tuple(m) for m in res["members"]]
        for arm in dict.fromkeys(a for a, _ in members):
            idx = [e for e, (a, _) in enumerate(members) if a == arm]
            seeds = [members[e][1] for e in idx]
            rows.append({"task": c["task"], "N": int(c["N"]), "arm": arm, "steps": steps,
                         "role": roles.get(c["task"], "probe"), "chance": float(res["chance"]),
                         "_raw": {r: acc[:, e] for r, e in zip(seeds, idx)},
                         "_prof": {r: prof[:, e] for r, e in zip(seeds, idx)},
                         "_norms": {"attn_fro": {r: fro[:, e] for r, e in zip(seeds, idx)}}})
    soft = {(r["task"], r["N"]): {s: _held(v) for s, v in r["_raw"].items()} for r in rows if r["arm"] == "softmax"}
    solved_by_softmax = {}
    out = []
    for r in rows:
        curves = {s: _held(v) for s, v in r["_raw"].items()}
        st = LC.curve_stats(r["steps"], curves, r["chance"], None if r["arm"] == "softmax"
                            else soft.get((r["task"], r["N"])))
        iv = {name: {str(s): list(exit_interval(r["steps"], list(v), thr)) for s, v in r["_raw"].items()}
              for name, thr in (("half", HALF), ("solve", SOLVED))}
        solve_at = {s: (hi if np.isfinite(hi) else None) for s, (_, hi) in iv["solve"].items()}
        half_at = {int(s): (int(hi) if np.isfinite(hi) else None) for s, (_, hi) in iv["half"].items()}
        frac = sum(v is not None for v in solve_at.values()) / len(solve_at)
        if r["arm"] == "softmax":
            solved_by_softmax[(r["task"], r["N"])] = frac

        def prof_at(which):
            ps = [r["_prof"][s][which(s)] for s in r["_prof"] if which(s) is not None]
            ps = [p for p in ps if np.isfinite(p).all()]
            return [round(float(v), 4) for v in np.median(ps, axis=0)] if ps else None

        last = {s: int(np.nonzero(~np.isnan(v))[0][-1]) for s, v in r["_raw"].items()}
        out.append({**{k: v for k, v in r.items() if k not in ("_prof", "_raw")}, "_curves": curves, **st,
                    "intervals": iv, "exit_at": {str(s): t for s, t in half_at.items()},
                    "solved_fraction": round(frac, 4),
                    "steps_to_solve": {s: (int(t) if t is not None else None) for s, t in solve_at.items()},
                    "solve": LC.censored_exits([None if t is None else int(t) for t in solve_at.values()],
                                               r["steps"][-1]),
                    "half": LC.censored_exits(list(half_at.values()), r["steps"][-1]),
                    "stopped": {str(s): r["steps"][k] for s, k in last.items()},
                    "profile_end": prof_at(lambda s: last[s]),
                    "profile_at_exit": prof_at(lambda s: r["steps"].index(half_at[s])
                                               if half_at.get(s) is not None else None)})
    for c in out:
        frac = solved_by_softmax.get((c["task"], c["N"]), 0.0)
        c["softmax_solved_fraction"] = frac
        c["decidable"] = bool(c["role"] == "probe" and frac >= GATE - 1e-12)
    return out


def slowdown_trends(cells: list[dict], arms=None, threshold: str = "floor", margins=(0.0, 0.5, 1.0),
                    cell_means: bool = True) -> dict:
    """{(task, arm): IntervalTrend} of s = log2(t(arm)/t(softmax)) per paired seed over the decidable N of each
    (task, arm), from the exit intervals at ``threshold`` ("floor" for the study; "half" / "solve" for the mechanisms).
    """
    iv = {(c["task"], c["N"], c["arm"]): c["intervals"][threshold] for c in cells if c.get("decidable", True)}
    out = {}
    for task, arm in dict.fromkeys((c["task"], c["arm"]) for c in cells if c["arm"] != "softmax"):
        if arms is not None and arm not in arms:
            continue
        Ns, data = [], []
        for N in sorted({n for t, n, a in iv if t == task and a == arm}):
            sm = iv.get((task, N, "softmax"))
            if sm is None:
                continue
            seeds = sorted(set(iv[(task, N, arm)]) & set(sm), key=int)
            Ns.append(N)
            data.append(paired_log2_intervals([iv[(task, N, arm)][s] for s in seeds], [sm[s] for s in seeds]))
        if len(Ns) >= 2:
            out[(task, arm)] = interval_trend(Ns, data, margins, cell_means=cell_means)
    return out


def norms_at_exit(cells: list[dict], quantity: str = "attn_fro", before: int = 3, after: int = 3) -> dict:
    """Per arm: the runs' ``quantity`` aligned on their exit (median per offset) and :func:`learning_curves.exit_change`."""
    by_arm: dict[str, list] = {}
    for c in cells:
        series = c.get("_norms", {}).get(quantity) or {}
        for s, v in series.items():
            t = c["exit_at"].get(str(s))
            row = LC.aligned_on_exit(c["steps"], list(v), t, before, after)
            if row is not None:
                by_arm.setdefault(c["arm"], []).append(row)
    out = {}
    for arm, rows in by_arm.items():
        med = []
        for j in range(before + after + 1):
            col = [r[j] for r in rows if r[j] is not None]
            med.append(round(float(np.median(col)), 6) if col else None)
        out[arm] = {"offsets": list(range(-before, after + 1)), "median": med, **LC.exit_change(rows, before)}
    return out
