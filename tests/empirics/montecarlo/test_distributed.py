"""Tests for `empirics/montecarlo/distributed.py`: sweeps on Dask, bit-identical to serial, and under real faults.

Default run: argument checks, unreachable schedulers, and one LocalCluster(2) of worker threads in this process
(the scheduler, executor and result handling of ``--workers 2``, started in ~0.6 CPU-s) that must give
byte-identical results to the serial path, stream cells as they finish and raise an InputError once.
``-m slow``: the same byte-identity on the LocalCluster(2) of worker processes that ``sapa sweep --workers 2`` starts
(two interpreters importing torch: ~8 CPU-s), a worker process SIGKILLed mid-sweep, separate ``dask scheduler`` /
``dask worker`` processes, and ``sapa sweep`` clients killed (SIGKILL, serial) and interrupted (SIGINT, 2 workers),
then rerun.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import sapa.empirics.montecarlo.sweep.run as sw  # run_sweep looks run_cell, _part_done, _write_parquet up here
from sapa.empirics.montecarlo.distributed import executor_for, worker_pids
from sapa.empirics.montecarlo.sweep import CellFailedError, cells, config_from_dict, read_metadata, run_sweep
from sapa.cli import main
from sapa.common.validate import InputError

pytest.importorskip("distributed")

SMALL = {  # 12 cells, ~1 s serially
    "seed": 5,
    "trials": 6,
    "N": [4, 8, 16],
    "D": [6],
    "d": [3],
    "weight_model": ["paper", "tied"],
    "activation": [{"kind": "softmax"}, {"kind": "poly", "p": 3, "scale": "inv_sqrt_n"}],
}
SLOW = {  # 9 cells of ~0.5 s each: long enough to kill something in the middle
    "seed": 11,
    "trials": 64,
    "N": [256],
    "D": [32],
    "weight_model": ["iid", "tied", "corr"],
    "activation": [{"kind": "softmax"}, {"kind": "poly", "p": [1, 3], "scale": "inv_sqrt_n"}],
}


def _toml(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def write_config(path: Path, raw: dict) -> Path:
    """``raw`` (a config dict with an ``activation`` list) as a TOML file."""
    lines = [f"{k} = {_toml(v)}" for k, v in raw.items() if k != "activation"]
    for a in raw["activation"]:
        lines.append("[[activation]]")
        lines += [f"{k} = {_toml(v)}" for k, v in a.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def assert_same_store(a: Path, b: Path) -> None:
    """Same results.parquet bytes (hence data and provenance) and the same part files."""
    assert (a / "results.parquet").read_bytes() == (b / "results.parquet").read_bytes()
    pa, pb = sorted((a / "cells").glob("*.parquet")), sorted((b / "cells").glob("*.parquet"))
    assert [p.name for p in pa] == [p.name for p in pb]
    assert all(x.read_bytes() == y.read_bytes() for x, y in zip(pa, pb))


def assert_complete_parts_only(out: Path) -> None:
    """Every visible part file is a complete Parquet file of the cell it is named after."""
    for p in (out / "cells").glob("*.parquet"):
        if p.name.startswith("."):
            continue  # a temporary file of an interrupted write: never read
        assert read_metadata(p)["cell_id"] == p.stem
        assert len(pd.read_parquet(p)) > 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def client():
    """One embedded LocalCluster(2) of worker processes for the module, as ``--workers 2`` starts it (seconds)."""
    with executor_for(workers=2) as c:
        yield c


@pytest.fixture(scope="module")
def threads_client():
    """A LocalCluster(2) of worker threads in this process, as the sweep's executor (:class:`DaskExecutor`): Dask's
    scheduler, futures and retries as with worker processes, without two interpreters to start."""
    import logging

    import distributed

    from sapa.empirics.montecarlo.distributed import DaskExecutor

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:
        yield DaskExecutor(c)


# --------------------------------------------------------------------------- arguments


def test_one_worker_means_serial():
    with executor_for() as ex:
        assert ex is None
    with executor_for(workers=1) as ex:
        assert ex is None


@pytest.mark.parametrize("kw, needle", [
    ({"workers": 0}, "workers"),
    ({"workers": -2}, "workers"),
    ({"workers": 1.5}, "workers"),
    ({"workers": True}, "workers"),
    ({"workers": "2"}, "workers"),
    ({"workers": 2, "scheduler": "tcp://127.0.0.1:1"}, "not both"),
    ({"scheduler": ""}, "--scheduler"),
    ({"scheduler": "   "}, "--scheduler"),
    ({"scheduler": 8786}, "scheduler"),
    ({"scheduler": "no-port"}, "not a usable"),
    ({"scheduler": "udp://127.0.0.1:5"}, "not a usable"),
    ({"scheduler": "missing-file.json"}, "not found"),
    ({"scheduler": "tcp://127.0.0.1:1", "timeout": 0}, "timeout"),
    ({"scheduler": "tcp://127.0.0.1:1", "timeout": float("nan")}, "timeout"),
])
def test_bad_arguments_are_one_line(kw, needle):
    with pytest.raises(InputError, match=needle) as info:
        with executor_for(**kw):
            pass
    assert "\n" not in str(info.value)


@pytest.mark.slow  # waits out a 2 s timeout
def test_unreachable_scheduler_is_one_line_and_bounded(tmp_path):
    port = free_port()  # nothing listens here
    t0 = time.monotonic()
    with pytest.raises(InputError, match="cannot reach"):
        with executor_for(scheduler=f"tcp://127.0.0.1:{port}", timeout=1):
            pass
    # something listens but never speaks the Dask protocol: bounded by the timeout, not a hang
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        silent = srv.getsockname()[1]
        with pytest.raises(InputError, match="within 1 s"):
            with executor_for(scheduler=f"tcp://127.0.0.1:{silent}", timeout=1):
                pass
        (tmp_path / "sched.json").write_text(json.dumps({"address": f"tcp://127.0.0.1:{silent}"}))
        with pytest.raises(InputError, match="within 1 s"):
            with executor_for(scheduler=str(tmp_path / "sched.json"), timeout=1):
                pass
    assert time.monotonic() - t0 < 15
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(InputError, match="not a Dask scheduler file"):
        with executor_for(scheduler=str(tmp_path / "junk.json")):
            pass


def test_cli_unreachable_scheduler_exit_2_no_output(tmp_path, capsys):
    cfg = write_config(tmp_path / "c.toml", SMALL)
    out = tmp_path / "out"
    code = main(["sweep", str(cfg), "--out", str(out), "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--no-progress"])
    o, err = capsys.readouterr()
    assert code == 2 and o == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("sapa: error: cannot reach"), err
    assert not out.exists()


# --------------------------------------------------------------------------- LocalCluster


def test_local_cluster_is_byte_identical_to_serial(tmp_path, threads_client):
    _byte_identical_to_serial(tmp_path, threads_client)


@pytest.mark.slow  # the LocalCluster of worker processes (module fixture ``client``)
def test_a_local_cluster_of_processes_is_byte_identical_to_serial(tmp_path, client):
    _byte_identical_to_serial(tmp_path, client)


def _byte_identical_to_serial(tmp_path, client):
    cfg = config_from_dict(SMALL)
    ref = run_sweep(cfg, tmp_path / "serial", progress=False)
    got = run_sweep(cfg, tmp_path / "dask", progress=False, executor=client)
    pd.testing.assert_frame_equal(ref, got)
    assert_same_store(tmp_path / "serial", tmp_path / "dask")
    # a second dask run of the same sweep recomputes nothing and changes nothing
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "dask" / "cells").glob("*.parquet")}
    run_sweep(cfg, tmp_path / "dask", progress=False, executor=client)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "dask" / "cells").glob("*.parquet")} == before
    assert_same_store(tmp_path / "serial", tmp_path / "dask")


def test_results_stream_back_as_cells_finish(tmp_path, threads_client, monkeypatch):
    """A slow cell submitted first is stored after fast cells that finished before it."""
    cfg = config_from_dict({**SMALL, "N": [4, 8, 16, 512], "D": [32], "d": [8], "trials": 32, "weight_model": ["tied"],
                            "activation": [{"kind": "softmax"}]})
    order = sorted(cells(cfg), key=lambda c: -c.N)  # the slow N = 512 cell first
    written: list[str] = []
    real = sw._write_parquet

    def spy(path, df, meta):
        if path.parent.name == "cells":
            written.append(meta["cell"]["N"])
        real(path, df, meta)

    monkeypatch.setattr(sw, "_write_parquet", spy)
    got = run_sweep(cfg, tmp_path / "o", progress=False, executor=threads_client, order=order)
    assert sorted(written) == sorted(c.N for c in order)  # each cell stored once
    assert written[0] != 512, f"cells were stored in submission order: {written}"
    monkeypatch.setattr(sw, "_write_parquet", real)
    pd.testing.assert_frame_equal(got, run_sweep(cfg, tmp_path / "s", progress=False))


def test_cell_input_error_is_raised_once_not_retried(tmp_path, threads_client):
    """A deterministic InputError (here a true float64 overflow of x^3: |S| ≈ 1e120) comes back as itself, first time."""
    cfg = config_from_dict({**SMALL, "N": [8], "weight_model": ["tied"], "sigma_x": 1e60,
                            "activation": [{"kind": "poly", "p": 3, "scale": "const", "c": 1.0}]})
    t0 = time.monotonic()
    with pytest.raises(InputError, match=r"x\^3 .*overflows float64 at N=8, D=6"):
        run_sweep(cfg, tmp_path / "o", progress=False, executor=threads_client)
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "o" / "results.parquet").exists()


# --------------------------------------------------------------------------- real faults (slow)


@pytest.mark.slow
def test_worker_killed_mid_sweep_loses_and_duplicates_nothing(tmp_path, client, monkeypatch):
    cfg = config_from_dict(SLOW)
    n = len(cells(cfg))
    written: list[str] = []
    real = sw._write_parquet

    def spy(path, df, meta):
        if path.parent.name == "cells":
            written.append(meta["cell_id"])
        real(path, df, meta)

    monkeypatch.setattr(sw, "_write_parquet", spy)
    killed: list[int] = []

    def killer():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            busy = [w for w, tasks in client.client.processing().items() if tasks]
            if written and busy:  # one cell stored, another one running: kill the worker running it
                pid = worker_pids(client)[busy[0]]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    got = run_sweep(cfg, tmp_path / "dask", progress=False, executor=client)
    t.join()
    assert killed, "no worker was killed: the sweep finished too fast"
    assert len(written) == n and len(set(written)) == n  # every cell stored exactly once
    monkeypatch.setattr(sw, "_write_parquet", real)
    ref = run_sweep(cfg, tmp_path / "serial", progress=False)
    pd.testing.assert_frame_equal(ref, got)
    assert_same_store(tmp_path / "serial", tmp_path / "dask")
    assert killed[0] not in worker_pids(client).values()


def _default_sigint() -> None:
    """In the child: SIGINT back to its default, so Python installs its KeyboardInterrupt handler.

    A test runner started as a background job (``cmd &`` in a script) ignores SIGINT, the child
    inherits SIG_IGN, and Python then installs no handler: a Ctrl-C test would send a signal that
    nothing receives, and the sweep would simply finish.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(cmd: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint, **kw)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.slow
