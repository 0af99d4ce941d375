"""Tests for `empirics/montecarlo/workload.py` and the `sapa sweep` / `sapa train` guards."""

from __future__ import annotations

import re
import time

import pytest

from sapa.empirics.montecarlo.sweep import builtin_config, config_from_dict, load_config
from sapa.empirics.montecarlo.workload import MAX_CELLS, MAX_FLOPS, available_memory, cap_workers, check_sweep_work, sweep_work
from sapa.cli import main
from sapa.common.validate import InputError

ACT = [{"kind": "poly", "p": 1}]


def _cfg(**kw):
    return config_from_dict({"N": [4], "D": [2], "activation": ACT, **kw})


def _toml(path, N="[4]", D="[2]", trials=2):
    path.write_text(f'N = {N}\nD = {D}\ntrials = {trials}\n[[activation]]\nkind = "poly"\np = 1\n')
    return path


def test_builtin_sweeps_are_within_the_limits():
    for name in ("quick", "full"):
        w = check_sweep_work(load_config(builtin_config(name)))
        assert w.cells <= MAX_CELLS and w.flops <= MAX_FLOPS / 10


def test_flops_formula():
    w = sweep_work(_cfg(trials=3, d=[2]))
    assert (w.cells, w.flops) == (1, 3 * (6 * 16 * 2 + 4 * 4 * 4 + 2 * 4 * 2))


@pytest.mark.parametrize("kw, message", [
    (dict(trials=10**30), "flops"),
    (dict(N=list(range(1, 2001)), D=list(range(1, 2001))), "up to 4,000,000 cells"),
    (dict(D=[10**200]), "flops"),
    (dict(N=[2**40], D=[2**20]), "flops"),
])
def test_absurd_work_is_refused_unless_forced(kw, message):
    cfg = config_from_dict({"N": [4], "D": [2], "activation": ACT, **kw})
    t0 = time.monotonic()
    with pytest.raises(InputError, match=message):
        check_sweep_work(cfg)
    assert time.monotonic() - t0 < 5  # the 4-million-cell grid is not enumerated
    assert check_sweep_work(cfg, force=True).flops > MAX_FLOPS or check_sweep_work(cfg, force=True).cells > MAX_CELLS


def test_cap_workers():
    assert cap_workers(2, 10, 100, cores=4, memory=10**9) == (2, None)
    k, note = cap_workers(64, 10, 2**20, cores=2, memory=10**12)
    assert k == 2 and "--workers 64 clamped to 2" in note and "cores: 2" in note
    assert cap_workers(8, 4, 2**20, cores=16, memory=None)[0] == 4  # not more workers than cells
    k, note = cap_workers(8, 100, 400 * 2**20, cores=16, memory=2**30)
    assert k == 2 and "GiB available" in note
    assert cap_workers(8, 100, 400 * 2**20, cores=16, memory=10)[0] == 1  # never below one


def test_available_memory_reads_meminfo(tmp_path):
    f = tmp_path / "meminfo"
    f.write_text("MemTotal: 100 kB\nMemAvailable:    2048 kB\n")
    assert available_memory(f) == 2048 * 1024


# ----------------------------------------------------------------------------- through the CLI


def _run(argv, capsys):
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr()


@pytest.mark.parametrize("sched", ["", " ", "\t"])
def test_blank_scheduler_is_refused(tmp_path, capsys, sched):
    rc, cap = _run(["sweep", _toml(tmp_path / "c.toml"), "--out", tmp_path / "o", "--scheduler", sched], capsys)
    assert rc == 2 and "--scheduler is empty" in cap.err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("N, D, trials, message", [
    ("[4]", "[2]", str(10**30), "flops"),
    ("[4]", f"[{10**200}]", "2", "flops"),
])
def test_cli_refuses_absurd_sweeps(tmp_path, capsys, N, D, trials, message):
    rc, cap = _run(["sweep", _toml(tmp_path / "c.toml", N, D, trials), "--out", tmp_path / "o"], capsys)
    assert rc == 2 and message in cap.err and cap.err.count("\n") == 1 and not (tmp_path / "o").exists()


