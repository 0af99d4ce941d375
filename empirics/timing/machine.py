"""The machine a timing ran on: CPU model, usable cores, load average and torch threads (for the timing rule's gate).

A ratio of timings measured on a shared machine moves with its load, so every timing records the state of
the machine: ``sapa.rules.timing`` refuses to decide when the load average exceeds the cores.
"""

from __future__ import annotations

import os
import platform

__all__ = ["machine_state", "cpu_model", "usable_cores", "load_average"]


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


def load_average() -> dict:
    """{"1min", "5min", "15min", "running"}: the load averages and the runnable tasks now (/proc/loadavg), or None."""
    try:
        one, five, fifteen = os.getloadavg()
    except (OSError, AttributeError):
        return {"1min": None, "5min": None, "15min": None, "running": None}
    running = None
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            running = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        pass
    return {"1min": one, "5min": five, "15min": fifteen, "running": running}


def machine_state() -> dict:
    """CPU model, usable and logical cores, torch threads and the load average now (``load_before``)."""
    import torch

    return {"cpu_model": cpu_model(), "cores": usable_cores(), "logical_cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
            "load_before": load_average()}
