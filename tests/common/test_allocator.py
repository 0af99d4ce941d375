"""common.allocator: glibc keeps freed heap memory (mmap threshold at its maximum, no trimming)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from common.allocator import keep_freed_memory

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_glibc_accepts_both_thresholds():
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # idempotent


def test_the_command_and_the_pool_workers_set_it():
    """`sapa` sets it before any command runs, and every pool worker (spawned: nothing inherited) sets its own."""
    import inspect

    from common import pool
    from sapa import cli

    assert "keep_freed_memory()" in inspect.getsource(cli.main)
    assert "keep_freed_memory()" in inspect.getsource(pool.worker_init)


@pytest.mark.slow
@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_a_sweep_cell_faults_its_pages_in_once():
    """The point of it: the quick sweep's N = 512 cells free and allocate (T, B, N) blocks of varying size; with
    glibc's defaults each is faulted in again (measured 610 k minor faults, 1.1 s in the kernel), kept: 4.5 k."""
    code = (
        "import resource, sys, torch\n"
        "torch.set_num_threads(1)\n"
        "from common.allocator import keep_freed_memory\n"
        "if sys.argv[1] == 'on': keep_freed_memory()\n"
        "from empirics.montecarlo.sweep import builtin_config, load_config, with_overrides\n"
        "from empirics.montecarlo.sweep.cells import cells\n"
        "from empirics.montecarlo.sweep.run import run_cell\n"
        "cfg = with_overrides(load_config(builtin_config('quick')), seed=0, N=[512], D=[16], weight_model=['paper'])\n"
        "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for c in cells(cfg): run_cell(cfg, c)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)\n")
    faults = {m: int(subprocess.run([sys.executable, "-c", code, m], capture_output=True, text=True, check=True)
                     .stdout) for m in ("off", "on")}
    assert faults["on"] * 10 < faults["off"], faults
