"""Shared fixtures of the test suite."""

from __future__ import annotations

import gc
import socket
import sys

import pytest

import sapa.empirics  # noqa: F401  (pins CPU kernel dispatch before any test module imports torch)
from sapa.common.collector import collect_less_often
from tests.layout import FOLDERS


class _InstalledNamesOnly:
    """Refuses ``import theory`` (and common, empirics, figures) in the tests: pytest puts the checkout's root on
    sys.path, where the bare folder names would import, but a wheel installs them only as sapa.theory and so on."""

    def find_spec(self, name, path=None, target=None):
        if name in FOLDERS:
            raise ImportError(f"import sapa.{name}, not {name}: the folder installs only under sapa")
        return None


sys.meta_path.insert(0, _InstalledNamesOnly())

# As in the `sapa` command, from here on, so that collecting the test modules gains too (sapa.common.collector: the
# cyclic collector's full passes over ~10⁶ objects cost 7 % of the theory, figure and claim tests' CPU).
collect_less_often()


# Under pytest-xdist each worker computes a module- or session-scoped fixture for itself, so a module whose tests are
# spread over both workers computes its module fixture twice. With addopts' --dist loadgroup, tests of one
# xdist_group run on one worker: every test reading a module-scoped fixture is grouped by its module, and every test
# reading one of these costly session fixtures by the fixture's name (one computation each, not one per worker).
SHARED_ON_ONE_WORKER = ("softmax_verify", "spawn_pool", "real_small", "growth_context", "tiny_scorecard")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the xdist_group marks into the test ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        names = getattr(item, "fixturenames", ())
        shared = [n for n in SHARED_ON_ONE_WORKER if n in names]
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if shared:
            item.add_marker(pytest.mark.xdist_group(shared[0]))
        elif any(d and d[-1].scope == "module" for d in defs.values()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.hookimpl(tryfirst=True)  # after every collection_modifyitems (xdist's included), before xdist sends the ids
def pytest_collection_finish(session):
    """Put each test's xdist group into its node id where xdist did not manage to.

    The loadgroup scheduler reads a test's group from a "@group" suffix of its node id, which pytest-xdist (3.8)
    appends by writing ``item._nodeid``. pytest 9.2 keeps the id in ``item._id`` and no longer reads ``_nodeid``, so
    the suffix was silently lost and every group's tests were spread over both workers, each computing the module's
    fixture for itself (pytest-xdist issue #1386): 2 × 6 s for the alibi-scaling entry, and so on. Only a test whose
    id lacks its suffix is changed, so this does nothing where xdist's own write takes effect."""
    if not getattr(session.config.option, "loadgroup", False):  # set on xdist workers under --dist loadgroup
        return
    for item in session.items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix):
            from _pytest.nodeid import NodeId  # pytest ≥ 9.2 only; there the structured id is what nodeid reads

            item._id = NodeId.parse(item.nodeid + suffix)


@pytest.hookimpl(trylast=True)  # after the session fixtures' teardown (pytest's runner), before xdist's workerfinished
def pytest_sessionfinish(session):
    """Collect once, then freeze the surviving heap, so that the collections after the session are cheap.

    After a worker reports workerfinished, the controller closes its gateway, and execnet gives the worker's main
    thread 5 s to finish, then sends it SIGINT (execnet.gateway_base._terminate_execution). In those 5 s pytest's
    unconfigure runs gc.collect() 5 times (_pytest.unraisableexception.cleanup) over the worker's heap, ~6 · 10⁵
    objects after the suite (torch, sympy, cached results): 1.2 s a pass, 6 s in all. The SIGINT then lands inside a
    collection, where the first Python code to run is hypothesis's gc-timing callback in gc.callbacks, and the run
    ended in "Exception ignored in: <function gc_cumulative_time.<locals>.gc_callback> ... KeyboardInterrupt" after
    every test had passed. Here, before workerfinished is sent (xdist's hook wraps this one), one collection frees
    the session's cycles (an exception in a __del__ there is still reported: pytest's unraisable hook is in place)
    and gc.freeze() moves what survives to the permanent generation, which no later collection scans."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """One intra-op torch thread for the whole run: the tests use small tensors, for which a second thread only
    adds synchronisation (measured 2.5× slower on 2 shared cores: 13.5 s vs 5.4 s for a small worst-case search).
    A test that needs another count sets it and restores it; subprocesses keep their own default."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session", autouse=True)
