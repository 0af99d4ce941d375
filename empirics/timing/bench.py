"""Measured speed and memory of the exact norm kernels of ``sapa.empirics.kernels.norms`` (arXiv 2410.18613).

The paper is silent on the overhead of polynomial against softmax attention (ledger claim
``overhead``). Two benchmarks, both returning plain JSON-ready dicts:

* :func:`bench_vs_autograd` — the exact O(N²D) kernel against ``torch.func.jacrev`` of
  vec φ(S) followed by its Frobenius norm (the reference the tests use), at small N;
* :func:`bench_vs_gemm` — the softmax and x³ kernels against the bare cost of forming
  S = X W Xᵀ once (same row chunks, same flops as the full product), at transformer sizes,
  with the peak memory of each, measured in a fresh subprocess per N: the rise of peak RSS
  (Linux VmHWM, reset before each kernel) on CPU, ``torch.cuda.max_memory_allocated`` on GPU.

Timings: one warm-up run of each function, then ``repeats`` rounds in which the compared functions
run in turn (interleaved), so a burst of load on a shared machine hits both sides of a ratio
alike; medians are reported, and the ratios (``speedup_vs_autograd``, ``cost_vs_gemm``) are
ratios of the minima — the least disturbed runs — which a loaded machine cannot push below what
the two computations really cost (``time.perf_counter``, CUDA synchronised). These are
measurements, not tests: nothing here asserts a speed.
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from typing import Callable

import torch

from sapa.empirics.kernels.norms import (
    _rows_per_chunk,
    at_length,
    attention_norms,
    default_device,
    jacobian_autograd,
    kernel_family,
    kernel_label,
)
from sapa.common.seeds import torch_gen_for
from sapa.common.validate import InputError, positive_int
from sapa.theory.families import Family, power, softmax

__all__ = ["bench_vs_autograd", "bench_vs_gemm", "bench_all", "DEFAULT_ACTIVATIONS"]

DEFAULT_ACTIVATIONS = (softmax(), power(3))  # families with a global scale (taken at each N)
# Blocks of 64 KiB and more are mmap-ed and unmapped on free, so RSS follows live memory:
# without it glibc keeps one kernel's freed buffers resident and the next one's peak hides.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn: Callable[[], object], repeats: int, device: torch.device) -> tuple[float, float, list[float]]:
    """(first-run seconds, median of ``repeats`` later runs (nan if none), all later runs) of ``fn()``."""
    times = []
    for _ in range(repeats + 1):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return times[0], statistics.median(times[1:]) if repeats else math.nan, times[1:]


def _time_interleaved(fns: dict[str, Callable[[], object]], repeats: int,
                      device: torch.device) -> dict[str, tuple[float, list[float]]]:
    """{name: (first-run seconds, ``repeats`` later runs)}: one warm-up each, then rounds of every fn in turn."""
    out = {name: (_time(fn, 0, device)[0], []) for name, fn in fns.items()}
    for _ in range(repeats):
        for name, fn in fns.items():
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            out[name][1].append(time.perf_counter() - t0)
    return out


def _inputs(N: int, D: int, seed: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """X (N, D) with i.i.d. N(0, 1) entries, W = G / D with G (D, D) i.i.d. N(0, 1): S_ij = O(1)."""
    g = torch_gen_for(seed, "bench")
    X = torch.randn(N, D, generator=g, dtype=torch.float64)
    W = torch.randn(D, D, generator=g, dtype=torch.float64) / D
    return X.to(device, dtype), W.to(device, dtype)


def _provenance(device: torch.device, dtype: torch.dtype) -> dict:
    return {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine(),
        "dtype": str(dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }


def bench_vs_autograd(
    Ns: tuple[int, ...] = (32, 64, 96),
    D: int = 32,
    activations: tuple[Family, ...] = DEFAULT_ACTIVATIONS,
    repeats: int = 3,
    *,
    seed: int = 0,
    device=None,
    quick: bool = False,
    threads: int | None = 1,
) -> list[dict]:
    """Seconds of the exact kernel vs ``jacrev`` + norm, and ``speedup_vs_autograd`` = their ratio.

    Both run in float64 on ``device`` (default: CUDA when available, else CPU). Each row also
    reports ``rel_err`` between the two Jacobian norms. ``quick`` shrinks to N = (8, 16), D = 4,
    one repeat. ``threads``: torch CPU threads for both sides (default 1: at these sizes a
    millisecond kernel is dominated by thread-pool wake-ups on a busy machine, which made
    medians jump between 1 and 100 ms with 2 threads; ``None`` leaves torch's setting).

    Returns:
      [{"N", "D", "activation", "kernel_s", "autograd_s", "speedup_vs_autograd", "rel_err",
        "repeats", "device", "dtype", "threads", ...}, ...] one per (N, activation).
    """
    if quick:
        Ns, D, repeats = (8, 16), 4, 1
    D, repeats = positive_int("D", D), positive_int("repeats", repeats)
    Ns = tuple(positive_int("N", n) for n in Ns)
    dev = default_device(device)
    before = torch.get_num_threads()
    if threads is not None and dev.type == "cpu":
        torch.set_num_threads(positive_int("threads", threads))
    try:
        return _bench_vs_autograd(Ns, D, activations, repeats, seed, dev)
    finally:
        torch.set_num_threads(before)


def _bench_vs_autograd(Ns, D, activations, repeats, seed, dev) -> list[dict]:
    rows = []
    for N in Ns:
        X, W = _inputs(N, D, seed, dev, torch.float64)
        for act in activations:
            res: dict = {}

            def kernel() -> None:
                res["kernel"] = attention_norms(X, W, act, device=dev).jac_fro

            def autograd() -> None:
                res["autograd"] = float(jacobian_autograd(X, W, act, device=dev).norm())

            t = _time_interleaved({"kernel": kernel, "autograd": autograd}, repeats, dev)
            runs_kernel, runs_auto = t["kernel"][1], t["autograd"][1]
            rows.append(
                {
                    "N": N,
                    "D": D,
                    "activation": kernel_label(at_length(act, N)[0]),
                    "kernel_s": statistics.median(runs_kernel),
                    "autograd_s": statistics.median(runs_auto),
                    "speedup_vs_autograd": min(runs_auto) / min(runs_kernel),  # interleaved minima
                    "kernel_min_s": min(runs_kernel),  # the least disturbed run, on a shared machine
                    "autograd_min_s": min(runs_auto),
                    "rel_err": abs(res["kernel"] - res["autograd"]) / max(abs(res["autograd"]), 1e-300),
                    "repeats": repeats,
                    **_provenance(dev, torch.float64),
                }
            )
    return rows


# ----------------------------------------------------------------------------- vs GEMM


def _rss_now() -> int:
    """Current resident set size in bytes (Linux /proc), or -1."""
    try:
        with open("/proc/self/status") as fh:
            return int(re.search(r"VmRSS:\s+(\d+) kB", fh.read()).group(1)) * 1024
    except (OSError, AttributeError):
        return -1


def _reset_peak_rss() -> bool:
    """Reset the peak RSS (VmHWM) to the current RSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak_rss() -> int:
    """Peak RSS in bytes since the last reset (VmHWM), else since process start (ru_maxrss)."""
    try:
        with open("/proc/self/status") as fh:
            return int(re.search(r"VmHWM:\s+(\d+) kB", fh.read()).group(1)) * 1024
    except (OSError, AttributeError):
        scale = 1 if sys.platform == "darwin" else 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _form_scores(X: torch.Tensor, W: torch.Tensor, chunk: int) -> float:
    """Form S = X W Xᵀ once, chunk rows at a time (the GEMM baseline); returns a checksum."""
    N = X.shape[0]
    Z = X @ W  # (N, D) @ (D, D)
    acc = 0.0
    for r0 in range(0, N, chunk):
        Sc = Z[r0 : r0 + chunk] @ X.T  # (B, D) @ (D, N) -> (B, N)
        acc += float(Sc[:, 0].sum())
    return acc


def _worker(spec: dict) -> list[dict]:
    """Measure every kernel of ``spec`` at one N in this process; used by :func:`bench_vs_gemm`."""
    N, D, repeats = spec["N"], spec["D"], spec["repeats"]
    dev, dtype = torch.device(spec["device"]), getattr(torch, spec["dtype"])
    X, W = _inputs(N, D, spec["seed"], dev, dtype)
    chunk = _rows_per_chunk(spec.get("chunk"), N, N, 1, dtype)
    fns, mem = {}, {}
    for k in spec["kernels"]:  # pass 1: each kernel alone (its warm-up run), for its peak memory
        if k["kind"] == "gemm":
            label, fn = "gemm", (lambda: _form_scores(X, W, chunk))
        else:
            act = kernel_family(k["kind"], p=k["p"], scale=k["scale"])
            label, fn = kernel_label(act), (lambda act=act: attention_norms(X, W, act, chunk=chunk, device=dev, dtype=dtype))
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(dev)
            base, source = torch.cuda.memory_allocated(dev), "cuda_max_memory_allocated"
        else:
            source = "rss_hwm" if _reset_peak_rss() else "ru_maxrss"
            base = _rss_now()
        first = _time(fn, 0, dev)[0]
        peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else _peak_rss()
        fns[label], mem[label] = fn, (first, max(0, peak - base), source)
    timed = _time_interleaved(fns, repeats, dev)  # pass 2: rounds of every kernel in turn
    out = []
    for label, (first, peak, source) in mem.items():
        runs = timed[label][1]
        out.append(
            {
                "N": N,
                "D": D,
                "kernel": label,
                "seconds": statistics.median(runs),
                "seconds_first": first,
                "seconds_all": runs,
                "seconds_min": min(runs),
                "peak_mem_bytes": peak,
                "peak_mem_source": source,
                "input_bytes": 2 * X.numel() * X.element_size() + W.numel() * W.element_size(),
                "chunk_rows": chunk,
                "repeats": repeats,
                **_provenance(dev, dtype),
            }
        )
    return out


def bench_vs_gemm(
    Ns: tuple[int, ...] = (1024, 4096, 16384),
    D: int = 768,
    activations: tuple[Family, ...] = DEFAULT_ACTIVATIONS,
    repeats: int = 3,
    *,
    seed: int = 0,
    device=None,
    dtype: torch.dtype = torch.float64,
    chunk: int | None = None,
    isolate: bool = True,
    timeout_s: float = 3600.0,
    quick: bool = False,
) -> list[dict]:
    """Seconds and peak memory of each kernel vs forming S = X W Xᵀ once: ``cost_vs_gemm`` per N.

    Each N runs in a fresh ``python`` subprocess (``isolate``) so that its peak memory is its
    own; ``peak_mem_bytes`` is the rise of peak RSS (CPU) or of allocated CUDA memory above
    the inputs, per kernel. ``quick`` shrinks to N = (256,), D = 16, one repeat.

    Returns:
      [{"N", "D", "kernel", "seconds", "seconds_first", "seconds_all", "cost_vs_gemm",
        "peak_mem_bytes", "peak_mem_source", "input_bytes", "chunk_rows", "device", "dtype",
        ...}, ...]; kernel "gemm" is the baseline (cost_vs_gemm = 1).
    """
    if quick:
        Ns, D, repeats = (256,), 16, 3  # 3 interleaved rounds: the minima need more than one run
    D, repeats = positive_int("D", D), positive_int("repeats", repeats)
    Ns = tuple(positive_int("N", n) for n in Ns)
    if chunk is not None:
        chunk = positive_int("chunk", chunk)
    if dtype not in (torch.float64, torch.float32):
        raise InputError(f"dtype must be torch.float64 or torch.float32, got {dtype!r}")
    dev = default_device(device)
    rows: list[dict] = []
    for N in Ns:
        kernels = [{"kind": "gemm"}] + [{"kind": a.kernel, "p": a.p or 1, "scale": a.coef}
                                        for a in (at_length(f, N)[0] for f in activations)]
        spec = {"N": N, "D": D, "repeats": repeats, "seed": seed, "device": str(dev),
                "dtype": str(dtype).removeprefix("torch."), "chunk": chunk, "kernels": kernels}
        got = _run_isolated(spec, timeout_s) if isolate else _worker(spec)
        gemm_s = got[0]["seconds_min"]  # ratio of interleaved minima: load cannot push it below the true cost
        for r in got:
            r["cost_vs_gemm"] = r["seconds_min"] / gemm_s
        rows.extend(got)
    return rows


def _run_isolated(spec: dict, timeout_s: float) -> list[dict]:
    """Run :func:`_worker` in a fresh interpreter and return its rows."""
    code = "import json, sys; from sapa.empirics.timing.bench import _worker; print(json.dumps(_worker(json.loads(sys.argv[1]))))"
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(spec)],
        capture_output=True, text=True, timeout=timeout_s, env={**os.environ, **MALLOC_ENV},
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-5:]
        raise RuntimeError(f"benchmark subprocess for N={spec['N']} failed (rc={proc.returncode}): " + " | ".join(tail))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_all(quick: bool = False, *, device=None) -> dict:
    """Both benchmarks at their default sizes (or ``quick`` ones) as one JSON-ready dict."""
    dev = default_device(device)
    return {
        "vs_autograd": bench_vs_autograd(quick=quick, device=dev),
        "vs_gemm": bench_vs_gemm(quick=quick, device=dev),
        "provenance": _provenance(dev, torch.float64),
    }


if __name__ == "__main__":  # python -m sapa.empirics.timing.bench [--quick]
    print(json.dumps(bench_all(quick="--quick" in sys.argv), indent=2, default=float))