def test_cli_huge_D_with_force_is_one_line_not_overflow_traceback(tmp_path, capsys):
    rc, cap = _run(["sweep", _toml(tmp_path / "c.toml", D=f"[{10**200}]"), "--out", tmp_path / "o", "--force"], capsys)
    assert rc == 2 and "GiB for one trial" in cap.err and cap.err.count("\n") == 1


def test_cli_clamps_workers(tmp_path, capsys, monkeypatch):
    import sapa.empirics.montecarlo.workload as wl

    monkeypatch.setattr(wl, "usable_cores", lambda: 1)
    rc, cap = _run(["sweep", _toml(tmp_path / "c.toml"), "--out", tmp_path / "o", "--workers", "64", "--no-progress"], capsys)
    assert rc == 0 and "--workers 64 clamped to 1" in cap.err


def test_timeout_needs_scheduler(tmp_path, capsys):
    rc, cap = _run(["sweep", _toml(tmp_path / "c.toml"), "--out", tmp_path / "o", "--timeout", "3"], capsys)
    assert rc == 2 and "--timeout applies to --scheduler only" in cap.err
    rc, cap = _run(["sweep", _toml(tmp_path / "c.toml"), "--out", tmp_path / "o", "--timeout", "0"], capsys)
    assert rc == 2


