"""Scorecard of attention activations φ against softmax (arXiv 2410.18613): one row per φ, one cell per axis.

Axes: ``size`` (E-RMS ‖φ(S)‖_F/√N at ViT-Base, N = 196, D = 768, d = 64), ``growth`` (local exponent at N = 196 and
as N → ∞, N*), ``worst_case`` (exponent of the worst case over bounded tokens), ``lipschitz`` (σ₁ growth on the
balls β = 4 and β = 1), ``time`` (CPU time against SDPA) and ``train`` (steps to threshold against softmax on the
quick probes). Every cell carries its value, its uncertainty, the verdict of the rule that applies (None where no
rule applies, said so in its note) and, where it cannot be computed for this φ, why. The axes themselves live in
:mod:`sapa.api.compare_axes` (audit, ball, timing) and :mod:`sapa.api.compare_train` (training); the budgets, rows,
cells and jobs in :mod:`sapa.api.compare_types`.

>>> from sapa.api.compare import resolve_rows
>>> [r.id for r in resolve_rows(["x3_sqrtN", "Max(x,0)**2/N"])]
['softmax', 'x3_sqrtN', 'Max(x,0)**2/N']
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

from sapa.api.compare_types import (AXES, AXIS_WORDS, BUDGETS, Cell, CompareBudget, Job, _finite,  # noqa: F401
                                    not_computed, row_dict)
from sapa.theory.families import Family
from sapa.common.seeds import seed_sequence
from sapa.common.validate import InputError, positive_int

__all__ = ["AXES", "BUDGETS", "Cell", "CompareBudget", "Job", "Scorecard", "compare", "resolve_rows",
           "run_jobs"]


@dataclass(frozen=True)
class Scorecard:
    """Rows (softmax first, the reference) × :data:`AXES` cells, the budget, seconds per axis, provenance."""

    rows: tuple[Family, ...]  # family rows (sapa.theory.families): a table row, or an expression's unlisted row
    cells: tuple[tuple[Cell, ...], ...]
    budget: str
    seconds: dict
    provenance: dict

    def cell(self, row_id: str, axis: str) -> Cell:
        return self.cells[[r.id for r in self.rows].index(row_id)][AXES.index(axis)]

    def to_dict(self) -> dict:
        """JSON-ready: every non-finite number as None (its cell's note says why)."""
        return {"axes": list(AXES), "budget": self.budget, "rows": [row_dict(r) for r in self.rows],
                "cells": [{c.axis: c.to_dict() for c in cs} for cs in self.cells], "seconds": _finite(self.seconds),
                "provenance": self.provenance}

    def table(self) -> str:
        """Plain-text table: one line per activation, value [interval] verdict per axis."""
        head = ["activation", *(AXIS_WORDS[a] for a in AXES)]
        body = [[r.label, *(_short(c) for c in cs)] for r, cs in zip(self.rows, self.cells)]
        w = [max(len(x[k]) for x in [head, *body]) for k in range(len(head))]
        return "\n".join("  ".join(x[k].ljust(w[k]) for k in range(len(x))).rstrip() for x in [head, *body])

    def markdown(self) -> str:
        """A markdown table, then each cell's note (the rule, or why no rule / why not computed)."""
        lines = ["| activation | " + " | ".join(AXIS_WORDS[a] for a in AXES) + " |",
                 "|---" * (len(AXES) + 1) + "|"]
        lines += [f"| {r.label} | " + " | ".join(_short(c).replace("|", "\\|") for c in cs) + " |"
                  for r, cs in zip(self.rows, self.cells)]
        lines += ["", *(f"- **{r.label}, {c.axis}**: {c.note}" + (f" (rule {c.rule})" if c.rule else "")
                        for r, cs in zip(self.rows, self.cells) for c in cs)]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Scorecard(budget={self.budget!r})\n{self.table()}"


def _short(c: Cell) -> str:
    if c.value is None:
        return "— (not computed)" if c.note.startswith("not computed") else "—"
    iv = "" if c.interval is None else f" [{_g(c.interval[0])}, {_g(c.interval[1])}]"
    return f"{_g(c.value)}{iv} {c.verdict or 'no rule'}"


def _g(x) -> str:
    return "∞" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3g}"


