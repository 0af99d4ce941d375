"""Wall time of polynomial attention c·(QKᵀ)^{∘p}V against softmax's fused kernel (arXiv 2410.18613; the reviews ask for running times).

The paper is silent on runtime; the review asks for "an analysis of time complexity or running
times" (ledger claim ``overhead``). One attention layer, batch 1 and ``heads`` heads (default 1),
head dim d = d_v = 64, float32, forward and forward+backward, masks none and causal:

* ``softmax``    — ``torch.nn.functional.scaled_dot_product_attention`` (``is_causal`` for the mask):
                   torch's fused kernel, O(N²d) time, O(N·d) memory;
* ``naive``      — S = QKᵀ materialised, c·S^{∘p}V (``sapa.empirics.kernels.linearised._quadratic``): O(N²d), O(N²);
* ``compiled``   — ``torch.compile`` of the naive function, S^{∘p} written as S·S·…·S (dynamic shapes:
                   one compile per p, mask and grad mode; the first call, compile included, is recorded
                   apart as ``first_call_s``; its output is checked against the naive one);
                   "unavailable: <reason>" where compiling fails;
* ``linearised`` — c·φ_p(Q)(φ_p(K)ᵀV) with symmetric features, F = C(d+p−1, p), causal by blockwise
                   prefix sums (``sapa.empirics.kernels.linearised``): O(N·F·d_v) time, O(F·d_v + chunk·F) memory.

The polynomial's scale is c = 1/√N without a mask and the per-row 1/√i under the causal mask (the
scale the ``causal-masking`` check recommends); it costs N·d_v multiplies. Q, K, V are seeded
N(0, 1/√d)-entry draws (S = O(1)). Per N, every method gets one warm-up call, then ``repeats``
rounds in which the methods run in turn (interleaved, so a burst of load hits all alike); medians and
minima are reported, ratios against softmax of both (CUDA synchronised), torch threads as the caller set them. A cell is
skipped, and says why, when its estimated memory exceeds ``mem_cap_bytes`` or its time predicted
from the fastest run at the previous N of its series (∝ N² quadratic, ∝ N linearised)
exceeds ``time_cap_s`` (softmax, the baseline, is always timed). Measurements, not tests: nothing here asserts a speed.

A form key ``p`` may also be an expression (``"expr:<φ>"`` element-wise, ``"row:<ψ>"`` row-normalised; its scale is
in the expression, r is ignored): ``naive`` materialises S = QKᵀ and φ(S, N, i, j); under the causal mask φ(S) is
masked (not S: φ(0) ≠ 0 in general); ``causal_blocked`` likewise per block; ``linearised`` is skipped (no finite
feature map).
"""

from __future__ import annotations

import contextlib
import math
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from typing import Callable

import torch
import torch.nn.functional as Fn

from sapa.empirics.timing.bench import _sync, _time
from sapa.empirics.kernels.linearised import _linearised, _quadratic, crossover_flops, default_chunk, feature_dim, flops
from sapa.empirics.kernels.norms import default_device
from sapa.common.seeds import rng_for, torch_gen_for
from sapa.common.validate import InputError, choice, positive_float, positive_int

__all__ = ["OverheadGrid", "FULL", "QUICK", "bench_overhead", "rerun_cells", "time_cells", "measured_crossover",
           "crossover_table", "flat_summary", "summary_lines", "COMPLEXITY", "METHODS"]

METHODS = ("naive", "causal_blocked", "compiled", "linearised")
CLOCKS = ("process", "thread", "wall")  # the clock of a timed block: process / thread CPU time, or wall time
CUDA_CLOCK = "cuda_event"  # a CUDA device's clock, whatever the grid's: the device's time between two events on
# its stream (CUDA work does not show in the host's CPU time, and a host clock would time the launches)
MASKS = ("none", "causal")
PASSES = ("fwd", "fwd+bwd")
DTYPE = torch.float32
GIB = 2**30

COMPLEXITY = {
    "softmax": "O(N²·d) time, O(N·d) memory (fused: S never materialised)",
    "naive": "O(N²·d) time, O(N²) memory (S materialised)",
    "causal_blocked": "O(N²·d/2) time under the mask (key blocks above the diagonal skipped), O(N·block) memory",
    "compiled": "O(N²·d) time, O(N²) memory (S materialised; element-wise ops fused)",
    "linearised": "O(N·C(d+p−1,p)·d_v) time, O(C(d+p−1,p)·(d_v + chunk)) memory; causal adds O(N·chunk·d)",
}


@dataclass(frozen=True)
class OverheadGrid:
    """What :func:`bench_overhead` measures."""

    Ns: tuple[int, ...] = tuple(2**k for k in range(7, 15))  # 128 … 16384
    d: int = 64                                   # head dim (d_v = d) of the main comparison
    ps: tuple[int, ...] = (1, 2, 3)
    masks: tuple[str, ...] = MASKS
    passes: tuple[str, ...] = PASSES
    methods: tuple[str, ...] = METHODS
    heads: int = 1                                # batch 1, this many heads
    repeats: int = 5                              # timed rounds after one warm-up; the median is reported
    clock: str = "process"                        # clock of each timed block (CLOCKS); "wall" = one call per round
    block_s: float = 0.1                          # a block: as many calls as fill this many seconds of the clock
    block: int = 128                              # query/key block length of the causal_blocked form
    memory: bool = True                           # peak memory per form (torch profiler, one extra call)
    linearised_flop_cap: float = 1.5              # at the main d, time the linearisation only below this flop ratio
    crossover_ds: tuple[int, ...] = (16, 32, 64)  # naive vs linearised, forward, for the crossover table
    crossover_masks: tuple[str, ...] = MASKS
    mem_cap_bytes: int = 4 * GIB                  # skip cells whose estimated working memory exceeds this
    time_cap_s: float = 20.0                      # skip cells whose predicted seconds per call exceed this
    chunk: int | None = None                      # linearised block length (None: sapa.empirics.kernels.linearised.default_chunk)
    seed: int = 0
    replicate: int = 0                            # run k > 0 of the same cells (:func:`rerun_cells`): its own order


