"""ensemble_speedup = (members/s of one batched ensemble) / (members/s of one-at-a-time training), same work.

The training study (:mod:`sapa.empirics.training.train_study`) trains seeds × learning rates × scale rules of
one shape as one vectorised ensemble (:mod:`sapa.empirics.training.ensemble`). This benchmark measures what that
buys on this machine: E members of a study cell trained for S optimiser steps (i) as one ensemble
and (ii) one after the other, each as an ``nn.Module`` with ``torch.optim.AdamW`` (fused) and
``clip_grad_norm_`` — the loop the study replaced. Same model, batch, steps and thread count (one
torch thread, the study's setting). Timing: interleaved rounds, the fastest of each, so a loaded
machine cannot manufacture a ratio; it is one run on one machine: a ratio, load-dependent.
Training steps only (evaluation and norm probes are batched in the ensemble as well, so this
understates the end-to-end gain).

speedup_ceiling = 1 / loop_gemm_fraction, loop_gemm_fraction = (self CPU time of the GEMM kernels,
:data:`GEMM_OPS`, in one extra profiled round of the one-at-a-time loop) / (the loop's timed wall
time): the share of the loop's time that is arithmetic. Batching removes per-op overhead, not
arithmetic, so an ensemble that did the same products at the same GEMM rate and removed every other
cost (dispatch, Python, element-wise passes, the optimiser) would be exactly ``speedup_ceiling``
times faster: an upper bound under that assumption only (a batched GEMM can run at a better rate
than many small ones — ``loop_gemm_s_per_member`` vs ``ensemble_gemm_s_per_member`` shows the two
rates). The profiler's overhead never enters ``ensemble_speedup``. ``ensemble_gemm_fraction`` is the
same share for the ensemble: how much of its own time is already arithmetic.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from sapa.empirics.training.ensemble import AdamWState, EnsembleSpec, adamw_step, clip_per_member, ensemble_forward, member_losses
from sapa.empirics.training.ensemble import stack_members
from sapa.common.pool import one_thread
from sapa.common.seeds import torch_gen_for
from sapa.empirics.training.tiny_models import build_model
from sapa.theory.families import family

__all__ = ["GEMM_OPS", "BenchCell", "bench_training", "gemm_profile", "member_step_rates"]

# The matrix-product kernels whose *self* time is arithmetic. In torch 2.13 (CPU) the loop's profile
# shows aten::mm, aten::addmm and aten::bmm (forward and backward) and the ensemble's aten::bmm and
# aten::baddbmm. aten::_addmm_activation (addmm with a fused GELU/ReLU epilogue) exists in this build
# but does not appear in these profiles; it is listed so a build that fuses linear+activation still
# counts its GEMMs. aten::matmul and aten::linear are left out: composite ops that dispatch to the
# kernels above, their self time is dispatch overhead, not arithmetic.
GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation"})


@dataclass(frozen=True)
class BenchCell:
    """A study cell to time: task, N, the p³ family's members E, optimiser steps S, loop sample size."""

    task: str
    N: int
    members: int
    steps: int
    loop_members: int  # members timed one at a time (their mean time stands for every member)


def _cells(quick: bool) -> tuple[BenchCell, ...]:
    from sapa.empirics.training.train_study import QUICK, plan_chunks

    out = []
    for task, N in (("digits", 16), ("text", QUICK.text.Ns[0]), ("text", QUICK.text.Ns[-1])):
        E = max(len(c.members) for c in plan_chunks(QUICK, task, N, {1: 16.0, 3: 16.0}) if c.family == "p3")
        out.append(BenchCell(task, N, E, 6 if quick else 20, 2 if quick else 4))
    return tuple(out[:1]) if quick else tuple(out)




def _batches(cell: BenchCell, B: int, vocab: int, E: int):
    g = torch_gen_for(0, "train_bench", cell.task, cell.N)
    if cell.task == "digits":
        return [(torch.rand(E, B, 8, 8, generator=g), torch.randint(0, 10, (E, B), generator=g))
                for _ in range(cell.steps)]
    return [(torch.randint(0, vocab, (E, B, cell.N), generator=g), torch.randint(0, vocab, (E, B, cell.N), generator=g))
            for _ in range(cell.steps)]


def _time_ensemble(cell: BenchCell, spec: EnsembleSpec, data, B: int) -> float:
    prm = stack_members(spec, [torch_gen_for(0, "train_bench", e) for e in range(cell.members)])
    st = AdamWState.zeros(prm)
    rowc = torch.full((cell.members, cell.N), 1 / math.sqrt(cell.N))
    lr = torch.full((cell.members,), 1e-3)
    names = list(prm)
    t0 = time.perf_counter()
    for x, y in data:
        L = member_losses(ensemble_forward(prm, x, spec, rowc), y)
        grads = dict(zip(names, torch.autograd.grad(L.sum(), [prm[k] for k in names])))
        clip_per_member(grads, 1.0)
        adamw_step(prm, grads, st, lr)
    return time.perf_counter() - t0


def _time_loop(cell: BenchCell, spec: EnsembleSpec, data, vocab: int) -> float:
    """Seconds for ``loop_members`` members trained one after the other (nn.Module, fused AdamW, clipping)."""
    arm = family("x3_sqrtN")
    t0 = time.perf_counter()
    for e in range(cell.loop_members):
        m = build_model(cell.task, arm, spec.model, torch_gen_for(0, "train_bench", e), vocab=vocab, context=cell.N,
                        patch=spec.patch if cell.task == "digits" else 2)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95), fused=True)
        for x, y in data:
            out = m(x[e])
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y[e].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0, foreach=True)
            opt.step()
    return time.perf_counter() - t0


