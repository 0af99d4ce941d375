"""Tests for `empirics/training/study_store.py`: a stored chunk reads back as written — per-row CPU share, the
history's leading (task, N) columns, infinities — and an incomplete record is named, never assembled."""

from __future__ import annotations

import json
import math

import pytest

from sapa.common.integrity import timing_path
from sapa.empirics.training.study_config import SCHEMA, Chunk, Member
from sapa.empirics.training.study_store import chunk_ok, chunk_record_problem, read_chunk, store_chunk


def _row(seed: int) -> dict:
    return {"task": "digits", "N": 16, "arm": "softmax", "p": 1, "scale": "softmax", "lr": 0.003, "seed": seed,
            "diverged": False, "diverged_step": -1, "test_acc": 0.9, "val_acc_final": 0.8, "loss_start": math.inf,
            "attn_fro": -math.inf}


def _chunk_and_result(k: int, cpu_s: float | None = 6.0):
    members = tuple(Member("softmax", math.nan, 0.003, r) for r in range(k))
    hist = [["softmax", None, 0.003, r, 10, "val_acc", 0.5] for r in range(k)]
    return Chunk("digits", 16, "softmax", 0, members), {"rows": [_row(r) for r in range(k)], "history": hist,
                                                       "wall_s": 1.0, "cpu_s": cpu_s}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_stored_chunk_reads_back_with_its_cpu_time_shared_over_its_rows(tmp_path, k):
    chunk, res = _chunk_and_result(k)
    path = tmp_path / chunk.file_name
    store_chunk(path, chunk, "h", res)
    assert chunk_ok(path, chunk, "h") and not chunk_ok(path, chunk, "other")
    rows, hist = read_chunk(path, chunk)
    assert list(rows["cpu_s"]) == [6.0 / k] * k  # one member's share of the chunk's CPU time
    assert math.isinf(rows["loss_start"][0]) and rows["loss_start"][0] > 0 and rows["attn_fro"][0] < 0
    assert list(hist.columns[:3]) == ["task", "N", "arm"] and set(hist["N"]) == {16} and set(hist["task"]) == {"digits"}


def test_the_timings_live_beside_the_sealed_chunk_so_two_runs_write_the_same_bytes(tmp_path):
    chunk, res = _chunk_and_result(2)
    a, b = tmp_path / "a" / chunk.file_name, tmp_path / "b" / chunk.file_name
    store_chunk(a, chunk, "h", res)
    store_chunk(b, chunk, "h", {**res, "wall_s": 99.0, "cpu_s": 3.0})  # the same numbers, another run's clock
    assert a.read_bytes() == b.read_bytes()
    assert b"wall_s" not in a.read_bytes() and b"cpu_s" not in a.read_bytes()
    timing = json.loads(timing_path(b).read_text())
    assert {k: timing[k] for k in ("wall_s", "cpu_s")} == {"wall_s": 99.0, "cpu_s": 3.0} and "finished_utc" in timing
    assert list(read_chunk(b, chunk)[0]["cpu_s"]) == [1.5, 1.5]  # the sidecar's CPU time, shared over the rows
    timing_path(b).unlink()  # a lost sidecar costs the timing, not the result
    assert chunk_ok(b, chunk, "h") and read_chunk(b, chunk)[0]["cpu_s"].isna().all()


def test_a_chunk_without_cpu_time_reads_as_nan(tmp_path):
    chunk, res = _chunk_and_result(2, cpu_s=None)
    store_chunk(tmp_path / "c.json", chunk, "h", res)
    rows, _ = read_chunk(tmp_path / "c.json", chunk)
    assert rows["cpu_s"].isna().all()


def test_an_empty_member_list_is_named_not_assembled():
    chunk, res = _chunk_and_result(1)
    rec = {"schema": SCHEMA, "members": [], "rows": [], "history": res["history"]}
    assert chunk_record_problem(rec) == "no 'members' list"
    assert chunk_record_problem(dict(rec, members="x")) == "no 'members' list"