FULL = OverheadGrid()
# Quick: N ∈ {128, 512, 1024}, 5 blocks of ≥ 0.04 CPU-s per form and cell, no torch.compile (its cold start costs
# 20–40 s per configuration on 2 cores), the x³ linearisation (F = 45 760 at d = 64) only where it predicts < 0.05 s
# per call (the crossover table's other d keep one call per round).
QUICK = OverheadGrid(Ns=(128, 512, 1024), repeats=5, methods=("naive", "causal_blocked", "linearised"),
                     crossover_masks=("none",), time_cap_s=0.05, block_s=0.04)


# =========================================================================== the timed functions


def _inputs(N: int, d: int, heads: int, seed: int, dev: torch.device, grad: bool) -> tuple[torch.Tensor, ...]:
    """Q, K, V (1, heads, N, d) with N(0, 1/√d) entries, so S = QKᵀ = O(1); G = ∂L/∂O likewise.

    Drawn from the named stream ``torch_gen_for(seed, "overhead", N)``.
    """
    g = torch_gen_for(seed, "overhead", N)
    Q, K, V, G = (torch.randn(1, heads, N, d, generator=g, dtype=torch.float64) / d**0.25 for _ in range(4))
    Q, K, V = (x.to(dev, DTYPE).requires_grad_(grad) for x in (Q, K, V))
    return Q, K, V, G.to(dev, DTYPE)


def _poly_scale(N: int, causal: bool, dev: torch.device) -> torch.Tensor:
    """(N,) row scale: 1/√N everywhere, or 1/√i under the causal mask."""
    if causal:
        return torch.arange(1, N + 1, device=dev, dtype=DTYPE).rsqrt()
    return torch.full((N,), N**-0.5, device=dev, dtype=DTYPE)


def _naive_fn(p: int, causal: bool) -> Callable:
    def naive(Q, K, V, r):  # (…, N, d) ×3, r (N,)
        return _quadratic(Q, K, V, p, causal) * r.unsqueeze(-1)

    return naive


def _products_fn(p: int, causal: bool) -> Callable:
    """The naive function with S^{∘p} as S·S·…·S: what ``compiled`` compiles (inductor fuses the products;
    its dynamic-shape backward of ``S.pow(p)`` fails here with 'NYI SymInt equality', and a symbolic p
    would let one graph serve every p)."""
    def naive_products(Q, K, V, r):
        S = Q @ K.transpose(-1, -2)  # (…, N, d) @ (…, d, N)
        if causal:
            S = torch.tril(S)
        P = S
        for _ in range(p - 1):
            P = P * S
        return (P @ V) * r.unsqueeze(-1)

    return naive_products


def causal_blocked(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, p: int, block: int) -> torch.Tensor:
    """Σ_{j ≤ i} (q_i·k_j)^p v_j, computing only the key blocks on and below the diagonal; (…, N, d) -> (…, N, d_v).

    Query block [i0, i1) meets keys [0, i1): S_b = Q_b K_{<i1}ᵀ (…, b, i1), the entries j > i zeroed by
    tril(·, diagonal=i0) (column j, row i0 + r: kept iff j ≤ i0 + r), then S_b^{∘p} V_{<i1}. The blocks above the
    diagonal are never formed: ≈ N²/2 + N·block/2 score entries instead of N², and b × N instead of N × N memory.
    """
    N = Q.shape[-2]
    out = []
    for i0 in range(0, N, block):
        i1 = min(i0 + block, N)
        S = Q[..., i0:i1, :] @ K[..., :i1, :].transpose(-1, -2)  # (…, b, d) @ (…, d, i1) -> (…, b, i1)
        S = torch.tril(S, diagonal=i0)
        P = S if p == 1 else S.pow(p)
        out.append(P @ V[..., :i1, :])  # (…, b, i1) @ (…, i1, d_v) -> (…, b, d_v)
    return torch.cat(out, dim=-2)


def _blocked_fn(p: int, block: int) -> Callable:
    def blocked(Q, K, V, r):
        return causal_blocked(Q, K, V, p, block) * r.unsqueeze(-1)

    return blocked


