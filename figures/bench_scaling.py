"""Figure: wall time of one fixed Monte Carlo sweep (arXiv 2410.18613, Thm 4.1–Cor 4.5) on 1 and K local workers.

The sweep runs serially in this process (K = 1) and on an embedded ``LocalCluster(K)`` of
single-threaded worker processes (:func:`sapa.empirics.montecarlo.distributed.executor_for`), each into a
fresh directory. Reported per K: the sweep's wall time on a warm cluster (``seconds``), the
cluster's start-up (``startup_s``: spawning the workers and importing torch in them), the
speed-up T₁/T_K and the parallel efficiency T₁/(K·T_K), also counting start-up.

Before drawing, the figure asserts its claim: every K gives byte-identical ``results.parquet``
(same config and seed, same numbers, whatever the executor). Speed is measured, not asserted:
on a shared 2-core machine other processes take their share.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from sapa.figures import style
from sapa.theory.families import INV_SQRT_N

# Fixed sweep: 12 cells, ≈ 5–10 s serially on one core (softmax and x³/√N at N up to 512).
CONFIG = {
    "name": "bench-scaling",
    "seed": 0,
    "trials": 48,
    "N": [128, 256, 512],
    "D": [32],
    "d": [16],
    "weight_model": ["iid", "tied"],
    "activation": [{"kind": "softmax"}, {"kind": "poly", "p": 3, "scale": INV_SQRT_N}],
}
SMALL_CONFIG = {**CONFIG, "name": "bench-scaling-small", "trials": 8, "N": [32, 64], "D": [8], "d": [4]}
WARMUP = {"seed": 0, "trials": 1, "N": [4], "D": [2], "weight_model": ["iid", "tied"],
          "activation": [{"kind": "softmax"}]}  # one tiny cell per worker: first-call costs out of the timing


def scaling_benchmark(workers: Sequence[int] = (1, 2), config: dict | None = None, *, small: bool = False) -> dict:
    """Time one sweep serially and on ``LocalCluster(K)`` for each K in ``workers``.

    Args:
      workers: worker counts; 1 is the serial path (it must be included: it is T₁).
      config: a sweep config dict (``sapa.empirics.montecarlo.sweep.config_from_dict``); default :data:`CONFIG`
        (:data:`SMALL_CONFIG` when ``small``).

    Returns:
      ``{"workers": [...], "seconds": [...], "startup_s": [...], "speedup": [...],
      "efficiency": [...], "efficiency_with_startup": [...], "cells": int, "rows": int,
      "config_hash": str, "config": dict, "identical": True, "cpu_count": int, "load_avg": [...]}``,
      lists aligned with ``workers``.
    """
    import os

    from sapa.empirics.montecarlo.distributed import executor_for
    from sapa.empirics.montecarlo.sweep import cells, config_from_dict, run_sweep
    from sapa.common.validate import InputError, positive_int

    ks = [positive_int("workers", k) for k in workers]
    if 1 not in ks:
        raise InputError("workers must include 1 (the serial time T₁)")
    raw = config if config is not None else (SMALL_CONFIG if small else CONFIG)
    cfg, warm = config_from_dict(raw), config_from_dict(WARMUP)
    tmp = Path(tempfile.mkdtemp(prefix="sapa-bench-scaling-"))
    seconds, startup, stores = {}, {}, {}
    try:
        for k in sorted(set(ks)):
            t0 = time.perf_counter()
            with executor_for(workers=k) as ex:
                startup[k] = time.perf_counter() - t0
                run_sweep(warm, tmp / f"warm{k}", progress=False, executor=ex)
                t1 = time.perf_counter()
                run_sweep(cfg, tmp / f"w{k}", progress=False, executor=ex)
                seconds[k] = time.perf_counter() - t1
            stores[k] = (tmp / f"w{k}" / "results.parquet").read_bytes()
        identical = all(stores[k] == stores[1] for k in stores)
        if not identical:  # the claim of the figure; never expected
            raise AssertionError("results differ between worker counts")
        import pandas as pd

        rows = len(pd.read_parquet(tmp / "w1" / "results.parquet"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    T1 = seconds[1]
    return {
        "workers": ks,
        "seconds": [seconds[k] for k in ks],
        "startup_s": [0.0 if k == 1 else startup[k] for k in ks],
        "speedup": [T1 / seconds[k] for k in ks],
        "efficiency": [T1 / (k * seconds[k]) for k in ks],
        "efficiency_with_startup": [T1 / (k * (seconds[k] + (0.0 if k == 1 else startup[k]))) for k in ks],
        "cells": len(cells(cfg)),
        "rows": rows,
        "config_hash": cfg.hash(),
        "config": cfg.as_dict(),
        "identical": identical,
        "cpu_count": os.cpu_count(),
        "load_avg": list(os.getloadavg()),
    }


def check(res: dict) -> None:
    """The figure's claim: the numbers do not depend on the worker count."""
    assert res["identical"], "results.parquet differs between worker counts"
    assert res["workers"][0] == 1 and len(res["seconds"]) == len(res["workers"])