# --------------------------------------------------------------------------- rows


def resolve_rows(activations) -> list[Family]:
    """Softmax (the reference) then each activation's family row (:func:`sapa.theory.families.row_of`): a family id
    (no free parameter) or a sympy expression in x, N, i, j (``EXPR@row``: row-normalised). InputError naming the
    bad one, before any work: an unparsable expression, a free parameter, an activation given twice (also as a
    family and as its expression), softmax itself (always the first row), an empty list."""
    from sapa.theory.activation_audit import parse_activation
    from sapa.theory.families import FAMILIES, row_of

    if isinstance(activations, str):
        activations = [activations]
    activations = list(activations)
    if not activations:
        raise InputError("name at least one activation to compare with softmax (a family id or an expression)")
    softmax = FAMILIES["softmax"]
    rows, seen = [softmax], {_same(softmax): "softmax (the reference, always the first row)"}
    for text in activations:
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"an activation must be a family id or an expression, got {text!r}")
        body, _, tag = text.partition("@")
        if tag not in ("", "row"):
            raise InputError(f"{text!r}: the only suffix is @row (row-normalised), got @{tag}")
        r = row_of(body, "row" if tag else "none", id=text)
        if body not in FAMILIES:
            parse_activation(r.expr, r.normalize, r.mask)  # one clear InputError for an unparsable expression
        if _same(r) in seen:
            raise InputError(f"{text!r} is {seen[_same(r)]} again: name each activation once")
        seen[_same(r)] = repr(text)
        rows.append(r)
    return rows


def _same(r: Family) -> tuple[str, str, str]:
    """What makes two rows one activation: the expression (spaces and ^ aside), the normalisation, the mask."""
    return r.expr.replace(" ", "").replace("^", "**"), r.normalize, r.mask


# --------------------------------------------------------------------------- the scorecard


def run_job(job: Job) -> dict:
    """``job`` on one torch thread (deterministic algorithms): {"value", "error" (an InputError's words, else None),
    "cpu_s", "wall_s"}; in a worker of the pool or in this process."""
    from sapa.common.pool import one_thread

    t, c = time.perf_counter(), time.process_time()
    value, error = None, None
    with one_thread():
        try:
            value = job.fn(*job.arg)
        except InputError as exc:
            error = " ".join(str(exc).split())
    return {"value": value, "error": error, "cpu_s": time.process_time() - c, "wall_s": time.perf_counter() - t}


def run_jobs(jobs: list[Job], workers: int, progress: bool | str = False, desc: str = "[compare] pool") -> list[dict]:
    """Every job's :func:`run_job` result, in the order given: in a pool of ``workers`` processes (one thread each,
    longest first; stopped at once on an interrupt: :func:`sapa.common.pool.stopping_pool`), or here for 1 worker.

    Progress: a bar weighted by the jobs' expected cost (its ETA), the jobs done as its postfix."""
    from sapa.common.progress import progress_bar

    order = sorted(range(len(jobs)), key=lambda k: -jobs[k].cost)
    out: list = [None] * len(jobs)
    bar = progress_bar(sum(j.cost for j in jobs), desc=desc, progress=progress,  # a terminal: no cost-s count
                       bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]")
    done = 0

    def finished(k: int, res: dict) -> None:
        nonlocal done
        out[k], done = res, done + 1
        bar.set_postfix_str(f"{done}/{len(jobs)} jobs")
        bar.update(jobs[k].cost)

    try:
        if workers <= 1 or len(jobs) <= 1:
            for k in order:
                finished(k, run_job(jobs[k]))
        else:
            import concurrent.futures as cf

            from sapa.common.pool import stopping_pool

            with stopping_pool(min(workers, len(jobs))) as ex:
                futs = {ex.submit(run_job, jobs[k]): k for k in order}
                for f in cf.as_completed(futs):
                    finished(futs[f], f.result())
    finally:
        bar.close()
    return out


