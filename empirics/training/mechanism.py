"""acc_e(t) on copy / induction / MQAR across N, every arm as an ensemble member: do x^p/√N's mechanisms form later as N grows?

The mechanism study (tasks: :mod:`sapa.empirics.training.mechanism_data`). Per (task, N) one
causal model shape (:class:`sapa.empirics.training.tiny_models.TinyModelConfig`), every arm × seed trained
as vectorised ensembles (:mod:`sapa.empirics.training.ensemble`, one chunk per activation family), with:

* the same initial weights and minibatch stream for every arm at replicate r (paired), one peak
  learning rate for every arm, linear warm-up and then a **constant** rate — so a curve does not
  depend on the step cap, and a longer cap only extends it;
* evaluation at :func:`sapa.empirics.training.learning_curves.log_eval_steps`: validation accuracy and loss
  over the scored positions, and on a probe batch in float64 the first layer's **offset-mass profile**
  (share of Σ|φ(S)_ij| on the offsets i − j = 0, 1, …, K − 1 and beyond) and ‖φ(S)‖_F (mean over heads
  and probe sequences).

``train_mechanism_chunk`` is a pure function of its arguments (one torch thread, deterministic
algorithms, explicit generators) except its timing fields; on CUDA (``device="cuda"``) the numbers
are float32 round-off away from the CPU's, never identical. Chunks are written atomically to
``OUT/mechanism/*.json`` under the config hash, so a rerun skips finished chunks.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from sapa.common.atomic import make_dirs
from sapa.common.integrity import split_run_metadata, write_sealed_json
from sapa.common.pool import one_thread
from sapa.common.validate import InputError, choice, positive_int
from sapa.common.seeds import stable_hash, torch_gen_for
from sapa.empirics.training import mechanism_data as MD
from sapa.empirics.training.ensemble import (AdamWState, EnsembleSpec, adamw_step, attention_inputs,
                                        clip_per_member, ensemble_forward, expression_family, head_Ws, phi,
                                        row_coefficients, stack_members)
from sapa.empirics.training.learning_curves import log_eval_steps
from sapa.empirics.training.tiny_models import TinyModelConfig
from sapa.theory.families import Family, family

__all__ = ["MECH_ARMS", "member_scales", "MechConfig", "MECH_BUDGETS", "mech_config", "MechChunk", "plan_mech_chunks",
           "train_mechanism_chunk", "run_mechanisms", "start_mechanisms", "OFFSETS", "SOLVED", "expr_arm", "resolve_device"]

SCHEMA = 3  # 3: per-probe sizes, the geometric evaluation grid, members stop once solved
OFFSETS = 8  # profile bins: offsets 0 … 7 and "8 or more"
SOLVED = 0.9  # a task is solved at the first evaluation with validation accuracy ≥ 0.9
HALF = 0.5  # the main exit threshold: steps to validation accuracy ≥ 0.5 (far less noisy across seeds than 0.9)
GATE = 0.9  # a (task, N) cell enters a verdict when softmax solves it in ≥ 90 % of its seeds within the cap


# The arms: the family rows softmax, x/√N, x³/√N (each trains as its kernel's ensemble, r = the row's scale 1/√N), and
# an activation expression φ(x, N, i) given at run time (:func:`expr_arm`).
MECH_ARMS: dict[str, Family] = {a: family(a) for a in ("softmax", "x_sqrtN", "x3_sqrtN")}


def expr_arm(text: str) -> Family:
    """The arm "expr" of an activation expression (parsed and translated now: one clear error if it cannot train);
    ``"row:<ψ>"``: ψ with each row divided by its sum."""
    if text.startswith("row:"):
        return expression_family("expr", text[len("row:"):], "row")
    return expression_family("expr", text)


def member_scales(arm: Family, N: int) -> torch.Tensor | None:
    """(N,) float32 r_i of a power arm at length N (its row's scale), None for softmax and an expression."""
    return row_coefficients(arm, N) if arm.kernel == "poly" else None


def grid_steps(cap: int, first: int = 8, ratio: float = 2 ** 0.2) -> tuple[int, ...]:
    """(0, first, ⌈first·ratio⌉, …, cap): evaluations geometric in the step (log2 spacing log2 ratio), the cap last.

    An exit (the first evaluation at or above a threshold) is then known to lie in (t_{k−1}, t_k]: an interval
    of width log2(ratio) = 0.2 in log2 steps (the earlier 16-point grid's was 0.47), kept as an interval.

    >>> grid_steps(100)
    (0, 8, 10, 11, 13, 14, 16, 19, 22, 25, 28, 32, 37, 43, 49, 56, 64, 74, 85, 98, 100)
    """
    if cap < 1 or first < 1 or not ratio > 1:
        raise InputError(f"need a step cap ≥ 1, a first evaluation ≥ 1 and a ratio > 1, got {cap}, {first}, {ratio}")
    out, t = [0], float(first)
    while t < cap:
        k = int(math.ceil(t - 1e-9))
        if k > out[-1]:
            out.append(k)
        t *= ratio
    if out[-1] != cap:
        out.append(int(cap))
    return tuple(out)


@dataclass(frozen=True)
class Probe:
    """One mechanism task of the study with its own sizes: N grid, step cap, seeds, batch, vocabulary, role (and, where
    the task needs another, its own model and learning rate).

    ``role``: "probe" — enters the verdict at the N where softmax solves it (accuracy ≥ SOLVED in ≥ GATE of its
    seeds within the cap); "finding" — trained and reported (e.g. a task only softmax solves at one N), never judged.
    ``first_seed``: the seeds are first_seed … first_seed + seeds − 1 (fresh seeds for a design sized by a pilot run
    on the seeds below them, so that the verdict never reads the pilot's data twice).
    """

    task: str
    Ns: tuple[int, ...]
    steps: int  # the step cap
    seeds: int
    batch: int = 16  # sequences per step
    vocab: int = 16
    role: str = "probe"
    model: TinyModelConfig | None = None  # None: the study's model
    lr: float | None = None  # None: the study's learning rate
    first_seed: int = 0

    def __post_init__(self) -> None:
        choice("probe role", self.role, ("probe", "finding"))
        if self.lr is not None and not (self.lr > 0 and math.isfinite(self.lr)):
            raise InputError(f"the learning rate must be positive and finite, got {self.lr}")
        for k in ("steps", "seeds", "batch"):
            positive_int(k, getattr(self, k))
        if isinstance(self.first_seed, bool) or not isinstance(self.first_seed, int) or self.first_seed < 0:
            raise InputError(f"first_seed must be a non-negative integer, got {self.first_seed!r}")
        if not self.Ns or list(self.Ns) != sorted(set(self.Ns)):
            raise InputError(f"the N grid must be increasing and non-empty, got {self.Ns}")
        for N in self.Ns:
            MD.check_task(self.task, N, self.vocab)


@dataclass(frozen=True)
class MechConfig:
    """The mechanism study: probes (task, N grid, cap, seeds, batch, V), model, one lr, arms, evaluation grid."""

    name: str
    probes: tuple[Probe, ...]
    lr: float = 3e-3  # peak learning rate of every arm (warm-up, then constant)
    warmup: int = 20
    model: TinyModelConfig = field(default_factory=lambda: TinyModelConfig(width=32, layers=2, heads=1))
    arms: tuple[str, ...] = ("softmax", "x_sqrtN", "x3_sqrtN")
    activation: str = ""  # φ(x, N, i) text: an extra arm "expr"
    first_eval: int = 8  # the evaluation grid: grid_steps(cap, first_eval, grid_ratio)
    grid_ratio: float = 2 ** 0.2
    stop_at: float = SOLVED  # a member stops at its first evaluation with accuracy ≥ stop_at (its exits are known)
    eval_size: int = 128  # validation sequences (induction: 4×, one scored token each)
    probe: int = 8  # probe sequences of the offset profile and the norm
    clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.probes or len({p.task for p in self.probes}) != len(self.probes):
            raise InputError(f"the mechanism study needs distinct tasks, got {[p.task for p in self.probes]}")
        for a in self.arms:
            choice("mechanism arm", a, tuple(MECH_ARMS))
        for k in ("eval_size", "probe", "first_eval"):
            positive_int(k, getattr(self, k))
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise InputError(f"the learning rate must be positive and finite, got {self.lr}")
        if not (self.grid_ratio > 1 and math.isfinite(self.grid_ratio)):
            raise InputError(f"the evaluation grid's ratio must be > 1, got {self.grid_ratio}")

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(p.task for p in self.probes)

    @property
    def Ns(self) -> tuple[int, ...]:
        return tuple(sorted({N for p in self.probes for N in p.Ns}))

    def plan(self, task: str) -> Probe:
        return next(p for p in self.probes if p.task == task)

    def arm_list(self) -> list[Family]:
        return [MECH_ARMS[a] for a in self.arms] + ([expr_arm(self.activation)] if self.activation else [])

    def eval_steps(self, task: str) -> tuple[int, ...]:
        return grid_steps(self.plan(task).steps, self.first_eval, self.grid_ratio)

    def hash(self) -> str:
        return stable_hash({"schema": SCHEMA, **asdict(self)})

    def chunk_hash(self, task: str) -> str:
        """sha256 of what a chunk of ``task`` depends on: the shared settings and that task's probe only, so that adding
        or resizing another probe keeps this task's stored chunks."""
        shared = {k: v for k, v in asdict(self).items() if k not in ("name", "probes")}
        unset = {"model": None, "lr": None, "first_seed": 0}  # left out at their defaults: older chunks keep their hash
        own = {k: v for k, v in asdict(self.plan(task)).items() if k not in unset or v != unset[k]}
        return stable_hash({"schema": SCHEMA, **shared, "probe": own})

    def model_of(self, task: str) -> TinyModelConfig:
        return self.plan(task).model or self.model

    def lr_of(self, task: str) -> float:
        return self.plan(task).lr or self.lr


# Quick: the copy tasks at N = 16, 32, 3 seeds, a 400-step cap — a smoke test (its figures say so): the seeds are too
# few to decide the growth questions. Induction and MQAR are full-budget only.
MECH_QUICK = MechConfig(name="quick", probes=(Probe("copy1", (16, 32), 400, 3), Probe("copy2", (16, 32), 400, 3)))
# Full: copy at lag 1, 2 and N/2 at N = 16 … 128, a 2 000-step cap, with the seeds the power analysis asks for: a pilot
# (6 seeds) measured the per-seed sd of the log2 slowdown at accuracy 0.5 at 0.54–0.80, and 16 seeds per cell give 80 %
# power to see a change of one doubling at the least favourable Holm level 0.01/12 for sd ≤ 0.7 (docs/training.md);
# and three findings (3 seeds, not judged): one-token induction at batch 64, N = 16; random-lag induction (V = 64,
# batch 64) and Zoology's MQAR (V = 64 > N, width 64, 2 heads, lr 1e-3, batch 64) at N = 32 — the largest size at
# which softmax solves them on 2 cores (at N = 64 it passes neither gate within 2 000–2 500 steps; the first full run
# also trained N = 16, where softmax solves both too: docs/training.md). One N each keeps the budget under 90 min.
# The long-lag copy (lag N/2) runs to N = 64 on 24 fresh seeds (16–39): in the first full run (seeds 0–15, its pilot)
# softmax solved it at N = 128 in only 14 of 16 seeds (below the gate: 1 323 CPU-s that entered no verdict), and x³/√N's
# Δ̂ = +0.38 doublings (se 0.26, σ̂ 0.74) asked for ≈ 24 seeds per cell to decide "more than 2×" with 80 % power at
# Holm's last step; fresh seeds, so that no verdict reads the pilot's data.
MECH_FULL = MechConfig(name="full", probes=(
    Probe("copy1", (16, 32, 64, 128), 2000, 16), Probe("copy2", (16, 32, 64, 128), 2000, 16),
    Probe("copy_far", (16, 32, 64), 2000, 24, first_seed=16),
    Probe("induction", (16,), 3000, 3, batch=64, role="finding"),
    Probe("induction_lag", (32,), 3000, 3, batch=64, vocab=64, role="finding"),
    Probe("mqar", (32,), 2000, 3, batch=64, vocab=64, role="finding",
          model=TinyModelConfig(width=64, layers=2, heads=2), lr=1e-3)))
MECH_TINY = MechConfig(name="tiny", probes=(Probe("copy1", (16, 32), 6, 2, vocab=16), Probe("mqar", (16, 32), 6, 2)),
                       eval_size=8, probe=2, first_eval=2, grid_ratio=2.0,
                       model=TinyModelConfig(width=8, layers=1, heads=2))
MECH_BUDGETS = {"quick": MECH_QUICK, "full": MECH_FULL, "tiny": MECH_TINY}


def mech_config(budget: str | MechConfig, seed: int = 0, activation: str = "") -> MechConfig:
    """The budget's config with the study ``seed`` and an optional expression arm."""
    if isinstance(budget, MechConfig):
        cfg = budget
    elif budget in MECH_BUDGETS:
        cfg = MECH_BUDGETS[budget]
    else:
        raise InputError(f"unknown mechanism budget {budget!r}; choose quick or full")
    return replace(cfg, seed=int(seed), activation=activation or cfg.activation)


@dataclass(frozen=True)
class MechChunk:
    """One ensemble: (task, N, activation family) and its (arm, seed) members."""

    task: str
    N: int
    family: str
    members: tuple[tuple[str, int], ...]

    @property
    def file_name(self) -> str:
        return f"{self.task}_N{self.N}_{self.family}.json"


def _family_id(arm: Family) -> str:
    """The chunk an arm trains in: "softmax", "p<p>" or "expr" (the chunk file names and mechanism.json.gz)."""
    return f"p{arm.p}" if arm.kernel == "poly" else arm.kernel or "expr"


def plan_mech_chunks(cfg: MechConfig) -> list[MechChunk]:
    """Per (task, N): one chunk per activation family holding its arms × the probe's seeds."""
    out = []
    for pr in cfg.probes:
        for N in pr.Ns:
            fams: dict[str, list] = {}
            for a in cfg.arm_list():
                fams.setdefault(_family_id(a), []).extend(
                    (a.id, r) for r in range(pr.first_seed, pr.first_seed + pr.seeds))
            out += [MechChunk(pr.task, N, f, tuple(ms)) for f, ms in fams.items()]
    return out


def resolve_device(device: str) -> torch.device:
    """cpu, or cuda when asked and present (one clear :class:`InputError` when asked and absent)."""
    choice("device", device, ("cpu", "cuda"))
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is available to torch here (use --device cpu)")
    return torch.device(device)


# --------------------------------------------------------------------------- one chunk


def _masked_losses(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(E,) mean cross-entropy over each member's scored positions: logits (E, B, N, V), y (E, B, N) (−100 not scored)."""
    E, V = logits.shape[0], logits.shape[-1]
    ce = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), reduction="none", ignore_index=MD.IGNORE)
    scored = (y != MD.IGNORE).reshape(E, -1).sum(1).clamp(min=1)
    return ce.reshape(E, -1).sum(1) / scored