def expr_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, text: str, row: bool, causal: bool,
                   block: int | None = None) -> torch.Tensor:
    """φ(QKᵀ, N, i, j) V (row: each row of φ divided by its sum), causal: φ's entries j > i zeroed after φ; ``block``:
    query blocks, keys up to the block's last row only (as :func:`causal_blocked`); (…, N, d) -> (…, N, d_v)."""
    from sapa.empirics.kernels.activation_fns import torch_activation

    f = torch_activation(text, "row" if row else "none")
    N = Q.shape[-2]
    n = torch.tensor(float(N), dtype=Q.dtype, device=Q.device)
    idx = torch.arange(1, N + 1, dtype=Q.dtype, device=Q.device)
    out = []
    for i0 in range(0, N, block or N):
        i1 = min(i0 + (block or N), N)
        k1 = i1 if (causal and block) else N
        S = Q[..., i0:i1, :] @ K[..., :k1, :].transpose(-1, -2)  # (…, b, d) @ (…, d, k1) -> (…, b, k1)
        P = f(S, n, idx[i0:i1, None], idx[None, :k1]) * torch.ones_like(S)
        if causal:
            P = torch.tril(P, diagonal=i0)
        if row:
            P = P / P.sum(dim=-1, keepdim=True)
        out.append(P @ V[..., :k1, :])  # (…, b, k1) @ (…, k1, d_v) -> (…, b, d_v)
    return torch.cat(out, dim=-2)


def _expr_fn(text: str, row: bool, causal: bool, block: int | None) -> Callable:
    def expression(Q, K, V, r):  # r unused: the expression carries its own scale
        return expr_attention(Q, K, V, text, row, causal, block)

    return expression


def _linearised_fn(p: int, causal: bool, chunk: int | None) -> Callable:
    def linearised(Q, K, V, r):
        return _linearised(Q, K, V, p, 1.0, causal, r, "sym", chunk)

    return linearised


def _softmax_fn(causal: bool) -> Callable:
    def softmax(Q, K, V, r):  # r unused: softmax normalises its rows
        return Fn.scaled_dot_product_attention(Q, K, V, is_causal=causal)

    return softmax


def _call(fn: Callable, args: tuple, G: torch.Tensor, pas: str) -> Callable[[], None]:
    Q, K, V, r = args
    if pas == "fwd":
        def run() -> None:
            with torch.no_grad():
                fn(Q, K, V, r)
    else:
        def run() -> None:
            torch.autograd.grad(fn(Q, K, V, r), (Q, K, V), G)
    return run


@contextlib.contextmanager
def _dynamo_limits(needed: bool):
    """Raise torch.compile's recompile limit (one code object serves every p and mask) and fail loudly if hit
    (the default silently falls back to eager); a no-op unless ``compiled`` is timed (importing dynamo costs seconds)."""
    if not needed:
        yield
        return
    try:
        import torch._dynamo as dynamo

        keys = {"recompile_limit": 256, "fail_on_recompile_limit_hit": True}
        cfg = {k: v for k, v in keys.items() if hasattr(dynamo.config, k)}
        with dynamo.config.patch(**cfg):
            yield
    except ImportError:
        yield


# =========================================================================== memory and time caps


def _mem_estimate(method: str, N: int, d: int, heads: int, p: int | None, pas: str, causal: bool,
                  chunk: int | None) -> int:
    """Working-memory estimate in bytes (float32) beyond the inputs: N×N matrices for the quadratic forms,
    the F-row monomials of one block and the F × d_v state for the linearised one."""
    item = 4
    if method == "softmax":
        return 8 * heads * N * d * item
    if _expr_key(p) is not None:  # an expression: the naive form's N × N matrices plus φ's own buffer
        return ((3 + causal) if pas == "fwd" else (6 + causal)) * heads * N * N * item
    if method in ("naive", "compiled"):
        mats = (2 + causal) if pas == "fwd" else (5 + causal)  # S, S^p (tril) | + saved S, dP, dS
        return mats * heads * N * N * item
    F = feature_dim(d, p, "sym")
    C = min(N, chunk or default_chunk(F, causal))
    per_block = (p + 2) * C * F + C * C  # monomials of each degree, their gradient, the block's scores
    return heads * (per_block + 4 * F * d) * item


# =========================================================================== measurement


def bench_overhead(quick: bool = False, *, device=None, progress: bool = False, grid: OverheadGrid | None = None,
                   threads: int | None = None) -> dict:
    """Seconds per call of softmax (fused), naive, compiled and linearised polynomial attention, and their ratios.

    Args:
      quick: use :data:`QUICK` (N ≤ 1024, seconds) instead of :data:`FULL` (N = 128…16384, minutes).
      device: torch device (default: CUDA when available, else CPU).
      progress: one line per cell on stderr.
      grid: an explicit :class:`OverheadGrid` (overrides ``quick``).
      threads: torch CPU threads for the run, restored afterwards (default None: as the caller set them;
        on a shared machine 1 thread gives far steadier medians than 2 contended ones).

    Returns:
      JSON-ready dict: ``rows`` [{method, p, mask, N, d, d_v, heads, pass, seconds (median),
      seconds_min, first_call_s, ratio_vs_softmax (of medians), ratio_min_vs_softmax (of the fastest
      runs), status, ...}], ``ratios`` {"method/p{p}/{mask}/{pass}@N={N}": ratio}
      at the main d, ``crossover`` [{p, d, mask, measured_crossover_N, measured_status, flop_crossover_N,
      ...}], ``complexity``, ``features``, ``compile``, ``grid``, ``provenance``, ``seconds_total``.
    """
    g = _validated(grid if grid is not None else (QUICK if quick else FULL))
    dev = default_device(device)
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(positive_int("threads", threads))
    try:
        return _bench(g, dev, progress)
    finally:
        torch.set_num_threads(before)


