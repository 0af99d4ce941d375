"""``sapa bench --part training``: the ensemble and the one-at-a-time loop time the same work; a ratio comes back."""

from __future__ import annotations

import math

import pytest
import torch

from sapa.empirics.training import train_bench as tb


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
    from sapa.empirics.training.train_study import QUICK, plan_chunks

    cells = tb._cells(quick=False)
    assert cells[0].N == QUICK.plan(cells[0].task).Ns[0]  # the speedup is reported at the smallest quick cell
    for c in cells:
        sizes = [len(ch.members) for ch in plan_chunks(QUICK, c.task, c.N, {1: 16.0, 3: 16.0}) if ch.family == "p3"]
        assert c.members == max(sizes)


def test_bench_reports_a_gemm_ceiling_per_cell(monkeypatch):
    monkeypatch.setattr(tb, "_cells", lambda quick: (tb.BenchCell("digits", 16, members=3, steps=2, loop_members=2),))
    res = tb.bench_training(quick=True, rounds=1)
    (row,) = res["cells"]
    for k in ("loop_gemm_fraction", "ensemble_gemm_fraction"):
        assert 0 < row[k] < 1.5  # GEMM seconds (profiled) over timed seconds: ≤ 1 up to the profiler's overhead
    assert row["speedup_ceiling"] >= 1
    assert row["speedup_ceiling"] == pytest.approx(1 / row["loop_gemm_fraction"])  # the definition
    assert res["speedup_ceiling"] == row["speedup_ceiling"]  # the first cell, like ensemble_speedup
    assert row["loop_gemm_s_per_member"] > 0 and row["ensemble_gemm_s_per_member"] > 0
    assert "upper bound" in res["note"]


def test_the_profiled_rounds_do_not_enter_the_speedup(monkeypatch):
    # fake timers with known seconds: the speedup is theirs alone, whatever the profiled rounds measure
    monkeypatch.setattr(tb, "_cells", lambda quick: (tb.BenchCell("text", 8, members=6, steps=1, loop_members=2),))
    monkeypatch.setattr(tb, "_time_ensemble", lambda *a: 3.0)
    monkeypatch.setattr(tb, "_time_loop", lambda *a: 4.0)
    profiles = iter([(1.0, 9.0), (2.0, 9.0)])  # (GEMM s, op s): the loop's, then the ensemble's; timed: 4 s, 3 s
    monkeypatch.setattr(tb, "gemm_profile", lambda run: next(profiles))
    res = tb.bench_training(quick=True, rounds=2)
    (row,) = res["cells"]
    assert row["speedup"] == pytest.approx((6 / 3.0) / (2 / 4.0)) == res["ensemble_speedup"]
    assert row["loop_gemm_fraction"] == pytest.approx(0.25) and row["speedup_ceiling"] == pytest.approx(4.0)
    assert row["ensemble_gemm_fraction"] == pytest.approx(2.0 / 3.0)  # of the ensemble's timed 3 s
    assert row["loop_gemm_s_per_member"] == pytest.approx(0.5) and row["ensemble_gemm_s_per_member"] == pytest.approx(2 / 6)


def test_gemm_profile_counts_matrix_products_and_nothing_else():
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    gemm, total = tb.gemm_profile(lambda: [a @ b for _ in range(5)])
    assert 0 < gemm <= total and gemm / total > 0.5  # a GEMM-only run is mostly GEMM
    gemm, total = tb.gemm_profile(lambda: [(a + b).exp() for _ in range(5)])
    assert gemm == 0 < total  # elementwise work is not counted


def test_the_gemm_names_are_real_aten_ops():
    # a misspelt name would silently count nothing
    for name in tb.GEMM_OPS:
        ns, op = name.split("::")
        assert ns == "aten" and hasattr(torch.ops.aten, op), name
