"""Monte Carlo sweeps on a Dask cluster (arXiv 2410.18613 sweeps that outgrow one machine).

:func:`executor_for` gives :func:`sapa.empirics.montecarlo.sweep.run_sweep` a standard
``concurrent.futures.Executor`` to run its cells on; ``run_sweep`` knows no Dask:

* ``workers=1`` (and no scheduler): ``None``, i.e. the serial path in this process;
* ``workers=K > 1``: an embedded ``LocalCluster(n_workers=K, threads_per_worker=1,
  processes=True)`` (dashboard off, logs silenced) and a :class:`DaskExecutor` on its client;
* ``scheduler=ADDRESS`` (``tcp://host:8786``, or the path of a ``--scheduler-file``): a
  :class:`DaskExecutor` on a running cluster (``dask scheduler`` / ``dask worker``,
  dask-jobqueue, ...); an unreachable scheduler is one :class:`InputError` line after ``timeout`` s.

:class:`DaskExecutor` is ``Client.get_executor(pure=False, retries=RETRIES)`` with two
additions; each ``submit`` is one task, results stream back in completion order and
``run_sweep`` writes each one atomically as it arrives, so a killed client loses only cells
in flight and a rerun resumes. Fault model:

* a worker process that dies (killed, out of memory, node lost) has its tasks rescheduled
  by the scheduler on the remaining workers (the nanny of a ``LocalCluster`` also restarts
  it); a task that takes ``distributed.scheduler.allowed-failures`` + 1 workers down with it
  fails with :class:`WorkerLostError` (``run_sweep`` then names the cell);
* an exception inside a task is retried ``RETRIES`` times (transient faults such as a
  ``MemoryError``), except :class:`InputError` (bad config, ``NormOverflowError``), which is
  deterministic: the task returns it as a value, so it is not retried, and its future raises it;
* results are bit-identical whatever the executor: :func:`sapa.empirics.montecarlo.sweep.run_cell` is a pure
  function of ``(config, cell)`` and runs with ``config.threads`` torch threads (default 1).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Iterator

from sapa.common.validate import InputError, positive_float, positive_int

__all__ = [
    "RETRIES",
    "CONNECT_TIMEOUT_S",
    "WorkerLostError",
    "DaskExecutor",
    "executor_for",
    "wait_for_workers",
    "describe",
    "worker_pids",
]

RETRIES = 2  # re-runs of a cell after a non-InputError exception inside it
CONNECT_TIMEOUT_S = 10.0  # seconds to reach a remote scheduler before giving up


class WorkerLostError(RuntimeError):
    """A task took down ``allowed-failures`` + 1 workers with it (``distributed.KilledWorker``)."""


def _import_distributed():
    try:
        import distributed
    except ImportError:  # pragma: no cover - dist extra missing
        raise InputError("--workers > 1 and --scheduler need dask.distributed: run python3 -m pip install -e '.[dist]' "
                         "in the sapa checkout") from None
    return distributed


@contextlib.contextmanager
def _quiet_logs(level: int = logging.ERROR) -> Iterator[None]:
    """Raise the level of the ``distributed`` loggers in this process for the block."""
    names = ("distributed", "distributed.nanny", "distributed.scheduler", "distributed.worker", "distributed.core",
             "distributed.client", "distributed.batched", "distributed.comm", "tornado")
    loggers = [logging.getLogger(n) for n in names]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, lv in zip(loggers, before):
            lg.setLevel(lv)


def _connect(distributed, scheduler: str, timeout: float):
    """A Client on a running scheduler (address or scheduler file), or InputError in one line."""
    address = _resolve(scheduler)
    ident = _identity(address, timeout)
    if ident.get("type") != "Scheduler":
        raise InputError(f"--scheduler {address} answers, but as a {ident.get('type', 'non-Dask server')!s}, not a Dask scheduler")
    try:
        client = distributed.Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:  # pragma: no cover - it answered a moment ago
        raise InputError(f"cannot connect to the Dask scheduler at {address} ({_short(exc)})") from None
    if not ident.get("n_workers", len(ident.get("workers", {}))):
        print(f"sapa: the scheduler at {address} has no workers yet; cells wait for one", file=sys.stderr)
    return client


def _resolve(scheduler: str) -> str:
    """The address in ``scheduler``: ``tcp://host:port``, ``host:port`` or a ``--scheduler-file`` JSON path."""
    target = scheduler.strip()
    if not target:
        raise InputError("--scheduler must be an address like tcp://host:8786 or a scheduler file, got ''")
    if "://" in target or Path(target).suffix != ".json":
        return target
    path = Path(target)
    from sapa.common.readfile import read_regular_text

    text = read_regular_text(path, "--scheduler")  # one line for a missing file, a FIFO or a device
    try:
        address = json.loads(text)["address"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"--scheduler: {target} is not a Dask scheduler file ({_short(exc)})") from None
    if not isinstance(address, str):
        raise InputError(f"--scheduler: {target} holds no scheduler address")
    return address


