"""The training study's evidence, shipped: its assembled tables sealed into a folder that ``sapa verify`` reads instead
of training.

``export(study_dir, dest)`` writes what the three training entries read — ``runs.parquet`` and ``history.parquet``
(one row per member, and the learning curves; zstd, each sealed by its content checksum), ``study.json``,
``mechanism.json.gz`` (the probes' results; gzip without a time stamp) and ``design.json`` — and ``evidence.json``, a sealed manifest: the sha256 of every file's bytes,
the study's budget, seed and config hash. ``load(dest)`` verifies the manifest and every file's sha256 *before*
anything is read (a changed, missing or extra file is refused with one line) and returns the
:class:`~sapa.empirics.training.train_study.StudyResult` the entries judge, the same as reading the study's own folder.

Where: :data:`SHIPPED` / ``<budget>`` (package data of ``sapa.empirics``; docs/training.md says how it was made and how to
regenerate it).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from sapa.common.validate import InputError

__all__ = ["SHIPPED", "FILES", "export", "load", "shipped_for", "pack_problem"]

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "training"  # empirics/data/training/<budget>/
TREE = Path(__file__).resolve().parents[2]  # the folder that holds empirics/ (the repository, or site-packages)


def shown_path(dest: Path) -> str:
    """``dest`` as a ledger records it: relative to the installed tree (``empirics/data/training/full``) when inside
    it, so a ledger's bytes do not depend on where the repository was cloned; else as given."""
    try:
        return Path(dest).resolve().relative_to(TREE).as_posix()
    except ValueError:
        return str(dest)
MANIFEST = "evidence.json"
TABLES = ("runs.parquet", "history.parquet")
RECORDS = ("study.json", "mechanism.json", "design.json")  # mechanism.json, design.json: when the study has them
GZIPPED = ("mechanism.json",)  # the largest record (the probes' curves): stored as NAME.gz
FILES = TABLES + tuple(f"{n}.gz" if n in GZIPPED else n for n in RECORDS)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export(study_dir: str | Path, dest: str | Path) -> dict:
    """Seal the study stored in ``study_dir`` (``sapa train --out``) into ``dest``; return the manifest."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sapa.common.atomic import atomic_write, atomic_write_json, atomic_write_text, make_dirs
    from sapa.common.integrity import seal_record, seal_table
    from sapa.empirics.training.train_study import load_study

    src, dest = Path(study_dir), Path(dest)
    res = load_study(src)  # verifies the tables' checksums: only a sound study is shipped
    make_dirs(dest)  # never through a link planted below the destination
    for name, df in zip(TABLES, (res.runs, res.history)):
        table = seal_table(pa.Table.from_pandas(df, preserve_index=False))
        atomic_write(dest / name, lambda fh, t=table: pq.write_table(t, fh, compression="zstd"))
    for name in RECORDS:
        target = dest / (f"{name}.gz" if name in GZIPPED else name)
        if not (src / name).is_file():
            if target.exists():
                target.unlink()  # a stale file of an earlier export
            continue
        text = json.dumps(json.loads((src / name).read_text(encoding="utf-8")), separators=(",", ":")) + "\n"
        if name in GZIPPED:  # mtime 0: the same record gives the same bytes
            data = gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)
            atomic_write(target, lambda fh, d=data: fh.write(d))
        else:
            atomic_write_text(target, text)
    prov = res.provenance
    files = {n: _sha(dest / n) for n in FILES if (dest / n).is_file()}
    manifest = seal_record({"budget": (res.config or {}).get("name"), "seed": (res.config or {}).get("seed"),
                            "config_hash": prov.get("config_hash"), "members": prov.get("members"),
                            "files": files})
    atomic_write_json(dest / MANIFEST, manifest)
    return manifest


def pack_problem(dest: str | Path) -> str | None:
    """What makes the pack in ``dest`` unusable (a missing, changed or extra file; a broken manifest), or None."""
    from sapa.common.integrity import CorruptResult, check_record
    from sapa.common.readfile import read_regular_text

    dest = Path(dest)
    try:
        man = json.loads(read_regular_text(dest / MANIFEST, "evidence manifest"))
        check_record(man, dest / MANIFEST)
    except CorruptResult as exc:
        return " ".join(str(exc).split())
    except (OSError, ValueError) as exc:
        return f"{dest / MANIFEST}: unreadable ({' '.join(str(exc).split())[:120]})"
    files = man.get("files")
    if not isinstance(files, dict) or not set(TABLES) <= set(files) or "study.json" not in files:
        return f"{dest / MANIFEST}: its file list is incomplete"
    present = {p.name for p in dest.iterdir() if p.name != MANIFEST}
    if present - set(files):
        return f"{dest}: files not in its manifest: {', '.join(sorted(present - set(files)))}"
    for name, sha in files.items():
        if name not in FILES:
            return f"{dest / MANIFEST}: names an unknown file {name!r}"
        path = dest / name
        if not path.is_file():
            return f"{path}: missing"
        if _sha(path) != sha:
            return f"{path}: content does not match its sha256 in {MANIFEST} (changed or corrupt)"
    return None


def load(dest: str | Path):
    """The study shipped in ``dest``, every file's sha256 verified first (InputError, one line, when any fails)."""
    from sapa.common.integrity import CorruptResult, read_parquet_verified
    from sapa.common.readfile import read_regular_text
    from sapa.empirics.training.train_study import StudyResult

    dest = Path(dest)
    why = pack_problem(dest)
    if why is not None:
        raise InputError(f"shipped training evidence refused: {why}; regenerate it (docs/training.md) or remove "
                         f"{dest}")
    try:
        runs, hist = (read_parquet_verified(dest / n) for n in TABLES)
    except CorruptResult as exc:  # the bytes matched, the table's own seal did not: an export from a changed table
        raise InputError(f"shipped training evidence refused: {' '.join(str(exc).split())}") from None

    def rec(name: str):
        if name in GZIPPED:
            p = dest / f"{name}.gz"
            return json.loads(gzip.decompress(p.read_bytes()).decode("utf-8")) if p.is_file() else None
        p = dest / name
        return json.loads(read_regular_text(p, "training evidence")) if p.is_file() else None

    prov = rec("study.json")
    prov = {**prov, "evidence": {"shipped": shown_path(dest), "manifest_sha256": rec(MANIFEST)["sha256"]}}
    if "design" not in prov:
        d = rec("design.json")
        prov["design"] = None if d is None else {"sha256": d.get("sha256"), "fixed_at": d.get("fixed_at"),
                                                 "first_data_at": None, "fixed_first": None}
    return StudyResult(runs, hist, prov.get("config", {}), prov, rec("mechanism.json"))


def shipped_for(name: str, seed: int, root: str | Path | None = None) -> Path | None:
    """The shipped pack of budget ``name`` and ``seed`` (its folder), or None when none is shipped for them.

    A pack of another config (the budget's config changed since it was made) is not this budget's study: one
    warning line, and None (the study is trained).
    """
    import sys

    from sapa.empirics.training.study_config import study_config

    d = (SHIPPED if root is None else Path(root)) / name
    if not (d / MANIFEST).is_file():
        return None
    try:
        man = json.loads((d / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return d  # present but broken: load() refuses it by name
    if not isinstance(man, dict) or man.get("seed") != seed:
        return None
    if man.get("config_hash") != study_config(name, seed).hash():
        print(f"sapa: warning: the shipped training evidence in {d} is of another config than the {name} budget's "
              "(regenerate it: docs/training.md); training instead", file=sys.stderr)
        return None
    return d
