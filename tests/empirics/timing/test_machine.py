"""sapa.empirics.timing.machine: the load the timing rule's gate reads is the load while the timings run."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from sapa.empirics.timing.machine import RunQueueSampler, own_running_threads, running_tasks

LINUX = sys.platform.startswith("linux")


@pytest.mark.skipif(not LINUX, reason="/proc")
def test_counts_are_read():
    assert running_tasks() >= 1  # the reader itself
    assert own_running_threads() >= 1


@pytest.mark.skipif(not LINUX, reason="/proc")
def test_busy_processes_raise_the_load_during_the_block_and_an_idle_block_does_not():
    """Three spinning processes on any machine: the mean load during the block is at least 1 + 2 (each sample
    counts the spinners that are runnable, on a core or waiting for one); the timed work alone counts as 1."""
    spin = [subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 8: pass"])
            for _ in range(3)]
    try:
        time.sleep(0.3)  # the interpreters are up and spinning
        with RunQueueSampler(interval=0.05) as busy:
            time.sleep(0.6)
    finally:
        for p in spin:
            p.kill()
            p.wait()
    b = busy.summary()
    assert b["samples"] >= 5 and b["mean"] >= 3, b
    with RunQueueSampler(interval=0.05) as idle:  # nothing of ours runs: only the host's own tasks
        time.sleep(0.3)
    assert idle.summary()["mean"] < b["mean"] - 1.5, (idle.summary(), b)


def test_unavailable_counts_give_no_load(monkeypatch):
    from sapa.empirics.timing import machine

    monkeypatch.setattr(machine, "running_tasks", lambda: None)
    with RunQueueSampler(interval=0.01) as s:
        time.sleep(0.05)
    assert s.summary()["mean"] is None and s.summary()["max"] is None and s.summary()["samples"] == 0
