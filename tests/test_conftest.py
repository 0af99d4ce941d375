"""Tests for `tests/conftest.py`: a finished xdist run ends without a KeyboardInterrupt traceback (its session end),
and the tests that share a module fixture run on one worker (its xdist groups).

The first one's cause (see ``pytest_sessionfinish`` there): execnet sends a worker SIGINT when its main thread runs
on for 5 s after the controller closed the gateway, and pytest's unconfigure then runs gc.collect() 5 times over the
whole heap; the signal landed inside a collection, in hypothesis's gc callback.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import conftest

REPO = Path(__file__).resolve().parents[1]


def test_session_end_leaves_later_collections_nothing_to_scan():
    """After the hook, the heap is frozen: what a later full collection scans (the objects gc tracks outside the
    permanent generation, gc.get_objects()) is no longer the heap. Counted, not timed: a timing of five collections
    against one full pass depended on the machine's load."""
    junk = [[i] for i in range(200_000)]  # a heap worth scanning, as after the suite
    before = gc.get_freeze_count()
    assert len(gc.get_objects()) >= len(junk)  # a full pass would scan all of it
    try:
        conftest.pytest_sessionfinish(None)
        assert gc.get_freeze_count() >= before + len(junk)  # the survivors sit in the permanent generation
        assert len(gc.get_objects()) < len(junk) // 100  # what a collection still scans: next to nothing
    finally:
        gc.unfreeze()
    del junk


INNER_CONFTEST = """
    import gc, sys, time
    sys.path.insert(0, {repo!r})
    from hypothesis.internal.conjecture.junkdrawer import gc_cumulative_time

    gc_cumulative_time()  # hypothesis's gc-timing callback, as any @given test installs it

    SLOW = []

    def _slow_full_pass(phase, info):  # after the session, a full pass costs what it scans: 25 µs an object
        if SLOW and phase == "stop" and info["generation"] == 2:  # (the permanent generation is not in get_objects)
            time.sleep(min(1.5, 25e-6 * len(gc.get_objects())))

    gc.callbacks.append(_slow_full_pass)

    def pytest_configure(config):  # pytest < 9.1's 5 collections at cleanup on CPython (later ones default to 1):
        from _pytest.unraisableexception import gc_collect_iterations_key  # the same case under either version

        config.stash[gc_collect_iterations_key] = 5

    def pytest_unconfigure(config):  # runs before pytest's cleanup, whose 5 gc.collect() then take ≥ 5 s
        SLOW.append(True)
    if {fixed!r}:
        from tests.conftest import pytest_sessionfinish  # noqa: F401  (the hook under test)
"""


def _inner_run(tmp_path: Path, fixed: bool) -> tuple[int, str]:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(INNER_CONFTEST.format(repo=str(REPO), fixed=fixed)))
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-n", "1", "-p", "no:cacheprovider",
                        "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [False, True])
def test_an_xdist_run_ends_without_a_keyboard_interrupt(tmp_path, fixed):
    """Without the hook, the slow collections at unconfigure outlast execnet's 5 s and the worker gets SIGINT inside
    hypothesis's gc callback (the traceback this fixes); with it, the same run ends cleanly."""
    code, out = _inner_run(tmp_path, fixed)
    assert "1 passed" in out, out
    if fixed:
        assert code == 0 and "KeyboardInterrupt" not in out and "gc_callback" not in out, out
    else:
        assert "KeyboardInterrupt" in out, out


GROUPED_TESTS = """
    import os, pytest

    @pytest.fixture(scope="module")
    def shared(tmp_path_factory):
        with open({log!r}, "a") as f:
            f.write("computed\\n")

    @pytest.mark.parametrize("k", range(6))
    def test_reads_the_module_fixture(shared, k):
        with open({log!r}, "a") as f:
            f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

    @pytest.mark.parametrize("k", range(6))
    def test_alone(k):
        pass
"""


@pytest.mark.slow  # an inner xdist run: three fresh interpreters importing the conftest (~5 s)
def test_an_xdist_run_computes_a_module_fixture_once_on_one_worker(tmp_path):
    """The tests reading a module-scoped fixture run on one worker, so it is computed once (pytest_collection_finish
    writes the group into the node id where pytest-xdist's own write is lost, under pytest ≥ 9.2)."""
    log = tmp_path / "log.txt"
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
                                          "from tests.conftest import pytest_collection_modifyitems, "
                                          "pytest_collection_finish  # noqa: F401  (the hooks under test)\n")
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent(GROUPED_TESTS.format(log=str(log))))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-n", "2", "--dist", "loadgroup",
                        "-p", "no:cacheprovider", "-p", "no:randomly", "-o", "addopts=", "--rootdir", str(tmp_path),
                        str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "12 passed" in r.stdout, r.stdout + r.stderr
    lines = log.read_text().split()
    assert lines.count("computed") == 1 and len(set(lines) - {"computed"}) == 1, lines


def test_the_suite_handles_sigint_however_it_was_started():
    """tests/conftest.py's sigint_as_in_a_terminal: a suite started with SIGINT ignored (a background job) still gets
    Python's handler, so the Ctrl-C tests test something."""
    import signal

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.slow  # a pytest run in a fresh interpreter (~5 s)
def test_a_suite_started_with_sigint_ignored_still_receives_it(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "test_one.py").write_text(
        "import os, signal, time, pytest\n"
        "def test_ctrl_c():\n"
        "    with pytest.raises(KeyboardInterrupt):\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(5)\n")
    (tmp_path / "conftest.py").write_text("from tests.conftest import sigint_as_in_a_terminal  # noqa: F401\n")
    ignored = lambda: __import__("signal").signal(__import__("signal").SIGINT, __import__("signal").SIG_IGN)  # noqa: E731
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n0", "test_one.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300, preexec_fn=ignored,
                         env={**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert out.returncode == 0, out.stdout[-2000:]