def offset_profile(P: torch.Tensor, bins: int = OFFSETS) -> torch.Tensor:
    """Share of Σ|P_ij| on offsets i − j = 0 … bins − 1 and ≥ bins: P (E, ..., N, N) causal → (E, bins + 1).

    >>> offset_profile(torch.eye(4)[None], 2)  # all mass on the diagonal
    tensor([[1., 0., 0.]], dtype=torch.float64)
    """
    N = P.shape[-1]
    i = torch.arange(N, device=P.device)  # everything on P's device (--device cuda): only the result is copied back
    off = (i[:, None] - i[None, :]).clamp(min=0)  # (N, N); j > i (masked, 0 mass) counted at offset 0
    idx = off.clamp(max=bins).reshape(-1)  # (N²,)
    A = P.detach().abs().to(torch.float64).reshape(P.shape[0], -1, N * N).sum(1)  # (E, N²)
    mass = torch.zeros(P.shape[0], bins + 1, dtype=torch.float64, device=P.device).index_add_(1, idx, A)
    return mass / mass.sum(1, keepdim=True).clamp(min=1e-300)


def _probe(prm, spec: EnsembleSpec, rowc, x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Layer 1's offset profile (E, OFFSETS + 1) and mean ‖φ(S)‖_F (E,) on the probe batch x (P, N), float64."""
    E = next(iter(prm.values())).shape[0]
    X = attention_inputs(prm, x.expand(E, *x.shape), spec, rowc)[0].to(torch.float64)  # (E, P, N, D)
    W = head_Ws(prm, 0, spec)  # (E, H, D, D)
    S = torch.einsum("epnd,ehdf,epmf->ephnm", X, W, X)  # (E, P, H, N, N) = X W_h Xᵀ
    rc = None if rowc is None else rowc.to(torch.float64)
    with torch.no_grad():
        P = phi(S, spec, rc)
    fro = torch.linalg.matrix_norm(P).reshape(E, -1).mean(1)  # (E,)
    prof = offset_profile(P)
    bad = ~torch.isfinite(P.reshape(E, -1)).all(1)
    prof[bad] = math.nan
    fro[bad] = math.inf
    return prof.cpu().numpy(), fro.cpu().numpy()


def train_step(prm: dict, st: AdamWState, x: torch.Tensor, y: torch.Tensor, alive: torch.Tensor, lr: torch.Tensor,
               spec: EnsembleSpec, rowc: torch.Tensor | None, clip: float) -> None:
    """One AdamW step of every member on its batch x, y (E, B, N), in place; a member whose loss is not finite stops.

    ``alive`` (E,) bool is updated in place; ``lr`` (E,) is each member's learning rate at this step. Every tensor
    stays on the parameters' device.
    """
    L = _masked_losses(ensemble_forward(prm, x, spec, rowc), y)
    alive &= torch.isfinite(L)
    total = torch.where(alive, L, torch.zeros_like(L)).sum()
    names = list(prm)
    grads = dict(zip(names, torch.autograd.grad(total, [prm[k] for k in names])))
    zero = torch.zeros((), dtype=L.dtype, device=L.device)
    for g in grads.values():
        g.copy_(torch.where(alive.reshape(-1, *([1] * (g.ndim - 1))), g, zero))
    clip_per_member(grads, clip)
    adamw_step(prm, grads, st, lr * alive.to(torch.float32))


def train_mechanism_chunk(chunk: MechChunk, cfg: MechConfig, device: str = "cpu") -> dict:
    """Train one chunk; return {"steps", "members", "stopped" (E,), "val_acc" (K, E), "val_loss", "profile" (K, E,
    bins), "attn_fro"}, None where a member had stopped (solved or diverged) before an evaluation."""
    t0, c0 = time.perf_counter(), time.process_time()
    with one_thread():
        out = _train(chunk, cfg, resolve_device(device))
    out["wall_s"], out["cpu_s"] = round(time.perf_counter() - t0, 3), round(time.process_time() - c0, 3)
    return out


def _train(chunk: MechChunk, cfg: MechConfig, dev: torch.device) -> dict:
    """Train the chunk's members together; a member leaves the ensemble at its first evaluation with accuracy ≥
    ``cfg.stop_at`` (or when it diverges), so the cap costs only the members that have not solved the task.

    A member's numbers do not depend on which others are still training (every product is per member); its
    evaluations after it stopped are None.
    """
    task, N = chunk.task, chunk.N
    pr = cfg.plan(task)
    V = pr.vocab
    arms = {a.id: a for a in cfg.arm_list()}
    mem = [arms[a] for a, _ in chunk.members]
    spec = EnsembleSpec("text", N, cfg.model_of(task), mem[0], vocab=V, classes=V)
    E = len(chunk.members)
    seeds = sorted({r for _, r in chunk.members})
    prm = stack_members(spec, [torch_gen_for(cfg.seed, "mech", task, N, r, "init") for _, r in chunk.members])
    prm = {k: v.detach().to(dev).requires_grad_(True) for k, v in prm.items()}
    rc = [member_scales(a, N) for a in mem]
    rowc = None if rc[0] is None else torch.stack(rc).to(dev)  # (E, N)
    gens = {r: torch_gen_for(cfg.seed, "mech", task, N, r, "data") for r in seeds}
    who = torch.tensor([seeds.index(r) for _, r in chunk.members])
    n_val = cfg.eval_size * (4 if task == "induction" else 1)  # one scored token per sequence: 4× the sequences
    xv, yv = MD.batch(task, n_val, N, V, torch_gen_for(cfg.seed, "mech", task, N, "val"))
    xv, yv = xv.to(dev), yv.to(dev)
    probe = xv[:cfg.probe]
    st = AdamWState.zeros(prm)
    evals = cfg.eval_steps(task)
    K = len(evals)
    rec = {"val_acc": np.full((K, E), np.nan), "val_loss": np.full((K, E), np.nan),
           "profile": np.full((K, E, OFFSETS + 1), np.nan), "attn_fro": np.full((K, E), np.nan)}
    active = np.arange(E)  # members still training (positions in chunk.members)
    stopped = [None] * E  # the step at which each member left the ensemble

    def record(k: int) -> np.ndarray:
        """Evaluate the active members at evaluation k; return the mask of those that stop here."""
        e = len(active)
        with torch.no_grad():
            logits = ensemble_forward(prm, xv.expand(e, *xv.shape), spec, rowc)  # (e, M, N, V)
            ys = yv.expand(e, *yv.shape)
            loss = _masked_losses(logits, ys)
            keep = ys != MD.IGNORE
            hit = ((logits.argmax(-1) == ys) & keep).reshape(e, -1).sum(1).double()
            acc = hit / keep.reshape(e, -1).sum(1).clamp(min=1)
        prof, fro = _probe(prm, spec, rowc, probe)
        loss = loss.double().cpu().numpy()
        acc = np.where(np.isfinite(loss), acc.cpu().numpy(), MD.chance(task, V))  # a diverged member at chance
        acc = np.round(acc, 6)  # as stored: the stop and every exit read the same number
        rec["val_acc"][k, active], rec["val_loss"][k, active] = acc, loss
        rec["profile"][k, active], rec["attn_fro"][k, active] = prof, fro
        return (acc >= cfg.stop_at) | ~np.isfinite(loss)

    def drop(done: np.ndarray, step: int) -> None:
        """Remove the members flagged ``done`` from the ensemble (parameters, moments, row scales, data rows)."""
        nonlocal prm, rowc, active, who, alive
        if not done.any():
            return
        for e in active[done]:
            stopped[e] = step
        keep = torch.from_numpy(np.nonzero(~done)[0])
        active = active[~done]
        if not len(active):
            return
        kd = keep.to(dev)
        prm = {k: v.detach()[kd].requires_grad_(True) for k, v in prm.items()}
        for moments in (st.exp_avg, st.exp_avg_sq):
            for k in moments:
                moments[k] = moments[k][kd]
        rowc = None if rowc is None else rowc[kd]
        who, alive = who[keep], alive[kd]

    alive = torch.ones(E, dtype=torch.bool, device=dev)
    drop(record(0), 0)
    for step in range(1, pr.steps + 1):
        if not len(active):
            break
        xb, yb = zip(*(MD.batch(task, pr.batch, N, V, gens[r]) for r in seeds))  # every stream advances every step
        x, y = torch.stack(xb)[who].to(dev), torch.stack(yb)[who].to(dev)  # (e, B, N)
        lr = torch.full((len(active),), cfg.lr_of(task) * min(1.0, step / cfg.warmup), dtype=torch.float32,
                        device=dev)
        train_step(prm, st, x, y, alive, lr, spec, rowc, cfg.clip)
        if step in evals:
            drop(record(evals.index(step)), step)

    def j(a: np.ndarray) -> list:  # NaN (not evaluated: the member had stopped) → None
        return np.where(np.isnan(a), None, np.round(a, 6)).tolist()

    big = lambda a: np.where(np.isinf(a), 1e300, a)  # noqa: E731 - a diverged value, JSON-safe
    return {"steps": list(evals), "members": [list(m) for m in chunk.members], "stopped": stopped,
            "val_acc": j(rec["val_acc"]), "val_loss": j(big(rec["val_loss"])), "profile": j(rec["profile"]),
            "attn_fro": np.where(np.isnan(rec["attn_fro"]), None, big(rec["attn_fro"])).tolist(),
            "chance": MD.chance(task, V), "device": str(dev)}


# --------------------------------------------------------------------------- the study


def _stored(path: Path, chash: str) -> dict | None:
    """A chunk's stored result when ``path`` is a regular, bounded, sealed file of chunk hash ``chash``; else None.

    An edited or damaged file (its sha256 does not match) is trained again, with one warning line.
    """
    import json

    from sapa.common.integrity import CorruptResult, check_record, warn_recompute
    from sapa.common.readfile import read_regular_text

    if not path.exists() and not path.is_symlink():
        return None
    try:
        d = json.loads(read_regular_text(path, "mechanism chunk"))
        check_record(d, path)
    except CorruptResult as exc:
        warn_recompute(exc)
        return None
    except ValueError:  # unreadable, truncated, a FIFO or a device (InputError): train it again
        return None
    ok = isinstance(d, dict) and d.get("config_hash") == chash and isinstance(d.get("result"), dict)
    return split_run_metadata(d["result"])[0] if ok else None  # a file written before the sidecar had its timings


def start_mechanisms(cfg: MechConfig, out: str | Path, ex: cf.Executor | None = None, device: str = "cpu",
                     on_chunk=None, on_stored=None):
    """Submit the chunks of ``cfg`` not yet stored in ``out/mechanism`` to ``ex`` now; return ``finish()``.

    ``finish()`` trains the rest here when there is no executor, writes each result atomically as it
    arrives (``on_chunk(chunk)`` after each) and returns {"config", "config_hash", "chunks", "results"}.
    ``on_stored(chunks)``: called once, before any training, with the chunks already stored (a resumed run), so a
    progress bar can count them as done without crediting them to this run's speed.
    ``ex``: any ``concurrent.futures.Executor`` (a process pool, or the Dask executor of
    :func:`sapa.empirics.montecarlo.distributed.executor_for`); the numbers do not depend on it.
    """
    d = Path(out) / "mechanism"
    try:
        make_dirs(d)  # never through a link planted below --out
    except OSError as exc:
        raise InputError(f"cannot create the results directory {d}: {exc.strerror or exc}") from None
    chunks = plan_mech_chunks(cfg)
    res = {c.file_name: _stored(d / c.file_name, cfg.chunk_hash(c.task)) for c in chunks}
    todo = [c for c in chunks if res[c.file_name] is None]
    if on_stored is not None:
        on_stored([c for c in chunks if res[c.file_name] is not None])
    todo.sort(key=lambda c: -c.N * len(c.members))
    written = threading.Condition()

    def store(c: MechChunk, r: dict) -> None:
        r, timing = split_run_metadata(r)  # the timings go beside the sealed result: reruns stay byte-identical
        write_sealed_json(d / c.file_name, {"config_hash": cfg.chunk_hash(c.task), "chunk": asdict(c), "result": r},
                          timing)
        with written:
            res[c.file_name] = r
            if on_chunk is not None:
                on_chunk(c)
            written.notify_all()

    def stored_when_done(c: MechChunk):
        def cb(fut: cf.Future) -> None:  # runs as the chunk finishes: a killed run keeps it on disk
            if not fut.cancelled() and fut.exception() is None:
                store(c, fut.result())
        return cb

    futs = {}
    for c in todo if ex is not None else ():
        fut = ex.submit(train_mechanism_chunk, c, cfg, device)
        futs[fut] = c
        fut.add_done_callback(stored_when_done(c))

    def finish() -> dict:
        try:
            if futs:
                for fut in cf.as_completed(futs):
                    fut.result()  # raises a chunk's error here; its result was stored by the callback
            else:
                for c in todo:
                    store(c, train_mechanism_chunk(c, cfg, device))
        except BaseException:
            for f in futs:
                f.cancel()
            raise
        with written:  # a finished future's callback may still be writing its file
            if not written.wait_for(lambda: all(res[c.file_name] is not None for c in chunks), timeout=120):
                raise RuntimeError("mechanism chunks finished but their results were not stored: "
                                   + ", ".join(c.file_name for c in chunks if res[c.file_name] is None))
        return {"config": asdict(cfg), "config_hash": cfg.hash(), "chunks": [asdict(c) for c in chunks],
                "results": [res[c.file_name] for c in chunks]}

    return finish


def run_mechanisms(cfg: MechConfig, out: str | Path, ex: cf.Executor | None = None, device: str = "cpu",
                   on_chunk=None, on_stored=None) -> dict:
    """Train (or resume) every chunk of ``cfg`` into ``out/mechanism``; return {"config", …, "results"}."""
    return start_mechanisms(cfg, out, ex, device, on_chunk, on_stored)()
