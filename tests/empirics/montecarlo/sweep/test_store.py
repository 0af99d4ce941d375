"""Tests for `empirics/montecarlo/sweep/store.py`: byte-identical Parquet with provenance, damaged parts recomputed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sapa.empirics.montecarlo.sweep import read_metadata, run_sweep
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


def test_stale_temporary_parts_go_and_nothing_is_removed_through_a_link(tmp_path):
    """A killed writer's old `.x.tmp.parquet` is removed (a fresh one kept); a link at the parts folder removes
    nothing where it points (issue 52, case 5: every write, and every removal, stays inside --out)."""
    import os
    import time

    import pytest

    from sapa.common.atomic import LinkRefused, confined
    from sapa.empirics.montecarlo.sweep.store import STALE_TMP_S, _remove_stale_tmp

    parts, elsewhere = tmp_path / "cells", tmp_path / "elsewhere"
    for d in (parts, elsewhere):
        d.mkdir()
        for name, age in ((".old.tmp.parquet", STALE_TMP_S + 60), (".new.tmp.parquet", 0)):
            (d / name).write_text("x")
            t = time.time() - age
            os.utime(d / name, (t, t))
    _remove_stale_tmp(parts)
    assert sorted(p.name for p in parts.iterdir()) == [".new.tmp.parquet"]
    link = tmp_path / "linked"
    link.symlink_to(elsewhere)
    with confined(tmp_path), pytest.raises(LinkRefused):  # tmp_path held as the sweep's --out
        _remove_stale_tmp(link)
    assert sorted(p.name for p in elsewhere.iterdir()) == [".new.tmp.parquet", ".old.tmp.parquet"]
