"""Tests for `empirics/timing/contention.py`: the neighbours run for the block, do what their state says, and are gone
after it however it ends."""

from __future__ import annotations

import os
import time

import pytest

from sapa.empirics.timing import contention as ct


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().split(")")[-1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15 of proc(5))


def test_quiet_starts_nothing():
    with ct.loaded("quiet") as pids:
        assert pids == []


@pytest.mark.parametrize("state, kw", [("compute", {}), ("memory", {"mib": 8})])
def test_a_neighbour_burns_cpu_while_the_block_runs_and_is_gone_after(state, kw):
    with ct.loaded(state, workers=1, **kw) as pids:
        assert len(pids) == 1 and _alive(pids[0])
        t0 = _cpu_ticks(pids[0])
        time.sleep(0.5)
        burnt = (_cpu_ticks(pids[0]) - t0) / os.sysconf("SC_CLK_TCK")
    assert burnt > 0.1  # a busy neighbour: at least a fifth of the half second (it shares 2 cores with the suite)
    assert not _alive(pids[0])


def test_the_memory_neighbour_holds_its_arrays():
    """Two arrays of ``mib`` MiB each, touched before the block starts: its resident set is at least that."""
    with ct.loaded("memory", workers=1, mib=64) as pids:
        with open(f"/proc/{pids[0]}/status") as f:
            rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
    assert rss_kib >= 2 * 64 * 1024


def test_an_exception_in_the_block_still_stops_the_neighbours():
    seen: list[int] = []
    with pytest.raises(RuntimeError, match="boom"):
        with ct.loaded("compute", workers=2) as pids:
            seen.extend(pids)
            raise RuntimeError("boom")
    assert len(seen) == 2 and not any(_alive(p) for p in seen)


@pytest.mark.parametrize("state, kw, msg", [("busy", {}, "unknown machine state"), ("memory", {"mib": 0}, "mib"),
                                            ("compute", {"workers": 0}, "workers"),
                                            ("compute", {"workers": True}, "workers")])
def test_bad_arguments_are_refused(state, kw, msg):
    with pytest.raises(ValueError, match=msg):
        with ct.loaded(state, **kw):
            pass
