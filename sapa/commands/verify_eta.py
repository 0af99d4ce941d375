"""Each entry's cost, known before it is spent: wall ≈ cpu_s × (probe here / probe on the reference) / workers.

``sapa/costs.json`` (package data) holds, per budget, each ledger entry's measured cost in CPU-seconds — of sapa and
every worker it started while the entry ran (:func:`sapa.common.cputime.tree_cpu_seconds`, kept as ``cpu_seconds`` in each
ledger entry) — on a reference machine, with the CPU-seconds of a fixed small workload (:func:`probe_seconds`) on
that machine. A run into a folder without a ledger of its budget times the same workload here (a fraction of a
second) and scales every entry by the ratio: a slower or busier machine gets a proportionally longer estimate. The
work of ``sapa verify`` runs in about :data:`WORKERS` processes at once (the checks beside the training study's and the
sweep's pools), so an entry's wall time is its CPU-seconds over that many cores (fewer when the machine has fewer).

``python3 tools/write_costs.py LEDGER`` writes the file from a finished run's ledger (docs/performance.md).
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

__all__ = ["COSTS_FILE", "WORKERS", "probe_seconds", "probe_once", "load_costs", "scale", "expected_wall", "eta_line",
           "costs_from_ledger", "outside_fraction", "shipped_seconds"]

COSTS_FILE = Path(__file__).resolve().parents[1] / "costs.json"  # sapa/costs.json (package data)
WORKERS = 2  # processes ``sapa verify`` keeps busy: the checks, and the training study's or the sweep's pool beside them
PROBE_REPEATS = 5


def _workload() -> float:
    """A fixed small float64 workload of element-wise maps (numpy, one thread: no BLAS): the probe's unit."""
    import numpy as np

    x = np.random.default_rng(0).standard_normal(32_768)
    acc = 0.0
    for _ in range(50):
        x = np.tanh(1.1 * x) + 0.01 * np.sin(3.0 * x)
        acc += float(np.abs(x).sum())
    return acc


def probe_seconds(clock=time.perf_counter, repeats: int = PROBE_REPEATS) -> float:
    """Fewest seconds of :func:`_workload` by ``clock`` over ``repeats`` runs (≈ 0.1 s in all on a quiet core).

    The fewest, not the median: on a virtual machine the same calls in one process take either ≈ 0.02 s or ≈ 0.033 s
    (two speeds that alternate within a second or so; both seen in 3 of 5 processes here), so a median of a few calls reads
    either speed and moved a first run's ETA by 1.6× from one start to the next; the fewest reads the faster one
    on both machines.

    Here it is timed by the wall clock (a busy machine makes it slower, as it makes the run slower); on the
    reference machine by ``time.process_time``, the cost without the neighbours of that moment. numpy only: the
    first line of a run comes before torch is imported.
    """
    _workload()  # warm: the first call pays for the ufuncs' first dispatch
    times = []
    for _ in range(repeats):
        t0 = clock()
        _workload()
        times.append(clock() - t0)
    return min(times)


@functools.lru_cache(maxsize=1)
def probe_once() -> float:
    """:func:`probe_seconds`, measured once per process: a process that starts ``sapa verify`` again (a notebook, a
    test worker: 31 runs in the default tests, 0.1 CPU-s each) reads the machine's speed from its first run."""
    return probe_seconds()


def load_costs(path: str | Path | None = None) -> dict | None:
    """The shipped costs (None when the file is missing or unreadable)."""
    path = COSTS_FILE if path is None else path
    try:
        got = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) and isinstance(got.get("budgets"), dict) else None


def scale(probe_here_s: float, probe_ref_s: float) -> float:
    """How much longer one CPU-second of the reference takes here: probe here / probe on the reference.

    >>> scale(0.2, 0.1)
    2.0
    """
    return float(probe_here_s) / float(probe_ref_s)


def expected_wall(cpu_s: dict[str, float], factor: float, cores: int | None = None) -> dict[str, float]:
    """{entry: expected wall seconds here} = cpu_s × factor / min(WORKERS, cores).

    >>> expected_wall({"a": 10.0, "b": 3.0}, 1.5, cores=2)
    {'a': 7.5, 'b': 2.25}
    >>> expected_wall({"a": 10.0}, 1.0, cores=1)
    {'a': 10.0}
    """
    cores = os.cpu_count() or 1 if cores is None else cores
    par = max(1, min(WORKERS, int(cores)))
    return {k: float(v) * float(factor) / par for k, v in cpu_s.items()}


