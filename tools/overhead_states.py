"""Time the overhead entry's quick grid in fresh processes under each machine state; write the runs it stores.

``python3 tools/overhead_states.py OUT.json --runs 5 [--states quiet compute memory] [--threads 1]``

Each run is one fresh interpreter that times the quick grid exactly as ``sapa verify --only overhead`` does on its
first look (``sapa.empirics.timing.overhead.bench_overhead`` at ``QUICK``, seed 0, the claim's best form per cell) while
:func:`sapa.empirics.timing.contention.loaded` keeps the state's neighbours running. The states are interleaved
(quiet, compute, memory, quiet, …) so a slow change of the machine hits every state alike. ``--threads 0`` times
with torch's default thread count (the platform row). Runs already in OUT are kept and new ones appended, so an
interrupted collection resumes; the file is written atomically after every run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def one_run(threads: int) -> dict:
    """The first-look per-round ratios of the quick grid in this process: {"process": {cell: rounds}, "wall": …}."""
    import torch

    from sapa.common.allocator import keep_freed_memory
    from sapa.empirics.timing import overhead as ov
    from sapa.claims.overhead import best_ratios

    keep_freed_memory()
    res = ov.bench_overhead(grid=ov.QUICK, threads=threads or None, device="cpu")
    cells = best_ratios(res["rows"], res["grid"]["d"])
    m = res["provenance"].get("machine") or {}
    return {"process": {k: list(c.get("rounds") or ()) for k, c in sorted(cells.items())},
            "wall": {k: list(c.get("wall_rounds") or ()) for k, c in sorted(cells.items())},
            "threads": torch.get_num_threads() if not threads else threads,
            "load_during_mean": (m.get("load_during") or {}).get("mean"), "cpu_model": m.get("cpu_model"),
            "cores": m.get("cores"), "repeats": res["grid"]["repeats"], "seed": res["grid"]["seed"],
            "seconds": res["seconds_total"]}


def main(argv: list[str] | None = None) -> int:
    from sapa.common.atomic import atomic_write_json
    from sapa.empirics.timing.contention import DEFAULT_MIB, STATES, loaded

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--runs", type=int, default=5, help="runs per state (default 5)")
    ap.add_argument("--states", nargs="+", choices=STATES, default=list(STATES))
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(one_run(a.threads)))
        return 0
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    data = json.loads(a.out.read_text()) if a.out.exists() else {"runs": []}
    done = {}
    for r in data["runs"]:
        if r.get("threads_asked") == a.threads:
            done[r["state"]] = done.get(r["state"], 0) + 1
    for k in range(a.runs):
        for state in a.states:
            if done.get(state, 0) > k:
                continue
            t0 = time.perf_counter()
            with loaded(state) as pids:
                proc = subprocess.run([sys.executable, __file__, str(a.out), "--one", "--threads", str(a.threads)],
                                      capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                return 1
            run = json.loads(proc.stdout.strip().splitlines()[-1])
            run.update(state=state, threads_asked=a.threads, git_commit=commit,
                       started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - (time.perf_counter() - t0))),
                       load={"kind": state, "neighbours": len(pids),
                             "mib_per_array": DEFAULT_MIB if state == "memory" else None})
            data["runs"].append(run)
            atomic_write_json(a.out, data)
            print(f"{state:8s} run {k + 1}/{a.runs} threads {run['threads']}: {time.perf_counter() - t0:.1f} s, "
                  f"load during {run['load_during_mean']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
