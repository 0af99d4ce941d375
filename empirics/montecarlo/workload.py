"""Work and memory estimates before a sweep or training starts; refusals beyond documented limits.

A sweep of 4 million cells or ``trials = 10**30`` would otherwise run for years with no word.
Before any work, ``sapa sweep`` estimates

* cells: the grid's size (an upper bound, from the product of the grid lengths, taken before
  the grid is enumerated, then the exact count);
* flops: Σ_cells trials·(6N²D + 4ND² + 2D²d) — the exact kernel's 3 N²D multiply-adds for
  softmax (N²D for polynomials; the larger is assumed), X Wᵀ and X W, and W = W_Q W_Kᵀ;

and refuses beyond :data:`MAX_CELLS` cells or :data:`MAX_FLOPS` flops unless ``--force``.
``MAX_FLOPS = 1e16`` is ≈ 20× the built-in ``full`` sweep (700 cells, ≈ 5e14 flops), days on 2 cores.

Parallel workers are capped by usable cores, by the pending tasks and by available memory
(``MemAvailable`` / per-worker footprint); :func:`cap_workers` returns the cap and a note to print.

Every other command that could be asked for absurd work (``sapa audit``, ``sapa train --seeds``, ``sapa calibrate
--trials``, a ``--safetensors`` layer) estimates it up front as a :class:`Cost` (flops, peak bytes, and seconds when
only a timed pilot can tell) and :func:`check_cost` refuses it, in one line, beyond :data:`MAX_FLOPS`,
:data:`MAX_SECONDS` or the memory available, unless ``--force``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from sapa.common.validate import InputError

__all__ = ["MAX_CELLS", "MAX_FLOPS", "MAX_SECONDS", "MEMORY_IF_UNKNOWN", "Work", "Cost", "sweep_work",
           "check_sweep_work", "check_cost", "cap_workers", "usable_cores", "available_memory", "SWEEP_WORKER_BYTES",
           "TRAIN_WORKER_BYTES"]

MAX_CELLS = 100_000  # the built-in full sweep has 700 cells
MAX_FLOPS = 1e16  # ≈ 20× the built-in full sweep (≈ 5e14 flops)
MAX_SECONDS = 2 * 86_400  # about what MAX_FLOPS takes on 2 cores: the limit of work measured by a timed pilot
MEMORY_IF_UNKNOWN = 8 * 2**30  # what check_cost assumes is available where MemAvailable cannot be read
SWEEP_WORKER_BYTES = 400 * 2**20  # one Dask worker with torch imported (measured ≈ 350 MB) ...
TRAIN_WORKER_BYTES = 1900 * 2**20  # ... and one training-study worker: torch (≈ 420 MB) + one chunk (1.5 GB cap)


@dataclass(frozen=True)
class Work:
    """A sweep's size: cells (exact, or an upper bound when ``bound``), flops (exact integer, may be huge)."""

    cells: int
    flops: int
    bound: bool = False  # cells is the grid product (the grid was too large to enumerate)


def _grid_bound(config) -> int:
    """Product of the grid lengths: an upper bound on the number of cells (Python int, exact)."""
    lengths = (config.N, config.D, config.d, config.weight_model, config.rho, config.mask, config.x_model,
               config.mean_norm, config.activations)
    return math.prod(len(g) for g in lengths)


def _cell_flops(N: int, D: int, d: int, trials: int) -> int:
    """trials·(6N²D + 4ND² + 2D²d), exact integers."""
    return trials * (6 * N * N * D + 4 * N * D * D + 2 * D * D * d)


def sweep_work(config) -> Work:
    """Cells and flops of ``config`` (a :class:`sapa.empirics.montecarlo.sweep.SweepConfig`); no cell is run."""
    from sapa.empirics.montecarlo.sweep import cell_trials, cells

    bound = _grid_bound(config)
    top_trials = max(config.trials, getattr(config, "tail_trials_max", 0))  # heavy-tailed cells may get more
    if bound > MAX_CELLS:  # do not enumerate millions of cells just to count them
        top = _cell_flops(max(config.N), max(config.D), max(config.D), top_trials)
        return Work(cells=bound, flops=top * bound, bound=True)
    cs = cells(config)
    flops = sum(_cell_flops(c.N, c.D, c.d, cell_trials(config, c)) for c in cs)
    return Work(cells=len(cs), flops=flops)


