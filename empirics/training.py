"""Train tiny transformers per attention activation and track ‖φ(S)‖_F, ‖∂φ(S)/∂X‖_F (arXiv 2410.18613, issue #8).

The paper argues softmax works because it caps ‖φ(S)‖_F, and that x^p/√N gives the same
regularization; the review asks why x³ (lower norms than x/16) then trains worse. This module
runs the experiment that can answer it:

* tasks: ``digits`` (TinyViT on sklearn's 8×8 digits, N = 16) and ``text`` (causal TinyCharLM on
  Python's documentation prose, N = 64), see :mod:`empirics.train_data`;
* arms: softmax, x/√N, x³/√N, x/16, x³, and (text only) x³·(1/√i), see :data:`empirics.tiny_models.ARMS`;
* each arm with AdamW weight decay 0 and 0.05 (decay also bounds ‖W_Q‖, ‖W_K‖: the confound);
* replicates r = 0..seeds−1. Initialisation and the minibatch stream come from
  ``SeedSequence(seed, spawn_key(task, r))``: every arm and weight decay of replicate r starts
  from the same weights and sees the same batches (paired comparisons).

At step 0, every ``eval_every`` steps and at the end, on a fixed probe batch and per layer and
head, in float64 with the exact kernels of :mod:`empirics.norms` (X = the head's attention input
LN(x) (P, N, D), W = W_Q,h W_K,hᵀ/√d, the arm's activation, mask and row scale), averaged over
the probe batch: ``attn_fro`` ‖φ(S)‖_F and ``jac_fro`` ‖∂φ(S)/∂X‖_F; invariants of the unscaled
W = W_Q,h W_K,hᵀ (``w_fro``, ``w_spec``, ``w_trace``, ``w_sym_fro``, ``w_anti_fro``); and
train/test loss and accuracy (layer = head = −1). Training dtype float32; norms measured in float64.

A run whose training loss becomes NaN/inf is stopped and recorded as diverged: chance-level
accuracy (1/classes), infinite loss and norms. :func:`run_experiment` writes each finished run
atomically as ``OUT/runs/<task>_<arm>_wd<wd>_s<r>.json`` (a rerun skips finished runs whose
config hash matches), then assembles ``OUT/history.parquet`` (long form) and
``OUT/final.parquet`` (one row per run) atomically. Runs execute serially or in a spawn-context
process pool; every run uses one torch thread, so numbers are identical either way.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import math
import multiprocessing as mp
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from empirics.atomic import atomic_write, atomic_write_json
from empirics.integrity import CorruptResult, check_record, seal_record, warn_recompute
from empirics.norms import NormOverflowError, attention_norms_batched
from empirics.interrupt import sigterm_as_interrupt
from empirics.numerics import PINNED, pin_kernel_dispatch
from empirics.samplers import seed_sequence, stable_hash
from empirics.tiny_models import ARMS, ModelConfig, build_model, head_W, w_invariants
from empirics.train_data import digits_batch, load_digits, load_text, text_batch, text_probe
from theory.validate import InputError, choice, positive_int

__all__ = ["TaskConfig", "TrainConfig", "QUICK", "FULL", "TINY", "config_named", "run_keys", "run_one",
           "run_experiment", "load_results", "summary_table", "main_cli", "HEAD_QUANTITIES", "RUN_QUANTITIES"]

SCHEMA = 1  # bump when the meaning of stored runs changes (invalidates run files)
TASKS = ("digits", "text")
HEAD_QUANTITIES = ("attn_fro", "jac_fro", "w_fro", "w_spec", "w_trace", "w_sym_fro", "w_anti_fro")
RUN_QUANTITIES = ("train_loss", "train_acc", "test_loss", "test_acc")
EVAL_TRAIN_IMAGES = 256  # evenly spaced training images for the train loss / accuracy
DIGITS_ARMS = ("softmax", "x_sqrtN", "x3_sqrtN", "x_16", "x3")
TEXT_ARMS = DIGITS_ARMS + ("x3_sqrti",)


@dataclass(frozen=True)
class TaskConfig:
    """Training schedule and model of one task."""

    steps: int  # optimiser steps
    batch: int  # images, or windows of ``context`` characters
    lr: float = 3e-3  # AdamW peak learning rate (linear warm-up, cosine decay to lr/10)
    warmup: int = 25  # warm-up steps
    eval_every: int = 50  # probe/eval interval in steps (plus step 0 and the last step)
    model: ModelConfig = field(default_factory=ModelConfig)
    context: int = 64  # N of the text task (the digits task has N = 16)
    eval_windows: int = 128  # held-out (and train-loss) windows of the text task


@dataclass(frozen=True)
class TrainConfig:
    """The whole experiment: tasks, arms, weight decays, replicates, probe size, seed."""

    name: str
    seeds: int = 3  # replicates per (task, arm, weight decay)
    digits: TaskConfig = field(default_factory=lambda: TaskConfig(steps=500, batch=32))
    text: TaskConfig = field(default_factory=lambda: TaskConfig(steps=400, batch=16))
    weight_decays: tuple[float, ...] = (0.0, 0.05)
    digits_arms: tuple[str, ...] = DIGITS_ARMS
    text_arms: tuple[str, ...] = TEXT_ARMS
    probe: int = 16  # probe-batch size P for the norms
    clip: float = 1.0  # global gradient-norm clip
    split_seed: int = 0  # the fixed digits train/test split
    seed: int = 0  # experiment seed (replicate r draws from SeedSequence(seed, (task, r)))

    def __post_init__(self) -> None:
        positive_int("seeds", self.seeds)
        positive_int("probe", self.probe)
        for a in self.digits_arms + self.text_arms:
            choice("arm", a, tuple(ARMS))
        for a in self.digits_arms:
            if ARMS[a].causal_only:
                raise InputError(f"arm {a} needs a causal mask and cannot run on digits")

    def task(self, task: str) -> TaskConfig:
        return self.digits if task == "digits" else self.text

    def arms(self, task: str) -> tuple[str, ...]:
        return self.digits_arms if task == "digits" else self.text_arms

    def as_dict(self) -> dict:
        return asdict(self)

    def hash(self) -> str:
        """sha256 of the config (and the stored schema): a run file is reused only under the same hash."""
        return stable_hash({"schema": SCHEMA, **self.as_dict()})


QUICK = TrainConfig(name="quick")
FULL = TrainConfig(
    name="full",
    seeds=5,
    digits=TaskConfig(steps=3000, batch=64, warmup=100, eval_every=150),
    text=TaskConfig(steps=3000, batch=32, warmup=100, eval_every=150, eval_windows=256),
)
# A handful of steps, for tests.
TINY = TrainConfig(
    name="tiny",
    seeds=1,
    digits=TaskConfig(steps=6, batch=8, warmup=2, eval_every=3, model=ModelConfig(width=8, layers=1, heads=2)),
    text=TaskConfig(steps=6, batch=4, warmup=2, eval_every=3, context=16, eval_windows=8,
                    model=ModelConfig(width=8, layers=1, heads=2)),
    probe=4,
)


def config_named(name: str, seed: int = 0) -> TrainConfig:
    """The budget's config (quick | full; tiny: a few steps, for tests) with the experiment ``seed``."""
    table = {"quick": QUICK, "full": FULL, "tiny": TINY}
    if name not in table:
        raise InputError(f"unknown training budget {name!r}; choose quick or full")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    return replace(table[name], seed=int(seed))


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class RunKey:
    """One training run."""

    task: str
    arm: str
    weight_decay: float
    seed: int  # replicate index r

    @property
    def file_name(self) -> str:
        wd = f"{self.weight_decay:g}".replace(".", "p")
        return f"{self.task}_{self.arm}_wd{wd}_s{self.seed}.json"


