"""Train one ensemble chunk of the study: data, the step loop, evaluations and exact float64 norm probes.

``train_chunk(chunk, cfg)`` is a pure function of its arguments (one torch thread, deterministic
algorithms, generators from :func:`sapa.common.seeds.torch_gen_for`), except its timing fields: the
same chunk gives the same numbers serially, in a worker, or in another order.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import torch

from sapa.common.validate import InputError
from sapa.empirics.training.ensemble import (AdamWState, EnsembleSpec, adamw_step, attention_inputs, clip_per_member,
                               ensemble_forward, head_Ws, member_losses, stack_members)
from sapa.empirics.kernels.norms import NormOverflowError, attention_norms_batched
from sapa.common.pool import one_thread
from sapa.common.seeds import torch_gen_for
from sapa.empirics.training.study_config import (MEMORY_BYTES, NORMS, VAL_FRACTION, Chunk, StudyConfig, TaskPlan, arm_of,
                                                arm_p, row_coefficients)
from sapa.theory.families import TEMPERATURE, power, softmax
from sapa.empirics.training.train_data import load_digits, load_text, text_probe

__all__ = ["train_chunk", "lr_factor"]


def text_validation(train: torch.Tensor, N: int, M: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(stream, val_x, val_y): the training text's first 1 − VAL_FRACTION (the only source of training windows) and
    M validation windows of N + 1 characters evenly spaced over the rest — the split every text curve is read on."""
    cut = int(len(train) * (1 - VAL_FRACTION))
    stream, tail = train[:cut], train[cut:]
    if len(tail) < N + 2:
        raise InputError(f"the validation text is shorter than context {N}")
    starts = torch.linspace(0, len(tail) - N - 1, M).round().long()
    win = torch.stack([tail[s:s + N + 1] for s in starts.tolist()])  # (M, N + 1)
    return stream, win[:, :-1], win[:, 1:]


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
            self.stream, val_x, val_y = text_validation(t.train, N, plan.eval_size)  # training windows: stream only
            self.val = (val_x, val_y)
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