def test_separate_scheduler_and_worker_processes(tmp_path, capsys):
    """`dask scheduler` + `dask worker` subprocesses on 127.0.0.1 (ephemeral ports), by address and by file."""
    sched_file = tmp_path / "scheduler.json"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    scheduler = _start(dask + ["--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)])
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            assert scheduler.poll() is None, scheduler.stderr.read()
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        worker = _start([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(sched_file),
                         "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--host", "127.0.0.1",
                         "--death-timeout", "60"])
        cfg = write_config(tmp_path / "c.toml", SMALL)
        run_sweep(config_from_dict(SMALL), tmp_path / "serial", progress=False)
        for name, target in (("by-address", address), ("by-file", str(sched_file))):
            code = main(["sweep", str(cfg), "--out", str(tmp_path / name), "--scheduler", target, "--no-progress"])
            _, err = capsys.readouterr()
            assert code == 0, err
            assert_same_store(tmp_path / "serial", tmp_path / name)
    finally:
        for p in (worker, scheduler):
            if p is not None:
                _stop(p)


def _wait_for_parts(out: Path, k: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len([p for p in (out / "cells").glob("*.parquet") if not p.name.startswith(".")]) >= k:
            return
        if proc.poll() is not None:
            pytest.fail(f"sapa sweep ended early ({proc.returncode}): {proc.stderr.read()}")
        time.sleep(0.02)
    pytest.fail("no progress")


@pytest.mark.slow
def test_client_killed_then_rerun_resumes_to_identical_data(tmp_path, monkeypatch, capsys):
    """SIGKILL `sapa sweep` (serial) after some cells; no partial file is visible; a rerun only finishes the rest."""
    cfg = write_config(tmp_path / "c.toml", SLOW)
    out = tmp_path / "out"
    argv = ["sweep", str(cfg), "--out", str(out), "--no-progress"]
    proc = _start([sys.executable, "-m", "sapa.cli", *argv])
    try:
        _wait_for_parts(out, 3, proc)
        proc.kill()
        proc.wait(30)
    finally:
        _stop(proc)
    assert not (out / "results.parquet").exists()
    assert_complete_parts_only(out)
    done = len([p for p in (out / "cells").glob("*.parquet") if not p.name.startswith(".")])
    n = len(cells(config_from_dict(SLOW)))
    assert 3 <= done < n
    calls = []
    real = sw.run_cell
    monkeypatch.setattr(sw, "run_cell", lambda c, cell: calls.append(cell) or real(c, cell))
    assert main(argv) == 0, capsys.readouterr().err
    assert len(calls) == n - done  # finished cells were kept, none recomputed
    monkeypatch.setattr(sw, "run_cell", real)
    run_sweep(config_from_dict(SLOW), tmp_path / "ref", progress=False)
    assert_same_store(tmp_path / "ref", out)


@pytest.mark.slow
def test_client_interrupted_with_local_cluster_exits_130_and_cleans_up(tmp_path):
    """Ctrl-C on `sapa sweep --workers 2`: exit 130, one line, worker processes gone; rerun resumes."""
    psutil = pytest.importorskip("psutil")
    cfg = write_config(tmp_path / "c.toml", SLOW)
    out = tmp_path / "out"
    argv = ["sweep", str(cfg), "--out", str(out), "--no-progress", "--workers", "2"]
    proc = _start([sys.executable, "-m", "sapa.cli", *argv])
    try:
        _wait_for_parts(out, 2, proc, timeout=240)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2
        proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=90)[1]
    finally:
        _stop(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("sapa: interrupted"), err
    gone, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, f"left behind: {alive}"
    assert_complete_parts_only(out)
    ref = run_sweep(config_from_dict(SLOW), tmp_path / "ref", progress=False)
    got = run_sweep(config_from_dict(SLOW), out, progress=False)  # resume serially: same numbers
    pd.testing.assert_frame_equal(ref, got)
    assert_same_store(tmp_path / "ref", out)


def _settled(outcome) -> cf.Future:
    """The future a DaskExecutor hands out once its Dask task ended with ``outcome`` (a value or an exception)."""
    from sapa.empirics.montecarlo.distributed import _settle

    inner, outer = cf.Future(), cf.Future()
    inner.set_running_or_notify_cancel()
    if isinstance(outcome, BaseException):
        inner.set_exception(outcome)
    else:
        inner.set_result(outcome)
    from distributed import KilledWorker

    _settle(inner, outer, KilledWorker)
    return outer


def test_cell_failures_are_one_line_naming_the_cell():
    from distributed import KilledWorker

    cell = cells(config_from_dict(SMALL))[0]
    with pytest.raises(CellFailedError, match=r"paper/iso/softmax/mask=none N=4 D=3 d=3 .*took down a worker") as info:
        sw._result(_settled(KilledWorker("run_cell-x", "tcp://127.0.0.1:1", 3)), cell)
    assert "\n" not in str(info.value)
    with pytest.raises(CellFailedError, match="failed in the executor \\(MemoryError: out of memory"):
        sw._result(_settled(MemoryError("out of memory")), cell)
    with pytest.raises(InputError, match="overflows") as info:  # returned by the task (not retried), raised here
        sw._result(_settled(InputError("x^3 overflows float32")), cell)
    assert not isinstance(info.value, CellFailedError)
    assert sw._result(_settled("frame"), cell) == "frame"


def test_dask_executor_is_a_standard_executor(threads_client):
    """``submit`` → ``concurrent.futures.Future``; an InputError is raised by the future, not retried."""
    client = threads_client
    assert isinstance(client, cf.Executor)
    futs = [client.submit(pow, 2, k) for k in range(5)]
    assert all(isinstance(f, cf.Future) for f in futs)
    assert sorted(f.result(timeout=60) for f in cf.as_completed(futs, timeout=60)) == [1, 2, 4, 8, 16]
    with pytest.raises(InputError, match="bad input"):
        client.submit(_raise_input_error, "bad input").result(timeout=60)


def _raise_input_error(msg):
    raise InputError(msg)
