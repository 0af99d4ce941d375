"""acc_e(t) on copy / induction / MQAR across N, every arm as an ensemble member: do x^p/√N's mechanisms form later as N grows?

The mechanism study (tasks: :mod:`empirics.training.mechanism_data`). Per (task, N) one
causal model shape (:class:`empirics.training.tiny_models.TinyModelConfig`), every arm × seed trained
as vectorised ensembles (:mod:`empirics.training.ensemble`, one chunk per activation family), with:

* the same initial weights and minibatch stream for every arm at replicate r (paired), one peak
  learning rate for every arm, linear warm-up and then a **constant** rate — so a curve does not
  depend on the step cap, and a longer cap only extends it;
* evaluation at :func:`empirics.training.learning_curves.log_eval_steps`: validation accuracy and loss
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

from common.atomic import atomic_write_json
from common.integrity import seal_record
from common.pool import one_thread
from common.validate import InputError, choice, positive_int
from common.seeds import stable_hash, torch_gen_for
from empirics.training import mechanism_data as MD
from empirics.training.ensemble import (AdamWState, EnsembleSpec, Family, adamw_step, attention_inputs,
                                        clip_per_member, ensemble_forward, head_Ws, phi, stack_members)
from empirics.training.learning_curves import log_eval_steps
from empirics.training.tiny_models import TinyModelConfig

__all__ = ["MechArm", "MECH_ARMS", "MechConfig", "MECH_BUDGETS", "mech_config", "MechChunk", "plan_mech_chunks",
           "train_mechanism_chunk", "run_mechanisms", "start_mechanisms", "OFFSETS", "SOLVED", "expr_arm", "resolve_device"]

SCHEMA = 2
OFFSETS = 8  # profile bins: offsets 0 … 7 and "8 or more"
SOLVED = 0.9  # a task is solved at the first evaluation with validation accuracy ≥ 0.9


@dataclass(frozen=True)
class MechArm:
    """An arm: softmax, r·S^p with r = 1/√N (scale "inv_sqrt_n"), or φ(x, N, i) from text (scale "expr")."""

    name: str
    family: Family
    scale: str  # "softmax" | "inv_sqrt_n" | "expr"
    label: str

    def row_coefficients(self, N: int) -> torch.Tensor | None:
        """(N,) float32 r_i of a power arm, None otherwise."""
        return torch.full((N,), 1 / math.sqrt(N), dtype=torch.float32) if self.scale == "inv_sqrt_n" else None


MECH_ARMS = {"softmax": MechArm("softmax", Family("softmax"), "softmax", "softmax"),
             "x_sqrtN": MechArm("x_sqrtN", Family("poly", 1), "inv_sqrt_n", "x/√N"),
             "x3_sqrtN": MechArm("x3_sqrtN", Family("poly", 3), "inv_sqrt_n", "x³/√N")}


def expr_arm(text: str) -> MechArm:
    """The arm of an activation expression (parsed and translated now: one clear error if it cannot train)."""
    return MechArm("expr", Family("expr", expr=text), "expr", f"φ = {text}")


@dataclass(frozen=True)
class MechConfig:
    """The mechanism study: tasks, N grid, step cap, batch, lr, seeds, model, arms (and an expression)."""

    name: str
    tasks: tuple[str, ...] = MD.TASKS
    Ns: tuple[int, ...] = (16, 32, 64)
    steps: int = 2400  # the step cap
    batch: int = 16  # sequences per step
    lr: float = 3e-3  # peak learning rate of every arm (warm-up, then constant)
    warmup: int = 20
    seeds: int = 3
    vocab: int = 16
    model: TinyModelConfig = field(default_factory=lambda: TinyModelConfig(width=32, layers=2, heads=1))
    arms: tuple[str, ...] = ("softmax", "x_sqrtN", "x3_sqrtN")
    activation: str = ""  # φ(x, N, i) text: an extra arm "expr"
    points: int = 14  # log-spaced evaluations after step 0
    eval_size: int = 128
    probe: int = 8
    clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for t in self.tasks:
            for N in self.Ns:
                MD.check_task(t, N, self.vocab)
        for a in self.arms:
            choice("mechanism arm", a, tuple(MECH_ARMS))
        for k in ("steps", "batch", "seeds", "points", "eval_size", "probe"):
            positive_int(k, getattr(self, k))
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise InputError(f"the learning rate must be positive and finite, got {self.lr}")
        if list(self.Ns) != sorted(set(self.Ns)):
            raise InputError(f"the N grid must be increasing, got {self.Ns}")

    def arm_list(self) -> list[MechArm]:
        return [MECH_ARMS[a] for a in self.arms] + ([expr_arm(self.activation)] if self.activation else [])

    def eval_steps(self) -> tuple[int, ...]:
        return log_eval_steps(self.steps, self.points)

    def hash(self) -> str:
        return stable_hash({"schema": SCHEMA, **asdict(self)})


# Quick: the copy tasks at N = 16, 32, 2 seeds, a 300-step cap (≈ 45 CPU-s; the cap censors slow arms: said so in the
# output). Induction and MQAR are full-budget only: at a 300-step cap the induction runs were censored for every arm,
# softmax included, and no arm solved MQAR — 49 CPU-s of a smoke test that could decide nothing.
MECH_QUICK = MechConfig(name="quick", tasks=("copy1", "copy2"), Ns=(16, 32), steps=300, seeds=2, points=12,
                        eval_size=256)
# Full: N = 16 … 64, 3 seeds, a 3000-step cap (the independent runs: every arm solves copy by 2400 steps at N = 64).
MECH_FULL = MechConfig(name="full", Ns=(16, 32, 64), steps=3000, seeds=3, points=16, eval_size=256)
MECH_TINY = MechConfig(name="tiny", tasks=("copy1", "mqar"), Ns=(16, 32), steps=6, seeds=2, points=3, eval_size=8,
                       probe=2, model=TinyModelConfig(width=8, layers=1, heads=2))
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


def _family_id(arm: MechArm) -> str:
    return arm.family.kind if arm.family.kind != "poly" else f"p{arm.family.p}"


def plan_mech_chunks(cfg: MechConfig) -> list[MechChunk]:
    """Per (task, N): one chunk per activation family holding its arms × seeds."""
    out = []
    for task in cfg.tasks:
        for N in cfg.Ns:
            fams: dict[str, list] = {}
            for a in cfg.arm_list():
                fams.setdefault(_family_id(a), []).extend((a.name, r) for r in range(cfg.seeds))
            out += [MechChunk(task, N, f, tuple(ms)) for f, ms in fams.items()]
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
    """Train one chunk; return {"steps", "members", "val_acc" (K, E), "val_loss", "profile" (K, E, bins), "attn_fro"}."""
    t0, c0 = time.perf_counter(), time.process_time()
    with one_thread():
        out = _train(chunk, cfg, resolve_device(device))
    out["wall_s"], out["cpu_s"] = round(time.perf_counter() - t0, 3), round(time.process_time() - c0, 3)
    return out


def _train(chunk: MechChunk, cfg: MechConfig, dev: torch.device) -> dict:
    task, N, V = chunk.task, chunk.N, cfg.vocab
    arms = {a.name: a for a in cfg.arm_list()}
    mem = [arms[a] for a, _ in chunk.members]
    spec = EnsembleSpec("text", N, cfg.model, mem[0].family, vocab=V, classes=V)
    E = len(chunk.members)
    seeds = sorted({r for _, r in chunk.members})
    prm = stack_members(spec, [torch_gen_for(cfg.seed, "mech", task, N, r, "init") for _, r in chunk.members])
    prm = {k: v.detach().to(dev).requires_grad_(True) for k, v in prm.items()}
    rc = [a.row_coefficients(N) for a in mem]
    rowc = None if rc[0] is None else torch.stack(rc).to(dev)  # (E, N)
    gens = {r: torch_gen_for(cfg.seed, "mech", task, N, r, "data") for r in seeds}
    who = torch.tensor([seeds.index(r) for _, r in chunk.members])
    n_val = cfg.eval_size * (4 if task == "induction" else 1)  # one scored token per sequence: 4× the sequences
    xv, yv = MD.batch(task, n_val, N, V, torch_gen_for(cfg.seed, "mech", task, N, "val"))
    xv, yv = xv.to(dev), yv.to(dev)
    probe = xv[:cfg.probe]
    st = AdamWState.zeros(prm)
    evals = cfg.eval_steps()
    rec = {"val_acc": [], "val_loss": [], "profile": [], "attn_fro": []}

    def record() -> None:
        with torch.no_grad():
            logits = ensemble_forward(prm, xv.expand(E, *xv.shape), spec, rowc)  # (E, M, N, V)
            ys = yv.expand(E, *yv.shape)
            loss = _masked_losses(logits, ys)
            keep = ys != MD.IGNORE
            hit = ((logits.argmax(-1) == ys) & keep).reshape(E, -1).sum(1).double()
            acc = hit / keep.reshape(E, -1).sum(1).clamp(min=1)
        prof, fro = _probe(prm, spec, rowc, probe)
        loss = loss.double().cpu().numpy()
        acc = np.where(np.isfinite(loss), acc.cpu().numpy(), MD.chance(task, V))  # a diverged member at chance
        rec["val_acc"].append(acc)
        rec["val_loss"].append(loss)
        rec["profile"].append(prof)
        rec["attn_fro"].append(fro)

    record()
    alive = torch.ones(E, dtype=torch.bool, device=dev)
    lr_peak = torch.full((E,), cfg.lr, dtype=torch.float32, device=dev)
    for step in range(1, cfg.steps + 1):
        xb, yb = zip(*(MD.batch(task, cfg.batch, N, V, gens[r]) for r in seeds))
        x, y = torch.stack(xb)[who].to(dev), torch.stack(yb)[who].to(dev)  # (E, B, N)
        train_step(prm, st, x, y, alive, lr_peak * min(1.0, step / cfg.warmup), spec, rowc, cfg.clip)
        if step in evals:
            record()
    j = lambda a: np.round(np.asarray(a, float), 6).tolist()  # noqa: E731
    return {"steps": list(evals), "members": [list(m) for m in chunk.members],
            "val_acc": j(rec["val_acc"]), "val_loss": j(np.where(np.isfinite(rec["val_loss"]), rec["val_loss"], 1e300)),
            "profile": j(rec["profile"]), "attn_fro": np.where(np.isfinite(rec["attn_fro"]), rec["attn_fro"], 1e300).tolist(),
            "chance": MD.chance(task, V), "device": str(dev)}


# --------------------------------------------------------------------------- the study


def _stored(path: Path, chash: str) -> dict | None:
    """A chunk's stored result when ``path`` is a regular, bounded, sealed file of config hash ``chash``; else None.

    An edited or damaged file (its sha256 does not match) is trained again, with one warning line.
    """
    import json

    from common.integrity import CorruptResult, check_record, warn_recompute
    from common.readfile import read_regular_text

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
    return d["result"] if isinstance(d, dict) and d.get("config_hash") == chash and "result" in d else None


def start_mechanisms(cfg: MechConfig, out: str | Path, ex: cf.Executor | None = None, device: str = "cpu",
                     on_chunk=None, on_stored=None):
    """Submit the chunks of ``cfg`` not yet stored in ``out/mechanism`` to ``ex`` now; return ``finish()``.

    ``finish()`` trains the rest here when there is no executor, writes each result atomically as it
    arrives (``on_chunk(chunk)`` after each) and returns {"config", "config_hash", "chunks", "results"}.
    ``on_stored(chunks)``: called once, before any training, with the chunks already stored (a resumed run), so a
    progress bar can count them as done without crediting them to this run's speed.
    ``ex``: any ``concurrent.futures.Executor`` (a process pool, or the Dask executor of
    :func:`empirics.montecarlo.distributed.executor_for`); the numbers do not depend on it.
    """
    d = Path(out) / "mechanism"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the results directory {d}: {exc.strerror or exc}") from None
    chash = cfg.hash()
    chunks = plan_mech_chunks(cfg)
    res = {c.file_name: _stored(d / c.file_name, chash) for c in chunks}
    todo = [c for c in chunks if res[c.file_name] is None]
    if on_stored is not None:
        on_stored([c for c in chunks if res[c.file_name] is not None])
    todo.sort(key=lambda c: -c.N * len(c.members))
    written = threading.Condition()

    def store(c: MechChunk, r: dict) -> None:
        atomic_write_json(d / c.file_name, seal_record({"config_hash": chash, "chunk": asdict(c), "result": r}))
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
        return {"config": asdict(cfg), "config_hash": chash, "chunks": [asdict(c) for c in chunks],
                "results": [res[c.file_name] for c in chunks]}

    return finish


def run_mechanisms(cfg: MechConfig, out: str | Path, ex: cf.Executor | None = None, device: str = "cpu",
                   on_chunk=None, on_stored=None) -> dict:
    """Train (or resume) every chunk of ``cfg`` into ``out/mechanism``; return {"config", …, "results"}."""
    return start_mechanisms(cfg, out, ex, device, on_chunk, on_stored)()