def _identity(address: str, timeout: float) -> dict:
    """The scheduler's ``identity`` reply, within ``timeout`` seconds, or one InputError line.

    ``distributed.Client`` can wait forever on a port where something else listens (its
    handshake has no deadline), so we say hello ourselves first, with one.
    """
    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, loc = parse_address(address)
        if scheme in ("tcp", "tls"):
            host, port = parse_host_port(loc)
    except (ValueError, TypeError) as exc:
        raise InputError(f"--scheduler {address!r} is not a usable Dask scheduler address ({_short(exc)})") from None
    if scheme in ("tcp", "tls"):  # refuse fast: distributed's own connect retries until the timeout
        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except (OSError, OverflowError, ValueError) as exc:
            raise InputError(f"cannot reach a Dask scheduler at {address} ({_short(exc)})") from None

    async def hello() -> dict:
        comm = await asyncio.wait_for(connect(address, timeout=timeout), timeout)
        try:
            await asyncio.wait_for(comm.write({"op": "identity"}), timeout)
            return await asyncio.wait_for(comm.read(), timeout)
        finally:
            comm.abort()

    with cf.ThreadPoolExecutor(1) as pool:  # a fresh event loop, even if the caller runs one
        try:
            reply = pool.submit(asyncio.run, hello()).result()
        except (OSError, TimeoutError, asyncio.TimeoutError) as exc:
            raise InputError(f"cannot reach a Dask scheduler at {address} within {timeout:g} s ({_short(exc)})") from None
        except ValueError as exc:  # unknown scheme and the like
            raise InputError(f"--scheduler {address!r} is not a usable Dask scheduler address ({_short(exc)})") from None
        except Exception as exc:  # noqa: BLE001 - garbage on the wire: not a Dask scheduler
            raise InputError(f"--scheduler {address} does not speak the Dask protocol ({_short(exc)})") from None
    return reply if isinstance(reply, dict) else {}


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


@contextlib.contextmanager
def executor_for(
    workers: int = 1,
    scheduler: str | None = None,
    *,
    timeout: float = CONNECT_TIMEOUT_S,
    memory_limit: str | int | None = "auto",
) -> Iterator[object]:
    """Where a sweep's cells run: ``None`` (serial), a ``LocalCluster(K)`` client, or a remote one.

    Args:
      workers: local worker processes; 1 means serial (yields ``None``), K > 1 starts an
        embedded ``LocalCluster(n_workers=K, threads_per_worker=1, processes=True)``.
      scheduler: address (``tcp://host:port``) or scheduler-file path of a running cluster;
        excludes ``workers > 1``.
      timeout: seconds to wait for a remote scheduler before an :class:`InputError`.
      memory_limit: per-worker memory limit of the local cluster (``LocalCluster`` semantics).

    Yields:
      ``None`` or a :class:`DaskExecutor`, for ``run_sweep(..., executor=...)``. Both the
      client and an embedded cluster are closed on exit, also after an error or Ctrl-C.
    """
    workers = positive_int("workers", workers)
    timeout = positive_float("timeout", timeout)
    if scheduler is not None and not isinstance(scheduler, str):
        raise InputError(f"scheduler must be an address string, got {scheduler!r}")
    if scheduler is not None and workers > 1:
        raise InputError("give either workers > 1 (a local cluster) or scheduler (a running one), not both")
    if scheduler is None and workers == 1:
        yield None
        return
    distributed = _import_distributed()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_quiet_logs())
        if scheduler is not None:
            client = _connect(distributed, scheduler, timeout)
            stack.callback(_close, client)
        else:
            cluster = distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",  # the scheduler's HTTP server: any free port ...
                scheduler_kwargs={"dashboard": False},  # ... and no dashboard on it
                worker_dashboard_address=None,
                silence_logs=logging.ERROR,
                memory_limit=memory_limit,
                preload=["sapa.empirics.montecarlo.sweep"],  # import torch & co. while the workers start, not in the first cell
            )
            stack.callback(_close, cluster)
            client = distributed.Client(cluster, set_as_default=False)
            stack.callback(_close, client)
        yield DaskExecutor(client)


