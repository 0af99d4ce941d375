"""Worker processes that die with their parent: a spawn-context pool of single-threaded, deterministic workers.

Long experiments (the training study) run independent units of work in ``concurrent.futures``
process pools. Every worker pins the kernel dispatch (:mod:`common.numerics`), uses one torch
thread and deterministic algorithms, so a unit gives the same numbers in a worker as in the
parent; and it dies with its parent (PR_SET_PDEATHSIG plus a ``getppid`` watchdog), so a killed
command never leaves workers computing for nobody.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing as mp
import os
import sys
import time

import torch

from common.allocator import keep_freed_memory
from common.collector import collect_less_often
from common.numerics import pin_kernel_dispatch

__all__ = ["deterministic_algorithms", "one_thread", "worker_init", "die_with_parent", "terminate_workers", "process_pool",
           "DeafProcess", "DeafSpawn"]

PR_SET_PDEATHSIG = 1  # linux/prctl.h
WATCHDOG_S = 1.0  # how often a worker checks that its parent is alive


def deterministic_algorithms(mode: bool) -> None:
    """``torch.use_deterministic_algorithms(mode)`` for eager kernels, without importing ``torch._inductor``.

    The public call imports ``torch._inductor.config`` (and with it dynamo: 2.4 CPU-s in every fresh worker) only
    to set the flag ``torch.compile`` reads; sapa trains eagerly. Once inductor is loaded (a caller compiles), or
    where torch lacks the setter, the public call is used.
    """
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None or "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode)
    else:
        setter(mode, warn_only=False)


@contextlib.contextmanager
def one_thread():
    """One torch thread and deterministic algorithms (:func:`deterministic_algorithms`) inside; both restored after."""
    before, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    deterministic_algorithms(True)
    try:
        yield
    finally:
        deterministic_algorithms(det)
        torch.set_num_threads(before)


def worker_init(parent_pid: int | None = None, niceness: int = 0) -> None:
    """Pool initializer: die with ``parent_pid``, pin the kernel dispatch, one torch thread, ``os.nice(niceness)``.

    A positive ``niceness`` makes the worker yield the cores to normal-priority work and take what they leave idle
    (``sapa verify`` trains its study so: the study fills the gaps between the other checks).
    """
    if parent_pid is not None:
        die_with_parent(parent_pid)
    if niceness:
        os.nice(niceness)
    pin_kernel_dispatch()  # inherited from the parent already; kept in case a caller cleared it
    torch.set_num_threads(1)
    keep_freed_memory()  # not inherited through spawn
    collect_less_often()  # nor is this


def die_with_parent(parent_pid: int) -> None:
    """Make this process die with ``parent_pid``: PR_SET_PDEATHSIG(SIGKILL) on Linux, and a getppid() watchdog."""
    import ctypes
    import signal
    import threading

    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(WATCHDOG_S)
        os._exit(1)

    threading.Thread(target=watch, name="sapa-parent-watchdog", daemon=True).start()


def terminate_workers(ex: cf.ProcessPoolExecutor) -> None:
    """Stop the pool's worker processes now (SIGTERM), so an interrupted run does not wait for work in flight."""
    for proc in list((getattr(ex, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            proc.terminate()


class DeafProcess(mp.context.SpawnProcess):
    """A spawned process that never sees SIGINT: it starts with SIGINT blocked (the mask is inherited through fork
    and exec), so a Ctrl-C sent to the terminal's process group reaches the parent alone, which stops its workers
    (:func:`terminate_workers`) and says in one line what it kept — no worker prints a traceback, even while it is
    still importing."""

    def start(self) -> None:
        import signal

        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # this thread only, for the fork
        try:
            super().start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


class DeafSpawn(type(mp.get_context("spawn"))):
    """The spawn context whose processes are :class:`DeafProcess`."""

    Process = DeafProcess


def process_pool(workers: int, niceness: int = 0) -> cf.ProcessPoolExecutor:
    """A spawn-context pool of ``workers`` processes initialised by :func:`worker_init` (dying with this one, deaf to
    SIGINT: :class:`DeafProcess`)."""
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=DeafSpawn(), initializer=worker_init,
                                  initargs=(os.getpid(), niceness))
