"""common.pool: one thread and deterministic algorithms inside ``one_thread``, without loading torch._inductor."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_one_thread_sets_and_restores_determinism_without_importing_inductor():
    code = (
        "import sys, torch\n"
        "from common.pool import one_thread\n"
        "torch.set_num_threads(2)\n"
        "assert not torch.are_deterministic_algorithms_enabled()\n"
        "with one_thread():\n"
        "    assert torch.are_deterministic_algorithms_enabled() and torch.get_num_threads() == 1\n"
        "    assert not torch.is_deterministic_algorithms_warn_only_enabled()\n"
        "assert not torch.are_deterministic_algorithms_enabled() and torch.get_num_threads() == 2\n"
        "print('torch._inductor' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"  # the public call would have loaded inductor and dynamo (2.4 CPU-s a worker)


@pytest.mark.slow
def test_once_inductor_is_loaded_its_flag_follows_too():
    code = (
        "import torch, torch._inductor.config as cfg\n"
        "from common.pool import deterministic_algorithms\n"
        "deterministic_algorithms(True)\n"
        "assert torch.are_deterministic_algorithms_enabled() and cfg.deterministic\n"
        "deterministic_algorithms(False)\n"
        "assert not torch.are_deterministic_algorithms_enabled() and not cfg.deterministic\n")
    subprocess.run([sys.executable, "-c", code], check=True)
