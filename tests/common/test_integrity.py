"""Tests for `common/integrity.py` and its use by the sweep and training stores: a flipped bit in a stored
float, or an edited value in a run's JSON, is detected and recomputed (one warning line), never used."""

from __future__ import annotations

import json
import struct
from dataclasses import replace

import pandas as pd
import pyarrow as pa
import pytest

import sapa.empirics.montecarlo.sweep.run as sw  # run_sweep looks run_cell, _part_done, _write_parquet up here
from sapa.empirics.training import train_study as ts
from sapa.common.integrity import (
    CorruptResult,
    check_record,
    check_table,
    read_parquet_verified,
    seal_record,
    seal_table,
)
from sapa.empirics.montecarlo.sweep import config_from_dict, run_sweep

TINY = {"seed": 3, "trials": 4, "N": [4, 8], "D": [4], "d": ["D"], "weight_model": ["iid"],
        "activation": [{"kind": "softmax"}]}
RUNS = replace(ts.TINY, arms=("softmax", "x_sqrtN"), tasks=("text",), text=replace(ts.TINY.text, Ns=(8,)))


def _flip_float_bit(path, value: float) -> None:
    """Flip the lowest mantissa bit of ``value`` where its 8 bytes sit in the (uncompressed-literal) Parquet page."""
    raw = bytearray(path.read_bytes())
    at = raw.find(struct.pack("<d", value))
    assert at >= 0, "value not found verbatim in the file"
    raw[at] ^= 1
    path.write_bytes(bytes(raw))


# --------------------------------------------------------------------------- units


def test_table_checksum_detects_one_changed_value():
    t = seal_table(pa.table({"a": [1.0, 2.0, 3.0], "s": ["x", "y", "z"]}))
    check_table(t, "t")
    changed = pa.table({"a": [1.0, 2.0000000000000004, 3.0], "s": ["x", "y", "z"]}).replace_schema_metadata(
        t.schema.metadata)
    with pytest.raises(CorruptResult, match="does not match"):
        check_table(changed, "t.parquet")
    with pytest.raises(CorruptResult, match="no content checksum"):
        check_table(pa.table({"a": [1.0]}), "t.parquet")


def test_record_checksum_detects_an_edit():
    rec = seal_record({"key": {"seed": 1}, "final": {"test_acc": 0.5, "attn_fro": float("inf")}, "history": [1, 2]})
    check_record(json.loads(json.dumps(rec)), "r.json")  # survives a JSON round trip
    edited = json.loads(json.dumps(rec))
    edited["final"]["test_acc"] = 0.51
    with pytest.raises(CorruptResult, match="r.json: content does not match"):
        check_record(edited, "r.json")
    with pytest.raises(CorruptResult, match="no content checksum"):
        check_record({"final": {}}, "r.json")


# --------------------------------------------------------------------------- the sweep store


def test_flipped_bit_in_a_cell_is_detected_and_recomputed(tmp_path, capsys):
    cfg = config_from_dict(TINY)
    ref = run_sweep(cfg, tmp_path, progress=False)
    part = min((tmp_path / "cells").glob("*.parquet"))
    good = pd.read_parquet(part)
    _flip_float_bit(part, float(good["value"].iloc[1]))
    bad = pd.read_parquet(part)  # still valid Parquet: only the content check can tell
    assert (bad["value"] != good["value"]).sum() == 1
    with pytest.raises(CorruptResult):
        read_parquet_verified(part)
    capsys.readouterr()
    got = run_sweep(cfg, tmp_path, progress=False)
    assert f"sapa: warning: {part}: content does not match its checksum" in capsys.readouterr().err
    pd.testing.assert_frame_equal(got, ref)
    pd.testing.assert_frame_equal(pd.read_parquet(part), good)  # the cell was recomputed and rewritten


def test_clean_resume_recomputes_nothing_and_warns_nothing(tmp_path, capsys, monkeypatch):
    cfg = config_from_dict(TINY)
    run_sweep(cfg, tmp_path, progress=False)
    capsys.readouterr()
    monkeypatch.setattr(sw, "run_cell", lambda *a: pytest.fail("a sealed, intact cell was recomputed"))
    run_sweep(cfg, tmp_path, progress=False)
    assert "warning" not in capsys.readouterr().err


