"""The training study's design: arms φ(S) = r_i·S^p or softmax, N grids, lr grids, budgets, and its ensemble chunks.

See :mod:`sapa.empirics.training.train_study` for what the study tests. A **chunk** is one (task, N, activation
family) ensemble — every scale rule × learning rate × seed of the family at that N, split so its
activations fit :data:`MEMORY_BYTES` — and the unit of training, storage and resumption.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from sapa.common.validate import InputError, choice, positive_int
from sapa.empirics.training.ensemble import expression_family, row_coefficients
from sapa.common.seeds import stable_hash
from sapa.empirics.training.tiny_models import TinyModelConfig
from sapa.theory.families import (ALPHA, DOSE, FAMILY_TABLE, GRID_RULES, INV_N, INV_SQRT_N, NONE, SOFTMAX,
                                  TEMPERATURE, Family)

__all__ = ["ARMS", "arm_of", "arm_p", "row_coefficients", "CAUSAL_ONLY", "GRID_SCALES", "aliases", "grid_value",
           "TaskPlan", "StudyConfig", "QUICK", "FULL", "TINY", "BUDGETS", "study_config", "Member", "Chunk",
           "plan_chunks", "member_count", "alpha_ps", "SCHEMA", "TASKS", "HISTORY_QUANTITIES", "NORMS", "VAL_FRACTION", "MEMORY_BYTES", "DOSE_ARMS", "look2_doses", "look2_chunks"]

SCHEMA = 3  # bump when the meaning of stored chunks changes (3: dose / temperature grids, aliased arms)
TASKS = ("digits", "text")
GRID_SCALES = GRID_RULES  # α, c, τ: arms trained over a grid at the task's smallest N (Member.alpha)
HISTORY_QUANTITIES = ("train_loss", "val_loss", "val_acc", "attn_fro", "jac_s_fro", "jac_x_fro", "grad_norm")
NORMS = ("attn_fro", "jac_s_fro", "jac_x_fro")
VAL_FRACTION = 0.2  # digits: of the training images; text: the tail of the training stream
MEMORY_BYTES = 1.5e9  # activations one ensemble chunk may hold (float32), chosen for 2 workers in 24 GiB


# The training arms: every row of the families table marked ``train`` (one row adds an arm). An arm trains as the
# ensemble of its row's kernel (softmax, the power p) or, without one, as its expression φ(x, N, i); each member's
# r_i = the row's scale (:func:`sapa.empirics.training.ensemble.row_coefficients`): 1/√N, 1/α (a grid at the smallest N,
# then the tuned α*), 1, 1/N, 1/√i, 1/c over the dose grid at the smallest N only (the dose-response of
# norm-vs-accuracy), softmax(S/τ) over a grid of τ at the smallest N only.
ARMS: dict[str, Family] = {f.id: f for f in FAMILY_TABLE if f.train}


EXPR_ARM = "expr:"  # an arm named "expr:<φ>" trains the expression φ(x, N, i) (sapa compare's arms)
ROW_ARM = "row:"  # an arm named "row:<ψ>" trains ψ(x, N, i) with each row divided by its sum


def arm_of(name: str) -> Family:
    """The arm called ``name``: a row of :data:`ARMS`, ``"expr:<φ>"``, the expression φ trained as its own arm
    (scale in the expression, rule "none"; parsed and translated now: one clear :class:`InputError` if it cannot
    train), or ``"row:<ψ>"``, ψ row-normalised."""
    if name in ARMS:
        return ARMS[name]
    for prefix, normalize in ((EXPR_ARM, "none"), (ROW_ARM, "row")):
        if isinstance(name, str) and name.startswith(prefix) and name[len(prefix):].strip():
            return expression_family(name, name[len(prefix):], normalize)
    raise InputError(f"arm must be one of {tuple(ARMS)}, 'expr:<φ>' or 'row:<ψ>', got {name!r}")


def arm_p(f: Family) -> int:
    """The runs' ``p`` column of an arm: its degree, 0 for softmax and the expression arms."""
    return f.p or 0