@pytest.mark.slow  # waits out a 2 s timeout
def test_scheduler_without_workers_times_out(tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        t0 = time.monotonic()
        rc, cap = _run(["sweep", _toml(tmp_path / "c.toml"), "--out", tmp_path / "o", "--scheduler",
                        cluster.scheduler_address, "--timeout", "2", "--no-progress"], capsys)
    assert rc == 2 and "no Dask worker joined" in cap.err and time.monotonic() - t0 < 60


def test_flop_counts_print_without_float_overflow():
    """The refusal message's flop count: ``2.7e+32`` style, and ``~1e<digits>`` where a float would overflow."""
    from sapa.empirics.montecarlo.workload import _sci

    assert _sci(27 * 10**31) == "2.7e+32"
    assert _sci(5000) == "5e+03"
    assert _sci(10**305) == "~1e305"
    assert _sci(3 * 10**400) == "~1e400"


def test_the_limits_are_exclusive_and_the_message_says_what_was_counted(monkeypatch):
    """Exactly MAX_CELLS cells or MAX_FLOPS flops still run; one more is refused. Enumerated grids are counted
    exactly ("2 cells"), only grids too large to enumerate are an upper bound ("up to ...")."""
    import sapa.empirics.montecarlo.workload as wl

    cfg = _cfg(N=[4, 8], trials=2)
    w = sweep_work(cfg)
    assert (w.cells, w.bound) == (2, False)
    monkeypatch.setattr(wl, "MAX_CELLS", 2)
    assert sweep_work(cfg).bound is False and check_sweep_work(cfg) == w
    monkeypatch.setattr(wl, "MAX_CELLS", 1)
    assert sweep_work(cfg).bound is True  # beyond the limit: not enumerated
    monkeypatch.setattr(wl, "MAX_CELLS", 10)
    monkeypatch.setattr(wl, "MAX_FLOPS", w.flops)
    assert check_sweep_work(cfg) == w
    monkeypatch.setattr(wl, "MAX_FLOPS", w.flops - 1)
    with pytest.raises(InputError, match=r"flops \(2 cells, trials=2\)"):
        check_sweep_work(cfg)


def test_usable_cores_falls_back_to_cpu_count(monkeypatch):
    import os

    from sapa.empirics.montecarlo.workload import usable_cores

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert usable_cores() == 1
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    for count, want in ((None, 1), (1, 1), (3, 3)):
        monkeypatch.setattr(os, "cpu_count", lambda: count)
        assert usable_cores() == want


def test_available_memory_falls_back_to_psutil(tmp_path, monkeypatch):
    import sys
    import types

    fake = types.SimpleNamespace(virtual_memory=lambda: types.SimpleNamespace(available=123 * 2**20))
    monkeypatch.setitem(sys.modules, "psutil", fake)
    assert available_memory(tmp_path / "no-meminfo") == 123 * 2**20


def test_cap_workers_notes_and_default_memory(monkeypatch):
    import sapa.empirics.montecarlo.workload as wl

    assert cap_workers(8, 100, 400 * 2**20, cores=16, memory=2**30) == \
        (2, "--workers 8 clamped to 2 (1.0 GiB available at ≈400 MiB per worker: 2)")
    assert cap_workers(8, 3, 2**20, cores=2, memory=None) == (2, "--workers 8 clamped to 2 (cores: 2, pending tasks: 3)")
    assert cap_workers(4, 2, 2**20, cores=4, memory=None) == (2, "--workers 4 clamped to 2 (pending tasks: 2)")
    assert cap_workers(4, 1, 2**20, cores=4, memory=None)[0] == 1 and cap_workers(4, 0, 2**20, cores=4, memory=None)[0] == 1
    monkeypatch.setattr(wl, "available_memory", lambda: 2**30)  # memory=-1 (the default) reads MemAvailable
    assert cap_workers(8, 100, 400 * 2**20, cores=16)[0] == 2


def test_a_grid_too_large_to_enumerate_gets_an_upper_bound_of_its_flops(monkeypatch):
    import sapa.empirics.montecarlo.workload as wl

    cfg = _cfg(N=[4, 8], D=[2, 3], trials=2)
    exact = sweep_work(cfg)
    monkeypatch.setattr(wl, "MAX_CELLS", 1)
    bound = sweep_work(cfg)
    assert bound.bound and bound.cells == exact.cells == 4 and bound.flops >= exact.flops
    assert bound.flops == 4 * wl._cell_flops(8, 3, 3, 2)


def test_available_memory_reads_proc_meminfo_by_default(monkeypatch):
    import sys
    from pathlib import Path

    monkeypatch.setitem(sys.modules, "psutil", None)  # no fallback: the figure must come from /proc/meminfo
    line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemAvailable:"))
    got = available_memory()
    assert got is not None and abs(got - int(line.split()[1]) * 1024) < 2**30


# --------------------------------------------------------------------------- check_cost: every command's estimate


def test_check_cost_refuses_flops_seconds_and_memory_in_one_line_each():
    from sapa.empirics.montecarlo.workload import MAX_FLOPS, MAX_SECONDS, Cost, check_cost

    ok = Cost(flops=int(MAX_FLOPS), bytes=2**30, how="h", seconds=MAX_SECONDS)
    assert check_cost(ok, "it", "reduce --x", memory=2**30) is ok  # at every limit: allowed
    for bad, needle in ((Cost(int(MAX_FLOPS) + 1, 0, "h"), "flops (h), more than the limit of 1e+16"),
                        (Cost(0, 0, "h", seconds=MAX_SECONDS * 1.01), "2.02 days of CPU time (h), more than the limit "
                                                                        "of 2 days"),
                        (Cost(0, 2**30 + 1, "h"), "GiB of memory (h), more than the 1 GiB available; reduce --y")):
        with pytest.raises(InputError, match=re.escape(needle)) as info:
            check_cost(bad, "it", "reduce --x", "reduce --y", memory=2**30)
        assert str(info.value).startswith("it needs ≈") and str(info.value).endswith(", or pass --force")
        assert "\n" not in str(info.value)
        assert check_cost(bad, "it", "reduce --x", force=True, memory=2**30) is bad
    with pytest.raises(InputError, match=r"≈1\.2e\+12 years of CPU time"):
        check_cost(Cost(0, 0, "h", seconds=3.8e19), "it", "a", memory=2**30)
