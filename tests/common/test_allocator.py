"""sapa.common.allocator: glibc keeps freed heap memory (mmap threshold at its maximum, no trimming)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from sapa.common.allocator import keep_freed_memory

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_glibc_accepts_both_thresholds():
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # idempotent


@pytest.mark.slow
@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_a_sweep_cell_faults_its_pages_in_once_in_the_command_and_in_pool_workers():
    """The point of it: the quick sweep's N = 512 cells free and allocate (T, B, N) blocks of varying size; with
    glibc's defaults each is faulted in again, with the setting only the first time the heap reaches its peak. So the
    faults are counted on a second pass over the cells, after one that grew the heap (one trial at a time, in one
    pass: 610 k minor faults and 1.1 s in the kernel, kept: 4.5 k; batched trials touch their peak once, ~30 k, so
    a single pass no longer separates the two). The setting takes effect through `sapa`'s entry point and through a
    pool worker's initialiser (spawned workers inherit nothing), each in a fresh interpreter."""
    setups = {
        "off": "",
        "allocator": "from sapa.common.allocator import keep_freed_memory; keep_freed_memory()",
        "command": "from sapa.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass",
        "worker": "from sapa.common.pool import worker_init; worker_init()",
    }
    code = (
        "import resource, sys, contextlib, io, torch\n"
        "torch.set_num_threads(1)\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    exec(sys.argv[1])\n"
        "from sapa.empirics.montecarlo.sweep import builtin_config, load_config, with_overrides\n"
        "from sapa.empirics.montecarlo.sweep.cells import cells\n"
        "from sapa.empirics.montecarlo.sweep.run import run_cell\n"
        "cfg = with_overrides(load_config(builtin_config('quick')), seed=0, N=[512], D=[16], weight_model=['paper'])\n"
        "for c in cells(cfg): run_cell(cfg, c)\n"  # the first pass grows the heap to its peak
        "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for c in cells(cfg): run_cell(cfg, c)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)\n")
    faults = {m: int(subprocess.run([sys.executable, "-c", code, setup], capture_output=True, text=True, check=True)
                     .stdout) for m, setup in setups.items()}
    for m in ("allocator", "command", "worker"):
        assert faults[m] * 10 < faults["off"], faults
