"""Worker processes that die with their parent: a spawn-context pool of single-threaded, deterministic workers.

Long experiments (the training study) run independent units of work in ``concurrent.futures``
process pools. Every worker pins the kernel dispatch (:mod:`sapa.common.numerics`), uses one torch
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

from sapa.common.allocator import keep_freed_memory
from sapa.common.collector import collect_less_often
from sapa.common.numerics import pin_kernel_dispatch

__all__ = ["deterministic_algorithms", "one_thread", "worker_init", "die_with_parent", "stop_pool", "stopping_pool", "process_pool",
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


def stop_pool(ex: cf.ProcessPoolExecutor, grace_s: float = 5.0, wait_s: float = 60.0) -> None:
    """Shut ``ex`` down now, waiting for no work in flight: queued work is cancelled, the workers get SIGTERM (SIGKILL
    after ``grace_s``) and are reaped, and the pool's manager thread is let go even if a worker died mid-result.

    A worker killed while it wrote a result leaves half a message in the result pipe; the manager thread then waits in
    ``recv`` for the rest, for ever, because this process still holds the pipe's write end — ``shutdown(wait=True)``
    hung, and so did the interpreter's exit, which joins that thread (an interrupted ``sapa verify`` printed its line
    and never ended). Once every worker is dead nobody else can write, so closing that end here turns the half message
    into end-of-file: the manager marks the pool broken, fails what was pending and ends.
    """
    # CPython's executor: its workers, result queue and manager thread (shutdown forgets them: taken first)
    procs = list((getattr(ex, "_processes", None) or {}).values())
    writer = getattr(getattr(ex, "_result_queue", None), "_writer", None)
    thread = getattr(ex, "_executor_manager_thread", None)
    ex.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.terminate()
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.join(grace_s)
            if proc.is_alive():
                proc.kill()
                proc.join()
    if writer is not None:
        with contextlib.suppress(OSError):
            writer.close()
    if thread is not None and thread.is_alive():
        thread.join(wait_s)


class DeafProcess(mp.context.SpawnProcess):
    """A spawned process that never sees SIGINT, and whose launch a stop signal cannot cut short.

    It starts with SIGINT blocked (the mask is inherited through fork and exec), so a Ctrl-C sent to the terminal's
    process group reaches the parent alone, which stops its workers (:func:`stop_pool`) and says in one line what it
    kept — no worker prints a traceback, even while it is still importing. A stop signal that arrives while the parent
    launches the child (another thread receives it; the main thread's Python handler would raise between the fork and
    the write of the child's start-up data, and the child died printing ``EOFError: Ran out of input``) is held and
    raised again the moment the launch has finished.
    """

    def start(self) -> None:
        import signal
        import threading

        held: list[int] = []
        handlers = {}
        if threading.current_thread() is threading.main_thread():  # only there can handlers be changed, or run
            for sig in (signal.SIGINT, signal.SIGTERM):
                if callable(signal.getsignal(sig)):  # a Python handler (SIG_DFL and SIG_IGN act in C, not mid-launch)
                    handlers[sig] = signal.signal(sig, lambda signum, frame: held.append(signum))
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # this thread only, for the fork
        try:
            super().start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            for signum in dict.fromkeys(held):  # once each, now that the child has what it needs
                signal.raise_signal(signum)


class DeafSpawn(type(mp.get_context("spawn"))):
    """The spawn context whose processes are :class:`DeafProcess`."""

    Process = DeafProcess


@contextlib.contextmanager
def stopping_pool(workers: int, niceness: int = 0):
    """A :func:`process_pool` for the ``with`` block: shut down waiting for its work when the block ends, stopped at
    once (:func:`stop_pool`) when it raises — an interrupt does not wait for the work in flight."""
    ex = process_pool(workers, niceness)
    try:
        yield ex
    except BaseException:
        stop_pool(ex)
        raise
    ex.shutdown(wait=True)


def _skip_done_futures_when_broken(thread) -> None:
    """Make the manager ``thread``'s ``terminate_broken`` (marks every pending future failed) skip the futures already
    done.

    CPython 3.11 calls ``set_exception`` on each pending future, which raises ``InvalidStateError`` on one its caller
    cancelled (``Executor.map`` cancels its futures as an interrupt unwinds it; gh-107219, fixed in 3.12): the thread
    died printing a traceback, and the futures after that one were never marked. Each retry drops the futures already
    done (the cancelled one, and those just marked), so it ends; where CPython skips them itself nothing is retried.
    """
    original = thread.terminate_broken

    def terminate_broken(cause):
        while True:
            try:
                return original(cause)
            except cf.InvalidStateError:
                thread.pending_work_items = {k: w for k, w in thread.pending_work_items.items() if not w.future.done()}

    thread.terminate_broken = terminate_broken


class _Pool(cf.ProcessPoolExecutor):
    """A ``ProcessPoolExecutor`` whose manager thread survives a worker's death after a caller cancelled a queued
    future (:func:`_skip_done_futures_when_broken`)."""

    def _start_executor_manager_thread(self) -> None:
        fresh = self._executor_manager_thread is None
        super()._start_executor_manager_thread()
        if fresh and self._executor_manager_thread is not None:  # it calls terminate_broken only once a worker died
            _skip_done_futures_when_broken(self._executor_manager_thread)


def process_pool(workers: int, niceness: int = 0) -> cf.ProcessPoolExecutor:
    """A spawn-context pool of ``workers`` processes initialised by :func:`worker_init` (dying with this one, deaf to
    SIGINT: :class:`DeafProcess`); stop it mid-work with :func:`stop_pool`."""
    return _Pool(max_workers=workers, mp_context=DeafSpawn(), initializer=worker_init, initargs=(os.getpid(), niceness))
