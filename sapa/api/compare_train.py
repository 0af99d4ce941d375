"""log2(steps to threshold of φ ÷ softmax's) on the quick probes: the copy tasks (accuracy 0.5) and digits (chance + 0.03).

Softmax is trained once per (task, N, seed); each row's arm with the same seeds (the same initial weights and
minibatches: the members are paired). Copy arms:
softmax / x/√N / x³/√N use their kernels (:data:`sapa.empirics.training.mechanism.MECH_ARMS`), any other element-wise
φ its expression; digits arms: the study's table arms or ``expr:<φ>``
(:func:`sapa.empirics.training.study_config.arm_of`). A row-normalised φ other than softmax has no ensemble form.
Every chunk is a job of the pool of :func:`sapa.api.compare.compare` (beside the audits and the ascents).
"""

from __future__ import annotations

import math
from dataclasses import replace

from sapa.api.compare_types import Cell, CompareBudget, Job, expr_form, not_computed, table_id
from sapa.common.validate import InputError

__all__ = ["train_cells", "train_jobs", "train_run"]


def _mech_cfg(r: Family, b: CompareBudget, seed: int):
    from sapa.empirics.training.mechanism import MECH_ARMS, mech_config

    cfg = mech_config(b.mech, seed)
    if b.mech_Ns is not None:
        cfg = replace(cfg, probes=tuple(replace(p, Ns=tuple(n for n in b.mech_Ns)) for p in cfg.probes
                                        if p.task.startswith("copy")))
    arm = table_id(r) if table_id(r) in MECH_ARMS else None
    # the mechanism's one "expr" arm takes φ as text, "row:<ψ>" row-normalised
    return replace(cfg, arms=(arm,) if arm else (), activation="" if arm else expr_form(r).removeprefix("expr:"))


def _digits_cfg(r: Family, b: CompareBudget, seed: int):
    from sapa.empirics.training.study_config import ARMS, study_config

    cfg = study_config(b.study, seed)
    arm = table_id(r) if table_id(r) in ARMS else expr_form(r)
    digits = replace(cfg.digits, Ns=b.digits_Ns, lrs=cfg.digits.lrs[:1],
                     steps=b.digits_steps or cfg.digits.steps)
    return replace(cfg, arms=(arm,), digits=digits, tasks=("digits",)), arm


def _jobs(r: Family, b: CompareBudget, seed: int) -> list[tuple]:
    """[(kind, chunk, cfg)] of one row; InputError when the row cannot train."""
    from sapa.empirics.training.mechanism import plan_mech_chunks
    from sapa.empirics.training.study_config import plan_chunks

    mc = _mech_cfg(r, b, seed)
    jobs = [("copy", c, mc) for c in plan_mech_chunks(mc)]
    if r.mask != "causal":  # digits attend without a mask
        dc, _ = _digits_cfg(r, b, seed)
        jobs += [("digits", c, dc) for N in dc.digits.Ns for c in plan_chunks(dc, "digits", N, None)]
    return jobs


def train_run(job: tuple) -> dict:
    """One chunk, trained: {(task, N): {seed: exit step or None}} plus the cap (a module function: picklable)."""
    from sapa.empirics.training.learning_curves import exit_step

    kind, chunk, cfg = job
    out: dict = {}
    if kind == "copy":
        from sapa.empirics.training.mechanism import HALF, train_mechanism_chunk

        res = train_mechanism_chunk(chunk, cfg)
        steps = cfg.eval_steps(chunk.task)
        for e, (_, seed) in enumerate(chunk.members):
            acc = [a for a in (row[e] for row in res["val_acc"])]
            hit = next((t for t, a in zip(steps, acc) if t > 0 and a is not None and math.isfinite(a) and a >= HALF),
                       None)
            out[seed] = hit
        return {"key": f"{chunk.task}@N={chunk.N}", "exits": out, "cap": steps[-1], "cpu_s": res["cpu_s"]}
    from sapa.empirics.training.study_chunk import train_chunk

    res = train_chunk(chunk, cfg)
    floor = res["rows"][0]["chance_acc"]
    for m in chunk.members:
        curve = sorted((step, v) for arm, _, _, s, step, q, v in res["history"] if q == "val_acc" and s == m.seed
                       and arm == m.arm)
        out[m.seed] = exit_step([t for t, _ in curve], [v for _, v in curve], floor)
    return {"key": f"digits@N={chunk.N}", "exits": out, "cap": cfg.digits.steps, "cpu_s": res["cpu_s"]}