def _bench(g: OverheadGrid, dev: torch.device, progress: bool) -> dict:
    t0 = time.perf_counter()
    from sapa.empirics.timing.machine import RunQueueSampler, machine_state

    before = machine_state()
    compiled: dict = {}
    compile_info: dict = {}
    rows: list[dict] = []
    with _dynamo_limits("compiled" in g.methods), RunQueueSampler() as run_queue:
        for d in dict.fromkeys((g.d, *g.crossover_ds)):
            main = d == g.d
            masks = g.masks if main else g.crossover_masks
            passes = g.passes if main else ("fwd",)
            methods = g.methods if main else tuple(m for m in ("naive", "linearised") if m in g.methods)
            for mask in masks:
                for pas in passes:
                    rows += _series(g, d, mask, pas, methods, dev, compiled, compile_info, progress)
    main_rows = [r for r in rows if r["d"] == g.d]
    ratios = {f"{r['method']}/p{r['p']}/{r['mask']}/{r['pass']}@N={r['N']}": r["ratio_vs_softmax"]
              for r in main_rows if r["method"] != "softmax" and r["ratio_vs_softmax"] is not None}
    return {
        "rows": rows,
        "ratios": ratios,
        "crossover": crossover_table(rows, g),
        "complexity": COMPLEXITY,
        "features": {f"p{p}": {"sym": feature_dim(g.d, p, "sym"), "full": g.d**p} for p in g.ps
                     if _expr_key(p) is None},
        "compile": compile_info,
        "scales": {"none": "c = 1/√N", "causal": "row i times 1/√i", "softmax": "1/√d inside (SDPA default)"},
        "grid": {**asdict(g), "mem_cap_gib": g.mem_cap_bytes / GIB},
        "provenance": {**_provenance(dev), "clock": g.clock if dev.type == "cpu" else CUDA_CLOCK,
                       "machine": {**before, "load_after": machine_state()["load_before"],
                                                       "load_during": run_queue.summary()}},
        "cost_rates": _rates(g, dev),
        "seconds_total": round(time.perf_counter() - t0, 3),
    }


def _rates(g: OverheadGrid, dev: torch.device) -> dict | None:
    """This machine's rates for the cost model (CPU clock on a CPU device only; else None)."""
    if dev.type != "cpu" or g.clock == "wall":
        return None
    from sapa.empirics.timing.cost_model import machine_rates

    return asdict(machine_rates(g.seed))


def _validated(g: OverheadGrid) -> OverheadGrid:
    if not isinstance(g, OverheadGrid):
        raise InputError(f"grid must be an OverheadGrid, got {type(g).__name__}")
    Ns = tuple(positive_int("N", n) for n in g.Ns)
    if not Ns or list(Ns) != sorted(set(Ns)):
        raise InputError(f"Ns must be a non-empty increasing sequence, got {g.Ns!r}")
    for m in g.methods:
        choice("method", m, METHODS)
    for m in (*g.masks, *g.crossover_masks):
        choice("mask", m, MASKS)
    for s in g.passes:
        choice("pass", s, PASSES)
    return replace(g, Ns=Ns, d=positive_int("d", g.d), ps=tuple(_form(p) for p in g.ps),
                   heads=positive_int("heads", g.heads), repeats=positive_int("repeats", g.repeats),
                   crossover_ds=tuple(positive_int("d", x) for x in g.crossover_ds),
                   mem_cap_bytes=positive_int("mem_cap_bytes", g.mem_cap_bytes),
                   time_cap_s=positive_float("time_cap_s", g.time_cap_s),
                   chunk=None if g.chunk is None else positive_int("chunk", g.chunk), seed=int(g.seed),
                   clock=choice("clock", g.clock, CLOCKS), block_s=positive_float("block_s", g.block_s),
                   block=positive_int("block", g.block),
                   linearised_flop_cap=positive_float("linearised_flop_cap", g.linearised_flop_cap),
                   replicate=_non_negative_int("replicate", g.replicate))


def _form(p) -> int | str:
    """A form key: a degree p ≥ 1, or an expression ``"expr:<φ>"`` / ``"row:<ψ>"`` (translated now: one clear error)."""
    if isinstance(p, str) and _expr_key(p) is not None:
        from sapa.empirics.kernels.activation_fns import torch_activation

        text, row = _expr_key(p)
        torch_activation(text, "row" if row else "none")
        return p
    return positive_int("p", int(p) if isinstance(p, str) and p.isdigit() else p)


def _expr_key(p) -> tuple[str, bool] | None:
    """(text, row-normalised) of an expression form key; None for a degree."""
    if not isinstance(p, str):
        return None
    for prefix, row in (("expr:", False), ("row:", True)):
        if p.startswith(prefix) and p[len(prefix):].strip():
            return p[len(prefix):], row
    return None


