"""Tests for `empirics/montecarlo/sweep/store.py`: byte-identical Parquet with provenance, damaged parts recomputed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from empirics.montecarlo.sweep import read_metadata, run_sweep
from tests.empirics.montecarlo.sweep.sweep_fixture import tiny


def test_same_seed_gives_identical_parquet(tmp_path):
    cfg = tiny()
    d1 = run_sweep(cfg, tmp_path / "a", progress=False)
    d2 = run_sweep(cfg, tmp_path / "b", progress=False)
    r1, r2 = pd.read_parquet(tmp_path / "a" / "results.parquet"), pd.read_parquet(tmp_path / "b" / "results.parquet")
    pd.testing.assert_frame_equal(r1, r2)
    pd.testing.assert_frame_equal(d1, r1)
    pd.testing.assert_frame_equal(d2, r2)
    assert (tmp_path / "a" / "results.parquet").read_bytes() == (tmp_path / "b" / "results.parquet").read_bytes()
    meta = read_metadata(tmp_path / "a" / "results.parquet")
    assert meta["config_hash"] == cfg.hash() and meta["seed"] == 3 and meta["dtype"] == "float64"
    assert meta["device"] == "cpu" and {"torch", "numpy", "pandas", "pyarrow"} <= set(meta["versions"])
    assert json.loads((tmp_path / "a" / "provenance.json").read_text())["rows"] == len(r1)
    d3 = run_sweep(tiny(seed=4), tmp_path / "c", progress=False)
    assert not np.array_equal(d3["value"].to_numpy(), d1["value"].to_numpy())


def test_damaged_or_foreign_part_file_is_recomputed(tmp_path):
    cfg = tiny(N=[4, 8])
    ref = run_sweep(cfg, tmp_path, progress=False)
    parts = sorted((tmp_path / "cells").glob("*.parquet"))
    parts[0].write_bytes(b"not parquet")
    parts[1].write_bytes(parts[2].read_bytes())  # another cell's rows under this name
    pd.testing.assert_frame_equal(run_sweep(cfg, tmp_path, progress=False), ref)