def run_keys(cfg: TrainConfig) -> list[RunKey]:
    """Every run of the experiment, in a fixed order (task, replicate, weight decay, arm)."""
    return [RunKey(t, a, float(wd), r) for t in TASKS for r in range(cfg.seeds) for wd in cfg.weight_decays
            for a in cfg.arms(t)]


@contextlib.contextmanager
def _one_thread():
    """One torch thread and ``torch.use_deterministic_algorithms(True)`` for the run; both restored after."""
    before, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(det)
        torch.set_num_threads(before)


def _generators(cfg: TrainConfig, task: str, seed: int) -> tuple[torch.Generator, torch.Generator]:
    """(init, data) generators of replicate ``seed``: the same for every arm and weight decay."""
    ss = seed_sequence(cfg.seed, {"experiment": "train", "task": task, "replicate": int(seed)})
    out = []
    for child in ss.spawn(2):
        g = torch.Generator(device="cpu")
        g.manual_seed(int(child.generate_state(1, dtype=np.uint64)[0]))
        out.append(g)
    return out[0], out[1]


class _Task:
    """Data, batches, evaluation sets and the probe batch of one task."""

    def __init__(self, task: str, cfg: TrainConfig) -> None:
        self.task, tc = task, cfg.task(task)
        if task == "digits":
            d = load_digits(split_seed=cfg.split_seed)
            self.data, self.classes, self.N = d, d.classes, 16
            tr = torch.linspace(0, len(d.y_train) - 1, EVAL_TRAIN_IMAGES).round().long()  # evenly spaced
            self.eval_sets = {"train": (d.x_train[tr], d.y_train[tr]), "test": (d.x_test, d.y_test)}
            idx = torch.linspace(0, len(d.y_train) - 1, cfg.probe).round().long()  # evenly spaced train images
            self.probe = d.x_train[idx]  # (P, 8, 8)
            self.vocab = 0
        else:
            t = load_text(tc.context, tc.eval_windows)
            self.data, self.classes, self.N, self.vocab = t, len(t.vocab), tc.context, len(t.vocab)
            tr = text_probe(t, tc.eval_windows, tc.context + 1)  # (M, N+1) evenly spaced train windows
            self.eval_sets = {"train": (tr[:, :-1], tr[:, 1:]), "test": (t.test_x, t.test_y)}
            self.probe = text_probe(t, cfg.probe, tc.context)  # (P, N)
        self.tc = tc

    def batch(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        if self.task == "digits":
            return digits_batch(self.data, self.tc.batch, gen)
        return text_batch(self.data, self.tc.batch, self.tc.context, gen)

    @staticmethod
    def loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def _evaluate(model, task: _Task) -> dict[str, float]:
    """Loss and accuracy (next character, or class) on the fixed train and test evaluation sets."""
    out = {}
    with torch.no_grad():
        for split, (x, y) in task.eval_sets.items():
            logits = model(x)
            out[f"{split}_loss"] = float(task.loss(logits, y))
            out[f"{split}_acc"] = float((logits.argmax(-1) == y).double().mean())
    return out


def _probe_norms(model, task: _Task) -> list[tuple[int, int, str, float]]:
    """(layer, head, quantity, value) of every head on the probe batch, float64 exact kernels."""
    arm = model.arm
    mask = "causal" if model.causal else "none"
    xs = model.attention_inputs(task.probe)  # per layer (P, N, D) float32
    N = xs[0].shape[1]
    act, rs = arm.activation(N), arm.row_scale(N)
    rows = []
    for layer, (blk, X) in enumerate(zip(model.blocks, xs)):
        for h in range(blk.attn.H):
            W = head_W(blk.attn, h)  # (D, D) float64 W_Q,h W_K,hᵀ/√d
            try:
                r = attention_norms_batched(X.to(torch.float64), W, act, mask, rs, device="cpu")
                fro, jac = float(r["fro"].mean()), float(r["jac_fro"].mean())
            except (NormOverflowError, InputError):  # non-finite even in float64
                fro = jac = math.inf
            rows += [(layer, h, "attn_fro", fro), (layer, h, "jac_fro", jac)]
            inv = w_invariants(head_W(blk.attn, h, scaled=False))
            rows += [(layer, h, q, inv[q]) for q in HEAD_QUANTITIES[2:]]
    return rows


def _param_groups(model, weight_decay: float) -> list[dict]:
    """Decay matrices and embeddings (ndim ≥ 2); never LayerNorm gains or biases."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    keep = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": keep, "weight_decay": 0.0}]


def _lr_factor(step: int, tc: TaskConfig) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay from 1 to 0.1 at ``steps``."""
    if step < tc.warmup:
        return (step + 1) / tc.warmup
    frac = (step - tc.warmup) / max(1, tc.steps - tc.warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))