def draw(res: dict, out_dir: str | Path, file_stem: str | None = None) -> list[Path]:
    """Bars: sweep time per worker count (start-up hatched on top), ideal T₁/K, efficiency labels."""
    check(res)
    ks = np.array(res["workers"])
    T = np.array(res["seconds"])
    S = np.array(res["startup_s"])
    x = np.arange(len(ks))
    with plt.rc_context(style.RC):
        fig, ax = plt.subplots(figsize=(5.6, 4.0))
        ax.bar(x, T, width=0.55, color=style.PALETTE[2], edgecolor="black", label="sweep (warm workers)")
        ax.bar(x, S, width=0.55, bottom=T, color="white", edgecolor="black", hatch="//",
               label="cluster start-up (spawn + import torch)")
        ax.hlines(T[0] / ks, x - 0.275, x + 0.275, colors="black", linestyles="--", linewidth=1.5, label="ideal T₁/K")
        for i, k in enumerate(ks):
            if k == 1:
                text = f"T₁ = {T[i]:.2f} s"
                ax.annotate(text, (x[i], T[i]), textcoords="offset points", xytext=(0, 4), ha="center", va="bottom",
                            fontsize=8)
                continue
            else:
                text = (f"{T[i]:.2f} s\nspeed-up {res['speedup'][i]:.2f}×\n"
                        f"efficiency {res['efficiency'][i]:.0%}\n(with start-up {res['efficiency_with_startup'][i]:.0%})")
            ax.annotate(text, (x[i], T[i] + S[i]), textcoords="offset points", xytext=(0, 4), ha="center",
                        va="bottom", fontsize=8)
        ax.set_xticks(x, ["serial" if k == 1 else f"LocalCluster({k})" for k in ks])
        ax.set_ylabel("wall time (s)")
        ax.set_ylim(0, 1.6 * float(np.max(T + S)))
        ax.set_title(f"One sweep ({res['cells']} cells, {res['rows']} rows): identical bytes for every K\n"
                     f"efficiency = T₁/(K·T_K); {res['cpu_count']} CPUs, load {res['load_avg'][0]:.1f}")
        ax.legend(loc="upper left", fontsize=7, framealpha=0.9)
        stem = file_stem or style.stem("bench_scaling", workers=list(res["workers"]), cells=res["cells"],
                                       trials=res["config"]["trials"])
        return style.save(fig, out_dir, stem)


def main(out_dir: str | Path = "results/figures", small: bool = False, res: dict | None = None) -> list[Path]:
    """Measure (unless ``res`` is given), assert identical results, save PNG + PDF."""
    if res is None:
        res = scaling_benchmark((1, 2), small=small)
    return draw(res, out_dir)


if __name__ == "__main__":  # pragma: no cover
    r = scaling_benchmark((1, 2))
    print({k: r[k] for k in ("workers", "seconds", "startup_s", "speedup", "efficiency", "efficiency_with_startup")})
    print(draw(r, "results/figures"))