def freed_memory_kept():
    """As in the `sapa` command (sapa.common.allocator): freed tensors' pages are reused, not faulted in again."""
    from sapa.common.allocator import keep_freed_memory

    keep_freed_memory()


@pytest.fixture(scope="session", autouse=True)
def machine_rates_measured_once():
    """The cost model's machine rates (sapa.empirics.timing.cost_model.machine_rates: four timed blocks, ~0.45 CPU-s)
    measured once per worker and seed, not in every overhead run: ~15 runs of the default tests record them (for the
    cost-model figure), none asserts their values, and each worker's are this machine's real rates. The function
    itself is measured afresh by tests/empirics/timing/test_cost_model.py (through ``__wrapped__``)."""
    import functools

    from sapa.empirics.timing import cost_model

    mp = pytest.MonkeyPatch()
    mp.setattr(cost_model, "machine_rates", functools.cache(cost_model.machine_rates))
    yield
    mp.undo()


@pytest.fixture(scope="session", autouse=True)
def sigint_as_in_a_terminal():
    """SIGINT handled as in a terminal, however the suite was started; the start's own setting is restored after.

    A runner started as a background job (``cmd &`` in a script) inherits SIGINT ignored, and Python then installs no
    handler: the Ctrl-C tests sent signals nothing received (an in-process one failed; the ``sapa`` subprocesses,
    which inherit SIG_IGN and keep it by design, ran to the end and passed for the wrong reason). A signal this
    process handles is reset to its default in a child at exec, so the children get Python's handler too.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(scope="session", autouse=True)
def one_thread_in_subprocesses():
    """One OpenMP / BLAS thread in the processes the tests start (notebook kernels, process pools, Dask workers,
    ``sapa`` subprocesses) and for numpy's OpenBLAS here. pytest-xdist already runs one worker per core, so a
    second thread in a child or in BLAS only contends with the other worker (a notebook kernel took 2.4× the CPU
    time with the default two threads: 22 s vs 9 s for notebook 06 on 2 shared cores). The thread count changes
    no tested value: the pools pin one thread in their workers anyway (sapa.common.pool.worker_init), and the
    tests compare floats with tolerances. A test that needs another count sets it and restores it."""
    import os

    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    before = {k: os.environ.get(k) for k in names}
    os.environ.update({k: "1" for k in names})
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # the [real] extra brings it; without it only the children are limited
        limits = None
    else:
        limits = threadpool_limits(limits=1, user_api="blas")
    yield
    if limits is not None:
        limits.restore_original_limits()
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def spawn_pool():
    """One spawn-context pool of 2 workers (sapa.common.pool.process_pool), shared by the tests whose point is that work
    done in pool workers equals the serial result: starting the workers (a fresh interpreter importing torch each)
    costs more than the tests' work. A reused worker must still give the serial numbers, so sharing hides nothing."""
    from sapa.common.pool import process_pool

    with process_pool(2) as ex:
        yield ex


def _offline(monkeypatch) -> None:
    """Offline hub variables, and any socket connection raises."""
    from sapa.empirics.realmodel import real

    for k, v in real.OFFLINE_ENV.items():
        monkeypatch.setenv(k, v)

    def refuse(*args, **kwargs):
        raise OSError("network access attempted in a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def no_network(monkeypatch):
    """Offline hub variables, and any socket connection raises (tests of the shipped real model)."""
    _offline(monkeypatch)


@pytest.fixture(scope="session")
def real_small(tmp_path_factory):
    """One analysis of the shipped model at ``real.SMALL`` (offline, one thread), cached: (result, its cache file).

    The analysis tests read the result; the claim and figure tests put the cache file where they would compute
    it (an unchanged config and model reuse a cached analysis, as ``sapa verify`` does), so the ~4 CPU-s analysis
    runs once, not three times."""
    from sapa.empirics.realmodel import real

    for m in real.REQUIRED_MODULES:
        pytest.importorskip(m)
    cache = tmp_path_factory.mktemp("real_small")
    with pytest.MonkeyPatch.context() as mp, real.single_thread():
        _offline(mp)
        res = real.analyse(real.SMALL, cache_dir=cache)
    (file,) = cache.glob("real_heads_*.json")
    return res, file


@pytest.fixture
def real_small_cached_in(real_small, monkeypatch):
    """``place(folder)``: the session's cached analysis (``real_small``) copied into ``folder``, where ``real.analyse``
    looks for its cache; computing an analysis again then fails the test (the claim and figure tests read it)."""
    from sapa.empirics.realmodel import real_analysis

    def place(folder) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / real_small[1].name).write_bytes(real_small[1].read_bytes())

    monkeypatch.setattr(real_analysis, "_setup", lambda *a: pytest.fail("the cached analysis was computed again"))
    return place


