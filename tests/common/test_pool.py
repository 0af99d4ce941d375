"""sapa.common.pool: one thread and deterministic algorithms inside ``one_thread``, without loading torch._inductor."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sapa.common.collector import THRESHOLDS


@pytest.mark.slow  # fresh interpreters (~2 s)
def test_one_thread_and_a_fresh_worker_import_neither_inductor_nor_dynamo_and_a_worker_takes_its_niceness():
    code = (
        "import sys, torch\n"
        "from sapa.common.pool import one_thread\n"
        "from sapa.empirics.training.tiny_models import ARMS, TinyModelConfig, build_model\n"
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
        "from sapa.common.pool import worker_init\n"
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
        "from sapa.common.pool import deterministic_algorithms\n"
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
        "from sapa.common.pool import process_pool\n"
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


def _half_a_result(marker: str) -> None:
    """In a pool worker: write the head of a result to the pool's result pipe (a 1 MiB message, 8 bytes of it), as a
    worker killed while writing its result leaves it, then wait to be stopped."""
    import os
    import struct
    import time
    from pathlib import Path

    frame = sys._getframe(1)
    while "result_queue" not in frame.f_locals:  # concurrent.futures' _process_worker, which called this
        frame = frame.f_back
    os.write(frame.f_locals["result_queue"]._writer.fileno(), struct.pack("!i", 1 << 20) + b"x" * 8)
    Path(marker).write_text("written")
    time.sleep(600)


@pytest.mark.slow  # a spawned worker (~3 s)
def test_stop_pool_ends_even_when_a_worker_died_mid_result(tmp_path):
    """Before, the manager thread waited in recv for the rest of that message for ever: ``shutdown(wait=True)`` and the
    interpreter's exit hung (an interrupted ``sapa verify`` printed its line and never ended)."""
    import concurrent.futures as cf
    import time

    from sapa.common.pool import process_pool, stop_pool

    ex = process_pool(1)
    marker = tmp_path / "written"
    fut = ex.submit(_half_a_result, str(marker))
    t0 = time.monotonic()
    while not marker.exists():
        assert time.monotonic() - t0 < 120, "the worker never wrote"
        time.sleep(0.05)
    time.sleep(0.2)  # the manager thread is in recv, 8 bytes into a 1 MiB message
    thread, workers = ex._executor_manager_thread, list(ex._processes.values())  # shutdown forgets them
    stop_pool(ex, wait_s=30)
    assert not thread.is_alive() and not any(p.is_alive() for p in workers)
    with pytest.raises(cf.process.BrokenProcessPool):
        fut.result(timeout=1)


def test_a_stop_during_a_launch_is_raised_once_the_child_has_started(monkeypatch):
    """A stop that reached the parent between the fork and the write of the child's start-up data cut that write
    short: the child died printing ``EOFError: Ran out of input``. It is held until the launch has finished."""
    import multiprocessing as mp
    import os
    import signal
    import time

    from sapa.common.interrupt import stop_signals
    from sapa.common.pool import DeafProcess

    steps = []

    def launch(self):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # as if another thread had taken the signal
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10**5):  # the handler would run here, mid-launch
            pass
        steps.append("launched")

    monkeypatch.setattr(mp.context.SpawnProcess, "start", launch)
    with stop_signals() as stops, pytest.raises(KeyboardInterrupt):
        DeafProcess(target=print).start()
        steps.append("after start")
        time.sleep(5)
    assert steps == ["launched"] and stops.received == ["SIGINT"]


@pytest.mark.slow  # a spawned worker (~3 s)
def test_a_stopping_pool_interrupted_does_not_wait_for_the_work_in_flight():
    import time

    from sapa.common.pool import stopping_pool

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with stopping_pool(1) as ex:
            fut = ex.submit(time.sleep, 600)
            while not fut.running():
                time.sleep(0.05)
            raise KeyboardInterrupt
    assert time.monotonic() - t0 < 120 and fut.done()


def test_a_worker_death_after_a_caller_cancelled_a_queued_future_raises_nothing_in_the_manager_thread(monkeypatch):
    """CPython 3.11's manager thread marks every pending future broken with ``set_exception``, which raises
    ``InvalidStateError`` on one its caller had cancelled (gh-107219, fixed in 3.12): the thread died printing a
    traceback, and an interrupted ``sapa verify`` (``Executor.map`` cancels its futures as it unwinds) ended with it on
    stderr above its one line. Now the cancelled future is skipped and every other one still fails as broken."""
    import concurrent.futures as cf
    import threading
    import time

    from sapa.common.pool import process_pool

    raised: list = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    ex = process_pool(1)
    started = ex.submit(time.sleep, 60)
    queued = [ex.submit(time.sleep, 60) for _ in range(4)]  # the call queue holds 2; the last ones stay PENDING
    t0 = time.monotonic()
    while not started.running() or not any(f.cancel() for f in reversed(queued)):
        assert time.monotonic() - t0 < 120, "no queued future could be cancelled"
        time.sleep(0.05)
    thread = ex._executor_manager_thread
    for proc in list(ex._processes.values()):
        proc.kill()
    thread.join(60)
    assert not thread.is_alive() and raised == []
    for fut in [started, *queued]:
        if not fut.cancelled():
            with pytest.raises(cf.process.BrokenProcessPool):
                fut.result(timeout=10)
    ex.shutdown(wait=True)
