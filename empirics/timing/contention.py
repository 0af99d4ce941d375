"""Machine states for timing: quiet, a compute load (busy loops) and a memory-bandwidth load (large array copies).

A timing measured in process CPU time is immune to a neighbour that only takes a core (it costs wall time), but not
to one that saturates the memory bus: a form that streams an N×N matrix waits on memory, and those stalls are
charged to its CPU time while a fused kernel that keeps its tiles in cache hardly notices. :func:`loaded` runs
``workers`` neighbours of one kind for the length of a ``with`` block, each in its own process, so a timing can
be repeated in each state and the between-run drift measured across states (``sapa.empirics.timing.drift``).

  compute  ``while True: pass`` in a fresh interpreter: one core busy, no memory traffic.
  memory   ``np.copyto(b, a)`` over two arrays of ``mib`` MiB each (256 MiB: far above any cache), forever: a core
           busy streaming 2·mib MiB per copy through the memory bus.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

STATES = ("quiet", "compute", "memory")
DEFAULT_WORKERS = 2   # two neighbours on a 2-core machine: the timed thread always shares a core
DEFAULT_MIB = 256     # each array of a memory neighbour; two per neighbour

_COMPUTE = "while True:\n    pass\n"
_MEMORY = ("import sys, numpy as np\n"
           "n = int(sys.argv[1]) * 2**20 // 8\n"
           "a = np.ones(n); b = np.empty(n); np.copyto(b, a)\n"  # (n,) float64 each, both touched before "ready"
           "print('ready', flush=True)\n"
           "while True:\n    np.copyto(b, a)\n")


def load_command(state: str, mib: int = DEFAULT_MIB) -> list[str] | None:
    """The argv of one neighbour of ``state`` (None for quiet)."""
    if state not in STATES:
        raise ValueError(f"unknown machine state {state!r}; choose one of {', '.join(STATES)}")
    if isinstance(mib, bool) or not isinstance(mib, int) or mib <= 0:
        raise ValueError(f"mib must be a positive integer, got {mib!r}")
    if state == "quiet":
        return None
    if state == "compute":
        return [sys.executable, "-c", _COMPUTE]
    return [sys.executable, "-c", _MEMORY, str(mib)]


@contextlib.contextmanager
def loaded(state: str, workers: int = DEFAULT_WORKERS, mib: int = DEFAULT_MIB) -> Iterator[list[int]]:
    """Run ``workers`` neighbours of ``state`` while the block runs; yield their pids (empty when quiet).

    A memory neighbour is waited for until its arrays are allocated and touched ("ready"), so the block starts
    under the full load. The neighbours are killed (SIGKILL) and reaped however the block ends.
    """
    cmd = load_command(state, mib)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers <= 0:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    procs: list[subprocess.Popen] = []
    try:
        if cmd is not None:
            env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            for _ in range(workers):
                procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                                              text=True))
            if state == "memory":
                for p in procs:
                    line = p.stdout.readline()
                    if line.strip() != "ready":
                        raise RuntimeError(f"a memory neighbour did not start (rc={p.poll()})")
            time.sleep(0.2)  # let the scheduler see them
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()
            if p.stdout is not None:
                p.stdout.close()