def gemm_profile(run: Callable[[], object]) -> tuple[float, float]:
    """(GEMM self s, all-ops self s) of one call of ``run`` under the CPU profiler; GEMM = :data:`GEMM_OPS`."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    events = prof.key_averages()
    gemm_us = sum(e.self_cpu_time_total for e in events if e.key in GEMM_OPS)
    return gemm_us / 1e6, events.self_cpu_time_total / 1e6


def _ceiling_fields(loop_gemm: float, loop_s: float, ens_gemm: float, ens_s: float, cell: BenchCell) -> dict:
    """speedup_ceiling = loop_s / loop_gemm: GEMM seconds (profiled) against the timed seconds of the same work."""
    frac = loop_gemm / loop_s
    return {"loop_gemm_fraction": frac, "speedup_ceiling": 1 / frac if frac > 0 else math.inf,
            "ensemble_gemm_fraction": ens_gemm / ens_s,
            "loop_gemm_s_per_member": loop_gemm / cell.loop_members,
            "ensemble_gemm_s_per_member": ens_gemm / cell.members}


def bench_training(quick: bool = False, rounds: int = 3) -> dict:
    """{"ensemble_speedup": ratio at the quick study's smallest cell, "speedup_ceiling": 1 / its loop's GEMM
    fraction, "cells": [per cell: members/s both ways, GEMM fractions, ceiling]}.

    The profiled rounds (one loop, one ensemble per cell, after the timed ones) are not timed for the
    speedup. Quick mode profiles its own short cell (2 members × 6 steps one at a time).
    """
    from sapa.empirics.training.train_study import QUICK

    rows = []
    with one_thread():
        for cell in _cells(quick):
            vocab = 96 if cell.task == "text" else 0
            spec = EnsembleSpec(cell.task, cell.N, QUICK.model, family("x3_sqrtN"), vocab=vocab,
                                classes=vocab or 10)
            B = QUICK.plan(cell.task).sequences(cell.N)
            data = _batches(cell, B, vocab, cell.members)
            ens, loop = [], []
            for _ in range(rounds):  # interleaved: both see the same machine state
                ens.append(_time_ensemble(cell, spec, data, B))
                loop.append(_time_loop(cell, spec, data, vocab))
            ens_rate = cell.members / min(ens)  # members per second
            loop_rate = cell.loop_members / min(loop)
            loop_gemm, _ = gemm_profile(partial(_time_loop, cell, spec, data, vocab))
            ens_gemm, _ = gemm_profile(partial(_time_ensemble, cell, spec, data, B))
            ceiling = _ceiling_fields(loop_gemm, min(loop), ens_gemm, min(ens), cell)
            rows.append({"task": cell.task, "N": cell.N, "members": cell.members, "steps": cell.steps, "batch": B,
                         "width": QUICK.model.width, "ensemble_members_per_s": ens_rate,
                         "loop_members_per_s": loop_rate, "speedup": ens_rate / loop_rate,
                         "ensemble_s": min(ens), "loop_s_per_member": min(loop) / cell.loop_members, **ceiling})
        rates = member_step_rates((16, 32) if quick else (16, 32, 64, 128), steps=4 if quick else 8, rounds=rounds)
    return {"ensemble_speedup": rows[0]["speedup"], "speedup_ceiling": rows[0]["speedup_ceiling"], "cells": rows,
            "member_steps_per_s": rates,
            "threads": 1, "rounds": rounds,
            "note": "one run, load-dependent: ratios of the fastest of interleaved rounds; training steps only; "
                    "float32; members/s at S steps each. speedup_ceiling = 1/loop_gemm_fraction (GEMM self CPU time of "
                    "one extra profiled loop round / the loop's timed seconds; not in the speedup): an upper bound "
                    "only if the ensemble did the same arithmetic at the same GEMM rate and removed all other cost"}


def member_step_rates(Ns=(16, 32, 64, 128), members: int = 6, steps: int = 8, rounds: int = 3,
                      vocab: int = 96) -> list[dict]:
    """Member-steps per second (E·S / fastest of ``rounds``) of a causal ensemble at each N: the study's text shape.

    Width, depth and heads of the quick study, 16 windows per step, the x³ family; the causal char model
    with ``vocab`` tokens (the mechanism tasks' 16 cost the same to within the embedding). These are the
    rates the full budget's time estimate multiplies (docs/training.md). One torch thread.
    """
    from sapa.empirics.training.train_study import QUICK

    out = []
    with one_thread():
        for N in Ns:
            cell = BenchCell("text", N, members, steps, 1)
            spec = EnsembleSpec("text", N, QUICK.model, family("x3_sqrtN"), vocab=vocab, classes=vocab)
            data = _batches(cell, 16, vocab, members)
            best = min(_time_ensemble(cell, spec, data, 16) for _ in range(rounds))
            out.append({"task": "text", "N": N, "members": members, "steps": steps, "batch": 16,
                        "member_steps_per_s": members * steps / best, "ms_per_member_step": 1e3 * best / (members * steps)})
    return out