def _causal_families() -> set[str]:
    return {f.id for f in FAMILY_TABLE if f.masks == ("causal",)}


def arm_label(arm: str) -> str:
    """The one display name of a training arm: ``x_sqrtN`` → ``x/√N`` (its :data:`ARMS` label); ``expr`` → ``φ``."""
    if arm == "expr":
        return "φ"
    return ARMS[arm].label if arm in ARMS else str(arm)


CAUSAL_ONLY = tuple(a for a in ARMS if a in _causal_families())  # defined under a causal mask only: text


@dataclass(frozen=True)
class TaskPlan:
    """One task's sizes and schedule: the N grid, steps, tokens per step, lr grid, evaluation."""

    Ns: tuple[int, ...]
    steps: int
    batch: int  # sequences per step ("sequences"), or tokens per step ("tokens": B = max(1, batch // N))
    lrs: tuple[float, ...]  # peak learning rates (every arm gets every one)
    warmup: int = 20  # linear warm-up steps, then cosine decay to lr/10
    evals: int = 12  # evaluation points after step 0, log-spaced up to ``steps`` (learning_curves.log_eval_steps)
    eval_size: int = 128  # validation sequences (text: also the held-out test windows; digits test: all images)
    constant: str = "sequences"  # what is held constant across N: "sequences" (images) or "tokens" (text)

    def __post_init__(self) -> None:
        choice("constant", self.constant, ("sequences", "tokens"))
        positive_int("batch", self.batch)

    def sequences(self, N: int) -> int:
        """B, the sequences per optimiser step at length N."""
        return self.batch if self.constant == "sequences" else max(1, self.batch // N)

    def eval_steps(self) -> tuple[int, ...]:
        """0 and ``evals`` log-spaced steps up to the cap (a dense learning curve, not a snapshot)."""
        from sapa.empirics.training.learning_curves import log_eval_steps

        return log_eval_steps(self.steps, self.evals)


@dataclass(frozen=True)
class StudyConfig:
    """The whole study: tasks, arms, α grid, seeds, model shape, optimiser, probe size, seed."""

    name: str
    digits: TaskPlan
    text: TaskPlan
    seeds: int = 3  # replicates r per (task, N, arm, lr)
    model: TinyModelConfig = field(default_factory=lambda: TinyModelConfig(width=16, layers=2, heads=2))
    arms: tuple[str, ...] = tuple(ARMS)
    alphas: tuple[float, ...] = (4.0, 16.0, 64.0)  # the fixed-α grid (and the dose grid c), at the smallest N
    temperatures: tuple[float, ...] = (1.0,)  # the softmax temperature sweep τ at the smallest N
    probe: int = 8  # probe sequences for the norms
    clip: float = 1.0  # per-member global gradient-norm clip
    weight_decay: float = 0.0  # AdamW decoupled decay of matrices and embeddings
    betas: tuple[float, float] = (0.9, 0.95)
    split_seed: int = 0  # the fixed digits train / validation / test split
    seed: int = 0
    tasks: tuple[str, ...] = TASKS
    # The dose-response's second look (norm-vs-accuracy): each factor between neighbouring grid values of c split into
    # this many log-equal steps for the strata the first look left open (0: no second look; 5 turns 8 doses into 36).
    look2_refine: int = 0

    def __post_init__(self) -> None:
        positive_int("seeds", self.seeds)
        if isinstance(self.look2_refine, bool) or not isinstance(self.look2_refine, int) or self.look2_refine < 0:
            raise InputError(f"look2_refine must be a non-negative integer, got {self.look2_refine!r}")
        positive_int("probe", self.probe)
        for a in self.arms:
            arm_of(a)
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
        for name, grid in (("α", self.alphas), ("τ", self.temperatures)):
            if not grid or any(not (a > 0 and math.isfinite(a)) for a in grid) or len(set(grid)) != len(grid):
                raise InputError(f"{name} must be distinct, positive and finite, got {grid}")

    def plan(self, task: str) -> TaskPlan:
        return self.digits if task == "digits" else self.text

    def task_arms(self, task: str) -> tuple[str, ...]:
        return tuple(a for a in self.arms if task == "text" or a not in CAUSAL_ONLY)

    def as_dict(self) -> dict:
        return asdict(self)

    def hash(self) -> str:
        """sha256 of the config and the schema: a chunk file is reused only under the same hash.

        ``look2_refine`` is left out: no first-look chunk depends on it, and a second-look chunk records its members
        (the doses it adds), which a changed refinement changes — so it is trained again (study_store.chunk_ok).
        """
        d = self.as_dict()
        d.pop("look2_refine")
        return stable_hash({"schema": SCHEMA, **d})


# Quick (with the mechanism tasks, ≤ 90 s of `sapa train` on 2 cores): digits only, softmax and the arms without a
# tuned α, 2 seeds, 12 log-spaced evaluations; a 200-step cap, so slow arms may be censored (the output says so).
# One learning rate, 3e-3: with 3e-3 and 1e-2 it had the higher validation accuracy for every arm but softmax at
# N = 64 (0.416 against 0.430), and the second lr cost half of the quick study's 124 CPU-s.
# Width 32 (at width 16 the digits models stay below 65 % accuracy in 300 steps); one head per layer (d = D: each
# layer's scores are the theory's single S = X W_Q W_Kᵀ Xᵀ/√d, and the (B, N, N) passes are half those of two heads).
# A smoke test of the dose-response too: 4 doses of c (p min 1/24 cannot decide) and 3 temperatures at N = 16.
QUICK = StudyConfig(
    name="quick",
    digits=TaskPlan(Ns=(16, 64), steps=200, batch=32, lrs=(3e-3,), warmup=20, evals=12, eval_size=256),
    text=TaskPlan(Ns=(32, 64), steps=200, batch=16, lrs=(1e-3, 3e-3, 1e-2), eval_size=64),
    seeds=2,
    model=TinyModelConfig(width=32, layers=2, heads=1),
    arms=("softmax", "x_sqrtN", "x", "x3_sqrtN", "x3", "x_dose", "x3_dose", "softmax_tau"),
    alphas=(1.0, 4.0, 16.0, 64.0),
    temperatures=(0.25, 1.0, 4.0),
    tasks=("digits",),
)
# Full: learning curves to a cap 4× the earlier 800 text steps (the independent runs: every polynomial arm leaves the
# bigram plateau between 1k and 3k steps, seed-dependent), 16 log-spaced evaluations. Text N = 64, 128 at 16 windows
# per step, 2 lrs; arms softmax, x/√N, x³/√N, x³/α* (α tuned at the smallest N), unscaled x and x³ (the paper's
# negative controls), x³/√i. Digits N = 16, 64 to 2000 steps. At each task's smallest N the dose-response of
# norm-vs-accuracy: x/c (x_dose) and x³/c (the α grid) over c = 1 … 128 (√N and the paper's 16 included), softmax(S/τ)
# over τ = 1/8, 1, 8; x^p, x^p/√N and softmax are trained once there, as grid members. Digits stop at 1 000 steps
# (every arm left chance by step 57 and softmax's curve was flat from step 500 in the 2 000-step study): the time goes
# to the dose grid and the mechanism seeds. Time estimate: docs/training.md.
FULL = StudyConfig(
    name="full",
    digits=TaskPlan(Ns=(16, 64), steps=1000, batch=32, lrs=(1e-3, 3e-3, 1e-2), warmup=30, evals=16, eval_size=256),
    text=TaskPlan(Ns=(64, 128), steps=3200, batch=16, lrs=(3e-3, 1e-2), warmup=50, evals=16, eval_size=128),
    seeds=3,
    model=TinyModelConfig(width=32, layers=2, heads=1),
    arms=("softmax", "x_sqrtN", "x3_sqrtN", "x3_alpha", "x", "x3", "x3_sqrti", "x_dose", "softmax_tau"),
    alphas=(1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0),
    temperatures=(0.125, 1.0, 8.0),
    look2_refine=5,
)
# A handful of steps, for tests.
TINY = StudyConfig(
    name="tiny",
    digits=TaskPlan(Ns=(16,), steps=4, batch=8, lrs=(1e-3, 1e-2), warmup=2, evals=2, eval_size=16),
    text=TaskPlan(Ns=(8, 16), steps=4, batch=32, constant="tokens", lrs=(1e-3, 1e-2), warmup=2, evals=2, eval_size=8),
    seeds=2,
    model=TinyModelConfig(width=8, layers=1, heads=2),
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
    family: str  # "softmax" | "p1" | "p3" | an expression arm's (_family_id)
    index: int  # chunk k of the family at this N
    members: tuple[Member, ...]
    look: int = 1  # 2: the dose-response's second look (look2_chunks)

    @property
    def file_name(self) -> str:
        tag = "" if self.look == 1 else f"look{self.look}_"
        return f"{self.task}_N{self.N}_{self.family}_{tag}{self.index}.json"


def _family_id(arm: Family) -> str:
    """The ensemble an arm trains in: softmax, the power p, or its own expression (a row's id; "expr:<φ>" arms:
    "expr-<hash>", a file-safe name)."""
    if arm.id.startswith(EXPR_ARM):
        return "expr-" + stable_hash(arm.id)[:12]
    if arm.id.startswith(ROW_ARM):
        return "row-" + stable_hash(arm.id)[:12]
    return arm.id if arm.kernel is None else SOFTMAX if arm.kernel == SOFTMAX else f"p{arm.p}"


def bytes_per_member(cfg: StudyConfig, task: str, N: int) -> float:
    """Float32 bytes of activations one member holds for backward (a generous count of saved tensors)."""
    B, m = cfg.plan(task).sequences(N), cfg.model
    attn = 8 * B * m.heads * N * N  # S, S^p / softmax, masks, products and their grads per layer
    dense = 24 * B * N * m.width * m.mlp_ratio
    return 4.0 * m.layers * (attn + dense)


def _grid(cfg: StudyConfig, arm: Family) -> tuple[float, ...]:
    return cfg.temperatures if arm.rule == TEMPERATURE else cfg.alphas


def grid_value(arm: Family, N: int) -> float | None:
    """The grid value (α, c or τ) at which a fixed-scale arm equals a grid arm of its family at length N (None: none).

    x^p → c = 1, x^p/√N → c = √N, x^p/N → c = N; softmax → τ = 1.
    """
    return {NONE: 1.0, INV_SQRT_N: math.sqrt(N), INV_N: float(N), SOFTMAX: 1.0}.get(arm.rule)


def _trains_as(arm: Family) -> tuple:
    """What an arm trains as, apart from its scale: (degree, expression of an arm without a kernel)."""
    return arm_p(arm), "" if arm.kernel else arm.expr


def aliases(cfg: StudyConfig, task: str) -> dict[str, tuple[str, float]]:
    """{arm: (grid arm, value)}: the task's fixed-scale arms that are members of a grid arm at its smallest N.

    Such an arm is trained once, as the grid member (same initial weights, minibatches, lr and seed: the same model),
    and its rows are copied under its own name (:func:`sapa.empirics.training.train_study.add_aliases`).
    """
    N0, arms = cfg.plan(task).Ns[0], cfg.task_arms(task)
    out = {}
    for name in arms:
        v = grid_value(arm_of(name), N0)
        if v is None:
            continue
        for g in arms:
            ga = arm_of(g)
            if _trains_as(ga) == _trains_as(arm_of(name)) and ga.rule in GRID_SCALES and any(
                    math.isclose(v, a) for a in _grid(cfg, ga)):
                out[name] = (g, next(a for a in _grid(cfg, ga) if math.isclose(v, a)))
                break
    return out


def plan_chunks(cfg: StudyConfig, task: str, N: int, alpha_star: dict[int, float] | None) -> list[Chunk]:
    """The chunks of (task, N): per family, its arms × lrs × seeds (grids at the smallest N, else α*; the dose and
    temperature arms only at the smallest N; arms that are grid members there are trained once, as the member)."""
    plan = cfg.plan(task)
    first = N == plan.Ns[0]
    alias = aliases(cfg, task) if first else {}
    per_family: dict[str, list[Member]] = {}
    for name in cfg.task_arms(task):
        arm = arm_of(name)
        if name in alias or (arm.rule in (DOSE, TEMPERATURE) and not first):
            continue
        if arm.rule in GRID_SCALES:
            alphas = _grid(cfg, arm) if first else (alpha_star[arm.p],)
        else:
            alphas = (math.nan,)
        ms = per_family.setdefault(_family_id(arm), [])
        ms += [Member(name, float(a), float(lr), r) for a in alphas for lr in plan.lrs for r in range(cfg.seeds)]
    cap = max(1, int(MEMORY_BYTES // bytes_per_member(cfg, task, N)))
    chunks = []
    for fam, ms in per_family.items():
        k = math.ceil(len(ms) / cap)
        size = math.ceil(len(ms) / k)  # equal chunks
        chunks += [Chunk(task, N, fam, i, tuple(ms[i * size:(i + 1) * size])) for i in range(k)]
    return chunks


DOSE_ARMS = {1: "x_dose", 3: "x3_dose"}  # the arm a second-look dose of x^p/c trains as (never the α grid's x3_alpha)


def look2_doses(cfg: StudyConfig) -> tuple[float, ...]:
    """c_k·(c_{k+1}/c_k)^(j/R), j = 1 … R − 1, between neighbouring values of the sorted grid ``cfg.alphas``: the doses
    the second look adds (R = ``cfg.look2_refine``; none when R < 2). 1 … 128 by factors of 2 and R = 5: 28 doses."""
    grid, R = sorted(cfg.alphas), cfg.look2_refine
    return tuple(a * (b / a) ** (j / R) for a, b in zip(grid, grid[1:]) for j in range(1, R))


def look2_chunks(cfg: StudyConfig, strata) -> list[Chunk]:
    """The second look's chunks: for each (task, p, lr) of ``strata``, x^p/c at every dose of :func:`look2_doses` ×
    every replicate, at the task's smallest N, as arm ``DOSE_ARMS[p]`` (replicate r: the grid's initial weights and
    minibatches). Per (task, p): members ordered (lr, c, replicate), split into ``2·cfg.seeds`` equal chunks (more if
    the memory budget asks), so that a pool of 2 or 3 workers finishes them together."""
    by: dict[tuple[str, int], list[Member]] = {}
    for task, p, lr in sorted({(str(t), int(p), float(lr)) for t, p, lr in strata}):
        choice("task", task, cfg.tasks)
        if p not in DOSE_ARMS or float(lr) not in cfg.plan(task).lrs:
            raise InputError(f"no dose grid of p = {p} at lr {lr:g} on {task} to look at again")
        by.setdefault((task, p), []).extend(Member(DOSE_ARMS[p], c, lr, r) for c in look2_doses(cfg)
                                            for r in range(cfg.seeds))
    chunks = []
    for (task, p), ms in by.items():
        N0 = cfg.plan(task).Ns[0]
        if not ms:
            continue
        cap = max(1, int(MEMORY_BYTES // bytes_per_member(cfg, task, N0)))
        replicates = cfg.seeds
        k = min(len(ms), max(2 * replicates, math.ceil(len(ms) / cap)))
        cuts = [len(ms) * i // k for i in range(k + 1)]  # sizes differ by at most one
        chunks += [Chunk(task, N0, f"p{p}", i, tuple(ms[cuts[i]:cuts[i + 1]]), look=2) for i in range(k)]
    return chunks


def alpha_ps(cfg: StudyConfig, task: str) -> tuple[int, ...]:
    return tuple(sorted({arm_p(arm_of(a)) for a in cfg.task_arms(task) if arm_of(a).rule == ALPHA}))


def member_count(cfg: StudyConfig) -> int:
    """Members trained (aliases are trained once, as their grid member)."""
    one = {p: 1.0 for t in cfg.tasks for p in alpha_ps(cfg, t)}
    return sum(len(c.members) for t in cfg.tasks for N in cfg.plan(t).Ns for c in plan_chunks(cfg, t, N, one))
