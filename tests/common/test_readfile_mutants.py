"""Mutation-testing additions for `common/readfile.py`: the exact bounds (at, just above the limit), a file that
grows while it is read, Parquet footers and decoded text at their limits, file objects rewound, OSError texts.

Each test names the mutants of ``tools/mutation_sample.py`` (line, change) it kills. The expected values are
computed independently (file sizes, pyarrow's own metadata, ``os.strerror``), never by the module."""

from __future__ import annotations

import errno
import io
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sapa.common import readfile
from sapa.common.readfile import check_parquet, read_parquet_table, read_regular, require_regular
from sapa.common.validate import InputError

MIB = 2**20


def _parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _uncompressed(path_or_bytes) -> int:
    """Σ total_uncompressed_size over the column chunks, read from pyarrow's metadata (not from the module)."""
    src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
    m = pq.ParquetFile(src).metadata
    return sum(m.row_group(r).column(c).total_uncompressed_size
               for r in range(m.num_row_groups) for c in range(m.num_columns))


def test_a_file_of_exactly_the_limit_is_read_whole(tmp_path):
    """Kills readfile.py line 50 ``st_size > limit`` → ``>=``, line 72 ``got > limit`` → ``>=``, line 65
    ``got = 0`` → ``1`` and line 67 ``limit + 1 - got`` → ``limit - 1 - got`` (which truncates the last byte)."""
    f = tmp_path / "three"
    f.write_bytes(b"abc")
    assert read_regular(f, "x", limit=3) == b"abc"
    assert require_regular(f, "x", limit=3) == f
    with pytest.raises(InputError, match="more than the limit of 2"):
        read_regular(f, "x", limit=2)


def test_the_default_limit_is_256_mib(tmp_path):
    """Kills readfile.py line 24 (MAX_READ_BYTES = 256 * 2**20): 256 → 257, ``2 ** 20`` → ``2 * 20``, 2 → 3, 20 → 21.

    Sparse files (no disk used): 256 MiB passes the size check, 256 MiB + 1 byte does not; a 20 kB file is read."""
    ok, big = tmp_path / "ok", tmp_path / "big"
    with open(ok, "wb") as fh:
        fh.truncate(256 * MIB)
    with open(big, "wb") as fh:
        fh.truncate(256 * MIB + 1)
    assert require_regular(ok) == ok
    with pytest.raises(InputError, match="more than the limit of 268,435,456"):
        require_regular(big)
    with pytest.raises(InputError, match="more than the limit"):
        read_regular(big)
    small = tmp_path / "small"
    small.write_bytes(b"x" * 20_000)
    assert read_regular(small) == b"x" * 20_000


def test_a_file_that_grows_while_read_is_refused_after_at_most_limit_plus_one_bytes(tmp_path, monkeypatch):
    """Kills readfile.py line 66 ``while got <= limit`` → ``<`` (returns the first MiB of a larger file silently),
    line 67 ``limit + 1 - got`` → ``limit + 1 + got`` and → ``limit + 2 - got`` (read past limit + 1 bytes).

    The growth is simulated by an fstat that reports the size the file had when it was opened (1 kB)."""
    f = tmp_path / "growing"
    f.write_bytes(b"y" * (3 * MIB))
    real_fstat, real_read = os.fstat, os.read
    got, seen = [], {"size": 1000}

    class _St:
        def __init__(self, st):
            self.st_mode, self.st_size = st.st_mode, seen["size"]

    def fake_fstat(fd):
        return _St(real_fstat(fd))

    def spy_read(fd, n):
        b = real_read(fd, n)
        got.append(len(b))
        return b

    monkeypatch.setattr(readfile.os, "fstat", fake_fstat)
    monkeypatch.setattr(readfile.os, "read", spy_read)
    with pytest.raises(InputError, match="more than the limit"):
        read_regular(f, "x", limit=MIB)
    assert sum(got) == MIB + 1  # never more than limit + 1 bytes held
    got.clear()
    seen["size"] = 3
    with pytest.raises(InputError, match="more than the limit"):
        read_regular(f, "x", limit=5)
    assert sum(got) == 6


def test_oserror_messages_carry_the_system_text(tmp_path):
    """Kills readfile.py line 42 and line 62 ``exc.strerror or exc`` → ``and`` (the message would carry the
    whole ``[Errno 40] …: 'path'`` repr instead of the system's one-line reason)."""
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    reason = os.strerror(errno.ELOOP)
    for f in (require_regular, read_regular):
        with pytest.raises(InputError) as ei:
            f(loop, "what")
        assert str(ei.value) == f"what: cannot read {loop} ({reason})"