def test_cell_without_checksum_is_recomputed(tmp_path, capsys):
    cfg = config_from_dict(TINY)
    ref = run_sweep(cfg, tmp_path, progress=False)
    part = min((tmp_path / "cells").glob("*.parquet"))
    import pyarrow.parquet as pq

    t = pq.read_table(part)
    pq.write_table(t.replace_schema_metadata({k: v for k, v in t.schema.metadata.items() if k != b"sapa_sha256"}), part)
    got = run_sweep(cfg, tmp_path, progress=False)
    assert "no content checksum; recomputing it" in capsys.readouterr().err
    pd.testing.assert_frame_equal(got, ref)


def test_cell_damaged_during_the_run_is_an_error_naming_it(tmp_path, monkeypatch):
    """A cell that passed the resume check but fails at assembly is never used: an error names the file."""
    from sapa.common.validate import InputError

    cfg = config_from_dict(TINY)
    run_sweep(cfg, tmp_path, progress=False)
    part = min((tmp_path / "cells").glob("*.parquet"))
    _flip_float_bit(part, float(pd.read_parquet(part)["value"].iloc[0]))
    monkeypatch.setattr(sw, "_part_done", lambda path, cid: True)
    with pytest.raises(InputError, match=f"{part.name}: content does not match"):
        run_sweep(cfg, tmp_path, progress=False)


# --------------------------------------------------------------------------- the training study's store


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    return out, ts.run_study(RUNS, out, seed=0, workers=1, progress=False)


def test_chunk_files_are_sealed(trained):
    out, _ = trained
    files = list((out / "chunks").glob("*.json"))
    assert files
    for p in files:
        check_record(json.loads(p.read_text()), p)


def test_edited_chunk_file_is_detected_and_recomputed(trained, tmp_path, capsys, monkeypatch):
    import shutil

    out, res = trained
    shutil.copytree(out / "chunks", tmp_path / "chunks")
    path = min((tmp_path / "chunks").glob("text_*p1*.json"))
    rec = json.loads(path.read_text())
    rec["rows"][0]["test_acc"] = 0.999
    path.write_text(json.dumps(rec, indent=2))
    real, calls = ts.train_chunk, []
    monkeypatch.setattr(ts, "train_chunk", lambda c, cfg: (calls.append(c.file_name), real(c, cfg))[1])
    got = ts.run_study(RUNS, tmp_path, seed=0, workers=1, progress=False)
    assert f"sapa: warning: {path}: content does not match its checksum" in capsys.readouterr().err
    assert calls == [path.name]
    pd.testing.assert_frame_equal(got.runs.drop(columns="cpu_s"), res.runs.drop(columns="cpu_s"))
    assert 0.999 not in set(got.runs["test_acc"])


def test_chunk_damaged_during_the_run_is_an_error_naming_it(trained, tmp_path, monkeypatch):
    """A chunk file that passed the resume check but fails when the tables are assembled is never used."""
    import shutil

    from sapa.common.validate import InputError

    out, _ = trained
    shutil.copytree(out / "chunks", tmp_path / "chunks")
    path = min((tmp_path / "chunks").glob("text_*softmax*.json"))
    rec = json.loads(path.read_text())
    rec["rows"][0]["attn_fro"] = 1.0
    path.write_text(json.dumps(rec))
    monkeypatch.setattr(ts, "chunk_ok", lambda *a: True)
    with pytest.raises(InputError, match=f"{path.name}: content does not match"):
        ts.run_study(RUNS, tmp_path, seed=0, workers=1, progress=False)


def test_a_cell_replaced_by_a_directory_is_named(tmp_path, capsys):
    """`sapa sweep` stops with one line naming the cell path, not a temporary file."""
    from sapa.cli import main

    cfg = tmp_path / "tiny.toml"
    cfg.write_text('seed = 3\ntrials = 4\nN = [4, 8]\nD = [4]\nd = ["D"]\nweight_model = ["iid"]\n'
                   '[[activation]]\nkind = "softmax"\n')
    out = tmp_path / "res"
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    part = min((out / "cells").glob("*.parquet"))
    part.unlink()
    part.mkdir()
    capsys.readouterr()
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sapa: error: ") and err[0].endswith(str(part)) and ".tmp" not in err[0]