def run_one(task: str, arm: str, weight_decay: float, seed: int, cfg: TrainConfig) -> dict:
    """Train one (task, arm, weight decay, replicate) and return {"key", "final", "history", "wall_s", ...}.

    A pure function of its arguments (one torch thread, explicit generators), except ``wall_s``
    and ``cpu_s`` (seconds of wall clock and of this process's CPU).
    ``history`` rows are (step, layer, head, quantity, value); ``final`` holds the last
    evaluation with the norms averaged over layers and heads (``attn_fro``, ``jac_fro``, ...),
    their values at step 0 (``*_init``), and ``diverged`` / ``diverged_step`` / ``steps_done``.
    """
    choice("task", task, TASKS)
    choice("arm", arm, cfg.arms(task))
    t0, c0 = time.perf_counter(), time.process_time()
    with _one_thread():
        out = _train(task, ARMS[arm], float(weight_decay), int(seed), cfg)
    out["wall_s"] = round(time.perf_counter() - t0, 3)
    out["cpu_s"] = round(time.process_time() - c0, 3)  # this process's CPU time: the cost without contention
    out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()  # kernel path used (AVX2 in pinned workers)
    return out


def _train(task: str, arm, weight_decay: float, seed: int, cfg: TrainConfig) -> dict:
    data = _Task(task, cfg)
    tc = data.tc
    g_init, g_data = _generators(cfg, task, seed)
    model = build_model(task, arm, tc.model, g_init, vocab=data.vocab, context=tc.context)
    opt = torch.optim.AdamW(_param_groups(model, weight_decay), lr=tc.lr, betas=(0.9, 0.95), fused=True)
    history: list[tuple] = []

    def record(step: int) -> None:
        model.eval()
        history.extend((step, -1, -1, q, v) for q, v in _evaluate(model, data).items())
        history.extend((step, *r) for r in _probe_norms(model, data))
        model.train()

    record(0)
    diverged_step = None
    for step in range(1, tc.steps + 1):
        for grp in opt.param_groups:
            grp["lr"] = tc.lr * _lr_factor(step - 1, tc)
        x, y = data.batch(g_data)
        loss = data.loss(model(x), y)
        if not math.isfinite(loss.item()):
            diverged_step = step
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip, foreach=True)
        opt.step()
        if step % tc.eval_every == 0 or step == tc.steps:
            record(step)
            last = {q: v for s, l, h, q, v in history if s == step and l == -1}
            if not math.isfinite(last["train_loss"]):  # parameters blew up in the last interval
                diverged_step = step
                break
    return _summarise_run(task, arm, weight_decay, seed, cfg, data, history, diverged_step)