@pytest.fixture(scope="session")
def softmax_verify(tmp_path_factory):
    """One ``sapa verify --only thm4.1-norm thm4.1-jacobian`` (quick budget, seed 0), shared by the CLI and ledger
    tests: (exit code, stdout, stderr, results directory, the parsed ledger.json).

    One part is smaller than at the quick budget: the Lipschitz search w.r.t. X that the Jacobian entry reports
    (not asserted; its own tests are in tests/empirics/kernels/test_lipschitz.py) runs at N = 4, 8, not 4, 8, 16:
    N = 16 alone took ~4 of the fixture's ~10 CPU-s."""
    import contextlib
    import io
    import json

    from sapa.empirics.experiments import softmax_bounds
    from sapa.cli import main

    out_dir = tmp_path_factory.mktemp("softmax_verify") / "res"
    out, err = io.StringIO(), io.StringIO()
    search = softmax_bounds.lipschitz_search
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.MonkeyPatch.context() as mp:
        mp.setattr(softmax_bounds, "lipschitz_search", lambda Ns, *a: search([n for n in Ns if n <= 8], *a))
        code = main(["verify", "--only", "thm4.1-norm", "thm4.1-jacobian", "--out", str(out_dir)])
    ledger = json.loads((out_dir / "ledger.json").read_text()) if code == 0 else None
    return code, out.getvalue(), err.getvalue(), out_dir, ledger


@pytest.fixture(scope="session")
def growth_context(tmp_path_factory):
    """One small Context for the growth entries and their worst case (tests/sapa/claims/growth_fixture.py): a tiny
    seeded sweep planted as the run's sweep, the worst case at N = 3, 6 from the closed-form witnesses only, in this
    process. Shared by the growth entries' tests and the worst-case tests, so the search (~20 CPU-s) runs once."""
    from tests.sapa.claims.growth_fixture import small_growth_context

    return small_growth_context(tmp_path_factory.mktemp("growth"))


@pytest.fixture(scope="session")
def tiny_scorecard():
    """(names, scorecard): one ``sapa.compare`` at the tiny budget (no training, no worker processes), read by the walk
    (tests/test_every_activation_walks.py: every walker's name, first) and by tests/sapa/api/test_compare.py (x²/N
    beside the walk's ReLU²/N, the causal-only x³/√i, …), which asked for two scorecards of 4 s and 9 s before."""
    from sapa.api.compare import compare
    from tests.test_every_activation_walks import compare_names

    names = [*compare_names(), "x**2/N"]
    return names, compare(names, budget="tiny", workers=1)


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory nobody can create files in, root included: mode 0o555 for a user; for root (as CI runs) the
    immutable attribute (``chattr +i``: root cannot add entries either). Skipped only where neither works."""
    import os
    import shutil
    import subprocess

    ro = tmp_path / "ro"
    ro.mkdir()
    undo = None
    if os.geteuid() != 0:
        ro.chmod(0o555)
        undo = lambda: ro.chmod(0o755)  # noqa: E731
    elif shutil.which("chattr") and subprocess.run(["chattr", "+i", str(ro)], capture_output=True).returncode == 0:
        undo = lambda: subprocess.run(["chattr", "-i", str(ro)], check=True)  # noqa: E731
    try:
        probe = ro / ".probe"
        try:
            probe.touch()
        except OSError:
            pass
        else:
            probe.unlink()
            pytest.skip("no way to make a directory read-only for this user here (no chattr +i)")
        yield ro
    finally:
        if undo is not None:
            undo()