def train_jobs(rows: list[Family], b: CompareBudget, seed: int) -> tuple[list[Job], dict]:
    """One job per chunk (:func:`train_run`; softmax's chunks once, as its own row) and the rows refused before any
    work ({row: {train}}, each saying why); a budget that trains nothing refuses every row."""
    if not b.train:
        return [], {r.id: {"train": not_computed("train", f"the {b.name} budget trains nothing")} for r in rows}
    jobs, refused = [], {}
    for r in rows:
        try:
            jobs += [Job("train", r.id, train_run, (j,), cost=_cost(j)) for j in _jobs(r, b, seed)]
        except InputError as exc:
            refused[r.id] = {"train": not_computed("train", " ".join(str(exc).split()))}
    return jobs, refused


def _cost(job: tuple) -> float:
    """Expected CPU-s of one chunk (quick budget, one thread, 2 cores: docs/performance.md): copy ≈ 1.4·(N/16)^1.5
    for 3 seeds, digits ≈ 3.5 at N = 16 for 2; scaled by members and steps."""
    kind, chunk, cfg = job
    if kind == "copy":
        return len(chunk.members) / 3 * 1.4 * (chunk.N / 16) ** 1.5 * cfg.plan(chunk.task).steps / 400
    return len(chunk.members) / 2 * 3.5 * chunk.N / 16 * cfg.digits.steps / 200


def train_cells(rows: list[Family], b: CompareBudget, done: dict) -> dict:
    """{row: {train}} from ``done`` ({row: [(chunk result, error)]}): per probe cell the Kaplan–Meier median exit of φ
    and of softmax; value: the median over cells of log2(φ's ÷ softmax's); quick: no verdict (2–3 seeds are a smoke
    test)."""
    soft = {x["key"]: x for x, _ in done.get("softmax", []) if x is not None}
    out = {}
    for r in rows:
        if r.id not in done:
            continue
        why = next((e for _, e in done[r.id] if e is not None), None)
        out[r.id] = {"train": not_computed("train", why) if why is not None else
                     _cell([x for x, _ in done[r.id]], soft, b)}
    return out


def _cell(mine: list[dict], soft: dict, b: CompareBudget) -> Cell:
    from sapa.empirics.training.learning_curves import censored_exits

    per, logs = {}, []
    for x in mine:
        s = soft.get(x["key"])
        if s is None:  # softmax's own chunk of this cell did not train
            continue
        a, c = censored_exits(list(x["exits"].values()), x["cap"]), censored_exits(list(s["exits"].values()), s["cap"])
        lr = None
        if a["median"] is not None and c["median"] is not None:
            lr = math.log2(a["median"] / c["median"])
        elif c["median"] is not None:  # φ censored: at least the cap's ratio
            lr = math.log2(x["cap"] / c["median"])
        per[x["key"]] = {"steps": a["median"], "softmax_steps": c["median"], "solved": f"{a['n'] - a['censored']}/"
                         f"{a['n']}", "softmax_solved": f"{c['n'] - c['censored']}/{c['n']}", "log2_ratio": lr,
                         "censored": a["median"] is None}
        if lr is not None:
            logs.append(lr)
    if not logs:
        return Cell("train", None, None, "none", None, None, "not computed: softmax reached no threshold", per)
    logs.sort()
    med = logs[len(logs) // 2] if len(logs) % 2 else 0.5 * (logs[len(logs) // 2 - 1] + logs[len(logs) // 2])
    return Cell("train", med, (logs[0], logs[-1]), "range over probe cells (Kaplan–Meier medians)", None, None,
                f"no verdict: the {b.name} budget is a smoke test (2–3 seeds cannot decide; the slowdown rule needs "
                "the full study); copy: accuracy 0.5, digits: chance + 0.03; a censored φ counts at the cap", per)
