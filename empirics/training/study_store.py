"""The study's store: sealed chunk files (JSON + sha256), their validation, and the assembled Parquet tables.

A chunk file is written atomically when its chunk finishes, its run metadata (``wall_s``, ``cpu_s``) beside it in
``chunks/timing/NAME`` (:func:`sapa.common.integrity.write_sealed_json`): a resumed run's chunk files are byte-identical to an
uninterrupted run's. A rerun reuses it only if it parses,
passes its checksum, belongs to the same config hash and schema, and holds a complete record
(:func:`chunk_record_problem`); otherwise it is trained again, with one warning line.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd

from sapa.common.validate import InputError
from sapa.common.integrity import CorruptResult, check_record, read_timing, warn_recompute, write_sealed_json
from sapa.common.readfile import read_regular_text
from sapa.empirics.training.study_config import SCHEMA, Chunk

__all__ = ["chunk_record_problem", "chunk_ok", "store_chunk", "read_chunk"]


ROW_TYPES = {"task": str, "N": int, "arm": str, "p": int, "scale": str, "lr": (int, float), "seed": int,
             "diverged": bool, "diverged_step": int, "test_acc": (int, float, str), "val_acc_final": (int, float, str),
             "loss_start": (int, float, str), "attn_fro": (int, float, str)}
HISTORY_TYPES = (str, (int, float, str, type(None)), (int, float), int, int, str, (int, float, str))


def _is(v: object, types) -> bool:
    """isinstance, with bool never counting as a number (and bool only where bool is asked for)."""
    if types is bool:
        return isinstance(v, bool)
    return isinstance(v, types) and not isinstance(v, bool)


def chunk_record_problem(rec: object, chunk: Chunk | None = None) -> str | None:
    """What makes ``rec`` not a complete chunk record (schema, members, rows, history and their types), or None."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("schema") != SCHEMA:
        return f"schema {rec.get('schema')!r}, expected {SCHEMA}"
    members, rows, hist = rec.get("members"), rec.get("rows"), rec.get("history")
    if not isinstance(members, list) or not members:
        return "no 'members' list"
    if chunk is not None and members != [m.as_dict() for m in chunk.members]:
        return "its members are not this chunk's"
    if not isinstance(rows, list) or len(rows) != len(members) or not all(isinstance(r, dict) for r in rows):
        return "'rows' is not one object per member"
    for r in rows:
        for k, types in ROW_TYPES.items():
            if not _is(r.get(k), types):
                return f"a row's {k!r} is missing or of the wrong type"
    if not isinstance(hist, list) or not hist:
        return "no 'history' rows"
    for h in hist:
        if not isinstance(h, list) or len(h) != len(HISTORY_TYPES) or not all(
                _is(v, t) for v, t in zip(h, HISTORY_TYPES)):
            return "a history row is not [arm, alpha, lr, seed, step, quantity, value]"
    return None


def chunk_ok(path: Path, chunk: Chunk, chash: str) -> bool:
    """True if ``path`` holds this chunk, finished under config hash ``chash`` (else it is trained again)."""
    if not path.is_file():
        return False
    try:
        rec = json.loads(read_regular_text(path, "training chunk"))
        check_record(rec, path)
    except CorruptResult as exc:
        warn_recompute(exc)
        return False
    except Exception:  # truncated, foreign or old: train it again
        return False
    if rec.get("config_hash") != chash:
        return False
    problem = chunk_record_problem(rec, chunk)
    if problem is not None:  # parses, but would crash the assembly: recompute, and say so
        print(f"sapa: warning: chunk file {path} is invalid ({problem}); recomputing it", file=sys.stderr)
        return False
    return True


def _json_num(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _from_json_num(v):
    return float(v) if v in ("nan", "inf", "-inf") else v


def store_chunk(path: Path, chunk: Chunk, chash: str, res: dict) -> None:
    """The chunk's members, rows and history sealed into ``path``; its wall and CPU seconds in the sidecar."""
    rec = {"schema": SCHEMA, "config_hash": chash, "members": [m.as_dict() for m in chunk.members],
           "rows": [{k: _json_num(v) for k, v in r.items()} for r in res["rows"]],
           "history": [[_json_num(v) for v in h] for h in res["history"]]}
    write_sealed_json(path, rec, {"wall_s": res.get("wall_s"), "cpu_s": res.get("cpu_s")})


def read_chunk(path: Path, chunk: Chunk) -> tuple[pd.DataFrame, pd.DataFrame]:
    rec = json.loads(read_regular_text(path, "training chunk"))
    try:
        check_record(rec, path)
    except CorruptResult as exc:
        raise InputError(f"{exc}; run again to recompute it") from None
    rows = pd.DataFrame([{k: _from_json_num(v) for k, v in r.items()} for r in rec["rows"]])
    cpu = read_timing(path).get("cpu_s", rec.get("cpu_s"))  # a chunk written before the sidecar kept it inside
    rows["cpu_s"] = float(cpu if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) else math.nan) \
        / max(1, len(rows))
    hist = pd.DataFrame([[_from_json_num(v) for v in h] for h in rec["history"]],
                        columns=["arm", "alpha", "lr", "seed", "step", "quantity", "value"])
    hist.insert(0, "N", chunk.N)
    hist.insert(0, "task", chunk.task)
    return rows, hist
