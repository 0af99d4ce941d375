"""Tests for `common/readfile.py`: regular files only (FIFOs and devices refused without blocking), bounded reads."""

from __future__ import annotations

import os

import pytest

from sapa.common.readfile import read_regular, read_regular_text, require_regular
from sapa.common.validate import InputError


def test_regular_files_are_read_and_bounded(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("héllo")
    assert read_regular_text(f) == "héllo" and require_regular(f) == f
    with pytest.raises(InputError, match="more than the limit of 3"):
        read_regular(f, "x", limit=3)
    f.write_bytes(b"\xff")
    with pytest.raises(InputError, match="not UTF-8"):
        read_regular_text(f)


def test_fifos_devices_and_missing_files_are_one_line(tmp_path):
    os.mkfifo(tmp_path / "p")
    for path, needle in ((tmp_path / "p", "a named pipe"), ("/dev/zero", "a character device"),
                         (tmp_path, "a directory"), (tmp_path / "none", "file not found")):
        for f in (read_regular, require_regular):
            with pytest.raises(InputError, match=needle):
                f(path, "what")


# --------------------------------------------------------------------------- issue 52, case 8
# A Parquet whose `activation` column is dictionary-typed (1.5 MB file, one 1 MiB string shared by 148 176 rows)
# skipped the text-size check, and its checksum then expanded every row: `sapa figures` reached 5.6 GB.


def _dictionary_bomb(path, rows: int, width: int, **columns) -> None:
    """A sealed-looking table whose ``activation`` column is dictionary<string>: one ``width``-byte value, ``rows``
    rows pointing at it (the file keeps the Arrow dictionary type in its schema)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sapa.common.integrity import PARQUET_KEY

    act = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["x" * width]))
    t = pa.table({"N": np.arange(rows, dtype=np.int64), "activation": act, **columns})
    pq.write_table(t.replace_schema_metadata({PARQUET_KEY: b"0" * 64}), path)


def test_a_dictionary_typed_column_is_bounded_before_it_is_decoded(tmp_path, monkeypatch):
    import pyarrow as pa

    from sapa.common import readfile
    from sapa.common.integrity import read_parquet_verified

    _dictionary_bomb(tmp_path / "results.parquet", rows=1_000, width=1 << 16)  # 65.5 MB decoded: 62× the limits below
    assert (tmp_path / "results.parquet").stat().st_size < 200_000
    with pytest.raises(InputError, match="column 'activation'; dictionaries counted from their indices"):
        readfile.read_parquet_table(tmp_path / "results.parquet", "sweep results", limit=2**20)
    monkeypatch.setattr(readfile, "MAX_READ_BYTES", 2**20)  # the checksum is never reached: the bound comes first
    with pytest.raises(InputError, match="decode to more than the limit"):
        read_parquet_verified(tmp_path / "results.parquet")
    ok = readfile.read_parquet_table(tmp_path / "results.parquet", "x", limit=2**30)  # within its limit: plain text
    assert ok.schema.field("activation").type == pa.string() and ok.column("activation")[999].as_py() == "x" * 65536


def test_dictionaries_inside_lists_and_structs_are_bounded_too(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sapa.common.readfile import read_parquet_table

    long = "y" * 10_000
    t = pa.table({"l": pa.array([[long, long]] * 50), "s": pa.array([{"u": long}] * 50)})
    pq.write_table(t, tmp_path / "nested.parquet")  # 50·2·10⁴ + 50·10⁴ = 1.5·10⁶ bytes once decoded
    with pytest.raises(InputError, match="decode to more than the limit of 1,499,999"):
        read_parquet_table(tmp_path / "nested.parquet", "nested", limit=1_499_999)
    back = read_parquet_table(tmp_path / "nested.parquet", "nested", limit=1_500_000)
    assert back.to_pylist() == t.to_pylist() and back.schema.field("l").type == pa.list_(pa.string())


@pytest.mark.slow  # a fresh interpreter under a 3 GiB address-space cap reads the reported file
def test_the_reported_dictionary_bomb_stays_small(tmp_path):
    """The reported sizes: one 1 MiB string shared by 148 176 rows (≈ 155 GB decoded) in a sweep's results.parquet
    read by `sapa figures`; under a 3 GiB cap the figure is skipped with the reason, no MemoryError, no traceback."""
    import subprocess
    import sys

    sweep = tmp_path / "R" / "sweep"
    sweep.mkdir(parents=True)
    _dictionary_bomb(sweep / "results.parquet", rows=148_176, width=1 << 20)
    assert (sweep / "results.parquet").stat().st_size < 3_000_000
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
            "from sapa.common.integrity import read_parquet_verified; from sapa.common.validate import InputError\n"
            f"try:\n    read_parquet_verified({str(sweep / 'results.parquet')!r})\n"
            "except InputError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 0 and "decode to more than the limit" in done.stdout, done.stderr[-2000:]