def shipped_seconds(budget: str, ids=None, probe=probe_seconds, path: str | Path | None = None) -> tuple[dict, str]:
    """({entry: expected wall seconds here}, basis) from the shipped costs of ``budget`` ({}, why not, when none)."""
    costs = load_costs(COSTS_FILE if path is None else path)
    b = (costs or {}).get("budgets", {}).get(budget)
    if not isinstance(b, dict) or not isinstance(b.get("entries"), dict):
        return {}, f"no shipped costs of the {budget} budget"
    ref = float(costs["probe"]["reference_cpu_s"])
    factor = scale(probe(), ref)
    cpu = {k: float(v) for k, v in b["entries"].items() if ids is None or k in ids}
    return expected_wall(cpu, factor), f"shipped costs × {factor:.2f} for this machine"


def outside_fraction(path: str | Path | None = None) -> float:
    """The reference run's wall time outside its entries (start, figures, report) over the time inside them (0 if
    unknown): the part of a run that no entry's cost holds."""
    got = (load_costs(path) or {}).get("reference", {}).get("outside_entries_fraction")
    return float(got) if isinstance(got, (int, float)) and got >= 0 else 0.0


def eta_line(expected: dict[str, float], ids, basis: str, outside: float | None = None) -> str:
    """The run's first line: how long its entries ``ids`` should take, from ``expected`` (entries without one named),
    plus ``outside`` × that for the start, the figures and the report (:func:`outside_fraction` when None).

    >>> eta_line({"a": 100.0, "b": 50.0}, ["a", "b"], "x", outside=0.0)
    'sapa verify: 2 entries, expected ~2.5 min (x)'
    >>> eta_line({"a": 30.0}, ["a", "c"], "x", outside=0.5)
    'sapa verify: 2 entries, expected ~45 s (x; no estimate for c)'
    """
    ids = list(ids)
    total = sum(expected.get(i, 0.0) for i in ids)
    total *= 1.0 + (outside_fraction() if outside is None else outside)
    missing = [i for i in ids if i not in expected]
    when = f"~{total:.0f} s" if total < 90 else f"~{total / 60:.1f} min"
    extra = f"; no estimate for {', '.join(missing)}" if missing else ""
    return f"sapa verify: {len(ids)} entries, expected {when} ({basis}{extra})"


def costs_from_ledger(ledger: dict, machine: str, load: str, probe_ref_s: float) -> dict:
    """The costs file's content from a finished ``sapa verify`` ledger (each entry's ``cpu_seconds``)."""
    prov = ledger["provenance"]
    name = (prov.get("budget") or {}).get("name")
    entries = {c["id"]: c["cpu_seconds"] for c in ledger["claims"] if isinstance(c.get("cpu_seconds"), (int, float))}
    if not entries:
        raise ValueError("the ledger's entries have no cpu_seconds (written before sapa kept them)")
    inside = sum(float(c.get("seconds") or 0.0) for c in ledger["claims"])
    wall = prov.get("wall_seconds")
    outside = round(max(0.0, float(wall) - inside) / inside, 3) if isinstance(wall, (int, float)) and inside else 0.0
    return {"about": "CPU-seconds of each ledger entry (sapa and its workers while the entry ran) on the reference "
                     "machine, and that machine's probe (sapa.commands.verify_eta.probe_seconds, process CPU time); a run scales "
                     "them by the probe timed here. Written by tools/write_costs.py from a finished run's ledger.",
            "reference": {"machine": machine, "load": load, "git_commit": prov.get("git_commit"),
                          "started_utc": prov.get("started_utc"), "wall_seconds": prov.get("wall_seconds"),
                          "torch": prov.get("torch"), "numpy": prov.get("numpy"),
                          "outside_entries_fraction": outside},
            "probe": {"reference_cpu_s": round(float(probe_ref_s), 5),
                      "workload": "sapa.commands.verify_eta._workload: 50 × (tanh, sin) over 32 768 float64 (numpy)"},
            "budgets": {name: {"entries": entries, "total_cpu_s": round(sum(entries.values()), 1)}}}
