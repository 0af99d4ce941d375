"""common.pool: one thread and deterministic algorithms inside ``one_thread``, without loading torch._inductor."""

from __future__ import annotations

import subprocess
import sys

import pytest

from common.collector import THRESHOLDS


@pytest.mark.slow  # fresh interpreters (~2 s)
def test_one_thread_and_a_fresh_worker_import_neither_inductor_nor_dynamo_and_a_worker_takes_its_niceness():
    code = (
        "import sys, torch\n"
        "from common.pool import one_thread\n"
        "from empirics.training.tiny_models import ARMS, TinyModelConfig, build_model\n"
        "torch.set_num_threads(2)\n"
        "assert not torch.are_deterministic_algorithms_enabled()\n"
        "with one_thread():\n"
        "    assert torch.are_deterministic_algorithms_enabled() and torch.get_num_threads() == 1\n"
        "    assert not torch.is_deterministic_algorithms_warn_only_enabled()\n"
        "    for task in ('digits', 'text'):\n"
        "        build_model(task, ARMS['x3'], TinyModelConfig(width=8, layers=1, heads=2), torch.Generator(),\n"
        "                    vocab=5, context=4)\n"
        "assert not torch.are_deterministic_algorithms_enabled() and torch.get_num_threads() == 2\n"
        "print('torch._inductor' in sys.modules, 'torch._dynamo' in sys.modules)\n"
        "import os\n"
        "from common.pool import worker_init\n"
        "before = os.nice(0)\n"
        "worker_init(None, niceness=3)\n"
        "print(os.nice(0) - before, torch.get_num_threads())\n"
        "import gc\n"
        "print(gc.get_threshold())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # the public determinism call would load inductor and dynamo (2.4 CPU-s a worker); a model built on the meta
    # device, dynamo (1.5–2.4 CPU-s)
    assert out.split("\n")[0] == "False False"
    assert out.split("\n")[1] == "3 1"  # a worker of a lower-priority pool (sapa verify's training study)
    assert out.split("\n")[2] == str(THRESHOLDS)  # spawned workers inherit no gc thresholds: worker_init sets them


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


@pytest.mark.slow  # a fresh process group with a two-worker pool (~5 s)
def test_a_ctrl_c_to_the_process_group_reaches_the_parent_alone():
    """A SIGINT to the terminal's group while workers were still importing printed their tracebacks (and broke the
    pool); workers start with SIGINT blocked, so only the parent sees it."""
    code = (
        "import os, signal, sys, time\n"
        "from common.pool import process_pool\n"
        "def main():\n"
        "    ex = process_pool(2)\n"
        "    futs = [ex.submit(time.sleep, 2) for _ in range(2)]\n"
        "    time.sleep(0.3)\n"
        "    try:\n"
        "        os.killpg(os.getpgrp(), signal.SIGINT)\n"
        "        time.sleep(5)\n"
        "    except KeyboardInterrupt:\n"
        "        print('parent interrupted')\n"
        "    print([f.result() for f in futs])\n"
        "    ex.shutdown()\n"
        "if __name__ == '__main__':\n"
        "    main()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         start_new_session=True)
    assert out.stdout.split("\n")[:2] == ["parent interrupted", "[None, None]"] and out.stderr == "", out.stderr
