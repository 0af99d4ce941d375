"""The machine a timing ran on: CPU model, usable cores, its load and torch threads (for the timing rule's gate).

A ratio of timings measured on a shared machine moves with its load, so every timing records the state of
the machine: ``sapa.rules.timing`` refuses to decide when the load exceeds the cores. The load that counts is
the number of runnable tasks *while the timings run* (:class:`RunQueueSampler`); the 1-minute load average is
recorded too, but it still carries a minute of what ran before (a ledger run's own training study, finished
seconds before its timings began, kept it above 2 on 2 cores while one task was running).
"""

from __future__ import annotations

import os
import platform
import threading

__all__ = ["machine_state", "cpu_model", "usable_cores", "load_average", "running_tasks", "own_running_threads",
           "RunQueueSampler"]


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else platform.processor() or the machine type."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def running_tasks() -> int | None:
    """Runnable tasks on the machine now, the reader included (/proc/loadavg's 4th field), or None."""
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def own_running_threads() -> int | None:
    """This process's threads that are runnable now (state R in /proc/self/task/*/stat), or None."""
    n = 0
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/stat", encoding="utf-8") as f:
                n += f.read().rsplit(")", 1)[1].split()[0] == "R"
    except (OSError, IndexError):
        return None
    return n


class RunQueueSampler:
    """The load while a block runs: 1 (the timed work) + other processes' runnable tasks, sampled by a thread.

    Every ``interval`` seconds the thread reads the machine's runnable tasks (:func:`running_tasks`) and
    subtracts this process's runnable threads (:func:`own_running_threads`: the sampler itself, and the timed
    thread when it is not waiting for the interpreter lock at that instant); the timed work counts as one
    task always. ``summary()`` gives {"mean", "max", "samples", "interval_s"} (mean and max None where the
    counts are unavailable). Reading two small /proc files five times a second costs the timings nothing
    measurable.
    """

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = float(interval)
        self._loads: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sapa-run-queue", daemon=True)

    def _sample(self) -> None:
        total, own = running_tasks(), own_running_threads()
        if total is not None and own is not None:
            self._loads.append(1 + max(0, total - own))

    def _run(self) -> None:
        self._sample()
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "RunQueueSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        c = self._loads
        return {"mean": round(sum(c) / len(c), 3) if c else None, "max": max(c) if c else None,
                "samples": len(c), "interval_s": self.interval}


def load_average() -> dict:
    """{"1min", "5min", "15min", "running"}: the load averages and the runnable tasks now (/proc/loadavg), or None."""
    try:
        one, five, fifteen = os.getloadavg()
    except (OSError, AttributeError):
        return {"1min": None, "5min": None, "15min": None, "running": None}
    return {"1min": one, "5min": five, "15min": fifteen, "running": running_tasks()}


def machine_state() -> dict:
    """CPU model, usable and logical cores, torch threads and the load average now (``load_before``)."""
    import torch

    return {"cpu_model": cpu_model(), "cores": usable_cores(), "logical_cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
            "load_before": load_average()}
