"""Tests for `figures/bench_scaling.py`: drawing from a measurement, its claim, and (slow) a real small run."""

from __future__ import annotations

import pytest

from sapa.figures import bench_scaling
from sapa.common.validate import InputError

RES = {"workers": [1, 2], "seconds": [4.2, 3.1], "startup_s": [0.0, 6.6], "speedup": [1.0, 4.2 / 3.1],
       "efficiency": [1.0, 4.2 / 6.2], "efficiency_with_startup": [1.0, 4.2 / 19.4], "cells": 12, "rows": 1728,
       "config": {"trials": 48}, "identical": True, "cpu_count": 2, "load_avg": [1.0, 1.0, 1.0]}


def test_draw_from_a_measurement(tmp_path):
    paths = bench_scaling.main(tmp_path, res=RES)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)
    assert paths[0].name == "bench_scaling_workers1-2_cells12_trials48.png"


def test_check_rejects_differing_results(tmp_path):
    with pytest.raises(AssertionError, match="differs"):
        bench_scaling.draw({**RES, "identical": False}, tmp_path)
    assert not list(tmp_path.iterdir())  # nothing saved


@pytest.mark.parametrize("workers", [(2,), (0, 1), (1, -2), (1, 1.5)])
def test_bad_worker_counts(workers):
    with pytest.raises(InputError):
        bench_scaling.scaling_benchmark(workers, small=True)


@pytest.mark.slow
def test_main_small_measures_and_saves(tmp_path):
    res = bench_scaling.scaling_benchmark((1, 2), small=True)
    assert res["identical"] and res["workers"] == [1, 2] and all(t > 0 for t in res["seconds"])
    assert res["efficiency"][1] == pytest.approx(res["seconds"][0] / (2 * res["seconds"][1]))
    paths = bench_scaling.main(tmp_path, res=res)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