def test_record_checksum_takes_numpy_values_and_ignores_key_order():
    """Run records hold numpy scalars, arrays and paths; a record whose keys were reordered is the same content."""
    from pathlib import Path

    import numpy as np

    rec = seal_record({"loss": np.float64(0.25), "steps": np.int64(3), "curve": np.arange(3.0), "out": Path("r")})
    stored = json.loads(json.dumps(rec, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
    check_record(stored, "run.json")
    check_record(dict(reversed(list(stored.items()))), "run.json")
    with pytest.raises(CorruptResult, match="run.json: content does not match"):
        check_record({**stored, "steps": 4}, "run.json")


def test_table_checksum_covers_the_cell_metadata_column_types_and_nulls():
    """Edits the value check alone would miss: the ``sapa`` metadata (the cell's key), a column's type, a null→NaN."""
    t = seal_table(pa.table({"a": [1.0, 2.0], "n": [3, 4]}).replace_schema_metadata({b"sapa": b'{"N": 4}'}))
    check_table(t, "t")
    meta = dict(t.schema.metadata)
    with pytest.raises(CorruptResult, match="does not match"):
        check_table(t.replace_schema_metadata({**meta, b"sapa": b'{"N": 8}'}), "t.parquet")
    with pytest.raises(CorruptResult, match="does not match"):
        check_table(t.cast(pa.schema([("a", pa.float64()), ("n", pa.int32())])).replace_schema_metadata(meta), "t")
    nulls = seal_table(pa.table({"a": pa.array([1.0, None, 3.0])}))
    nan = pa.table({"a": pa.array([1.0, float("nan"), 3.0])}).replace_schema_metadata(nulls.schema.metadata)
    with pytest.raises(CorruptResult, match="does not match"):
        check_table(nan, "t.parquet")
    mixed = seal_table(pa.table({"a": pa.array([1.0, None, float("nan")])}))  # a null and a NaN trade places
    swapped = pa.table({"a": pa.array([1.0, float("nan"), None])}).replace_schema_metadata(mixed.schema.metadata)
    with pytest.raises(CorruptResult, match="does not match"):
        check_table(swapped, "t.parquet")


def test_record_checksum_is_the_documented_canonical_json():
    """sha256 of the JSON with sorted keys and no spaces, checksum field left out: stored checksums stay valid
    across versions (a change of format would mark every stored run corrupt and recompute it)."""
    import hashlib

    rec = {"z": [1, 2.5], "a": {"y": "é", "b": None}, "sha256": "old"}
    canon = json.dumps({"a": {"b": None, "y": "é"}, "z": [1, 2.5]}, sort_keys=True, separators=(",", ":"))
    assert seal_record(rec)["sha256"] == hashlib.sha256(canon.encode()).hexdigest()


def test_a_garbled_stored_checksum_is_corrupt_not_a_crash():
    t = seal_table(pa.table({"a": [1.0]}))
    garbled = t.replace_schema_metadata({**t.schema.metadata, b"sapa_sha256": b"\xff\xfe" + b"0" * 62})
    with pytest.raises(CorruptResult, match="t.parquet: content does not match"):
        check_table(garbled, "t.parquet")


def test_table_checksum_covers_names_kinds_text_and_exact_integers():
    """A renamed column, a changed kind with the same bytes, an edited string, a date passed off as text, an
    integer beyond 2**53 changed by one: all detected. A string column read back as large_string is the same."""
    import datetime

    t = seal_table(pa.table({"n": pa.array([2**53, 1], pa.int64()), "s": ["x", "y"],
                             "d": pa.array([datetime.date(2020, 1, 1)], pa.date32()).take([0, 0])}))
    meta = t.schema.metadata
    check_table(t, "t")
    damaged = {
        "renamed": t.rename_columns(["m", "s", "d"]),
        "uint64": t.set_column(0, "n", t.column("n").cast(pa.uint64())),
        "2**53+1": t.set_column(0, "n", pa.array([2**53 + 1, 1], pa.int64())),
        "text": t.set_column(1, "s", pa.array(["x", "z"])),
        "date as text": t.set_column(2, "d", pa.array(["2020-01-01", "2020-01-01"])),
    }
    for what, bad in damaged.items():
        with pytest.raises(CorruptResult, match="does not match"):
            check_table(bad.replace_schema_metadata(meta), f"{what}.parquet")
    check_table(t.set_column(1, "s", t.column("s").cast(pa.large_string())).replace_schema_metadata(meta), "t")
