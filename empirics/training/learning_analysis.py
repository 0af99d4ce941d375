"""Per (task, N, arm): curve, censored t_exit, acc at matched steps, final acc + converged; slowdown trends over N.

Pure functions over the stored study (``history`` of :func:`empirics.training.train_study.run_study`, long
form) and the mechanism runs (:func:`empirics.training.mechanism.run_mechanisms`), built on
:mod:`empirics.training.learning_curves`:

* :func:`study_learning` — the text / digits cells at each arm's best lr (paired with softmax at its best lr);
* :func:`mechanism_learning` — the mechanism cells (one lr): also solved fraction, censored steps to solve
  (first evaluation with accuracy ≥ :data:`empirics.training.mechanism.SOLVED`) and the offset-mass profile
  at the end and at the plateau exit (median over seeds);
* :func:`slowdown_trends` — {(task, arm): :class:`learning_curves.SlowdownEvidence`} from the cells;
* :func:`norms_at_exit` — norm trajectories aligned on each run's exit, and the change into the exit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from empirics.training import learning_curves as LC

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
    from empirics.training.study_analysis import study_rows

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
        out.append({"task": r.task, "N": int(r.N), "arm": r.arm, "lr": float(r.lr), "steps": steps, **st,
                    "_curves": curves, "_norms": norms})
    return out


def mechanism_learning(mech: dict) -> list[dict]:
    """One dict per (task, N, arm) of the mechanism runs: curve statistics, solved fraction, steps to solve, profiles."""
    from empirics.training.mechanism import SOLVED

    rows = []
    for c, res in zip(mech["chunks"], mech["results"]):
        if res is None:
            continue
        steps = res["steps"]
        acc = np.asarray(res["val_acc"], float)  # (K, E)
        prof = np.asarray(res["profile"], float)  # (K, E, bins)
        fro = np.asarray(res["attn_fro"], float)  # (K, E)
        members = [tuple(m) for m in res["members"]]
        for arm in dict.fromkeys(a for a, _ in members):
            idx = [e for e, (a, _) in enumerate(members) if a == arm]
            seeds = [members[e][1] for e in idx]
            curves = {r: acc[:, e] for r, e in zip(seeds, idx)}
            rows.append({"task": c["task"], "N": int(c["N"]), "arm": arm, "steps": steps, "_curves": curves,
                         "_prof": {r: prof[:, e] for r, e in zip(seeds, idx)},
                         "_norms": {"attn_fro": {r: fro[:, e] for r, e in zip(seeds, idx)}},
                         "chance": float(res["chance"])})
    soft = {(r["task"], r["N"]): r["_curves"] for r in rows if r["arm"] == "softmax"}
    out = []
    for r in rows:
        st = LC.curve_stats(r["steps"], r["_curves"], r["chance"], None if r["arm"] == "softmax"
                            else soft.get((r["task"], r["N"])))
        solve = {s: next((t for t, a in zip(r["steps"], v) if t > 0 and a >= SOLVED), None)
                 for s, v in r["_curves"].items()}
        ex = {int(k): v for k, v in st["steps_to_leave_floor"].items()}

        def prof_at(which):
            ps = [r["_prof"][s][which(s)] for s in r["_prof"] if which(s) is not None]
            return [round(float(v), 4) for v in np.median(ps, axis=0)] if ps else None

        out.append({**{k: v for k, v in r.items() if k not in ("_prof",)}, **st,
                    "solved_fraction": round(sum(t is not None for t in solve.values()) / len(solve), 4),
                    "steps_to_solve": {str(s): t for s, t in solve.items()},
                    "solve": LC.censored_exits(list(solve.values()), r["steps"][-1]),
                    "profile_end": prof_at(lambda s: -1),
                    "profile_at_exit": prof_at(lambda s: r["steps"].index(ex[s]) if ex.get(s) is not None else None)})
    return out


def slowdown_trends(cells: list[dict], arms=None) -> dict:
    """{(task, arm): SlowdownEvidence} of log2(t_exit(arm)/t_exit(softmax)) over the N of each (task, arm)."""
    ex = {(c["task"], c["N"], c["arm"]): ({int(k): v for k, v in c["steps_to_leave_floor"].items()}, c["steps"][-1])
          for c in cells}
    out = {}
    for task, arm in dict.fromkeys((c["task"], c["arm"]) for c in cells if c["arm"] != "softmax"):
        if arms is not None and arm not in arms:
            continue
        Ns, vals, cens = [], [], []
        for N in sorted({c["N"] for c in cells if c["task"] == task and c["arm"] == arm}):
            if (task, N, "softmax") not in ex:
                continue
            (a, cap), (s, _) = ex[(task, N, arm)], ex[(task, N, "softmax")]
            sd = LC.slowdown(a, s, cap)
            Ns.append(N)
            vals.append(sd["values"])
            cens.append(sd["censored"])
        if Ns:
            out[(task, arm)] = LC.slowdown_evidence(Ns, vals, cens, task=task, arm=arm)
    return out


def norms_at_exit(cells: list[dict], quantity: str = "attn_fro", before: int = 3, after: int = 3) -> dict:
    """Per arm: the runs' ``quantity`` aligned on their exit (median per offset) and :func:`learning_curves.exit_change`."""
    by_arm: dict[str, list] = {}
    for c in cells:
        series = c.get("_norms", {}).get(quantity) or {}
        for s, v in series.items():
            t = c["steps_to_leave_floor"].get(str(s))
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