def lr_factor(step: int, plan: TaskPlan) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay from 1 to 0.1 at ``steps`` (step counts from 0)."""
    if step < plan.warmup:
        return (step + 1) / plan.warmup
    frac = (step - plan.warmup) / max(1, plan.steps - plan.warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))


# --------------------------------------------------------------------------- one chunk


def _eval_batch(cfg: StudyConfig, data: _Data, E: int) -> int:
    """Evaluation sequences per forward: the training batch B, fewer if E members would exceed the memory budget.

    A step's tensor sizes reuse the step's memory and stay in cache: one forward over the whole 408-image test set
    (E = 8, N = 64) ran its products 3–10× slower per flop than a step, and a quick digits chunk's evaluations took
    7.3 CPU-s of 26 at once, 4.4 in slices. A sequence's loss does not depend on the slicing (tested).
    """
    per_seq = 4.0 * cfg.model.layers * (3 * cfg.model.heads * data.N ** 2 + 8 * data.N * cfg.model.width)
    return max(1, min(data.B, int(MEMORY_BYTES / 2 // (per_seq * E))))


def _evaluate(prm, spec, rowc, data: _Data, xy, E: int, cfg: StudyConfig) -> tuple[np.ndarray, np.ndarray]:
    """(E,) mean loss and accuracy of every member on (x, y), in slices of at most the training batch (_eval_batch)."""
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
    if spec.family.kernel is None:
        return _probe_norms_expr(prm, spec, data, live, out)
    P = data.probe.shape[0]
    xs = attention_inputs(prm, data.probe.expand(E, *data.probe.shape), spec, rowc)  # per layer (E, P, N, D)
    act = softmax() if spec.family.kernel == "softmax" else power(spec.family.p)  # r_i, 1/τ: the row scale, W/τ
    mask = "causal" if spec.causal else "none"
    H, N = spec.model.heads, spec.N
    acc = {q: np.zeros(E) for q in NORMS}

    def one(es: list[int], layer: int) -> dict[str, torch.Tensor]:
        X = xs[layer][es].to(torch.float64)  # (e, P, N, D)
        W = head_Ws(prm, layer, spec)[es]  # (e, H, D, D)
        Xt = X[:, None].expand(-1, H, -1, -1, -1).reshape(-1, N, X.shape[-1])  # (e·H·P, N, D)
        Wt = W[:, :, None].expand(-1, -1, P, -1, -1).reshape(-1, W.shape[-1], W.shape[-1])  # (e·H·P, D, D)
        rs, inv_tau = None, None
        if rowc is not None and spec.family.kernel == "softmax":  # softmax(X (W/τ) Xᵀ) = softmax(S/τ) exactly
            inv_tau = rowc[es, 0].to(torch.float64)[:, None, None].expand(-1, H, P).reshape(-1)  # (e·H·P,)
            Wt = Wt * inv_tau[:, None, None]
        elif rowc is not None:
            rs = rowc[es].to(torch.float64)[:, None, None, :].expand(-1, H, P, -1).reshape(-1, N)  # (e·H·P, N)
        r = attention_norms_batched(Xt, Wt, act, mask, rs, device="cpu")
        jac_s = r["jac_s_fro"] if inv_tau is None else r["jac_s_fro"] * inv_tau  # ∂φ/∂S = (1/τ)·∂softmax/∂(S/τ)
        return {"attn_fro": r["fro"], "jac_s_fro": jac_s, "jac_x_fro": r["jac_fro"]}

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


def _probe_norms_expr(prm, spec: EnsembleSpec, data: _Data, live: list[int], out: dict) -> dict[str, np.ndarray]:
    """The same means for an expression arm, head by head and probe sequence by probe sequence with the exact
    expression kernels (:func:`sapa.empirics.kernels.expr_norms.expr_norms`; float64, causal on text)."""
    from sapa.empirics.kernels.expr_norms import expr_norms, layer_from_w
    from sapa.theory.activation import parse_activation

    act = parse_activation(spec.family.expr, mask="causal" if spec.causal else "none")
    E = next(iter(prm.values())).shape[0]
    xs = attention_inputs(prm, data.probe.expand(E, *data.probe.shape), spec, None)  # per layer (E, P, N, D)
    for e in live:
        acc = {q: [] for q in NORMS}
        for layer, X in enumerate(xs):
            Ws = head_Ws(prm, layer, spec)[e].to(torch.float64).numpy()  # (H, D, D)
            for x in X[e].to(torch.float64).numpy():  # (N, D) per probe sequence
                for W in Ws:
                    try:
                        r = expr_norms(x, layer_from_w(W), act)
                        v = (r.fro[0], r.jac_s_fro[0], r.jac_fro[0])
                    except (NormOverflowError, InputError):
                        v = (math.inf,) * 3
                    for q, val in zip(("attn_fro", "jac_s_fro", "jac_x_fro"), v):
                        acc[q].append(val)
        for q in NORMS:  # per layer: mean over heads and probes; then the mean over layers, as the batched path
            per_layer = np.asarray(acc[q], float).reshape(len(xs), -1).mean(axis=1)
            out[q][e] = float(per_layer.mean())
    return out


class _BestSnapshot:
    """Each member's weights at its best validation accuracy after step 0 (ties: the earliest, as ``np.argmax``).

    The held-out test split is then evaluated twice per chunk — on the final weights and on these —
    instead of at every evaluation point.
    """

    def __init__(self) -> None:
        self.prm: dict[str, torch.Tensor] = {}
        self.acc: np.ndarray | None = None

    def update(self, prm: dict[str, torch.Tensor], acc: np.ndarray) -> None:
        """Keep member e's current weights where ``acc[e]`` (E,) beats its best so far (always at the first call)."""
        if self.acc is None:
            self.prm = {k: v.detach().clone() for k, v in prm.items()}
            self.acc = acc.copy()
            return
        better = acc > self.acc
        if better.any():
            sel = torch.from_numpy(better)
            for k, v in prm.items():
                self.prm[k][sel] = v.detach()[sel]
            self.acc = np.where(better, acc, self.acc)


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
    arms = [arm_of(m.arm) for m in chunk.members]
    spec = EnsembleSpec(task, N, cfg.model, arms[0], vocab=data.vocab, classes=data.classes)
    E = len(chunk.members)
    gens = [torch_gen_for(cfg.seed, "study", task, N, m.seed, "init") for m in chunk.members]
    prm = stack_members(spec, gens)
    tempered = any(a.rule == TEMPERATURE for a in arms)  # softmax(S/τ): rowc holds 1/τ (None: τ = 1 for all)
    rowc = None if spec.family.kernel is None or (spec.family.kernel == "softmax" and not tempered) else torch.stack(
        [row_coefficients(a, N, m.alpha) for a, m in zip(arms, chunk.members)])  # (E, N)
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
    rec = {"val_loss": [], "val_acc": [], "step": []}
    norms_init: dict[str, np.ndarray] = {}
    norms_last: dict[str, np.ndarray] = {}
    best = _BestSnapshot()

    def record(step: int) -> None:
        nonlocal n_acc, loss_acc, gn_acc
        vl, va = _evaluate(prm, spec, rowc, data, data.val, E, cfg)
        nm = _probe_norms(prm, spec, rowc, data, alive)
        for k, v in (("val_loss", vl), ("val_acc", va)):
            rec[k].append(v)
        rec["step"].append(step)
        if step > 0:
            best.update(prm, np.where(np.isfinite(vl), va, -np.inf))
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
        adamw_step(prm, grads, st, lr_peak * lr_factor(step - 1, plan) * keep, betas=cfg.betas,
                   weight_decay=cfg.weight_decay)
        a = alive.numpy()
        loss_acc[a] += L.detach().double().numpy()[a]
        gn_acc[a] += gn[a]
        gn_max[a] = np.maximum(gn_max[a], gn[a])
        gn_last[a] = gn[a]
        n_acc += 1
        if step in evals:
            record(step)
    rec["test_loss"], rec["test_acc"] = _evaluate(prm, spec, rowc, data, data.test, E, cfg)  # final weights
    rec["test_loss_at_best"], rec["test_acc_at_best"] = _evaluate(best.prm, spec, rowc, data, data.test, E, cfg)
    rows = _summarise(chunk, cfg, data, rec, norms_init, norms_last, alive.numpy(), diverged_step, gn_max, gn_last)
    hist = [(m.arm, m.alpha, m.lr, m.seed, step, q, v) for e, step, q, v in history
            for m in (chunk.members[e],)]
    return {"rows": rows, "history": hist}


