"""Tests for `common/interrupt.py`: stop signals recorded whichever exception surfaces, handlers restored."""

from __future__ import annotations

import os
import signal
import time

import pytest

from sapa.common.interrupt import Stopped, stop_signals, stopped_by_interrupt


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_raises_keyboardinterrupt_and_is_recorded(sig):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with stop_signals() as stops:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig)
            time.sleep(5)
        assert stops.received == [sig.name]
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_signal_swallowed_by_c_code_is_still_recorded():
    """numpy's product of exact fractions turned the KeyboardInterrupt into a SystemError with no chain left."""
    with stop_signals() as stops:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass
        assert stops.received == ["SIGINT"]


def test_an_ignored_sigint_stays_ignored():
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with stop_signals() as stops:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert stops.received == []
    finally:
        signal.signal(signal.SIGINT, old)


def test_stopped_by_interrupt_reads_the_chain():
    def surfaced():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("returned a result with an exception set")

    with pytest.raises(SystemError) as err:
        surfaced()
    assert stopped_by_interrupt(err.value) and stopped_by_interrupt(KeyboardInterrupt())
    assert not stopped_by_interrupt(ValueError("x"))


def test_the_handlers_raise_stopped_a_keyboardinterrupt_of_its_own_type():
    with stop_signals(), pytest.raises(Stopped) as err:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    assert isinstance(err.value, KeyboardInterrupt) and type(err.value) is not KeyboardInterrupt


# A stop caught while code run by exec() of a string was on the stack (dataclasses, sympy's parser and lambdify run
# such code); the program then exits with its own code. CPython 3.11, running a module (`python -m sapa.cli`, as the
# tests and `python -m` users do), remembers an exact KeyboardInterrupt that left such code and at exit killed itself
# with SIGINT instead (-2): the CI run of `sapa verify` interrupted at 20 random moments saw it once, and 4 runs in 20
# here. (A script — the `sapa` console command — exits through another path that keeps the code.)
EXEC_THEN_EXIT = (
    "import os, signal, sys\n"
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # whatever mask or handler the caller left\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from sapa.common.interrupt import stop_signals\n"
    "with stop_signals() as stops:\n"
    "    try:\n"
    "        exec('import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(10**8): pass\\n')\n"
    "    except KeyboardInterrupt:\n"
    "        pass\n"
    "assert stops.received == ['SIGINT']\n"
    "sys.exit(130)\n")


def _run_module(tmp_path, code: str):
    """``code`` run as a module (``python -m``), this checkout on the path."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "stop_then_exit.py").write_text(code)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), root, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "stop_then_exit"], capture_output=True, text=True, timeout=60,
                          env=env, cwd=tmp_path)


def test_a_stop_caught_inside_exec_code_leaves_the_exit_code_to_the_program(tmp_path):
    out = _run_module(tmp_path, EXEC_THEN_EXIT)
    assert out.returncode == 130, (out.returncode, out.stderr)


def test_the_interpreter_did_kill_itself_for_an_exact_keyboardinterrupt(tmp_path):
    """The same program with a handler raising the exact type: the defect the subclass avoids is real here (where it
    is not — another interpreter — this test says so rather than pass for the wrong reason)."""
    import sys

    code = EXEC_THEN_EXIT.replace("with stop_signals() as stops:\n", "import contextlib, types\n"
                                  "def on(signum, frame):\n    stops.received.append('SIGINT')\n"
                                  "    raise KeyboardInterrupt\n"
                                  "stops = types.SimpleNamespace(received=[])\n"
                                  "signal.signal(signal.SIGINT, on)\n"
                                  "with contextlib.nullcontext():\n")
    out = _run_module(tmp_path, code)
    if out.returncode == 130:
        pytest.skip(f"{sys.version.split()[0]} keeps the program's exit code after an exact KeyboardInterrupt too")
    assert out.returncode == -signal.SIGINT, (out.returncode, out.stderr)


LATE_STOP = (
    "import atexit, signal\n"
    "from sapa.common.interrupt import exit_with, process_stops\n"
    "process_stops()\n"
    "atexit.register(lambda: signal.raise_signal(signal.SIGINT))  # a stop while the interpreter shuts down\n"
    "exit_with(5)\n")


def test_a_stop_after_the_exit_began_is_discarded(tmp_path):
    """After exit_with, a SIGINT (here raised by an exit hook) changes neither the exit code nor stderr; a plain
    sys.exit would print the interrupt's traceback from the hook (the mutant below)."""
    out = _run_module(tmp_path, LATE_STOP)
    assert out.returncode == 5 and out.stderr == "", (out.returncode, out.stderr)
    mutant = _run_module(tmp_path, LATE_STOP.replace("exit_with(5)", "raise SystemExit(5)"))
    assert mutant.returncode == 5 and "Traceback" in mutant.stderr and "Stopped" in mutant.stderr


def test_process_stops_raise_stopped_and_keep_an_inherited_ignore(tmp_path):
    code = ("import signal, sys\n"
            "from sapa.common.interrupt import Stopped, process_stops\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "process_stops()\n"
            "assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN\n"
            "try:\n"
            "    signal.raise_signal(signal.SIGINT)\n"
            "except Stopped:\n"
            "    sys.exit(3)\n")
    out = _run_module(tmp_path, code)
    assert out.returncode == 3, (out.returncode, out.stderr)


def test_console_turns_a_stop_during_mains_return_into_one_line(monkeypatch, capsys):
    """In-process, with the process-wide parts stubbed: a Stopped escaping main gives 130 and one line; a normal
    return passes main's code through."""
    import sapa.common.interrupt as ci
    from sapa import cli

    got = []
    monkeypatch.setattr(ci, "process_stops", lambda: None)
    monkeypatch.setattr(ci, "exit_with", got.append)

    def stopped(argv):
        raise Stopped

    monkeypatch.setattr(cli, "main", stopped)
    cli.console([])
    assert got == [130] and capsys.readouterr().err.startswith("sapa: interrupted; the command had finished")
    monkeypatch.setattr(cli, "main", lambda argv: 2)
    cli.console([])
    assert got == [130, 2]


@pytest.mark.slow  # 12 fresh interpreters of `sapa verify --only thm4.1-norm` (3.5 s each)
def test_a_sigint_in_the_last_moments_of_a_run_never_kills_it(tmp_path):
    """SIGINT sent in the last 0.6 s of a finished run: before the fix 22 of 30 runs ended "killed by SIGINT" (−2); now
    every run ends 0 or 130 (at 0.73 per run, 12 runs would all miss it with probability 10⁻⁷)."""
    import random
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def run(delay: float) -> int:
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        p = subprocess.Popen([sys.executable, "-m", "sapa.cli", "verify", "--only", "thm4.1-norm", "--out",
                              str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, cwd=root, start_new_session=True)
        t0 = time.monotonic()
        while p.poll() is None and time.monotonic() - t0 < delay:
            time.sleep(0.002)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
        p.communicate(timeout=120)
        return p.returncode

    t0 = time.monotonic()
    assert run(1e9) == 0
    length = time.monotonic() - t0
    rng = random.Random(7)
    codes = [run(length - rng.uniform(0.0, 0.6)) for _ in range(12)]
    assert set(codes) <= {0, 130}, codes