def _non_negative_int(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputError(f"{name} must be an integer ≥ 0, got {v!r}")
    return v


def _series(g: OverheadGrid, d: int, mask: str, pas: str, methods: tuple[str, ...], dev: torch.device,
            compiled: dict, compile_info: dict, progress: bool) -> list[dict]:
    """Every (method, p) at every N for one (d, mask, pass), methods interleaved per N (in shuffled order per round)."""
    causal = mask == "causal"
    main = d == g.d
    keys = [("softmax", None)] + [(m, p) for p in g.ps for m in methods if causal or m != "causal_blocked"]
    # CUDA: CUDA events around each block (CUDA work does not show in CPU time); the CPU crossover table's other d:
    # one call per round on the wall clock, as before
    clock = CUDA_CLOCK if dev.type == "cuda" else (g.clock if main else "wall")
    last: dict = {}      # (method, p) -> (N, seconds) of the last measured cell
    stopped: dict = {}   # (method, p) -> why later N are not measured
    out = []
    for N in g.Ns:
        Q, K, V, G = _inputs(N, d, g.heads, g.seed, dev, pas != "fwd")
        args = (Q, K, V, _poly_scale(N, causal, dev))
        rows, runners, calls = {}, {}, {}
        for method, p in keys:  # phase 1: skip checks, compile checks, one warm-up call, the block size, the memory
            lin = method == "linearised" and _expr_key(p) is None  # an expression has no linearised form
            row = {"method": method, "p": p, "mask": mask, "N": N, "d": d, "d_v": d, "heads": g.heads, "pass": pas,
                   "seconds": None, "seconds_min": None, "first_call_s": None, "ratio_vs_softmax": None,
                   "ratio_min_vs_softmax": None, "seconds_rounds": None, "ratio_rounds": None, "wall_rounds": None,
                   "wall_ratio_rounds": None, "clock": clock, "calls_per_block": None, "peak_bytes": None,
                   "repeats": g.repeats, "features": feature_dim(d, p, "sym") if lin else None,
                   "chunk": (g.chunk or default_chunk(feature_dim(d, p, "sym"), causal)) if lin else None, "block": g.block if method == "causal_blocked" else None, "status": "ok"}
            row["status"] = _skip_reason(g, method, N, d, p, pas, causal, last.get((method, p)),
                                         stopped.get((method, p)))
            if row["status"] == "ok":
                try:
                    fn = _function(method, p, causal, g.chunk, compiled, g.block)
                    if method == "compiled":
                        row["first_call_s"] = _first_call(fn, args, G, pas, dev)
                        if f"p{p}/{mask}/{pas}" not in compile_info:  # the compile: check it once
                            _same_as_naive(fn, args, p, causal)
                            compile_info[f"p{p}/{mask}/{pas}"] = {"N": N, "first_call_s": row["first_call_s"]}
                    runners[(method, p)] = _call(fn, args, G, pas)
                    calls[(method, p)] = _calls_per_block(runners[(method, p)], clock, g.block_s, dev)
                    row["calls_per_block"] = calls[(method, p)]
                    if g.memory and main and dev.type == "cpu":
                        row["peak_bytes"] = peak_bytes(runners[(method, p)])
                except Exception as exc:  # a failed method is recorded, never fatal
                    _fail(row, method, exc, stopped, (method, p))
                    runners.pop((method, p), None)
            rows[(method, p)] = row
        order = rng_for(g.seed, "overhead-order", d, mask, pas, N, *((g.replicate,) if g.replicate else ()))
        runs, walls = _rounds(runners, calls, g.repeats, dev, rows, stopped, clock, order)  # phase 2
        soft = rows[("softmax", None)]
        for key, row in rows.items():  # medians and minima; ratios of the same rounds against softmax
            if key in runs and runs[key]:
                row["seconds"], row["seconds_min"] = statistics.median(runs[key]), min(runs[key])
                row["seconds_rounds"] = [float(t) for t in runs[key]]  # one per interleaved round, in order
                row["wall_rounds"] = [float(t) for t in walls[key]]
                last[key] = (N, min(runs[key]))  # the least disturbed run predicts the next N
            if key[0] != "softmax" and row["seconds"] is not None and soft["seconds"]:
                row["ratio_vs_softmax"] = row["seconds"] / soft["seconds"]
                row["ratio_min_vs_softmax"] = row["seconds_min"] / soft["seconds_min"]
                if len(runs.get(("softmax", None), ())) == len(runs[key]):  # round r against softmax's round r
                    row["ratio_rounds"] = [t / u for t, u in zip(runs[key], runs[("softmax", None)])]
                    row["wall_ratio_rounds"] = [t / u for t, u in zip(walls[key], walls[("softmax", None)])]
            if progress:
                tm = "—" if row["seconds"] is None else f"{row['seconds']:.4g} s"
                print(f"[overhead] d={d} {mask:<6} {pas:<7} N={N:<6} {key[0]:<14} p={key[1]} {tm} "
                      f"{row['status'][:60]}", file=sys.stderr, flush=True)
            out.append(row)
        del Q, K, V, G, args
    return out


def time_cells(g: OverheadGrid, cells: list[dict], *, device=None) -> dict[str, dict]:
    """{"p{p}/{mask}/{pass}@N={N}": {"ratio_rounds": […], "wall_ratio_rounds": […], "method": m}}: the given cells'
    best forms timed again against softmax, in this process, ``g.repeats`` interleaved rounds at ``g.d``.

    ``cells``: [{"p", "mask", "pass", "N", "method"}] (or ``"methods"``: several forms of the cell, the first in
    ``method``); the cells of one (mask, pass, N) are timed together (softmax once), as :func:`bench_overhead` times
    them, in the order stream of ``g.replicate``. Each cell's ``forms`` holds every requested form's rounds."""
    g = _validated(g)
    dev = default_device(device)
    groups: dict[tuple, list[dict]] = {}
    for c in cells:
        groups.setdefault((c["mask"], c["pass"], int(c["N"])), []).append(c)
    out: dict[str, dict] = {}
    for (mask, pas, N), cs in sorted(groups.items()):
        wanted = [list(c.get("methods") or [c["method"]]) for c in cs]
        sub = replace(g, Ns=(N,), ps=tuple(sorted({_form(c["p"]) for c in cs}, key=str)), masks=(mask,), passes=(pas,),
                      methods=tuple(dict.fromkeys(m for ms in wanted for m in ms)), crossover_ds=(), memory=False)
        rows = {(r["method"], r["p"]): r for r in _series(sub, g.d, mask, pas, sub.methods, dev, {}, {}, False)}
        for c, methods in zip(cs, wanted):
            forms = {m: _rerun_rounds(rows.get((m, _form(c["p"])), {})) for m in methods}
            out[f"p{c['p']}/{mask}/{pas}@N={N}"] = {"method": methods[0], **forms[methods[0]], "forms": forms}
    return out


def _rerun_rounds(row: dict) -> dict:
    """{"ratio_rounds", "wall_ratio_rounds", "status"} of one timed row (empty rounds when it was not timed)."""
    return {"ratio_rounds": row.get("ratio_rounds") or [], "wall_ratio_rounds": row.get("wall_ratio_rounds") or [],
            "status": row.get("status", "not timed")}


def _rerun_worker(spec: dict) -> dict:
    """:func:`time_cells` in a fresh interpreter, set up as ``sapa`` sets up its own process (one torch thread, the
    freed-memory policy)."""
    from sapa.common.allocator import keep_freed_memory

    keep_freed_memory()
    torch.set_num_threads(int(spec.get("threads", 1)))
    grid = OverheadGrid(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec["grid"].items()})
    return time_cells(grid, spec["cells"], device=spec.get("device", "cpu"))