def _sci(n: int) -> str:
    """``n`` as ``2.7e+32`` (floats overflow beyond 1e308: then ``~1e<digits>``)."""
    return f"{n:.2g}" if n < 10**300 else f"~1e{len(str(n)) - 1}"


def check_sweep_work(config, force: bool = False) -> Work:
    """The sweep's :class:`Work`; InputError beyond MAX_CELLS or MAX_FLOPS unless ``force``."""
    w = sweep_work(config)
    if force:
        return w
    cells_txt = f"{'up to ' if w.bound else ''}{w.cells:,} cells"
    if w.cells > MAX_CELLS:
        raise InputError(f"the sweep has {cells_txt}, more than the limit of {MAX_CELLS:,}; "
                         f"shrink the grid, or pass --force to run it anyway")
    if w.flops > MAX_FLOPS:
        raise InputError(f"the sweep needs ≈{_sci(w.flops)} flops ({cells_txt}, trials={config.trials:,}), more than "
                         f"the limit of {MAX_FLOPS:.0e}; reduce trials or N, D, or pass --force")
    return w


@dataclass(frozen=True)
class Cost:
    """What a request will take, estimated before it starts: flops (exact integer, may be huge), peak bytes, CPU
    seconds where a timed pilot is the only estimate (None otherwise), and ``how`` (the request, in words)."""

    flops: int
    bytes: int
    how: str
    seconds: float | None = None


def check_cost(cost: Cost, what: str, advice: str, memory_advice: str | None = None, force: bool = False,
               memory: int | None = -1) -> Cost:
    """``cost``; InputError (one line: ``what`` needs …, ``advice``, or pass --force) beyond :data:`MAX_FLOPS`,
    :data:`MAX_SECONDS` or the memory available (``memory=-1``: MemAvailable; None: :data:`MEMORY_IF_UNKNOWN`),
    unless ``force``. ``memory_advice``: what to reduce when memory is the limit (default ``advice``)."""
    if force:
        return cost
    memory = available_memory() if memory == -1 else memory
    memory = MEMORY_IF_UNKNOWN if memory is None else memory
    if cost.flops > MAX_FLOPS:
        raise InputError(f"{what} needs ≈{_sci(cost.flops)} flops ({cost.how}), more than the limit of "
                         f"{MAX_FLOPS:.0e} (as sapa sweep); {advice}, or pass --force")
    if cost.seconds is not None and cost.seconds > MAX_SECONDS:
        raise InputError(f"{what} needs ≈{_duration(cost.seconds)} of CPU time ({cost.how}), more than the limit of "
                         f"{_duration(MAX_SECONDS)}; {advice}, or pass --force")
    if cost.bytes > memory:
        raise InputError(f"{what} needs ≈{cost.bytes / 2**30:.3g} GiB of memory ({cost.how}), more than the "
                         f"{memory / 2**30:.3g} GiB available; {memory_advice or advice}, or pass --force")
    return cost


def _duration(seconds: float) -> str:
    """``seconds`` as ``3.2 h``, ``2 days`` or ``1.1e+09 years``."""
    if seconds < 86_400:
        return f"{seconds / 3600:.2g} h"
    days = seconds / 86_400
    return f"{days:.3g} days" if days < 1000 else f"{days / 365.25:.2g} years"


def usable_cores() -> int:
    """CPU cores this process may run on (affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def available_memory(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """Bytes of MemAvailable (Linux), else psutil's figure, else None."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - no psutil, or it cannot tell
        return None


def cap_workers(requested: int, tasks: int, per_worker_bytes: int, *, cores: int | None = None,
                memory: int | None = -1) -> tuple[int, str | None]:
    """(workers, note): ``requested`` clamped to usable cores, pending ``tasks`` and memory / per-worker bytes.

    ``note`` says why when it was clamped (None otherwise). ``memory=-1`` reads MemAvailable.
    """
    cores = usable_cores() if cores is None else cores
    memory = available_memory() if memory == -1 else memory
    limits = {"cores": cores, "pending tasks": max(1, tasks)}
    if memory is not None:
        limits[f"{memory / 2**30:.1f} GiB available at ≈{per_worker_bytes / 2**20:.0f} MiB per worker"] = \
            max(1, memory // per_worker_bytes)
    k = min(requested, *limits.values())
    if k == requested:
        return k, None
    why = ", ".join(f"{name}: {v}" for name, v in limits.items() if v < requested)
    return k, f"--workers {requested} clamped to {k} ({why})"
