"""Does x^p/√N keep attention trainable as N grows? Tiny transformers across N, every arm with its own lr sweep.

The paper's practical thesis (arXiv 2410.18613, §5): softmax trains well because it keeps
‖φ(S)‖_F from growing with N, x^p/√N does the same and can replace it, while an unscaled x^p or
a constant tuned at one N (the paper's x/16, x³/16) should not transfer across N. The study
(docs/training.md):

* **tasks and N.** ``digits`` — sklearn's 8×8 digits, p×p patches: N = 16 (2×2) and 64 (1×1);
  ``text`` — a causal character model of Python's documentation prose, context N. Same width and
  depth at every N; the windows per step B are the same at every N (at a constant token count the
  few windows per step at large N left softmax itself on the bigram plateau: docs/training.md).
* **arms** (:data:`ARMS`): softmax; x^p/√N; x^p/α with α tuned once at the smallest N of the task
  (a grid, selected on validation accuracy) and then held fixed; unscaled x^p; x^p/N; x³/√i under
  the causal mask; p ∈ {1, 3}.
* **a fair comparison.** Every arm gets every learning rate of the grid, several seeds, the same
  warm-up and cosine schedule. Replicate r of (task, N) has the same initial weights and the same
  minibatch stream for every arm and learning rate (paired). The best learning rate is chosen on a
  validation split; the held-out test split is reported.
* **measured per member**: divergence (non-finite training loss, or a final validation loss above
  the one at step 0), validation / test loss and accuracy, and on a fixed probe batch, exactly in
  float64 (:func:`sapa.empirics.kernels.norms.attention_norms_batched`): ‖φ(S)‖_F, ‖∂φ(S)/∂S‖_F, ‖∂φ(S)/∂X‖_F
  (mean over layers, heads and probe sequences), and the pre-clip gradient norm.

Speed: each (task, N, activation family) is trained as vectorised ensembles
(:mod:`sapa.empirics.training.ensemble`): every scale rule × learning rate × seed of the family in one batched
forward/backward. An ensemble chunk is the unit of work and of resumption: its members are written
atomically to ``OUT/chunks/*.json`` (sealed with a checksum), a rerun skips finished chunks of the
same config hash, so a killed run loses at most the chunks in flight. Chunks run serially or in a
pool of single-threaded workers with identical numbers. Training float32, norms float64.

Modules: :mod:`sapa.empirics.training.study_config` (design, budgets, chunks), :mod:`sapa.empirics.training.study_chunk` (training one
chunk), :mod:`sapa.empirics.training.study_store` (sealed chunk files, Parquet tables); this module runs and loads the study.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch

from sapa.common.atomic import atomic_write, atomic_write_json, make_dirs
from sapa.common.progress import skip
from sapa.common.validate import InputError, positive_int
from sapa.common.numerics import PINNED
from sapa.common.pool import process_pool, stop_pool
from sapa.empirics.training.study_chunk import train_chunk
from sapa.empirics.training.study_config import (ARMS, BUDGETS, aliases, CAUSAL_ONLY, FULL, HISTORY_QUANTITIES, MEMORY_BYTES, NORMS, QUICK,
                                   SCHEMA, TASKS, TINY, Chunk, Member, StudyConfig, TaskPlan, alpha_ps,
                                   bytes_per_member, look2_chunks, member_count, plan_chunks, study_config)
from sapa.empirics.training.study_store import chunk_ok, chunk_record_problem, read_chunk, store_chunk

__all__ = ["ARMS", "TaskPlan", "StudyConfig", "QUICK", "FULL", "TINY", "study_config", "Member",
           "Chunk", "plan_chunks", "train_chunk", "run_study", "load_study", "StudyResult", "select_alpha",
           "HISTORY_QUANTITIES", "best_lr_summary", "member_count", "BUDGETS", "CAUSAL_ONLY", "MEMORY_BYTES",
           "NORMS", "TASKS", "chunk_record_problem", "chunk_ok", "bytes_per_member"]


# --------------------------------------------------------------------------- α*


def select_alpha(runs: pd.DataFrame, task: str, p: int) -> float:
    """α* of (task, p): at the smallest N, the α whose best lr has the highest median validation accuracy.

    Ties go to the smaller lr, then the smaller α. ``runs``: rows of the α grid (scale "alpha").
    """
    sub = runs[(runs["task"] == task) & (runs["p"] == p) & (runs["scale"] == "alpha")]
    if sub.empty:
        raise InputError(f"no fixed-α runs of {task}, p = {p} to tune α on")
    N0 = int(sub["N"].min())
    sub = sub[sub["N"] == N0]
    med = sub.groupby(["alpha", "lr"])["val_acc_final"].median().reset_index()
    med = med.sort_values(["val_acc_final", "lr", "alpha"], ascending=[False, True, True])
    best_per_alpha = med.drop_duplicates("alpha")  # each α at its best lr
    return float(best_per_alpha.iloc[0]["alpha"])


# --------------------------------------------------------------------------- the study


@dataclass(frozen=True)
class StudyResult:
    """The stored study: runs (one row per member), history (long form), config, provenance, mechanism runs."""

    runs: pd.DataFrame
    history: pd.DataFrame
    config: dict
    provenance: dict
    mechanism: dict | None = None  # sapa.empirics.training.mechanism.run_mechanisms's result (None: not run)


def _start_chunks(chunks: list[Chunk], cfg: StudyConfig, out: Path, ex: cf.Executor | None, bar):
    """Submit the chunks not yet on disk to ``ex`` now (largest first); return ``finish()`` → (members, chunks) trained.

    ``finish()`` stores each chunk as it arrives (trains them here when there is no executor).
    """
    chash = cfg.hash()
    todo = [c for c in chunks if not chunk_ok(out / "chunks" / c.file_name, c, chash)]
    bar.stored([c for c in chunks if c not in todo])  # found finished: not this run's speed
    todo.sort(key=lambda c: -len(c.members) * bytes_per_member(cfg, c.task, c.N))
    counts = sum(len(c.members) for c in todo), len(todo)

    def store(c: Chunk, res: dict) -> None:
        store_chunk(out / "chunks" / c.file_name, c, chash, res)
        bar.done(c)

    if ex is None:
        def finish_here() -> tuple[int, int]:
            for c in todo:
                store(c, train_chunk(c, cfg))
            return counts

        return finish_here
    futs = {ex.submit(train_chunk, c, cfg): c for c in todo}

    def finish() -> tuple[int, int]:
        try:
            for fut in cf.as_completed(futs):
                store(futs[fut], fut.result())
        except BaseException:
            for f in futs:
                f.cancel()
            raise
        return counts

    return finish


MEMBER_BYTES = 2048  # what one planned member holds until the study ends: its plan entry (≈ 150 B, measured with
# tracemalloc on the quick study at 2000 replicates) and its rows in the assembled runs and history tables


def member_flops(c, cfg: StudyConfig, mcfg=None) -> float:
    """Training flops of one member of chunk ``c`` (a study Chunk, or a mechanism chunk of ``mcfg``): steps × flops
    per step (:func:`sapa.empirics.training.tiny_models.step_flops`; a mechanism chunk's step cap, an upper bound)."""
    from sapa.empirics.training.mechanism import MechChunk
    from sapa.empirics.training.tiny_models import step_flops

    if isinstance(c, MechChunk):  # the cap: an upper bound (members stop once they solve the task)
        pr = mcfg.plan(c.task)
        return pr.steps * step_flops(mcfg.model_of(c.task), pr.batch, c.N)
    plan = cfg.plan(c.task)
    return plan.steps * step_flops(cfg.model, plan.sequences(c.N), c.N)


def study_cost(cfg: StudyConfig):
    """The :class:`sapa.empirics.montecarlo.workload.Cost` of training ``cfg`` (its second look, planned later, aside),
    before anything of its size is built: the chunks are planned at one replicate and every count is linear in the
    replicates (``sapa train --seeds 9007199254740992`` is refused in a second, not after 6.8 GB of plans)."""
    from dataclasses import replace

    from sapa.empirics.montecarlo.workload import Cost

    one = replace(cfg, seeds=1)
    chunks = [c for t in one.tasks for N in one.plan(t).Ns for c in plan_chunks(one, t, N, {p: 1.0 for p in
                                                                                          alpha_ps(one, t)})]
    members = cfg.seeds * sum(len(c.members) for c in chunks)
    flops = cfg.seeds * sum(len(c.members) * int(member_flops(c, one)) for c in chunks)
    return Cost(flops=flops, bytes=members * MEMBER_BYTES, how=f"{members:,} members at {cfg.seeds:,} replicates")


class StudyProgress:
    """The study's progress bar, weighted by work (:func:`step_flops` × steps per member), its postfix the members done.

    Members of the α grid at the smallest N cost a fraction of those at the largest: a bar counting members would
    promise an ETA that doubles when phase 2 starts. ``make_bar(total_work)``: the bar to count into
    (:func:`sapa.common.progress.progress_bar`'s, or a caller's through ``run_study(progress=callable)``).
    """

    def __init__(self, make_bar: Callable[[float], object], cfg: StudyConfig, mcfg=None, mchunks=()) -> None:
        self.cfg, self.mcfg = cfg, mcfg
        phases = [c for t in cfg.tasks for N in cfg.plan(t).Ns  # any α*: the chunks' sizes do not depend on it
                  for c in plan_chunks(cfg, t, N, {p: 1.0 for p in alpha_ps(cfg, t)})]
        self.members_total = member_count(cfg) + sum(len(c.members) for c in mchunks)
        self.members = 0
        self.bar = make_bar(sum(self.work(c) for c in phases) + sum(self.work(c) for c in mchunks))
        self._postfix()

    def work(self, c) -> float:
        """Flops of chunk ``c`` (a study Chunk or a mechanism chunk): members × steps × flops per step."""
        return len(c.members) * member_flops(c, self.cfg, self.mcfg)

    def _postfix(self) -> None:
        self.bar.set_postfix_str(f"{self.members}/{self.members_total} members")

    def grow(self, chunks) -> None:
        """Add chunks planned after the run began (the dose-response's second look) to the bar's total."""
        self.members_total += sum(len(c.members) for c in chunks)
        self.bar.total += sum(self.work(c) for c in chunks)
        self._postfix()

    def done(self, c) -> None:
        self.members += len(c.members)
        self._postfix()
        self.bar.update(self.work(c))

    def stored(self, chunks) -> None:
        self.members += sum(len(c.members) for c in chunks)
        self._postfix()
        skip(self.bar, sum(self.work(c) for c in chunks))

    def close(self) -> None:
        self.bar.close()


def _run_chunks(chunks: list[Chunk], cfg: StudyConfig, out: Path, ex: cf.Executor | None, bar) -> tuple[int, int]:
    """Train the chunks not yet on disk (largest first; in ``ex`` when given); return (members, chunks) trained."""
    return _start_chunks(chunks, cfg, out, ex, bar)()


def assemble(chunks: list[Chunk], out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    parts = [read_chunk(out / "chunks" / c.file_name, c) for c in chunks]
    runs = pd.concat([p[0] for p in parts], ignore_index=True)
    hist = pd.concat([p[1] for p in parts], ignore_index=True)
    runs = runs.astype({"N": "int64", "p": "int64", "seed": "int64", "steps": "int64", "diverged": bool,
                        "diverged_step": "int64", "best_step": "int64", "alpha": "float64", "in_study": bool})
    hist = hist.astype({"N": "int64", "seed": "int64", "step": "int64", "alpha": "float64", "value": "float64"})
    return runs, hist


def add_aliases(cfg: StudyConfig, runs: pd.DataFrame, hist: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Copy each aliased arm's grid-member rows under its own name at the task's smallest N (study_config.aliases).

    x^p at c = 1 and x^p/√N at c = √N are the same models as the dose grid's members there (same initial weights,
    minibatches, lr and seed); trained once, they are read under both names. A copied row keeps the grid member's
    numbers and cpu_s 0 (no second training).
    """
    add_r, add_h = [], []
    for task in cfg.tasks:
        N0 = cfg.plan(task).Ns[0]
        for name, (grid_arm, value) in aliases(cfg, task).items():
            arm = ARMS[name]
            sel = (runs["task"] == task) & (runs["N"] == N0) & (runs["arm"] == grid_arm) & np.isclose(runs["alpha"],
                                                                                                          value)
            r = runs[sel].copy()
            r["arm"], r["scale"], r["alpha"], r["in_study"], r["cpu_s"] = name, arm.rule, math.nan, True, 0.0
            hs = (hist["task"] == task) & (hist["N"] == N0) & (hist["arm"] == grid_arm) & np.isclose(hist["alpha"],
                                                                                                     value)
            h = hist[hs].copy()
            h["arm"], h["alpha"] = name, math.nan
            add_r.append(r)
            add_h.append(h)
    if not add_r:
        return runs, hist
    return pd.concat([runs, *add_r], ignore_index=True), pd.concat([hist, *add_h], ignore_index=True)


def write_parquet(path: Path, df: pd.DataFrame) -> None:
    """``df`` as Parquet with its content checksum (:func:`sapa.common.integrity.seal_table`), atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sapa.common.integrity import seal_table

    table = seal_table(pa.Table.from_pandas(df, preserve_index=False))
    atomic_write(path, lambda fh: pq.write_table(table, fh))


def _mechanism_config(budget, seed: int, mechanism):
    """The mechanism study to run beside ``budget``: "budget" → the budget's own (by name), None → none."""
    from sapa.empirics.training.mechanism import MECH_BUDGETS, MechConfig, mech_config

    if mechanism is None or isinstance(mechanism, MechConfig):
        return mechanism
    if mechanism != "budget":
        return mech_config(mechanism, seed)
    name = study_config(budget, seed).name if isinstance(budget, str) else None  # the budget's config, as registered
    return mech_config(name, seed) if name in MECH_BUDGETS else None


def run_study(budget: str | StudyConfig, out_dir: str | Path, seed: int = 0, workers: int = 2,
              progress: bool | str | Callable = True, executor: cf.Executor | None = None, mechanism="budget",
              device: str = "cpu", niceness: int = 0,
              second_look: Callable[[pd.DataFrame, StudyConfig], list] | None = None,
              design: dict | None = None) -> StudyResult:
    """Run (or resume) the study of ``budget`` into ``out_dir``; return the assembled :class:`StudyResult`.

    Phase 1 trains every task's smallest N (the α grid and the dose grids included) and selects α*; phase 2 trains
    the other N with α* held fixed; beside it, when the config has ``look2_refine`` ≥ 2 and ``second_look`` is given,
    the dose-response's second look: ``second_look(phase-1 runs, cfg)`` names the (task, p, lr) strata to look at
    again (the ledger's rule: ``sapa.evidence.dose_looks.second_look``) and :func:`look2_chunks` trains their
    finer dose grid; then the mechanism tasks (:mod:`sapa.empirics.training.mechanism`; ``mechanism``:
    "budget" — the budget's own when ``budget`` is a name —, a MechConfig, or None). ``executor``: any
    ``concurrent.futures.Executor`` (e.g. :func:`sapa.empirics.montecarlo.distributed.executor_for`'s Dask
    executor); else ``workers`` 1 trains here and K > 1 in a pool of K single-threaded processes (identical
    numbers either way; ``niceness``: the pool's ``os.nice``, its priority only). ``device``: where the mechanism
    chunks train ("cpu" | "cuda"). ``progress``: True/"force"/False as :func:`sapa.common.progress.progress_bar`, or
    ``progress(total_work)`` returning the bar to count into (e.g. a quiet :class:`sapa.common.progress.Tally`;
    :class:`StudyProgress` weighs each member by its flops and writes the members done as the postfix). Writes
    ``chunks/*.json`` and ``mechanism/*.json`` as chunks finish, then ``runs.parquet``, ``history.parquet``
    and ``study.json`` atomically. Before any member trains, the design — the config (and the mechanism study's) with
    ``design`` (the caller's rules, looks and levels) — is written and hashed into ``design.json``
    (:func:`sapa.empirics.training.study_design.fix_design`); the provenance's ``design`` is
    {sha256, fixed_at, first_data_at, fixed_first}.
    """
    from sapa.common.progress import progress_bar
    from sapa.empirics.training.mechanism import plan_mech_chunks, resolve_device, start_mechanisms

    cfg = study_config(budget, seed)
    workers = positive_int("workers", workers)
    resolve_device(device)
    mcfg = _mechanism_config(budget, seed, mechanism)
    out = Path(out_dir)
    try:
        make_dirs(out / "chunks")  # never through a link planted below --out
    except OSError as exc:
        raise InputError(f"cannot create the results directory {out / 'chunks'}: {exc.strerror or exc}") from None
    from dataclasses import asdict

    from sapa.empirics.training.study_design import design_record, fix_design

    fix_design(out, {"config": cfg.as_dict(), "mechanism": asdict(mcfg) if mcfg is not None else None,
                     **(design or {})})  # before the first member trains
    t0 = time.perf_counter()
    phase1 = [c for t in cfg.tasks for c in plan_chunks(cfg, t, cfg.plan(t).Ns[0], None)]
    mchunks = plan_mech_chunks(mcfg) if mcfg is not None else []
    bar = StudyProgress(progress if callable(progress) else
                        lambda work: progress_bar(work, 0, desc="train", progress=progress,  # a terminal: no flop count
                                                  bar_format="{l_bar}{bar}| {elapsed}<{remaining}{postfix}"),
                        cfg, mcfg, mchunks)
    own = executor is None and workers > 1
    ex = executor if executor is not None else process_pool(workers, niceness) if own else None  # one pool for all phases
    mech = None
    try:
        # Order in the pool: phase 1 alone (phase 2 waits for its α*), then phase 2's chunks (the largest of the study)
        # and only then the many small mechanism chunks, which fill in behind them: no long chunk starts last.
        ran, ran_chunks = _run_chunks(phase1, cfg, out, ex, bar)
        runs1, _ = assemble(phase1, out)
        alpha_star = {t: {p: select_alpha(runs1, t, p) for p in alpha_ps(cfg, t)} for t in cfg.tasks}
        phase2 = [c for t in cfg.tasks for N in cfg.plan(t).Ns[1:] for c in plan_chunks(cfg, t, N, alpha_star[t])]
        strata = sorted(second_look(runs1, cfg)) if second_look is not None and cfg.look2_refine >= 2 else []
        look2 = look2_chunks(cfg, strata)
        bar.grow(look2)
        finish2 = _start_chunks(phase2 + look2, cfg, out, ex, bar)
        mech_done = None if mcfg is None else start_mechanisms(
            mcfg, out, ex, device, on_chunk=bar.done, on_stored=bar.stored)
        ran2, ran_chunks2 = finish2()
        ran, ran_chunks = ran + ran2, ran_chunks + ran_chunks2
        if mech_done is not None:
            mech = mech_done()
    except BaseException:
        if own:
            stop_pool(ex)  # chunks in flight are lost; finished ones are on disk
        raise
    finally:
        bar.close()
        if own:
            ex.shutdown(wait=True, cancel_futures=True)
    runs, hist = assemble(phase1 + phase2 + look2, out)
    for t, by_p in alpha_star.items():
        for p, a in by_p.items():
            grid = (runs["task"] == t) & (runs["p"] == p) & (runs["scale"] == "alpha")
            runs.loc[grid, "in_study"] = runs.loc[grid, "alpha"] == a  # α* is one of the grid's values
    runs.loc[runs["scale"].isin(("dose", "temperature")), "in_study"] = False  # the dose-response only
    trained_rows = len(runs)
    runs, hist = add_aliases(cfg, runs, hist)
    prov = {"config": cfg.as_dict(), "config_hash": cfg.hash(), "schema": SCHEMA,
            "alpha_star": {t: {str(p): a for p, a in v.items()} for t, v in alpha_star.items()},
            "second_look": [{"task": t, "p": p, "lr": lr} for t, p, lr in strata],
            "members": int(len(runs)), "chunks": len(phase1) + len(phase2) + len(look2), "members_trained_now": ran,
            "members_aliased": int(len(runs) - trained_rows),  # rows read under a second arm's name, never trained
            "chunks_trained_now": ran_chunks,
            "wall_s": round(time.perf_counter() - t0, 3), "workers": workers,
            "cpu_s_total": round(float(runs["cpu_s"].sum()), 2),
            "dtype": "training float32; norms float64 (exact kernels)", "torch": torch.__version__,
            "numerics": {"threads_per_worker": 1, "deterministic_algorithms": True,
                         "pinned_kernel_dispatch": {k: os.environ.get(k) for k in PINNED}},
            "text_corpus": _text_source() if "text" in cfg.tasks else None, "design": design_record(out)}
    write_parquet(out / "runs.parquet", runs)
    write_parquet(out / "history.parquet", hist)
    atomic_write_json(out / "study.json", prov)
    if mech is not None:
        atomic_write_json(out / "mechanism.json", mech)
    return StudyResult(runs, hist, cfg.as_dict(), prov, mech)


def _text_source() -> dict:
    import hashlib

    from sapa.empirics.training.train_data import corpus

    docs, source = corpus()
    full = "\n\n".join(docs)
    return {"source": source, "chars": len(full), "sha256": hashlib.sha256(full.encode("utf-8")).hexdigest(),
            "python": sys.version.split()[0]}


def load_study(out_dir: str | Path) -> StudyResult:
    """The stored study of ``out_dir`` (``runs.parquet``, ``history.parquet``, ``study.json``)."""
    out = Path(out_dir)
    for f in ("runs.parquet", "history.parquet", "study.json"):
        if not (out / f).is_file():
            raise InputError(f"no training study in {out}: {f} is missing (run `sapa train --out {out}`)")
    from sapa.common.integrity import CorruptResult, read_parquet_verified
    from sapa.common.readfile import read_regular_text

    prov = json.loads(read_regular_text(out / "study.json", "training study"))
    mech = json.loads(read_regular_text(out / "mechanism.json", "training study")) \
        if (out / "mechanism.json").is_file() else None
    tables = {}
    for f in ("runs.parquet", "history.parquet"):
        try:  # bounded, and the checksum written with it verified: an edited table never draws
            tables[f] = read_parquet_verified(out / f)
        except CorruptResult as exc:
            raise InputError(f"training study: {' '.join(str(exc).split())}; rerun `sapa train --out {out}` to "
                             "assemble it again from its chunks") from None
    if "design" not in prov:  # a study stored before the design was recorded: what its folder holds (or None)
        from sapa.empirics.training.study_design import design_record

        prov["design"] = design_record(out)
    return StudyResult(tables["runs.parquet"], tables["history.parquet"], prov.get("config", {}), prov, mech)


# --------------------------------------------------------------------------- CLI summary (sapa/commands/train_summary.py)


def best_lr_summary(runs: pd.DataFrame, best: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (task, N, arm) at the ledger's best lr (:func:`sapa.empirics.training.study_analysis.best_lr`): test accuracies
    (diverged members at chance, as in the ledger), divergences at that lr and over the grid, median ‖φ(S)‖_F."""
    from sapa.empirics.training.study_analysis import at_best, best_lr, study_rows

    best = best_lr(runs) if best is None else best
    g = at_best(runs, best).groupby(["task", "N", "arm"], sort=False)
    tab = g.agg(lr=("lr", "first"), seeds=("seed", "size"), test_acc_median=("test_acc", "median"),
                test_acc_min=("test_acc", "min"), test_acc_max=("test_acc", "max"),
                diverged=("diverged", "sum"), attn_fro_median=("attn_fro", "median")).reset_index()
    grid_div = study_rows(runs).groupby(["task", "N", "arm"])["diverged"].agg(["sum", "size"]).reset_index()
    tab = tab.merge(grid_div.rename(columns={"sum": "diverged_grid", "size": "runs_grid"}), on=["task", "N", "arm"])
    order = {a: i for i, a in enumerate(ARMS)}
    return tab.sort_values(["task", "N", "arm"], key=lambda s: s.map(order) if s.name == "arm" else s,
                           ignore_index=True)


def study_floors(res: StudyResult) -> dict:
    """{(task, N): floor of the validation curves}: chance on digits (0.1); on text the bigram predictor fitted on the
    training stream and scored on the same validation windows the curves are read on.

    Not the held-out test bigram (0.270 at N = 64): the validation tail of the training text is easier (the bigram
    scores 0.348 there), and a floor from the other split made every text run "leave" it within ~35 steps.
    """
    out = {}
    for task, N in {(t, int(n)) for t, n in zip(res.runs["task"], res.runs["N"])}:
        out[(task, N)] = 0.1 if task == "digits" else text_validation_floor(N, text_eval_size(res.config))
    return out


def text_eval_size(config: dict | None) -> int:
    """The text task's validation / test window count in a stored study config (128 if absent)."""
    tc = (config or {}).get("text") or ((config or {}).get("tasks") or {}).get("text") or {}
    return int(tc.get("eval_size", tc.get("eval_windows", 128))) if isinstance(tc, dict) else 128


def text_validation_floor(N: int, eval_size: int = 128) -> float:
    """Accuracy of the bigram predictor (counts on the training stream) on the text task's validation windows."""
    from sapa.empirics.training.bigram import bigram_accuracy
    from sapa.empirics.training.study_chunk import text_validation
    from sapa.empirics.training.train_data import load_text

    stream, vx, vy = text_validation(load_text(int(N), int(eval_size)).train, int(N), int(eval_size))
    return bigram_accuracy(stream.numpy(), vx.numpy(), vy.numpy())


def print_learning(res: StudyResult, best: pd.DataFrame) -> None:
    """Per (task, N, arm) at the best lr: seeds that left the floor within the cap, median exit, final acc, converged."""
    from sapa.empirics.training.learning_analysis import study_learning

    cells = study_learning(res.runs, res.history, best, study_floors(res))
    cens = sum(c["exits"]["censored"] for c in cells)
    print(f"learning curves (floor: chance on digits, the bigram predictor on text; left = first evaluation above "
          f"floor + 0.03; {cens} run(s) censored: not converged within the cap)")
    for c in cells:
        ex = c["exits"]
        m = c.get("acc_at_matched_steps")
        print(f"  {c['task']:6s} {c['N']:4d} {ARMS[c['arm']].label:9s} left {ex['n'] - ex['censored']}/{ex['n']}, "
              f"median exit {ex['median'] if ex['median'] is not None else '>cap'} of {c['steps'][-1]}, final val acc "
              f"{c['final_acc_median']:.3f}, converged {sum(c['converged'].values())}/{len(c['converged'])}"
              + (f", gap to softmax at the cap {m[-1][3]:+.3f}" if m else ""))