def _client(obj):
    """The ``distributed.Client`` of a :class:`DaskExecutor`, or ``obj`` itself."""
    return obj.client if isinstance(obj, DaskExecutor) else obj


def wait_for_workers(client, timeout: float) -> None:
    """Block until the cluster of ``client`` (or of a :class:`DaskExecutor`) has a worker; InputError after ``timeout`` s."""
    timeout = positive_float("timeout", timeout)
    try:
        _client(client).wait_for_workers(1, timeout=timeout)
    except (TimeoutError, OSError) as exc:
        raise InputError(f"no Dask worker joined the scheduler within --timeout {timeout:g} s ({_short(exc)})") from None


def _close(obj) -> None:
    """Close a client or cluster, quietly, even while an exception propagates."""
    with contextlib.suppress(Exception), _quiet_logs(logging.CRITICAL):
        obj.close()


def describe(client) -> str:
    """Short text for the progress bar, e.g. ``dask: 2 workers``."""
    try:
        n = len(_client(client).scheduler_info().get("workers", {}))
    except Exception:  # noqa: BLE001 - purely cosmetic
        return "dask"
    return f"dask: {n} worker{'s' if n != 1 else ''}"


# --------------------------------------------------------------------------- the executor


class _ReturnInputError:
    """Worker side: ``fn(*args)``, with :class:`InputError` returned (not raised) so that Dask does not retry it."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "task")  # names the Dask task key

    def __call__(self, *args, **kwargs):
        try:
            return self.fn(*args, **kwargs)
        except InputError as exc:
            return exc


def _settle(inner: cf.Future, outer: cf.Future, killed_worker: type) -> None:
    """Copy the outcome of a Dask task onto ``outer``: a returned InputError is raised, KilledWorker is named."""
    if inner.cancelled():
        outer.cancel()
        return
    if not outer.set_running_or_notify_cancel():
        return
    exc = inner.exception()
    if isinstance(exc, killed_worker):
        outer.set_exception(WorkerLostError(
            "it took down a worker too often (out of memory? raise the workers' memory limit or lower the "
            "config's memory_gib)"))
    elif exc is not None:
        outer.set_exception(exc)
    elif isinstance(inner.result(), InputError):
        outer.set_exception(inner.result())
    else:
        outer.set_result(inner.result())


class DaskExecutor(cf.Executor):
    """A ``concurrent.futures.Executor`` on a Dask cluster: ``client.get_executor(pure=False, retries=RETRIES)``.

    ``submit(fn, *args)`` returns a ``concurrent.futures.Future``; an :class:`InputError` of
    ``fn`` is deterministic, so it is not retried; a task that keeps killing its workers
    fails with :class:`WorkerLostError`. ``client`` is the ``distributed.Client``.
    """

    def __init__(self, client, *, retries: int = RETRIES):
        self.client = client
        self._inner = client.get_executor(pure=False, retries=retries)
        self._killed_worker = _import_distributed().KilledWorker

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        inner = self._inner.submit(_ReturnInputError(fn), *args, **kwargs)
        outer: cf.Future = cf.Future()
        outer.add_done_callback(lambda f: f.cancelled() and inner.cancel())  # cancel the task on the cluster
        inner.add_done_callback(lambda f: _settle(f, outer, self._killed_worker))
        return outer

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._inner.shutdown(wait=wait and not cancel_futures)

    def describe(self) -> str:
        """Short text for the progress bar, e.g. ``dask: 2 workers``."""
        return describe(self.client)


def worker_pids(client) -> dict[str, int]:
    """``{worker address: pid}`` of the cluster's worker processes (for fault-injection tests)."""
    return _client(client).run(os.getpid)
