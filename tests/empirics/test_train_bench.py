"""``sapa bench --part training``: the ensemble and the one-at-a-time loop time the same work; a ratio comes back."""

from __future__ import annotations

import math

import pytest

from empirics import train_bench as tb


def test_bench_times_both_ways_on_a_tiny_cell(monkeypatch):
    monkeypatch.setattr(tb, "_cells", lambda quick: (tb.BenchCell("text", 8, members=3, steps=2, loop_members=2),))
    res = tb.bench_training(quick=True, rounds=2)
    (row,) = res["cells"]
    assert row["members"] == 3 and row["steps"] == 2 and row["N"] == 8
    for k in ("ensemble_members_per_s", "loop_members_per_s", "speedup"):
        assert math.isfinite(row[k]) and row[k] > 0
    assert res["ensemble_speedup"] == pytest.approx(row["ensemble_members_per_s"] / row["loop_members_per_s"])
    assert "load-dependent" in res["note"]


def test_the_quick_cells_are_the_quick_studys_p3_ensembles():
    from empirics.train_study import QUICK, plan_chunks

    cells = tb._cells(quick=False)
    assert cells[0].N == QUICK.plan(cells[0].task).Ns[0]  # the speedup is reported at the smallest quick cell
    for c in cells:
        sizes = [len(ch.members) for ch in plan_chunks(QUICK, c.task, c.N, {1: 16.0, 3: 16.0}) if ch.family == "p3"]
        assert c.members == max(sizes)
