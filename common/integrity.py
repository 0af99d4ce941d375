"""Content checksums of stored results: sha256 of a canonical payload, written with it, verified on read.

A flipped bit or an edited value in a stored result (a sweep cell's Parquet, a training run's JSON)
must never flow silently into the results. Writers seal the payload (Parquet: key-value metadata
``sapa_sha256``; JSON: a top-level ``"sha256"`` field); readers recompute it, and a mismatch or a
missing checksum makes the file corrupt: the caller recomputes it, with one warning line on stderr.
This guards against damage (disk, copies, hand edits), not against someone who rewrites the checksum.

Run metadata (how long a result took: ``wall_s``, ``cpu_s``) is not part of a result: it differs between two runs
that compute the same numbers. :func:`write_sealed_json` keeps it out of the sealed file, in a sidecar
``timing/NAME`` beside it (:func:`timing_path`), so a resumed run leaves result files byte-identical to an
uninterrupted one's.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

PARQUET_KEY = b"sapa_sha256"  # Parquet key-value metadata entry
JSON_FIELD = "sha256"         # top-level field of a sealed JSON record
_NUMERIC = ("int", "uint", "float", "double", "bool", "halffloat")


class CorruptResult(ValueError):
    """A stored result whose content does not match its checksum (or has none)."""


def table_sha256(table) -> str:
    """sha256 over the table's ``sapa`` metadata, then each column's name, kind and values (numbers as raw bytes)."""
    import numpy as np

    h = hashlib.sha256((table.schema.metadata or {}).get(b"sapa", b""))
    for name, col in zip(table.column_names, table.columns):
        kind = str(col.type)
        numeric = kind.startswith(_NUMERIC) and col.null_count == 0
        kind = kind if numeric else ("string" if "string" in kind else kind)
        h.update(json.dumps([name, kind, len(col)]).encode())
        if numeric:
            vals = np.ascontiguousarray(col.to_numpy())
            h.update(vals.astype(vals.dtype.newbyteorder("<")).tobytes())
        else:
            _update_json_list(h, col)
    return h.hexdigest()


def _update_json_list(h, col, batch: int = 1 << 16) -> None:
    """``h.update(json.dumps(col.to_pylist(), default=str).encode())``, one batch of rows at a time (the same bytes:
    ``[`` items joined by ``, `` ``]``), so that hashing a column never holds more than a batch of Python values."""
    h.update(b"[")
    for start in range(0, len(col), batch):
        text = json.dumps(col.slice(start, batch).to_pylist(), default=str)[1:-1]
        h.update((", " if start else "").encode() + text.encode())
    h.update(b"]")


def seal_table(table):
    """``table`` with its content checksum in the Parquet key-value metadata (:data:`PARQUET_KEY`)."""
    meta = {k: v for k, v in (table.schema.metadata or {}).items() if k != PARQUET_KEY}
    return table.replace_schema_metadata({**meta, PARQUET_KEY: table_sha256(table).encode()})


def check_table(table, path: str | Path) -> None:
    """Raise :class:`CorruptResult` (naming ``path``) unless the table's stored checksum matches its content."""
    stored = (table.schema.metadata or {}).get(PARQUET_KEY)
    if stored is None:
        raise CorruptResult(f"{path}: no content checksum")
    if stored.decode("ascii", "replace") != table_sha256(table):
        raise CorruptResult(f"{path}: content does not match its checksum (corrupt file)")


def read_parquet_verified(path: str | Path):
    """The DataFrame stored in ``path`` after its checksum is verified (else :class:`CorruptResult`).

    What the table decodes to is bounded before anything is decoded, the checksum included
    (:func:`sapa.common.readfile.read_parquet_table`: a dictionary column of one long string shared by every row is
    refused from its indices, not hashed row by row); the checksum is computed a batch of rows at a time.
    """
    from sapa.common.readfile import read_parquet_table

    table = read_parquet_table(path, "stored results")  # a regular file, every size bounded before decoding
    check_table(table, path)
    return table.to_pandas()


def record_sha256(rec: dict) -> str:
    """sha256 of the canonical JSON of ``rec`` (sorted keys, no spaces) without its own checksum field."""
    body = {k: v for k, v in json.loads(json.dumps(rec, default=_plain)).items() if k != JSON_FIELD}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal_record(rec: dict) -> dict:
    """``rec`` with its content checksum in the field :data:`JSON_FIELD`."""
    return {**{k: v for k, v in rec.items() if k != JSON_FIELD}, JSON_FIELD: record_sha256(rec)}


def check_record(rec: object, path: str | Path) -> None:
    """Raise :class:`CorruptResult` (naming ``path``) unless ``rec`` is a dict whose checksum matches."""
    if not isinstance(rec, dict) or not isinstance(rec.get(JSON_FIELD), str):
        raise CorruptResult(f"{path}: no content checksum")
    if rec[JSON_FIELD] != record_sha256(rec):
        raise CorruptResult(f"{path}: content does not match its checksum (corrupt file)")


RUN_FIELDS = ("wall_s", "cpu_s")  # run metadata, kept beside a result, never inside it


def split_run_metadata(res: dict) -> tuple[dict, dict]:
    """(``res`` without its run metadata, the run metadata {wall_s, cpu_s} it had)."""
    return ({k: v for k, v in res.items() if k not in RUN_FIELDS},
            {k: res[k] for k in RUN_FIELDS if k in res})


def timing_path(path: str | Path) -> Path:
    """The run-metadata sidecar of the result file ``path``: ``DIR/NAME`` → ``DIR/timing/NAME`` (out of its globs)."""
    path = Path(path)
    return path.parent / "timing" / path.name


def write_sealed_json(path: str | Path, rec: dict, timing: dict | None = None) -> None:
    """``rec`` sealed (:func:`seal_record`) into ``path`` atomically; ``timing`` (run metadata) into its sidecar.

    The sidecar is written first (with ``finished_utc``, the time now): a result file on disk always has the sidecar
    of the run that made it.
    """
    import time

    from sapa.common.atomic import atomic_write_json

    atomic_write_json(timing_path(path), {**(timing or {}),
                                          "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    atomic_write_json(path, seal_record(rec))


def read_timing(path: str | Path) -> dict:
    """The run metadata beside the result file ``path`` ({} when its sidecar is missing or unreadable)."""
    from sapa.common.readfile import read_regular_text

    try:
        got = json.loads(read_regular_text(timing_path(path), "run metadata"))
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def warn_recompute(exc: CorruptResult) -> None:
    """One warning line on stderr: this stored result is not used, it is recomputed."""
    print(f"sapa: warning: {' '.join(str(exc).split())}; recomputing it", file=sys.stderr, flush=True)


def _plain(o: object) -> object:
    from sapa.common.atomic import _jsonable

    return _jsonable(o)