def compare(activations, budget: str | CompareBudget = "quick", *, logit_scale: str = "S/sqrt(d)", seed: int = 0,
            workers: int = 2, progress: bool | str = False) -> Scorecard:
    """The scorecard of ``activations`` (family ids or expressions) against softmax under ``budget``.

    Order: parse every row (InputError before any work); time each row alone (this process, one thread, nothing
    else of sapa's running); then the audits (size, growth, worst case), the Lipschitz ascents (one job per row and
    ball) and the training chunks as the jobs of one pool of ``workers`` processes (one thread each; a budget with
    ``spawn=False``: here). ``seconds``: wall time of the timing, of the pool and in all; the CPU-s of each pooled axis
    (summed over its jobs); ``cpu_total``: this process and its reaped workers (getrusage).
    """
    from sapa.api import compare_axes as AX
    from sapa.api import compare_train as CT
    from sapa.api.conventions import CONVENTIONS

    b = BUDGETS.get(budget) if isinstance(budget, str) else budget
    if not isinstance(b, CompareBudget):
        raise InputError(f"unknown budget {budget!r}; choose one of {', '.join(BUDGETS)}")
    if logit_scale not in CONVENTIONS:
        raise InputError(f"logit scale must be one of {CONVENTIONS}, got {logit_scale!r}")
    workers = positive_int("workers", workers)
    seed_sequence(seed, "compare")  # a seed that is not a non-negative integer: one InputError, before any work
    rows = resolve_rows(activations)
    say = _sayer(progress)
    cells: dict = {r.id: {} for r in rows}
    cpu0, t0 = _cpu(), time.perf_counter()
    for rid, got in AX.timing(rows, b, seed, say).items():
        cells[rid].update(got)
    seconds = {"time": round(time.perf_counter() - t0, 2)}
    say(f"[compare] time: {seconds['time']:.1f} s (alone, one thread)")

    jobs, refused = [], []
    for plan in (AX.audit_jobs(rows, b, logit_scale, seed), AX.ball_jobs(rows, b, seed), CT.train_jobs(rows, b, seed)):
        jobs += plan[0]
        refused.append(plan[1])
    for got in refused:
        for rid, c in got.items():
            cells[rid].update(c)
    n = max(1, min(workers, len(jobs))) if b.spawn else 1
    say(f"[compare] audits, Lipschitz ascents, training: {len(jobs)} jobs on {n} process{'es' if n > 1 else ''}")
    t = time.perf_counter()
    results = run_jobs(jobs, n, progress, "[compare] audits, Lipschitz, training")
    seconds["pool"] = round(time.perf_counter() - t, 2)
    done: dict = {a: {} for a in ("audit", "lipschitz", "train")}
    for j, res in zip(jobs, results):
        done[j.axis].setdefault(j.row, []).append((res["value"], res["error"]))
        seconds[f"{j.axis}_cpu"] = round(seconds.get(f"{j.axis}_cpu", 0.0) + res["cpu_s"], 2)
    for got in (AX.audit_cells(rows, {k: v[0] for k, v in done["audit"].items()}),
                AX.ball_cells(rows, b, done["lipschitz"]), CT.train_cells(rows, b, done["train"])):
        for rid, c in got.items():
            cells[rid].update(c)
    seconds["total"] = round(time.perf_counter() - t0, 2)
    seconds["cpu_total"] = round(_cpu() - cpu0, 2)
    seconds["workers"] = n
    say(f"[compare] pool: {seconds['pool']:.1f} s; in all {seconds['total']:.1f} s, {seconds['cpu_total']:.1f} CPU-s")
    table = tuple(tuple(cells[r.id].get(a) or not_computed(a, "no result") for a in AXES) for r in rows)
    return Scorecard(tuple(rows), table, b.name, seconds, _provenance(b, logit_scale, seed))


def _cpu() -> float:
    """CPU-s of this process and of its children that have ended (the pool's workers, once shut down)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _sayer(progress: bool | str):
    from sapa.common.progress import say

    return (lambda line: say(line)) if progress else (lambda line: None)


def _provenance(b: CompareBudget, logit_scale: str, seed: int) -> dict:
    import os
    import platform

    import torch

    import sapa

    return {"sapa": sapa.__version__, "torch": torch.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "cores": os.cpu_count(), "load_1min": round(os.getloadavg()[0], 2),
            "budget": asdict(b), "logit_scale": logit_scale, "seed": seed,
            "model": "iid weights, D = 768, d = 64, N = 196 (ViT-Base)"}