def test_parquet_rows_cells_and_size_at_their_limits(tmp_path):
    """Kills readfile.py line 107 ``rows * max(1, cols)`` → ``rows / …`` and ``max(1, …)`` → ``max(2, …)``; line 108
    ``8 * cells`` → ``8 / cells`` and 8 → 9, each ``>`` → ``>=`` (size, rows, cells) and ``or`` → ``and``.

    The thresholds come from the table's shape and pyarrow's own footer (8 bytes a decoded value)."""
    one = _parquet_bytes(pa.table({"a": pa.array([7] * 100, type=pa.int8())}))  # 1 column: 8·cells = 800
    assert _uncompressed(one) <= 800
    check_parquet(io.BytesIO(one), limit=800, max_rows=100)  # exactly at every bound: accepted
    with pytest.raises(InputError, match="100 rows"):
        check_parquet(io.BytesIO(one), limit=799)
    with pytest.raises(InputError, match="100 rows"):
        check_parquet(io.BytesIO(one), limit=800, max_rows=99)
    two = _parquet_bytes(pa.table({"a": pa.array([7] * 50, type=pa.int8()), "b": pa.array([1] * 50, type=pa.int8())}))
    assert _uncompressed(two) <= 799  # 2 × 50 cells: 8·cells = 800 > 799 is the only bound crossed
    with pytest.raises(InputError, match="50 rows × 2 columns"):
        check_parquet(io.BytesIO(two), limit=799)
    check_parquet(io.BytesIO(two), limit=800)
    wide = _parquet_bytes(pa.table({"s": [f"{k:04d}" + "z" * 996 for k in range(10)]}))  # size ≫ 8·cells = 80
    size = _uncompressed(wide)
    check_parquet(io.BytesIO(wide), limit=size)
    with pytest.raises(InputError, match=f"{size:,} bytes uncompressed"):
        check_parquet(io.BytesIO(wide), limit=size - 1)


def test_the_default_row_limit_is_fifty_million(tmp_path):
    """Kills readfile.py line 25 MAX_ROWS 50_000_000 → 50_000_001 (a null column: 50 M rows cost no bytes)."""
    for n, refused in ((50_000_000, False), (50_000_001, True)):
        p = tmp_path / f"n{n}.parquet"
        pq.write_table(pa.table({"n": pa.nulls(n)}), p)
        if refused:
            with pytest.raises(InputError, match="50,000,001 rows"):
                check_parquet(p, limit=2**40)
        else:
            check_parquet(p, limit=2**40)


def test_check_parquet_rewinds_a_file_object():
    """Kills readfile.py line 104 ``source.seek(0)`` → ``seek(1)``: the docstring's "a file object is rewound"."""
    buf = io.BytesIO(_parquet_bytes(pa.table({"a": [1, 2, 3]})))
    buf.seek(7)
    check_parquet(buf)
    assert buf.tell() == 0


def test_decoded_text_at_the_limit(tmp_path):
    """Kills readfile.py line 137 ``decoded = 0`` → 1, line 145 ``decoded > limit`` → ``>=``, line 142 ``… or 0`` →
    ``or 1`` and ``or`` → ``and``, line 131 the text-column test ``or`` → ``and``, line 134 ``text or None`` →
    ``text and None`` (decoded by pyarrow, so the bound would count offsets too).

    Four rows pointing at one 300-character dictionary value decode to exactly 4·300 = 1200 bytes; a column of
    empty strings decodes to 0."""
    raw = _parquet_bytes(pa.table({"s": ["a" * 300] * 4, "e": [""] * 4}))
    assert _uncompressed(raw) <= 1199
    t = read_parquet_table(io.BytesIO(raw), limit=1200)
    assert t.column("s").to_pylist() == ["a" * 300] * 4 and t.column("e").to_pylist() == [""] * 4
    assert t.schema.field("s").type == pa.string()
    with pytest.raises(InputError, match="columns decode to more than the limit of 1,199"):
        read_parquet_table(io.BytesIO(raw), limit=1199)


def test_a_platform_without_o_cloexec_still_opens_read_only(tmp_path, monkeypatch):
    """Kills readfile.py line 58 ``getattr(os, "O_CLOEXEC", 0)`` → ``1``: where the OS has no O_CLOEXEC (Windows)
    the flags must stay O_RDONLY | O_NONBLOCK; 1 is O_WRONLY on POSIX, and a write-only descriptor cannot be read."""
    f = tmp_path / "plain"
    f.write_bytes(b"payload")
    monkeypatch.delattr(os, "O_CLOEXEC")
    seen = []
    real_open = os.open

    def spy_open(path, flags, *a):
        seen.append(flags)
        return real_open(path, flags, *a)

    monkeypatch.setattr(readfile.os, "open", spy_open)
    assert read_regular(f, "x") == b"payload"
    assert seen == [os.O_RDONLY | os.O_NONBLOCK]


def test_a_footer_declaring_empty_or_negative_column_chunks_counts_them_as_zero_bytes(monkeypatch):
    """Kills readfile.py line 105 ``max(0, total_uncompressed_size)`` → ``max(1, …)``: a hand-made footer may declare
    0 or negative sizes; each counts as 0 bytes, so a table of no rows and such chunks passes a limit of 0 bytes.

    pyarrow writes no such footer, so ``pq.ParquetFile`` is replaced by one whose metadata declares the sizes."""
    import pyarrow.parquet as pq_mod

    sizes = [[0, -(2**40)], [0, 0]]  # two row groups × two columns

    class _Col:
        def __init__(self, s):
            self.total_uncompressed_size = s

    class _Meta:
        num_row_groups, num_columns, num_rows = 2, 2, 0

        def row_group(self, r):
            return type("RG", (), {"column": lambda _self, c: _Col(sizes[r][c])})()

    class _PF:
        def __init__(self, source):
            self.metadata = _Meta()

    monkeypatch.setattr(pq_mod, "ParquetFile", _PF)
    check_parquet(io.BytesIO(b"not read"), limit=0)  # Σ max(0, size) = 0 ≤ 0, 8·cells = 0 ≤ 0
    sizes[1][1] = 1
    with pytest.raises(InputError, match="1 bytes uncompressed"):
        check_parquet(io.BytesIO(b"not read"), limit=0)
