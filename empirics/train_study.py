"""Does x^p/√N keep attention trainable as N grows? Tiny transformers across N, every arm with its own lr sweep.

The paper's practical thesis (arXiv 2410.18613, §5): softmax trains well because it keeps
‖φ(S)‖_F from growing with N, x^p/√N does the same and can replace it, while an unscaled x^p or
a constant tuned at one N (the paper's x/16, x³/16) should not transfer across N. The study
(issue #13):

* **tasks and N.** ``digits`` — sklearn's 8×8 digits, p×p patches: N = 16 (2×2) and 64 (1×1);
  ``text`` — a causal character model of Python's documentation prose, context N. Same width and
  depth at every N; tokens per step B·N are held (about) constant across N on text.
* **arms** (:data:`ARMS`): softmax; x^p/√N; x^p/α with α tuned once at the smallest N of the task
  (a grid, selected on validation accuracy) and then held fixed; unscaled x^p; x^p/N; x³/√i under
  the causal mask; p ∈ {1, 3}.
* **a fair comparison.** Every arm gets every learning rate of the grid, several seeds, the same
  warm-up and cosine schedule. Replicate r of (task, N) has the same initial weights and the same
  minibatch stream for every arm and learning rate (paired). The best learning rate is chosen on a
  validation split; the held-out test split is reported.
* **measured per member**: divergence (non-finite training loss, or a final validation loss above
  the one at step 0), validation / test loss and accuracy, and on a fixed probe batch, exactly in
  float64 (:func:`empirics.norms.attention_norms_batched`): ‖φ(S)‖_F, ‖∂φ(S)/∂S‖_F, ‖∂φ(S)/∂X‖_F
  (mean over layers, heads and probe sequences), and the pre-clip gradient norm.

Speed: each (task, N, activation family) is trained as vectorised ensembles
(:mod:`empirics.ensemble`): every scale rule × learning rate × seed of the family in one batched
forward/backward. An ensemble chunk is the unit of work and of resumption: its members are written
atomically to ``OUT/chunks/*.json`` (sealed with a checksum), a rerun skips finished chunks of the
same config hash, so a killed run loses at most the chunks in flight. Chunks run serially or in a
pool of single-threaded workers with identical numbers. Training float32, norms float64.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from common.atomic import atomic_write, atomic_write_json
from empirics.ensemble import (AdamWState, EnsembleSpec, Family, adamw_step, attention_inputs, clip_per_member,
                               ensemble_forward, head_Ws, member_losses, stack_members)
from empirics.integrity import CorruptResult, check_record, seal_record, warn_recompute
from empirics.norms import Activation, NormOverflowError, attention_norms_batched
from empirics.numerics import PINNED
from empirics.pool import one_thread, process_pool, terminate_workers
from empirics.samplers import stable_hash, torch_gen_for
from empirics.tiny_models import ModelConfig
from empirics.train_data import load_digits, load_text, text_probe
from common.validate import InputError, choice, positive_int

__all__ = ["StudyArm", "ARMS", "TaskPlan", "StudyConfig", "QUICK", "FULL", "TINY", "study_config", "Member",
           "Chunk", "plan_chunks", "train_chunk", "run_study", "load_study", "StudyResult", "select_alpha",
           "main_cli", "HISTORY_QUANTITIES", "best_lr_summary"]

SCHEMA = 1  # bump when the meaning of stored chunks changes
TASKS = ("digits", "text")
SCALES = ("softmax", "inv_sqrt_n", "alpha", "none", "inv_n", "inv_sqrt_i")
HISTORY_QUANTITIES = ("train_loss", "val_loss", "val_acc", "attn_fro", "jac_s_fro", "jac_x_fro", "grad_norm")
NORMS = ("attn_fro", "jac_s_fro", "jac_x_fro")
VAL_FRACTION = 0.2  # digits: of the training images; text: the tail of the training stream
MEMORY_BYTES = 1.5e9  # activations one ensemble chunk may hold (float32), chosen for 2 workers in 24 GiB


@dataclass(frozen=True)
class StudyArm:
    """An attention activation of the study: φ(S)_ij = r_i · S_ij^p (masked j > i → 0 on text) or row softmax.

    ``scale``: softmax; inv_sqrt_n r = 1/√N; alpha r = 1/α; none r = 1; inv_n r = 1/N; inv_sqrt_i r_i = 1/√i.
    """

    name: str
    p: int  # 0 for softmax
    scale: str
    label: str

    def row_coefficients(self, N: int, alpha: float = math.nan) -> torch.Tensor:
        """(N,) float32 r_i of the poly arm at length N (α for the fixed-α arm)."""
        i = torch.arange(1, N + 1, dtype=torch.float64)
        c = {"inv_sqrt_n": 1 / math.sqrt(N), "alpha": 1 / alpha, "none": 1.0, "inv_n": 1 / N}
        r = i.rsqrt() if self.scale == "inv_sqrt_i" else torch.full((N,), c[self.scale], dtype=torch.float64)
        return r.to(torch.float32)

    @property
    def family(self) -> Family:
        return Family("softmax") if self.p == 0 else Family("poly", self.p)


def _arms() -> dict[str, StudyArm]:
    out = [StudyArm("softmax", 0, "softmax", "softmax")]
    for p, s in ((1, ""), (3, "³")):
        x = "x" if p == 1 else "x3"
        out += [StudyArm(f"{x}_sqrtN", p, "inv_sqrt_n", f"x{s}/√N"), StudyArm(f"{x}_alpha", p, "alpha", f"x{s}/α"),
                StudyArm(x, p, "none", f"x{s}"), StudyArm(f"{x}_N", p, "inv_n", f"x{s}/N")]
    out.append(StudyArm("x3_sqrti", 3, "inv_sqrt_i", "x³/√i"))
    return {a.name: a for a in out}


ARMS: dict[str, StudyArm] = _arms()
CAUSAL_ONLY = ("x3_sqrti",)


@dataclass(frozen=True)
class TaskPlan:
    """One task's sizes and schedule: the N grid, steps, tokens per step, lr grid, evaluation."""

    Ns: tuple[int, ...]
    steps: int
    batch: int  # sequences per step ("sequences"), or tokens per step ("tokens": B = max(1, batch // N))
    lrs: tuple[float, ...]  # peak learning rates (every arm gets every one)
    warmup: int = 20  # linear warm-up steps, then cosine decay to lr/10
    evals: int = 4  # evaluation points after step 0 (evenly spaced, the last at ``steps``)
    eval_size: int = 128  # validation sequences (text: also the held-out test windows; digits test: all images)
    constant: str = "sequences"  # what is held constant across N: "sequences" (images) or "tokens" (text)

    def __post_init__(self) -> None:
        choice("constant", self.constant, ("sequences", "tokens"))
        positive_int("batch", self.batch)

    def sequences(self, N: int) -> int:
        """B, the sequences per optimiser step at length N."""
        return self.batch if self.constant == "sequences" else max(1, self.batch // N)

    def eval_steps(self) -> tuple[int, ...]:
        return tuple(sorted({0, *(round(self.steps * k / self.evals) for k in range(1, self.evals + 1))}))


@dataclass(frozen=True)
class StudyConfig:
    """The whole study: tasks, arms, α grid, seeds, model shape, optimiser, probe size, seed."""

    name: str
    digits: TaskPlan
    text: TaskPlan
    seeds: int = 3  # replicates r per (task, N, arm, lr)
    model: ModelConfig = field(default_factory=lambda: ModelConfig(width=16, layers=2, heads=2))
    arms: tuple[str, ...] = tuple(ARMS)
    alphas: tuple[float, ...] = (4.0, 16.0, 64.0)  # the fixed-α grid, tuned at the smallest N
    probe: int = 8  # probe sequences for the norms
    clip: float = 1.0  # per-member global gradient-norm clip
    weight_decay: float = 0.0  # AdamW decoupled decay of matrices and embeddings
    betas: tuple[float, float] = (0.9, 0.95)
    split_seed: int = 0  # the fixed digits train / validation / test split
    seed: int = 0
    tasks: tuple[str, ...] = TASKS

    def __post_init__(self) -> None:
        positive_int("seeds", self.seeds)
        positive_int("probe", self.probe)
        for a in self.arms:
            choice("arm", a, tuple(ARMS))
        for t in self.tasks:
            choice("task", t, TASKS)
        for N in self.digits.Ns:
            if N not in (16, 64):
                raise InputError(f"digits take N = 16 (2×2 patches) or 64 (1×1), got {N}")
        for plan in (self.digits, self.text):
            if not plan.Ns or list(plan.Ns) != sorted(set(plan.Ns)):
                raise InputError(f"the N grid must be increasing and non-empty, got {plan.Ns}")
            if len(plan.lrs) < 1 or any(not (lr > 0 and math.isfinite(lr)) for lr in plan.lrs):
                raise InputError(f"learning rates must be positive and finite, got {plan.lrs}")
            positive_int("steps", plan.steps)
        if any(not (a > 0 and math.isfinite(a)) for a in self.alphas):
            raise InputError(f"α must be positive and finite, got {self.alphas}")

    def plan(self, task: str) -> TaskPlan:
        return self.digits if task == "digits" else self.text

    def task_arms(self, task: str) -> tuple[str, ...]:
        return tuple(a for a in self.arms if task == "text" or a not in CAUSAL_ONLY)

    def as_dict(self) -> dict:
        return asdict(self)

    def hash(self) -> str:
        """sha256 of the config and the schema: a chunk file is reused only under the same hash."""
        return stable_hash({"schema": SCHEMA, **self.as_dict()})


# Quick (≤ 90 s of `sapa verify` on 2 cores): digits only, the arms the claim turns on, 2 seeds. Every arm at
# every lr of the grid; width 32 (at width 16 the digits models stay below 65 % accuracy in 300 steps).
QUICK = StudyConfig(
    name="quick",
    digits=TaskPlan(Ns=(16, 64), steps=200, batch=32, lrs=(1e-3, 3e-3, 1e-2), warmup=20, evals=4, eval_size=256),
    text=TaskPlan(Ns=(32, 64), steps=200, batch=512, constant="tokens", lrs=(1e-3, 3e-3, 1e-2), eval_size=64),
    seeds=2,
    model=ModelConfig(width=32, layers=2, heads=2),
    arms=("softmax", "x_sqrtN", "x_alpha", "x", "x3_sqrtN", "x3_alpha", "x3"),
    tasks=("digits",),
)
# Full (≈ 30 min on 2 cores): both tasks, every arm, text N = 32 … 256 at 512 tokens per step.
FULL = StudyConfig(
    name="full",
    digits=TaskPlan(Ns=(16, 64), steps=500, batch=32, lrs=(1e-3, 3e-3, 1e-2), warmup=30, evals=5, eval_size=256),
    text=TaskPlan(Ns=(32, 64, 128, 256), steps=800, batch=512, constant="tokens", lrs=(1e-3, 3e-3, 1e-2), warmup=50,
                  evals=8, eval_size=128),
    seeds=3,
    model=ModelConfig(width=32, layers=2, heads=2),
)
# A handful of steps, for tests.
TINY = StudyConfig(
    name="tiny",
    digits=TaskPlan(Ns=(16,), steps=4, batch=8, lrs=(1e-3, 1e-2), warmup=2, evals=2, eval_size=16),
    text=TaskPlan(Ns=(8, 16), steps=4, batch=32, constant="tokens", lrs=(1e-3, 1e-2), warmup=2, evals=2, eval_size=8),
    seeds=2,
    model=ModelConfig(width=8, layers=1, heads=2),
    alphas=(4.0, 16.0),
    probe=2,
)
BUDGETS = {"quick": QUICK, "full": FULL, "tiny": TINY}


def study_config(name: str | StudyConfig, seed: int = 0) -> StudyConfig:
    """The budget's config (quick | full; tiny: for tests), or ``name`` itself, with the study ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    if isinstance(name, StudyConfig):
        return replace(name, seed=int(seed))
    if name not in BUDGETS:
        raise InputError(f"unknown training budget {name!r}; choose quick or full")
    return replace(BUDGETS[name], seed=int(seed))


# --------------------------------------------------------------------------- members and chunks


@dataclass(frozen=True)
class Member:
    """One trained model: arm, α (fixed-α arm), peak learning rate, replicate r."""

    arm: str
    alpha: float  # NaN unless the arm's scale is "alpha"
    lr: float
    seed: int

    def as_dict(self) -> dict:
        return {"arm": self.arm, "alpha": None if math.isnan(self.alpha) else self.alpha, "lr": self.lr,
                "seed": self.seed}


@dataclass(frozen=True)
class Chunk:
    """An ensemble trained together: one (task, N, activation family) and its members."""

    task: str
    N: int
    family: str  # "softmax" | "p1" | "p3"
    index: int  # chunk k of the family at this N
    members: tuple[Member, ...]

    @property
    def file_name(self) -> str:
        return f"{self.task}_N{self.N}_{self.family}_{self.index}.json"


def _family_id(arm: StudyArm) -> str:
    return "softmax" if arm.p == 0 else f"p{arm.p}"


def _bytes_per_member(cfg: StudyConfig, task: str, N: int) -> float:
    """Float32 bytes of activations one member holds for backward (a generous count of saved tensors)."""
    B, m = cfg.plan(task).sequences(N), cfg.model
    attn = 8 * B * m.heads * N * N  # S, S^p / softmax, masks, products and their grads per layer
    dense = 24 * B * N * m.width * m.mlp_ratio
    return 4.0 * m.layers * (attn + dense)


def plan_chunks(cfg: StudyConfig, task: str, N: int, alpha_star: dict[int, float] | None) -> list[Chunk]:
    """The chunks of (task, N): per family, its arms × lrs × seeds (α grid at the smallest N, else α*)."""
    plan = cfg.plan(task)
    first = N == plan.Ns[0]
    per_family: dict[str, list[Member]] = {}
    for name in cfg.task_arms(task):
        arm = ARMS[name]
        if arm.scale == "alpha":
            alphas = cfg.alphas if first else (alpha_star[arm.p],)
        else:
            alphas = (math.nan,)
        ms = per_family.setdefault(_family_id(arm), [])
        ms += [Member(name, float(a), float(lr), r) for a in alphas for lr in plan.lrs for r in range(cfg.seeds)]
    cap = max(1, int(MEMORY_BYTES // _bytes_per_member(cfg, task, N)))
    chunks = []
    for fam, ms in per_family.items():
        k = math.ceil(len(ms) / cap)
        size = math.ceil(len(ms) / k)  # equal chunks
        chunks += [Chunk(task, N, fam, i, tuple(ms[i * size:(i + 1) * size])) for i in range(k)]
    return chunks


# --------------------------------------------------------------------------- data


class _Data:
    """Training batches, validation / test sets and the probe batch of (task, N)."""

    def __init__(self, cfg: StudyConfig, task: str, N: int) -> None:
        plan = cfg.plan(task)
        self.task, self.N, self.B = task, N, plan.sequences(N)
        if task == "digits":
            from sklearn.model_selection import train_test_split

            d = load_digits(split_seed=cfg.split_seed)
            idx = np.arange(len(d.y_train))
            tr, va = train_test_split(idx, test_size=VAL_FRACTION, random_state=cfg.split_seed,
                                      stratify=d.y_train.numpy())
            tr, va = torch.from_numpy(np.sort(tr)), torch.from_numpy(np.sort(va))
            self.x_train, self.y_train = d.x_train[tr], d.y_train[tr]
            m = plan.eval_size
            self.val = (d.x_train[va][:m], d.y_train[va][:m])
            self.test = (d.x_test, d.y_test)  # every held-out image
            pi = torch.linspace(0, len(tr) - 1, cfg.probe).round().long()
            self.probe = self.x_train[pi]  # (P, 8, 8)
            self.classes, self.vocab = d.classes, 0
            self.chance = 1.0 / d.classes
        else:
            t = load_text(N, plan.eval_size)
            cut = int(len(t.train) * (1 - VAL_FRACTION))
            self.stream = t.train[:cut]  # training windows come from here only
            tail = t.train[cut:]
            if len(tail) < N + 2:
                raise InputError(f"the validation text is shorter than context {N}")
            starts = torch.linspace(0, len(tail) - N - 1, plan.eval_size).round().long()
            win = torch.stack([tail[s:s + N + 1] for s in starts.tolist()])  # (M, N + 1)
            self.val = (win[:, :-1], win[:, 1:])
            self.test = (t.test_x, t.test_y)
            self.probe = text_probe(replace(t, train=self.stream), cfg.probe, N)  # (P, N)
            self.classes = self.vocab = len(t.vocab)
            self.chance = 1.0 / self.vocab
            self.text_sha256, self.text_source = t.sha256, t.source

    def batch(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """One replicate's minibatch: digits (B, 8, 8), (B,); text (B, N), (B, N)."""
        if self.task == "digits":
            i = torch.randint(0, len(self.y_train), (self.B,), generator=gen)
            return self.x_train[i], self.y_train[i]
        s = torch.randint(0, len(self.stream) - self.N - 1, (self.B,), generator=gen)
        w = self.stream[s[:, None] + torch.arange(self.N + 1)[None, :]]  # (B, N + 1)
        return w[:, :-1], w[:, 1:]


def _lr_factor(step: int, plan: TaskPlan) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay from 1 to 0.1 at ``steps`` (step counts from 0)."""
    if step < plan.warmup:
        return (step + 1) / plan.warmup
    frac = (step - plan.warmup) / max(1, plan.steps - plan.warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))


# --------------------------------------------------------------------------- one chunk


def _eval_batch(cfg: StudyConfig, data: _Data, E: int) -> int:
    """Evaluation sequences per forward so that E members stay within the memory budget."""
    per_seq = 4.0 * cfg.model.layers * (3 * cfg.model.heads * data.N ** 2 + 8 * data.N * cfg.model.width)
    return max(1, int(MEMORY_BYTES / 2 // (per_seq * E)))


def _evaluate(prm, spec, rowc, data: _Data, xy, E: int, cfg: StudyConfig) -> tuple[np.ndarray, np.ndarray]:
    """(E,) mean loss and accuracy of every member on (x, y), in slices that fit the memory budget."""
    x, y = xy
    n = len(y)
    step = _eval_batch(cfg, data, E)
    loss_sum, hit = torch.zeros(E, dtype=torch.float64), torch.zeros(E, dtype=torch.float64)
    with torch.no_grad():
        for s in range(0, n, step):
            xs, ys = x[s:s + step], y[s:s + step]
            logits = ensemble_forward(prm, xs.expand(E, *xs.shape), spec, rowc)  # (E, b, ...)
            C = logits.shape[-1]
            ce = torch.nn.functional.cross_entropy(logits.reshape(-1, C), ys.expand(E, *ys.shape).reshape(-1),
                                                   reduction="none").reshape(E, -1)
            loss_sum += ce.double().sum(1)
            hit += (logits.argmax(-1) == ys).reshape(E, -1).double().sum(1)
    per = n * (1 if data.task == "digits" else data.N)
    return (loss_sum / per).numpy(), (hit / per).numpy()


def _probe_norms(prm, spec: EnsembleSpec, rowc, data: _Data, alive: torch.Tensor) -> dict[str, np.ndarray]:
    """Per member, mean over layers, heads and probe sequences of ‖φ(S)‖_F, ‖∂φ/∂S‖_F, ‖∂φ/∂X‖_F (float64, exact).

    Dead members (non-finite loss) and members whose norms overflow even in float64 get inf.
    """
    E = next(iter(prm.values())).shape[0]
    out = {q: np.full(E, np.inf) for q in NORMS}
    live = torch.nonzero(alive).flatten().tolist()
    if not live:
        return out
    P = data.probe.shape[0]
    xs = attention_inputs(prm, data.probe.expand(E, *data.probe.shape), spec, rowc)  # per layer (E, P, N, D)
    act = Activation("softmax", 1, 1.0) if spec.family.kind == "softmax" else Activation("poly", spec.family.p, 1.0)
    mask = "causal" if spec.causal else "none"
    H, N = spec.model.heads, spec.N
    acc = {q: np.zeros(E) for q in NORMS}

    def one(es: list[int], layer: int) -> dict[str, torch.Tensor]:
        X = xs[layer][es].to(torch.float64)  # (e, P, N, D)
        W = head_Ws(prm, layer, spec)[es]  # (e, H, D, D)
        Xt = X[:, None].expand(-1, H, -1, -1, -1).reshape(-1, N, X.shape[-1])  # (e·H·P, N, D)
        Wt = W[:, :, None].expand(-1, -1, P, -1, -1).reshape(-1, W.shape[-1], W.shape[-1])  # (e·H·P, D, D)
        rs = None
        if rowc is not None:
            rs = rowc[es].to(torch.float64)[:, None, None, :].expand(-1, H, P, -1).reshape(-1, N)  # (e·H·P, N)
        r = attention_norms_batched(Xt, Wt, act, mask, rs, device="cpu")
        return {"attn_fro": r["fro"], "jac_s_fro": r["jac_s_fro"], "jac_x_fro": r["jac_fro"]}

    finite = [e for e in live if all(bool(torch.isfinite(xs[l][e]).all()) for l in range(len(xs)))]
    for layer in range(len(xs)):
        try:
            res = {e: v for e, v in zip(finite, _split(one(finite, layer), len(finite)))} if finite else {}
        except (NormOverflowError, InputError):  # one member overflows: measure them one at a time
            res = {}
            for e in finite:
                try:
                    res[e] = _split(one([e], layer), 1)[0]
                except (NormOverflowError, InputError):
                    res[e] = None
        for e in live:
            v = res.get(e)
            for q in NORMS:
                acc[q][e] += np.inf if v is None else float(v[q].mean())
    for q in NORMS:
        out[q][live] = acc[q][live] / len(xs)
    return out


def _split(r: dict[str, torch.Tensor], e: int) -> list[dict[str, torch.Tensor]]:
    """Per member, its (H·P,) slice of each norm vector."""
    return [{q: v.reshape(e, -1)[i] for q, v in r.items()} for i in range(e)]


def train_chunk(chunk: Chunk, cfg: StudyConfig) -> dict:
    """Train one ensemble chunk; return {"rows": [per-member dict], "history": [rows], "cpu_s", "wall_s"}.

    A pure function of its arguments (one torch thread, deterministic algorithms, explicit
    generators) except the timing fields.
    """
    t0, c0 = time.perf_counter(), time.process_time()
    with one_thread():
        out = _train_chunk(chunk, cfg)
    out["wall_s"] = round(time.perf_counter() - t0, 3)
    out["cpu_s"] = round(time.process_time() - c0, 3)
    return out


def _train_chunk(chunk: Chunk, cfg: StudyConfig) -> dict:
    task, N, plan = chunk.task, chunk.N, cfg.plan(chunk.task)
    data = _Data(cfg, task, N)
    arms = [ARMS[m.arm] for m in chunk.members]
    spec = EnsembleSpec(task, N, cfg.model, arms[0].family, vocab=data.vocab, classes=data.classes)
    E = len(chunk.members)
    gens = [torch_gen_for(cfg.seed, "study", task, N, m.seed, "init") for m in chunk.members]
    prm = stack_members(spec, gens)
    rowc = None if spec.family.kind == "softmax" else torch.stack(
        [a.row_coefficients(N, m.alpha) for a, m in zip(arms, chunk.members)])  # (E, N)
    seeds = sorted({m.seed for m in chunk.members})
    data_gens = {r: torch_gen_for(cfg.seed, "study", task, N, r, "data") for r in seeds}
    who = torch.tensor([seeds.index(m.seed) for m in chunk.members])  # member -> its replicate's batch
    lr_peak = torch.tensor([m.lr for m in chunk.members], dtype=torch.float32)
    st = AdamWState.zeros(prm)
    alive = torch.ones(E, dtype=torch.bool)
    diverged_step = np.full(E, -1)
    history: list[tuple] = []
    loss_acc, gn_acc, gn_max, gn_last = np.zeros(E), np.zeros(E), np.zeros(E), np.zeros(E)
    n_acc = 0
    evals = set(plan.eval_steps())
    rec = {"val_loss": [], "val_acc": [], "test_loss": [], "test_acc": [], "step": []}
    norms_init: dict[str, np.ndarray] = {}
    norms_last: dict[str, np.ndarray] = {}

    def record(step: int) -> None:
        nonlocal n_acc, loss_acc, gn_acc
        vl, va = _evaluate(prm, spec, rowc, data, data.val, E, cfg)
        tl, ta = _evaluate(prm, spec, rowc, data, data.test, E, cfg)
        nm = _probe_norms(prm, spec, rowc, data, alive)
        for k, v in (("val_loss", vl), ("val_acc", va), ("test_loss", tl), ("test_acc", ta)):
            rec[k].append(v)
        rec["step"].append(step)
        if step == 0:
            norms_init.update(nm)
        norms_last.update(nm)
        q = {"val_loss": vl, "val_acc": va, **nm}
        if step > 0:
            q["train_loss"] = loss_acc / max(n_acc, 1)
            q["grad_norm"] = gn_acc / max(n_acc, 1)
        for e in range(E):
            for name, v in q.items():
                history.append((e, step, name, float(v[e])))
        loss_acc, gn_acc, n_acc = np.zeros(E), np.zeros(E), 0

    record(0)
    names = list(prm)
    for step in range(1, plan.steps + 1):
        xb, yb = zip(*(data.batch(data_gens[r]) for r in seeds))
        x, y = torch.stack(xb)[who], torch.stack(yb)[who]  # (E, B, ...): member e sees its replicate's batch
        L = member_losses(ensemble_forward(prm, x, spec, rowc), y)  # (E,)
        bad = alive & ~torch.isfinite(L)
        if bool(bad.any()):
            diverged_step[bad.numpy()] = step
            alive &= ~bad
        total = torch.where(alive, L, torch.zeros_like(L)).sum()
        grads = dict(zip(names, torch.autograd.grad(total, [prm[k] for k in names])))
        keep = alive.to(torch.float32)
        for g in grads.values():  # a dead member's gradient may be NaN: it takes no further step
            g.copy_(torch.where(alive.reshape(-1, *([1] * (g.ndim - 1))), g, torch.zeros((), dtype=g.dtype)))
        gn = clip_per_member(grads, cfg.clip).numpy()
        adamw_step(prm, grads, st, lr_peak * _lr_factor(step - 1, plan) * keep, betas=cfg.betas,
                   weight_decay=cfg.weight_decay)
        a = alive.numpy()
        loss_acc[a] += L.detach().double().numpy()[a]
        gn_acc[a] += gn[a]
        gn_max[a] = np.maximum(gn_max[a], gn[a])
        gn_last[a] = gn[a]
        n_acc += 1
        if step in evals:
            record(step)
    rows = _summarise(chunk, cfg, data, rec, norms_init, norms_last, alive.numpy(), diverged_step, gn_max, gn_last)
    hist = [(m.arm, m.alpha, m.lr, m.seed, step, q, v) for e, step, q, v in history
            for m in (chunk.members[e],)]
    return {"rows": rows, "history": hist}


def _summarise(chunk: Chunk, cfg, data: _Data, rec, n0, n1, alive, dstep, gmax, glast) -> list[dict]:
    """One row per member (schema of runs.parquet); a diverged member holds chance accuracy and infinite loss."""
    val_loss, val_acc = np.array(rec["val_loss"]), np.array(rec["val_acc"])  # (evals, E)
    test_loss, test_acc = np.array(rec["test_loss"]), np.array(rec["test_acc"])
    steps = np.array(rec["step"])
    rows = []
    for e, m in enumerate(chunk.members):
        arm = ARMS[m.arm]
        start = float(val_loss[0, e])
        vl_final = float(val_loss[-1, e])
        div = (not alive[e]) or not math.isfinite(vl_final) or vl_final > start
        va = np.where(np.isfinite(val_loss[:, e]), val_acc[:, e], -np.inf)
        b = int(np.argmax(va[1:]) + 1) if len(va) > 1 else 0  # best evaluation after step 0
        row = {"task": chunk.task, "N": chunk.N, "arm": m.arm, "p": arm.p, "scale": arm.scale, "alpha": m.alpha,
               "lr": m.lr, "seed": m.seed, "in_study": True, "steps": cfg.plan(chunk.task).steps,
               "diverged": bool(div), "diverged_step": int(dstep[e]) if dstep[e] >= 0 else (
                   int(steps[-1]) if div else -1),
               "loss_start": start, "chance_acc": data.chance,
               "val_acc_final": float(val_acc[-1, e]), "val_loss_final": vl_final,
               "val_acc_best": float(val_acc[b, e]), "val_loss_best": float(np.nanmin(
                   np.where(np.isfinite(val_loss[1:, e]), val_loss[1:, e], np.inf))) if len(steps) > 1 else start,
               "best_step": int(steps[b]), "test_acc": float(test_acc[-1, e]), "test_loss": float(test_loss[-1, e]),
               "test_acc_at_best_val": float(test_acc[b, e]),
               "grad_norm_max": float(gmax[e]), "grad_norm_final": float(glast[e])}
        for q in NORMS:
            row[q] = float(n1[q][e])
            row[f"{q}_init"] = float(n0[q][e])
        if div:  # a result, not a gap: chance accuracy, infinite loss and norms
            for k in ("val_acc_final", "val_acc_best", "test_acc", "test_acc_at_best_val"):
                row[k] = data.chance
            for k in ("val_loss_final", "val_loss_best", "test_loss", *NORMS):
                row[k] = math.inf
        rows.append(row)
    return rows


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
    """The stored study: runs (one row per member), history (long form), config, provenance."""

    runs: pd.DataFrame
    history: pd.DataFrame
    config: dict
    provenance: dict


ROW_TYPES = {"task": str, "N": int, "arm": str, "p": int, "scale": str, "lr": (int, float), "seed": int,
             "diverged": bool, "diverged_step": int, "test_acc": (int, float, str), "val_acc_final": (int, float, str),
             "loss_start": (int, float, str), "attn_fro": (int, float, str)}
HISTORY_TYPES = (str, (int, float, str, type(None)), (int, float), int, int, str, (int, float, str))


def _is(v: object, types) -> bool:
    """isinstance, with bool never counting as a number (and bool only where bool is asked for)."""
    if types is bool:
        return isinstance(v, bool)
    return isinstance(v, types) and not isinstance(v, bool)


def _chunk_record_problem(rec: object, chunk: Chunk | None = None) -> str | None:
    """What makes ``rec`` not a complete chunk record (schema, members, rows, history and their types), or None."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("schema") != SCHEMA:
        return f"schema {rec.get('schema')!r}, expected {SCHEMA}"
    members, rows, hist = rec.get("members"), rec.get("rows"), rec.get("history")
    if not isinstance(members, list) or not members:
        return "no 'members' list"
    if chunk is not None and members != [m.as_dict() for m in chunk.members]:
        return "its members are not this chunk's"
    if not isinstance(rows, list) or len(rows) != len(members) or not all(isinstance(r, dict) for r in rows):
        return "'rows' is not one object per member"
    for r in rows:
        for k, types in ROW_TYPES.items():
            if not _is(r.get(k), types):
                return f"a row's {k!r} is missing or of the wrong type"
    if not isinstance(hist, list) or not hist:
        return "no 'history' rows"
    for h in hist:
        if not isinstance(h, list) or len(h) != len(HISTORY_TYPES) or not all(
                _is(v, t) for v, t in zip(h, HISTORY_TYPES)):
            return "a history row is not [arm, alpha, lr, seed, step, quantity, value]"
    return None


def _chunk_ok(path: Path, chunk: Chunk, chash: str) -> bool:
    """True if ``path`` holds this chunk, finished under config hash ``chash`` (else it is trained again)."""
    if not path.is_file():
        return False
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
        check_record(rec, path)
    except CorruptResult as exc:
        warn_recompute(exc)
        return False
    except Exception:  # truncated, foreign or old: train it again
        return False
    if rec.get("config_hash") != chash:
        return False
    problem = _chunk_record_problem(rec, chunk)
    if problem is not None:  # parses, but would crash the assembly: recompute, and say so
        print(f"sapa: warning: chunk file {path} is invalid ({problem}); recomputing it", file=sys.stderr)
        return False
    return True


def _json_num(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _from_json_num(v):
    return float(v) if v in ("nan", "inf", "-inf") else v


def _store(path: Path, chunk: Chunk, chash: str, res: dict) -> None:
    rec = {"schema": SCHEMA, "config_hash": chash, "members": [m.as_dict() for m in chunk.members],
           "rows": [{k: _json_num(v) for k, v in r.items()} for r in res["rows"]],
           "history": [[_json_num(v) for v in h] for h in res["history"]],
           "wall_s": res.get("wall_s"), "cpu_s": res.get("cpu_s")}
    atomic_write_json(path, seal_record(rec))


def _read_chunk(path: Path, chunk: Chunk) -> tuple[pd.DataFrame, pd.DataFrame]:
    rec = json.loads(path.read_text(encoding="utf-8"))
    try:
        check_record(rec, path)
    except CorruptResult as exc:
        raise InputError(f"{exc}; run again to recompute it") from None
    rows = pd.DataFrame([{k: _from_json_num(v) for k, v in r.items()} for r in rec["rows"]])
    rows["cpu_s"] = float(rec.get("cpu_s") or math.nan) / max(1, len(rows))
    hist = pd.DataFrame([[_from_json_num(v) for v in h] for h in rec["history"]],
                        columns=["arm", "alpha", "lr", "seed", "step", "quantity", "value"])
    hist.insert(0, "N", chunk.N)
    hist.insert(0, "task", chunk.task)
    return rows, hist


def _run_chunks(chunks: list[Chunk], cfg: StudyConfig, out: Path, ex: cf.Executor | None, bar) -> int:
    """Train the chunks not yet on disk (largest first; in ``ex`` when given); return how many members were trained."""
    chash = cfg.hash()
    todo = [c for c in chunks if not _chunk_ok(out / "chunks" / c.file_name, c, chash)]
    bar.update(sum(len(c.members) for c in chunks if c not in todo))
    todo.sort(key=lambda c: -len(c.members) * _bytes_per_member(cfg, c.task, c.N))

    def finish(c: Chunk, res: dict) -> None:
        _store(out / "chunks" / c.file_name, c, chash, res)
        bar.update(len(c.members))

    if ex is None or len(todo) <= 1:
        for c in todo:
            finish(c, train_chunk(c, cfg))
        return sum(len(c.members) for c in todo)
    futs = {ex.submit(train_chunk, c, cfg): c for c in todo}
    try:
        for fut in cf.as_completed(futs):
            finish(futs[fut], fut.result())
    except BaseException:
        for f in futs:
            f.cancel()
        raise
    return sum(len(c.members) for c in todo)


def _assemble(chunks: list[Chunk], out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    parts = [_read_chunk(out / "chunks" / c.file_name, c) for c in chunks]
    runs = pd.concat([p[0] for p in parts], ignore_index=True)
    hist = pd.concat([p[1] for p in parts], ignore_index=True)
    runs = runs.astype({"N": "int64", "p": "int64", "seed": "int64", "steps": "int64", "diverged": bool,
                        "diverged_step": "int64", "best_step": "int64", "alpha": "float64", "in_study": bool})
    hist = hist.astype({"N": "int64", "seed": "int64", "step": "int64", "alpha": "float64", "value": "float64"})
    return runs, hist


def _write_parquet(path: Path, df: pd.DataFrame) -> None:
    atomic_write(path, lambda tmp: df.to_parquet(tmp, index=False))


def run_study(budget: str | StudyConfig, out_dir: str | Path, seed: int = 0, workers: int = 2,
              progress: bool | str = True) -> StudyResult:
    """Run (or resume) the study of ``budget`` into ``out_dir``; return the assembled :class:`StudyResult`.

    Phase 1 trains every task's smallest N (the α grid included) and selects α*; phase 2 trains the
    other N with α* held fixed. ``workers`` 1 trains here; K > 1 in a pool of K single-threaded
    processes (identical numbers). Writes ``chunks/*.json`` as chunks finish, then ``runs.parquet``,
    ``history.parquet`` and ``study.json`` atomically.
    """
    from empirics.progress import progress_bar

    cfg = study_config(budget, seed)
    workers = positive_int("workers", workers)
    out = Path(out_dir)
    try:
        (out / "chunks").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the results directory {out / 'chunks'}: {exc.strerror or exc}") from None
    t0 = time.perf_counter()
    phase1 = [c for t in cfg.tasks for c in plan_chunks(cfg, t, cfg.plan(t).Ns[0], None)]
    total_members = _member_count(cfg)
    bar = progress_bar(total_members, 0, desc="train members", unit="member", progress=progress)
    ex = process_pool(workers) if workers > 1 else None  # one pool for both phases (spawning costs seconds)
    try:
        ran = _run_chunks(phase1, cfg, out, ex, bar)
        runs1, _ = _assemble(phase1, out)
        alpha_star = {t: {p: select_alpha(runs1, t, p) for p in _alpha_ps(cfg, t)} for t in cfg.tasks}
        phase2 = [c for t in cfg.tasks for N in cfg.plan(t).Ns[1:] for c in plan_chunks(cfg, t, N, alpha_star[t])]
        ran += _run_chunks(phase2, cfg, out, ex, bar)
    except BaseException:
        if ex is not None:
            terminate_workers(ex)  # chunks in flight are lost; finished ones are on disk
        raise
    finally:
        bar.close()
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)
    runs, hist = _assemble(phase1 + phase2, out)
    for t, by_p in alpha_star.items():
        for p, a in by_p.items():
            grid = (runs["task"] == t) & (runs["p"] == p) & (runs["scale"] == "alpha")
            runs.loc[grid, "in_study"] = runs.loc[grid, "alpha"] == a  # α* is one of the grid's values
    prov = {"config": cfg.as_dict(), "config_hash": cfg.hash(), "schema": SCHEMA,
            "alpha_star": {t: {str(p): a for p, a in v.items()} for t, v in alpha_star.items()},
            "members": int(len(runs)), "chunks": len(phase1) + len(phase2), "members_trained_now": ran,
            "wall_s": round(time.perf_counter() - t0, 3), "workers": workers,
            "cpu_s_total": round(float(runs["cpu_s"].sum()), 2),
            "dtype": "training float32; norms float64 (exact kernels)", "torch": torch.__version__,
            "numerics": {"threads_per_worker": 1, "deterministic_algorithms": True,
                         "pinned_kernel_dispatch": {k: __import__("os").environ.get(k) for k in PINNED}},
            "text_corpus": _text_source() if "text" in cfg.tasks else None}
    _write_parquet(out / "runs.parquet", runs)
    _write_parquet(out / "history.parquet", hist)
    atomic_write_json(out / "study.json", prov)
    return StudyResult(runs, hist, cfg.as_dict(), prov)


def _alpha_ps(cfg: StudyConfig, task: str) -> tuple[int, ...]:
    return tuple(sorted({ARMS[a].p for a in cfg.task_arms(task) if ARMS[a].scale == "alpha"}))


def _member_count(cfg: StudyConfig) -> int:
    n = 0
    for t in cfg.tasks:
        plan = cfg.plan(t)
        for N in plan.Ns:
            for a in cfg.task_arms(t):
                k = len(cfg.alphas) if (ARMS[a].scale == "alpha" and N == plan.Ns[0]) else 1
                n += k * len(plan.lrs) * cfg.seeds
    return n


def _text_source() -> dict:
    import hashlib

    from empirics.train_data import corpus

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
    prov = json.loads((out / "study.json").read_text(encoding="utf-8"))
    return StudyResult(pd.read_parquet(out / "runs.parquet"), pd.read_parquet(out / "history.parquet"),
                       prov.get("config", {}), prov)


# --------------------------------------------------------------------------- CLI


def best_lr_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, N, arm): the best lr (median validation accuracy; ties → smaller lr), its test accuracies, divergences."""
    r = runs[runs["in_study"]]
    med = r.groupby(["task", "N", "arm", "lr"], sort=False)["val_acc_final"].median().reset_index()
    med = med.sort_values(["task", "N", "arm", "val_acc_final", "lr"], ascending=[True, True, True, False, True])
    best = med.drop_duplicates(["task", "N", "arm"])[["task", "N", "arm", "lr"]]
    sel = r.merge(best, on=["task", "N", "arm", "lr"])
    g = sel.groupby(["task", "N", "arm"], sort=False)
    tab = g.agg(lr=("lr", "first"), seeds=("seed", "size"), test_acc_median=("test_acc", "median"),
                test_acc_min=("test_acc", "min"), test_acc_max=("test_acc", "max"),
                diverged=("diverged", "sum"), attn_fro_median=("attn_fro", "median")).reset_index()
    grid_div = r.groupby(["task", "N", "arm"])["diverged"].agg(["sum", "size"]).reset_index()
    tab = tab.merge(grid_div.rename(columns={"sum": "diverged_grid", "size": "runs_grid"}), on=["task", "N", "arm"])
    order = {a: i for i, a in enumerate(ARMS)}
    return tab.sort_values(["task", "N", "arm"], key=lambda s: s.map(order) if s.name == "arm" else s,
                           ignore_index=True)


def main_cli(budget: str, out: Path, seed: int = 0, workers: int = 2, progress: bool = True) -> int:
    """``sapa train``: run (or resume) the study into ``out``; print accuracy per arm and N at the best lr."""
    from empirics.interrupt import sigterm_as_interrupt

    t0 = time.perf_counter()
    with sigterm_as_interrupt():
        res = run_study(budget, out, seed=seed, workers=workers, progress=progress)
    tab = best_lr_summary(res.runs)
    print(f"{'task':6s} {'N':>4s} {'arm':9s} {'best lr':>8s} {'test acc med':>12s} {'range':>13s} "
          f"{'div@lr':>6s} {'div/grid':>8s} {'‖φ(S)‖ med':>11s}")
    for r in tab.itertuples():
        print(f"{r.task:6s} {r.N:4d} {ARMS[r.arm].label:9s} {r.lr:8.0e} {r.test_acc_median:12.3f} "
              f"{r.test_acc_min:6.3f}–{r.test_acc_max:6.3f} {int(r.diverged):3d}/{r.seeds:<2d} "
              f"{int(r.diverged_grid):3d}/{r.runs_grid:<4d} {r.attn_fro_median:11.4g}")
    prov = res.provenance
    print(f"α* (tuned at the smallest N): {prov['alpha_star']}")
    print(f"{prov['members']} members in {prov['chunks']} ensemble chunks ({prov['members_trained_now']} trained now) "
          f"in {time.perf_counter() - t0:.1f} s; training float32, norms float64; results in {out}")
    return 0