def rerun_cells(g: OverheadGrid, cells: list[dict], runs: int, *, threads: int = 1, progress: bool = False,
                timeout_s: float = 600.0, device: str = "cpu") -> dict[str, list[dict]]:
    """{cell: [run 1, …, run ``runs``]}: :func:`time_cells` in ``runs`` fresh interpreters, one after another
    (replicates 1…runs of ``g``), so each run has its own memory layout and moment of the machine, as independent
    runs of the ledger do (``sapa.rules.timing``: the drift between runs falls only with fresh runs), on ``device``."""
    import json
    import os
    import subprocess

    runs = positive_int("runs", runs)
    if not cells:
        return {}
    code = ("import json, sys; from sapa.empirics.timing.overhead import _rerun_worker; "
            "print(json.dumps(_rerun_worker(json.loads(sys.argv[1]))))")
    out: dict[str, list[dict]] = {}
    for k in range(1, runs + 1):
        spec = {"grid": asdict(replace(_validated(g), replicate=k)), "cells": cells, "threads": threads,
                "device": str(device)}
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(spec)], capture_output=True, text=True,
                              timeout=timeout_s, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
        if proc.returncode != 0:
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            raise RuntimeError(f"overhead rerun {k} of {runs} failed (rc={proc.returncode}): {tail}")
        for name, got in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            out.setdefault(name, []).append(got)
        if progress:
            print(f"[overhead] run {k + 1} of {runs + 1} in a fresh process: {len(cells)} marginal cell(s), "
                  f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return out


MIN_CALLS = 3  # calls per block at least: one slow call (an allocation's page faults) is not a block


def _calls_per_block(run: Callable[[], None], clock: str, block_s: float, dev: torch.device) -> int:
    """One warm-up call, then the fastest of two calls on ``clock``: as many calls as fill ``block_s``, at least
    MIN_CALLS (the wall clock: one call per round, the old design)."""
    _time(run, 0, dev)  # warm-up
    if clock == "wall":
        return 1
    if clock == CUDA_CLOCK:
        best = min(event_seconds(run, 1) for _ in range(2))
    else:
        tick, best = clock_of(clock), math.inf
        for _ in range(2):
            _sync(dev)
            t0 = tick()
            run()
            _sync(dev)
            best = min(best, tick() - t0)
    return max(MIN_CALLS, math.ceil(block_s / max(best, 1e-9)))


def event_seconds(run: Callable[[], None], calls: int, event: Callable | None = None) -> float:
    """Seconds per call of ``calls`` calls of ``run`` between two CUDA events on the current stream:
    (end.elapsed_time(start) in ms) / 1000 / calls, after ``end.synchronize()`` (``event``: the event class,
    ``torch.cuda.Event`` by default; a test passes a stand-in)."""
    make = event or torch.cuda.Event
    start, end = make(enable_timing=True), make(enable_timing=True)
    start.record()
    for _ in range(calls):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def peak_bytes(run: Callable[[], None]) -> int:
    """Peak bytes the CPU allocator holds during one ``run()`` beyond what it held before (torch profiler's memory
    events, allocations positive and frees negative, in time order: the largest prefix sum)."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_fd2(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    cur = peak = 0
    for e in events:
        cur += e.nbytes()
        peak = max(peak, cur)
    return int(peak)


@contextlib.contextmanager
def _quiet_fd2():
    """File descriptor 2 to /dev/null for the block: the profiler's C++ side writes a start/stop line there per use."""
    import os

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _fail(row: dict, method: str, exc: Exception, stopped: dict, key) -> None:
    """Record a failed method in its row and stop it for later N (never fatal)."""
    word = "unavailable" if method == "compiled" else "failed"
    row["status"] = f"{word}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    stopped[key] = row["status"]


def _wall() -> float:
    """The wall clock of the blocks (``time.perf_counter``; one name, so a test can load it with noise)."""
    return time.perf_counter()


def clock_of(name: str) -> Callable[[], float]:
    """The clock of a timed block: ``process`` CPU time (all this process's threads), ``thread`` CPU time (the
    calling thread: exact with one torch thread), or ``wall`` (:func:`_wall`)."""
    return {"process": time.process_time, "thread": time.thread_time, "wall": _wall}[choice("clock", name, CLOCKS)]


def _rounds(runners: dict, calls: dict, repeats: int, dev: torch.device, rows: dict, stopped: dict,
            clock: str = "wall", order=None) -> tuple[dict, dict]:
    """({key: seconds per call of each round, on ``clock``}, {key: wall seconds per call of each round}).

    A round times one block of ``calls[key]`` calls of every method, in an order shuffled per round by the
    generator ``order`` (in turn when None): a burst of load hits every method alike, and no method always runs
    first after another's cache footprint. On a CPU clock a competing process costs wall time but not CPU time,
    so the ratios stay where an idle machine puts them (CUDA: ``clock=CUDA_CLOCK``, :func:`event_seconds` per block).
    """
    from torch.utils.benchmark import Timer

    tick = None if clock == CUDA_CLOCK else clock_of(clock)
    runs: dict = {k: [] for k in runners}
    walls: dict = {k: [] for k in runners}
    for _ in range(repeats):
        keys = list(runners)
        if order is not None:
            keys = [keys[i] for i in order.permutation(len(keys))]
        for key in keys:
            if key not in runners:
                continue
            run = runners[key]
            try:
                def block(run=run) -> None:
                    run()
                    _sync(dev)

                _sync(dev)
                w0 = _wall()
                if tick is None:  # CUDA events: the device's time of the block, no host sync inside it
                    runs[key].append(event_seconds(run, calls.get(key, 1)))
                else:
                    m = Timer("block()", globals={"block": block}, timer=tick).timeit(calls.get(key, 1))
                    runs[key].append(float(m.times[0]))
                _sync(dev)
                walls[key].append((_wall() - w0) / calls.get(key, 1))
            except Exception as exc:  # noqa: BLE001 (recorded in the row, never fatal)
                _fail(rows[key], key[0], exc, stopped, key)
                runners.pop(key)
                runs[key], walls[key] = [], []
    return runs, walls


def _skip_reason(g: OverheadGrid, method: str, N: int, d: int, p, pas: str, causal: bool, last, stopped) -> str:
    if stopped is not None:
        return stopped if stopped.startswith("unavailable") else f"skipped: after {stopped}"
    if _expr_key(p) is not None and method in ("linearised", "compiled"):
        return f"skipped: the {method} form is defined for c·S^p only (an expression has no finite feature map)"
    if method == "linearised" and d == g.d and g.clock != "wall":
        ratio = flops("linearised", N, d, d, p, causal, chunk=g.chunk) / flops("quadratic", N, d, d, p, causal)
        if ratio > g.linearised_flop_cap:
            return (f"skipped: needs {ratio:.3g}× the quadratic form's flops at this N (flop model; cap "
                    f"{g.linearised_flop_cap:g}×), so it cannot be the fastest form")
    mem = _mem_estimate(method, N, d, g.heads, p, pas, causal, g.chunk)
    if mem > g.mem_cap_bytes:
        return f"skipped: estimated memory {mem / GIB:.3g} GiB > cap {g.mem_cap_bytes / GIB:.3g} GiB"
    if last is not None and method != "softmax":  # the baseline is always timed
        n0, t0 = last
        pred = t0 * (N / n0) ** (1 if method == "linearised" else 2)
        if pred > g.time_cap_s:
            return f"skipped: predicted {pred:.3g} s per call > time cap {g.time_cap_s:g} s"
    return "ok"


def _function(method: str, p, causal: bool, chunk: int | None, compiled: dict, block: int = 128) -> Callable:
    if method == "softmax":
        return _softmax_fn(causal)
    if _expr_key(p) is not None:
        text, row = _expr_key(p)
        return _expr_fn(text, row, causal, block if method == "causal_blocked" else None)
    if method == "naive":
        return _naive_fn(p, causal)
    if method == "causal_blocked":
        return _blocked_fn(p, block)
    if method == "linearised":
        return _linearised_fn(p, causal, chunk)
    key = (p, causal)
    if key not in compiled:
        compiled[key] = torch.compile(_products_fn(p, causal), dynamic=True)
    return compiled[key]


def _first_call(fn: Callable, args: tuple, G: torch.Tensor, pas: str, dev: torch.device) -> float:
    """Seconds of the first call (compiles on the first shape and grad mode; later N reuse the dynamic graph)."""
    _sync(dev)
    t0 = time.perf_counter()
    _call(fn, args, G, pas)()
    _sync(dev)
    return time.perf_counter() - t0


def _same_as_naive(fn: Callable, args: tuple, p: int, causal: bool, rtol: float = 1e-3) -> None:
    """Raise unless the compiled output matches the eager naive one (float32: relative Frobenius error ≤ rtol)."""
    with torch.no_grad():
        want = _naive_fn(p, causal)(*args)
        err = float((fn(*args) - want).norm() / want.norm().clamp_min(1e-30))
    if not err <= rtol:
        raise RuntimeError(f"compiled output differs from the naive one (relative error {err:.3g} > {rtol:g})")


# =========================================================================== crossover


def measured_crossover(Ns: list[int], ratios: list[float]) -> dict:
    """First N from which linearised/naive time stays < 1, log-log interpolated with the grid point before it.

    Returns {"status": "crossed" | "below grid" | "none ≤ N_max" | "no data", "N": float | None}.
    """
    if not Ns:
        return {"status": "no data", "N": None}
    k = len(Ns)
    while k > 0 and ratios[k - 1] < 1:
        k -= 1
    if k == len(Ns):
        return {"status": f"none ≤ {Ns[-1]}", "N": None}
    if k == 0:
        return {"status": "below grid", "N": float(Ns[0])}
    x0, x1 = math.log(Ns[k - 1]), math.log(Ns[k])
    y0, y1 = math.log(ratios[k - 1]), math.log(ratios[k])
    return {"status": "crossed", "N": float(math.exp(x0 + (0 - y0) * (x1 - x0) / (y1 - y0)))}


def crossover_table(rows: list[dict], g: OverheadGrid) -> list[dict]:
    """Per (p, d, mask): linearised vs naive forward seconds over N, measured and flop-count crossovers."""
    table = []
    for d in g.crossover_ds:
        for mask in g.crossover_masks:
            for p in (p for p in g.ps if _expr_key(p) is None):  # an expression has no linearised form
                sel = {(r["method"], r["N"]): r["seconds"] for r in rows
                       if r["d"] == d and r["mask"] == mask and r["pass"] == "fwd" and r["p"] == p}
                Ns = [N for N in g.Ns if sel.get(("naive", N)) and sel.get(("linearised", N))]
                rat = [sel[("linearised", N)] / sel[("naive", N)] for N in Ns]
                F = feature_dim(d, p, "sym")
                causal = mask == "causal"
                chunk = g.chunk or default_chunk(F, causal)
                m = measured_crossover(Ns, rat)
                table.append({
                    "p": p, "d": d, "mask": mask, "pass": "fwd", "F": F,
                    "measured_crossover_N": m["N"], "measured_status": m["status"],
                    "N_measured": Ns, "linearised_over_naive": [round(x, 5) for x in rat],
                    "flop_crossover_N": round(crossover_flops(d, p, d, causal=causal, chunk=chunk), 2),
                    "flop_ratio_at_N": [round(flops("linearised", N, d, d, p, causal, chunk=chunk)
                                              / flops("quadratic", N, d, d, p, causal), 5) for N in Ns],
                })
    return table


def flat_summary(res: dict) -> dict:
    """Flat snake_case keys for ``sapa bench --json``: ratios per cell and crossovers per (p, d, mask)."""
    key = "p{p}/d{d}/{mask}"
    return {
        "overhead_ratio_vs_softmax": dict(res["ratios"]),
        "overhead_crossover_n": {key.format(**c): c["measured_crossover_N"] for c in res["crossover"]},
        "overhead_crossover_status": {key.format(**c): c["measured_status"] for c in res["crossover"]},
        "overhead_flop_crossover_n": {key.format(**c): c["flop_crossover_N"] for c in res["crossover"]},
        "overhead_threads": res["provenance"]["threads"],
        "overhead_dtype": res["provenance"]["dtype"],
        "overhead_device": res["provenance"]["device"],
    }


def summary_lines(res: dict) -> list[str]:
    """Human-readable lines: seconds and ratio per timed cell at the main d, then the crossover table."""
    d = res["grid"]["d"]
    lines = []
    for r in res["rows"]:
        if r["d"] != d:
            continue
        what = r["method"] if r["p"] is None else f"{r['method']} p={r['p']}"
        t = f"{r['seconds']:.4g} s" if r["seconds"] is not None else r["status"]
        ratio = f"  {r['ratio_vs_softmax']:.2f}× softmax" if r["ratio_vs_softmax"] is not None else ""
        lines.append(f"N={r['N']:>6} {r['mask']:<6} {r['pass']:<7} {what:<16} {t}{ratio}")
    for c in res["crossover"]:
        got = f"N ≈ {c['measured_crossover_N']:.0f}" if c["measured_status"] == "crossed" else c["measured_status"]
        lines.append(f"crossover linearised < naive, p={c['p']} d={c['d']} {c['mask']:<6} (F = {c['F']}): measured "
                     f"{got}, flop count N ≈ {c['flop_crossover_N']:.0f}")
    prov = res["provenance"]
    lines.append(f"{prov['device']}, {prov['threads']} thread(s), {prov['dtype']}, torch {prov['torch']}; "
                 f"{res['seconds_total']:.1f} s")
    return lines


def _provenance(dev: torch.device) -> dict:
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "dtype": "float32",
        "batch": 1,
        "timing": "per form and cell: one warm-up call, then `repeats` rounds; a round times one block of calls of "
                  "every form (as many calls as fill `block_s` of the clock; torch.utils.benchmark.Timer with the "
                  "grid's clock; on CUDA two CUDA events around the block, the device's own time), the forms in a "
                  "seeded shuffled order; seconds per call = block / calls (wall time of each block kept beside it, "
                  "CUDA synchronised)",
    }


if __name__ == "__main__":  # python -m sapa.empirics.timing.overhead [--quick] [--threads=T]
    import json

    threads = next((int(a.split("=")[1]) for a in sys.argv if a.startswith("--threads=")), None)
    print(json.dumps(bench_overhead(quick="--quick" in sys.argv, progress=True, threads=threads), indent=1, default=float))