def _summarise(chunk: Chunk, cfg, data: _Data, rec, n0, n1, alive, dstep, gmax, glast) -> list[dict]:
    """One row per member (schema of runs.parquet); a diverged member holds chance accuracy and infinite loss."""
    val_loss, val_acc = np.array(rec["val_loss"]), np.array(rec["val_acc"])  # (evals, E)
    test_loss, test_acc, test_acc_best = rec["test_loss"], rec["test_acc"], rec["test_acc_at_best"]  # (E,)
    steps = np.array(rec["step"])
    rows = []
    for e, m in enumerate(chunk.members):
        arm = arm_of(m.arm)
        start = float(val_loss[0, e])
        vl_final = float(val_loss[-1, e])
        div = (not alive[e]) or not math.isfinite(vl_final) or vl_final > start
        va = np.where(np.isfinite(val_loss[:, e]), val_acc[:, e], -np.inf)
        b = int(np.argmax(va[1:]) + 1) if len(va) > 1 else 0  # best evaluation after step 0
        row = {"task": chunk.task, "N": chunk.N, "arm": m.arm, "p": arm_p(arm), "scale": arm.rule, "alpha": m.alpha,
               "lr": m.lr, "seed": m.seed, "in_study": True, "steps": cfg.plan(chunk.task).steps,
               "diverged": bool(div), "diverged_step": int(dstep[e]) if dstep[e] >= 0 else (
                   int(steps[-1]) if div else -1),
               "loss_start": start, "chance_acc": data.chance,
               "val_acc_final": float(val_acc[-1, e]), "val_loss_final": vl_final,
               "val_acc_best": float(val_acc[b, e]), "val_loss_best": float(np.nanmin(
                   np.where(np.isfinite(val_loss[1:, e]), val_loss[1:, e], np.inf))) if len(steps) > 1 else start,
               "best_step": int(steps[b]), "test_acc": float(test_acc[e]), "test_loss": float(test_loss[e]),
               "test_acc_at_best_val": float(test_acc_best[e]),
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


