"""A study's design fixed before its data: ``OUT/design.json`` = {sha256, fixed_at, design} written before any member trains.

The design is everything that decides what is trained and how it is judged: the study's config (tasks, N, arms,
learning rates, seeds, dose grid, the second look's refinement), the rules' thresholds, the looks and their levels
(the caller — ``sapa`` — names the rules and levels; :func:`run_study <sapa.empirics.training.train_study.run_study>`
adds the config). :func:`fix_design` writes it before the first chunk is planned to train and keeps it while it is
unchanged; a changed design is written anew with its own ``fixed_at``. ``first_data_at`` is when the study's first
result was stored (the earliest ``finished_utc`` of the chunks' run metadata, their file time for chunks written
before that was kept), so each training entry's evidence can show ``design: {sha256, fixed_at, first_data_at}``
and a reader sees at once whether the design came first. A design fixed after data (a folder trained before the
design was recorded, or a design changed while its chunks were kept) shows ``fixed_at`` after ``first_data_at``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from sapa.common.atomic import atomic_write_json
from sapa.common.integrity import read_timing

__all__ = ["DESIGN_FILE", "design_sha256", "fix_design", "first_data_at", "design_record", "utc_now"]

DESIGN_FILE = "design.json"
RESULT_DIRS = ("chunks", "mechanism")  # where a study's results are stored under OUT


def utc_now() -> str:
    """The time now, UTC, ISO 8601 to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def design_sha256(design: dict) -> str:
    """sha256 of the design's canonical JSON (sorted keys, no spaces).

    >>> design_sha256({"b": 1, "a": [1, 2]}) == design_sha256({"a": [1, 2], "b": 1})
    True
    """
    return hashlib.sha256(json.dumps(design, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def _read(path: Path) -> dict | None:
    from sapa.common.readfile import read_regular_text

    try:
        got = json.loads(read_regular_text(path, "study design"))
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) else None


def fix_design(out: str | Path, design: dict) -> dict:
    """Write ``design`` with its sha256 and ``fixed_at`` into ``OUT/design.json`` unless the file holds it already.

    Called before any member trains; returns the stored {sha256, fixed_at, design}.
    """
    path = Path(out) / DESIGN_FILE
    design = json.loads(json.dumps(design, default=str))  # as it will read back
    sha = design_sha256(design)
    old = _read(path)
    if old is not None and old.get("sha256") == sha and old.get("design") == design:
        return old
    rec = {"sha256": sha, "fixed_at": utc_now(), "design": design}
    atomic_write_json(path, rec)
    return rec


def first_data_at(out: str | Path) -> str | None:
    """When the first result of the study in ``out`` was stored (UTC), or None when none is."""
    times = []
    for d in RESULT_DIRS:
        for p in (Path(out) / d).glob("*.json"):
            t = read_timing(p).get("finished_utc")
            if not isinstance(t, str):  # written before run metadata kept the time: the file's own
                try:
                    t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(p.stat().st_mtime))
                except OSError:
                    continue
            times.append(t)
    return min(times) if times else None


def design_record(out: str | Path) -> dict | None:
    """{sha256, fixed_at, first_data_at, fixed_first} of the study in ``out`` (None when no design was recorded)."""
    rec = _read(Path(out) / DESIGN_FILE)
    if rec is None or not isinstance(rec.get("sha256"), str):
        return None
    first = first_data_at(out)
    return {"sha256": rec["sha256"], "fixed_at": rec.get("fixed_at"), "first_data_at": first,
            "fixed_first": first is None or str(rec.get("fixed_at")) <= first}