def _summarise_run(task, arm, weight_decay, seed, cfg, data, history, diverged_step) -> dict:
    hist = pd.DataFrame(history, columns=["step", "layer", "head", "quantity", "value"])
    last_step = int(hist["step"].max())
    init = hist[hist["step"] == 0]
    last = hist[hist["step"] == last_step]

    def head_mean(df: pd.DataFrame, q: str) -> float:
        v = df.loc[(df["quantity"] == q) & (df["layer"] >= 0), "value"].to_numpy(float)
        return float(np.mean(v)) if v.size else math.nan

    def run_val(df: pd.DataFrame, q: str) -> float:
        v = df.loc[(df["quantity"] == q) & (df["layer"] == -1), "value"].to_numpy(float)
        return float(v[0]) if v.size else math.nan

    diverged = diverged_step is not None
    final = {"task": task, "arm": arm.name, "label": arm.label, "weight_decay": weight_decay, "seed": seed,
             "diverged": diverged, "diverged_step": -1 if diverged_step is None else int(diverged_step),
             "steps_done": (diverged_step - 1) if diverged else cfg.task(task).steps,
             "chance": 1.0 / data.classes, "N": data.N, "last_eval_step": last_step}
    for q in RUN_QUANTITIES:
        final[q] = run_val(last, q)
    for q in HEAD_QUANTITIES:
        final[q] = head_mean(last, q)
        final[f"{q}_init"] = head_mean(init, q)
    final["attn_fro_max"] = float(last.loc[(last["quantity"] == "attn_fro") & (last["layer"] >= 0), "value"].max())
    if diverged:  # a result, not an error: chance accuracy, infinite loss and norms
        final.update(test_acc=final["chance"], train_acc=final["chance"], test_loss=math.inf, train_loss=math.inf,
                     attn_fro=math.inf, jac_fro=math.inf, attn_fro_max=math.inf)
    key = {"task": task, "arm": arm.name, "weight_decay": weight_decay, "seed": seed}
    return {"key": key, "final": final, "history": hist.to_dict("list"), "config_hash": cfg.hash(), "schema": SCHEMA}


