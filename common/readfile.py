"""Reading files that come from a results folder: regular files only, and never more than a bound.

A results folder is exchanged between people, so what sits at ``data/x.json`` may be a named pipe
(reading it blocks forever), a symbolic link to ``/dev/zero`` (reading it never ends) or a small
Parquet file that decompresses to gigabytes. :func:`read_regular` opens without blocking, refuses
anything that is not a regular file (after symbolic links) and reads at most ``limit`` bytes;
:func:`check_parquet` refuses a Parquet file whose own metadata declares more than ``limit``
uncompressed bytes or more than ``max_rows`` rows, before a page of it is decompressed, and
:func:`read_parquet_table` also bounds what its text columns decode to (a dictionary page of one long
string referenced by every row is a few bytes on disk and gigabytes in memory).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sapa.common.validate import InputError

__all__ = ["MAX_READ_BYTES", "MAX_ROWS", "read_regular", "read_regular_text", "require_regular", "check_parquet",
           "read_parquet_table"]

MAX_READ_BYTES = 256 * 2**20  # every stored result sapa writes is far smaller (the full study's tables: a few MB)
MAX_ROWS = 50_000_000


def _kind(mode: int) -> str:
    from sapa.common.atomic import file_kind

    return file_kind(mode)


def require_regular(path: str | os.PathLike, what: str = "input", limit: int | None = None) -> Path:
    """``path`` if it is a regular file (symbolic links followed) of at most ``limit`` bytes; InputError otherwise."""
    path, limit = Path(path), MAX_READ_BYTES if limit is None else limit
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{what}: file not found: {path}") from None
    except OSError as exc:
        raise InputError(f"{what}: cannot read {path} ({exc.strerror or exc})") from None
    _check_stat(st, path, what, limit)
    return path


def _check_stat(st: os.stat_result, path: Path, what: str, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what}: {path} is not a regular file ({_kind(st.st_mode)}); sapa reads only regular files")
    if st.st_size > limit:
        raise InputError(f"{what}: {path} holds {st.st_size:,} bytes, more than the limit of {limit:,}")


def read_regular(path: str | os.PathLike, what: str = "input", limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``); never blocks on a FIFO, never reads a device."""
    path, limit = Path(path), MAX_READ_BYTES if limit is None else limit
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{what}: file not found: {path}") from None
    except OSError as exc:
        raise InputError(f"{what}: cannot read {path} ({exc.strerror or exc})") from None
    try:
        _check_stat(os.fstat(fd), path, what, limit)  # the file opened, not a name that may have changed
        chunks, got = [], 0
        while got <= limit:
            b = os.read(fd, min(1 << 20, limit + 1 - got))
            if not b:
                break
            chunks.append(b)
            got += len(b)
        if got > limit:  # grew while being read
            raise InputError(f"{what}: {path} holds more than the limit of {limit:,} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_regular_text(path: str | os.PathLike, what: str = "input", limit: int | None = None) -> str:
    """:func:`read_regular` decoded as UTF-8 (InputError if it is not UTF-8)."""
    try:
        return read_regular(path, what, limit).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what}: {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def check_parquet(source, what: str = "input", limit: int | None = None, max_rows: int | None = None) -> None:
    """InputError if the Parquet ``source`` (a path or a file object) declares > ``limit`` uncompressed bytes or > ``max_rows`` rows.

    Only the footer is read. A path must be a regular file. (A file object is rewound afterwards.)
    """
    import pyarrow.parquet as pq

    limit = MAX_READ_BYTES if limit is None else limit
    max_rows = MAX_ROWS if max_rows is None else max_rows
    if isinstance(source, (str, os.PathLike)):
        source = require_regular(source, what, limit)
    try:
        meta = pq.ParquetFile(source).metadata
    except Exception as exc:  # noqa: BLE001 - not Parquet, truncated footer, ...
        raise InputError(f"{what}: not a Parquet table ({type(exc).__name__})") from None
    finally:
        if hasattr(source, "seek"):
            source.seek(0)
    size = sum(max(0, meta.row_group(r).column(c).total_uncompressed_size)
               for r in range(meta.num_row_groups) for c in range(meta.num_columns))
    cells = meta.num_rows * max(1, meta.num_columns)
    if size > limit or meta.num_rows > max_rows or 8 * cells > limit:  # ≥ 8 bytes a value once decoded (numbers)
        raise InputError(f"{what}: the Parquet table declares {meta.num_rows:,} rows × {meta.num_columns} columns and "
                         f"{size:,} bytes uncompressed, more than the limit of {limit:,} bytes ({max_rows:,} rows)")


def read_parquet_table(source, what: str = "input", limit: int | None = None, max_rows: int | None = None):
    """The Parquet ``source`` as a pyarrow Table, every size bounded by ``limit`` bytes before it is allocated.

    :func:`check_parquet` first (the footer's declared sizes); then every variable-length leaf (Parquet's
    BYTE_ARRAY: text and binary, top-level or inside a list or struct) is read as a dictionary — indices and the
    distinct values only —, and so is any column the file itself declares dictionary-typed. The size the table
    decodes to (Σ over rows of the length of the value each row points at, for every column) is checked, and only
    then is anything decoded (dictionaries to their plain value types).
    """
    import pyarrow.parquet as pq

    limit = MAX_READ_BYTES if limit is None else limit
    check_parquet(source, what, limit, max_rows)
    try:
        pf = pq.ParquetFile(source)
        leaves = [pf.schema.column(i).path for i in range(len(pf.schema)) if pf.schema.column(i).physical_type
                  == "BYTE_ARRAY"]
        schema = pf.schema_arrow
    except Exception as exc:  # noqa: BLE001 - a schema pyarrow cannot map
        raise InputError(f"{what}: not a Parquet table ({type(exc).__name__})") from None
    finally:
        if hasattr(source, "seek"):
            source.seek(0)
    try:
        table = pq.read_table(source, read_dictionary=leaves or None)
    except Exception as exc:  # noqa: BLE001 - a damaged page
        raise InputError(f"{what}: cannot read the Parquet table ({type(exc).__name__})") from None
    decoded = 0
    for name, col in zip(table.column_names, table.columns):
        decoded += sum(_decoded_bytes(chunk, what, name) for chunk in col.chunks)
        if decoded > limit:
            raise InputError(f"{what}: the Parquet table's columns decode to more than the limit of {limit:,} bytes "
                             f"(column {name!r}; dictionaries counted from their indices, nothing decoded)")
    for i, field in enumerate(table.schema):
        plain = _plain_type(schema.field(i).type if len(schema) == table.num_columns else field.type)
        if plain != field.type:  # the file's own types (list item names included), without dictionaries
            table = table.set_column(i, field.with_type(plain), table.column(i).cast(plain))
    return table


def _decoded_bytes(arr, what: str, name: str) -> int:
    """Bytes ``arr`` takes once every dictionary in it is decoded, computed from indices and values (nothing decoded)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if pa.types.is_dictionary(t):
        vt, n = t.value_type, len(arr)
        if pa.types.is_binary(vt) or pa.types.is_string(vt) or pa.types.is_large_binary(vt) or \
                pa.types.is_large_string(vt):
            if not n or not len(arr.dictionary):
                return 0
            return int(pc.sum(pc.take(pc.binary_length(arr.dictionary), arr.indices)).as_py() or 0)
        if getattr(vt, "bit_width", 0) > 0:
            return n * max(1, vt.bit_width // 8)
        raise InputError(f"{what}: column {name!r} holds a dictionary of {vt}, which sapa never stores")
    if isinstance(arr, (pa.ListArray, pa.LargeListArray, pa.FixedSizeListArray)):  # maps are lists of structs
        return _decoded_bytes(arr.values, what, name)
    if isinstance(arr, pa.StructArray):
        return sum(_decoded_bytes(arr.field(k), what, name) for k in range(t.num_fields))
    return arr.nbytes


def _plain_type(t):
    """``t`` with every dictionary type replaced by its value type (inside lists and structs too)."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return _plain_type(t.value_type)
    if pa.types.is_map(t):
        return pa.map_(_plain_type(t.key_type), _plain_type(t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        make = pa.list_ if pa.types.is_list(t) else pa.large_list
        return make(t.value_field.with_type(_plain_type(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_plain_type(t.value_type)), t.list_size)
    if pa.types.is_struct(t):
        return pa.struct([t.field(k).with_type(_plain_type(t.field(k).type)) for k in range(t.num_fields)])
    return t