# --------------------------------------------------------------------------- the experiment


def _run_file_ok(path: Path, key: RunKey, chash: str) -> bool:
    """True if ``path`` is a finished run of ``key`` under config hash ``chash``."""
    if not path.is_file():
        return False
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
        if not _record_intact(path, rec):
            return False
        problem = _run_record_problem(rec)
        if problem is not None:  # parses, but would crash load_results: recompute, and say so
            print(f"sapa: warning: run file {path} is invalid ({problem}); recomputing it", file=sys.stderr)
            return False
        k = rec["key"]
        return (rec.get("config_hash") == chash and k["task"] == key.task and k["arm"] == key.arm
                and float(k["weight_decay"]) == key.weight_decay and int(k["seed"]) == key.seed)
    except Exception:  # truncated, foreign or old: run again
        return False


_HISTORY_TYPES = {"step": int, "layer": int, "head": int, "quantity": str, "value": (int, float)}


def _is(v: object, types) -> bool:
    """isinstance, with bool never counting as a number."""
    return isinstance(v, types) and not isinstance(v, bool)


def _run_record_problem(rec: object) -> str | None:
    """What makes ``rec`` not a complete run record (schema, key, final, history columns and types), or None."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("schema") != SCHEMA:
        return f"schema {rec.get('schema')!r}, expected {SCHEMA}"
    key, final, hist = rec.get("key"), rec.get("final"), rec.get("history")
    if not isinstance(key, dict) or not all(k in key for k in ("task", "arm", "weight_decay", "seed")):
        return "no valid 'key'"
    if not isinstance(final, dict):
        return "no 'final' object"
    for q in ("task", "arm"):
        if not _is(final.get(q), str):
            return f"final[{q!r}] is not a string"
    if not isinstance(final.get("diverged"), bool):
        return "final['diverged'] is not true/false"
    for q in ("weight_decay", "seed", *RUN_QUANTITIES, *HEAD_QUANTITIES):
        if not _is(final.get(q), (int, float)):
            return f"final[{q!r}] is missing or not a number"
    if not isinstance(hist, dict):
        return "no 'history' object"
    cols = [hist.get(c) for c in _HISTORY_TYPES]
    if not all(isinstance(c, list) for c in cols):
        return f"history lacks one of the columns {', '.join(_HISTORY_TYPES)}"
    if not cols[0] or len({len(c) for c in cols}) != 1:
        return "history columns are empty or of different lengths"
    for (name, types), col in zip(_HISTORY_TYPES.items(), cols):
        if not all(_is(v, types) for v in col):
            return f"history column {name!r} holds a value of the wrong type"
    return None


def _record_intact(path: Path, rec: object) -> bool:
    """True if the run record matches its checksum; else one warning line, and the run is recomputed."""
    try:
        check_record(rec, path)
    except CorruptResult as exc:
        warn_recompute(exc)
        return False
    return True


def _read_run(path: Path) -> dict:
    """A finished run record, checksum verified; one damaged since the start of this run is an error naming it."""
    rec = json.loads(path.read_text(encoding="utf-8"))
    try:
        check_record(rec, path)
    except CorruptResult as exc:
        raise InputError(f"{exc}; run again to recompute it") from None
    return rec


PINNED_NUMERICS = PINNED  # kernel dispatch pinned for the whole process tree (empirics.numerics)


def _worker_init(parent_pid: int | None = None) -> None:
    if parent_pid is not None:
        _die_with_parent(parent_pid)
    pin_kernel_dispatch()  # inherited from the parent already; kept in case a caller cleared it
    torch.set_num_threads(1)


PR_SET_PDEATHSIG = 1  # linux/prctl.h
WATCHDOG_S = 1.0  # how often a worker checks that its parent is alive


def _die_with_parent(parent_pid: int) -> None:
    """Make this worker die with ``parent_pid``: PR_SET_PDEATHSIG(SIGKILL) on Linux, and a getppid() watchdog.

    A killed ``sapa train`` (SIGKILL or SIGTERM) must not leave workers computing, then sleeping forever
    reparented to PID 1 with the parent's stdout open (issue 15).
    """
    import ctypes
    import signal
    import threading

    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(WATCHDOG_S)
        os._exit(1)

    threading.Thread(target=watch, name="sapa-parent-watchdog", daemon=True).start()


def _terminate_workers(ex: cf.ProcessPoolExecutor) -> None:
    """Stop the pool's worker processes now (SIGTERM), so an interrupted run does not wait for runs in flight."""
    for proc in list((getattr(ex, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            proc.terminate()


def _progress(total: int, done: int, progress: bool | str):
    from empirics.progress import progress_bar

    return progress_bar(total, done, desc="train runs", unit="run", progress=progress)


def run_experiment(budget_name: str | TrainConfig, out_dir: str | Path, seed: int = 0, workers: int = 2,
                   progress: bool | str = True) -> dict[str, pd.DataFrame]:
    """Run (or resume) every run of the budget into ``out_dir``; return {"history", "final"} DataFrames.

    Args:
      budget_name: "quick" | "full", or a :class:`TrainConfig` (its seed is replaced by ``seed``).
      out_dir: ``runs/*.json`` per finished run, then ``history.parquet``, ``final.parquet``,
        ``provenance.json``, all written atomically.
      seed: the experiment seed.
      workers: 1 runs here, K > 1 in a spawn-context pool of K processes (identical numbers).
      progress: tqdm bar on stderr when it is a TTY, periodic lines otherwise (``"force"``: bar; ``False``: none).
    """
    if isinstance(budget_name, TrainConfig):
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(f"seed must be a non-negative integer, got {seed!r}")
        cfg = replace(budget_name, seed=int(seed))
    else:
        cfg = config_named(budget_name, seed)
    workers = positive_int("workers", workers)
    out = Path(out_dir)
    runs_dir = out / "runs"
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the results directory {runs_dir}: {exc.strerror or exc}") from None
    chash = cfg.hash()
    keys = run_keys(cfg)
    pending = [k for k in keys if not _run_file_ok(runs_dir / k.file_name, k, chash)]
    t0 = time.perf_counter()
    bar = _progress(len(keys), len(keys) - len(pending), progress)

    def finish(k: RunKey, rec: dict) -> None:
        atomic_write_json(runs_dir / k.file_name, seal_record(rec))  # checksum, verified when read back
        bar.update(1)

    try:
        if workers == 1 or len(pending) <= 1:
            for k in pending:
                finish(k, run_one(k.task, k.arm, k.weight_decay, k.seed, cfg))
        else:
            # Longest runs first (text before digits) keeps both workers busy to the end.
            order = sorted(pending, key=lambda k: (k.task != "text", keys.index(k)))
            ctx = mp.get_context("spawn")
            with cf.ProcessPoolExecutor(max_workers=min(workers, len(pending)), mp_context=ctx,
                                        initializer=_worker_init, initargs=(os.getpid(),)) as ex:
                futs = {ex.submit(run_one, k.task, k.arm, k.weight_decay, k.seed, cfg): k for k in order}
                try:
                    for fut in cf.as_completed(futs):
                        finish(futs[fut], fut.result())
                except BaseException:
                    for f in futs:
                        f.cancel()
                    _terminate_workers(ex)  # runs in flight are lost; finished ones are on disk
                    raise
    finally:
        bar.close()
    res = load_results(out, cfg)
    prov = {"config": cfg.as_dict(), "config_hash": chash, "schema": SCHEMA, "runs": len(keys),
            "ran_now": len(pending), "wall_s_now": round(time.perf_counter() - t0, 3), "workers": workers,
            "dtype": "training float32; norms float64", "torch": torch.__version__,
            "numerics": {"threads_per_run": 1, "deterministic_algorithms": True,
                         "pinned_kernel_dispatch": {k: os.environ.get(k) for k in PINNED_NUMERICS}},
            "text_source": _text_source(cfg)}
    _write_parquet(out / "history.parquet", res["history"])
    _write_parquet(out / "final.parquet", res["final"])
    atomic_write_json(out / "provenance.json", prov)
    res["provenance"] = prov
    return res


def _text_source(cfg: TrainConfig) -> dict:
    from empirics.train_data import corpus

    docs, source = corpus()
    import hashlib

    full = "\n\n".join(docs)
    return {"source": source, "chars": len(full), "sha256": hashlib.sha256(full.encode("utf-8")).hexdigest(),
            "python": sys.version.split()[0]}


def _write_parquet(path: Path, df: pd.DataFrame) -> None:
    atomic_write(path, lambda tmp: df.to_parquet(tmp, index=False))


def load_results(out_dir: str | Path, cfg: TrainConfig) -> dict[str, pd.DataFrame]:
    """Assemble the run files of ``cfg`` under ``out_dir/runs`` into {"history", "final"} (run order)."""
    runs_dir = Path(out_dir) / "runs"
    finals, hists = [], []
    for k in run_keys(cfg):
        rec = _read_run(runs_dir / k.file_name)
        finals.append(rec["final"] | {"wall_s": rec.get("wall_s", math.nan), "cpu_s": rec.get("cpu_s", math.nan)})
        h = pd.DataFrame(rec["history"])
        for col, v in (("task", k.task), ("arm", k.arm), ("weight_decay", k.weight_decay), ("seed", k.seed)):
            h.insert(0 if col == "task" else h.columns.get_loc("step"), col, v)
        hists.append(h)
    hist = pd.concat(hists, ignore_index=True)
    hist = hist[["task", "arm", "weight_decay", "seed", "step", "layer", "head", "quantity", "value"]]
    hist = hist.astype({"step": "int64", "layer": "int64", "head": "int64", "seed": "int64", "value": "float64"})
    return {"history": hist, "final": pd.DataFrame(finals)}


# --------------------------------------------------------------------------- summary / CLI


def summary_table(final: pd.DataFrame) -> pd.DataFrame:
    """Per (task, arm, weight decay): runs, diverged, median test accuracy and final norms."""
    g = final.groupby(["task", "arm", "weight_decay"], sort=False)
    return g.agg(runs=("seed", "size"), diverged=("diverged", "sum"), acc_median=("test_acc", "median"),
                 acc_min=("test_acc", "min"), acc_max=("test_acc", "max"), attn_fro_median=("attn_fro", "median"),
                 jac_fro_median=("jac_fro", "median")).reset_index()


def main_cli(budget: str, out: Path, seed: int = 0, workers: int = 2, progress: bool = True) -> int:
    """``sapa train``: run (or resume) the experiment into ``out``, print a per-arm summary; exit code 0."""
    t0 = time.perf_counter()
    with sigterm_as_interrupt():
        res = run_experiment(budget, out, seed=seed, workers=workers, progress=progress)
    tab = summary_table(res["final"])
    print(f"{'task':7s} {'arm':8s} {'wd':>5s} {'runs':>4s} {'div':>3s} {'acc med':>8s} {'acc range':>13s} "
          f"{'‖φ(S)‖ med':>11s} {'‖∂φ/∂X‖ med':>12s}")
    for r in tab.itertuples():
        print(f"{r.task:7s} {ARMS[r.arm].label:8s} {r.weight_decay:5g} {r.runs:4d} {int(r.diverged):3d} "
              f"{r.acc_median:8.3f} {r.acc_min:6.3f}–{r.acc_max:6.3f} {r.attn_fro_median:11.4g} {r.jac_fro_median:12.4g}")
    print(f"{len(res['final'])} runs ({res['provenance']['ran_now']} now) in {time.perf_counter() - t0:.1f} s; "
          f"training float32, norms float64; results in {out}")
    return 0
