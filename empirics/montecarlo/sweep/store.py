"""The sweep's store: sealed Parquet part files with provenance metadata, written atomically.

A part file is found by its exact name and trusted only if its metadata names the cell and
its content checksum holds; temporary files of a killed writer are cleaned up later.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from sapa.common.atomic import atomic_write
from sapa.common.validate import InputError
from sapa.common.integrity import seal_table, warn_recompute
from sapa.empirics.montecarlo.sweep.cells import SCHEMA
from sapa.empirics.montecarlo.sweep.config import SweepConfig


def provenance(config: SweepConfig) -> dict:
    """Config, its hash, seed, dtype, device and package versions (deterministic: no clock)."""
    import importlib.metadata as md
    import platform

    import pyarrow
    import scipy

    try:
        sapa_version = md.version("sapa")
    except md.PackageNotFoundError:
        sapa_version = "unknown"
    device = config.device
    if device.startswith("cuda") and torch.cuda.is_available():
        device = f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return {
        "config_hash": config.hash(),
        "config": config.as_dict(),
        "seed": config.seed,
        "dtype": config.dtype,
        "device": device,
        "schema": SCHEMA,
        "versions": {
            "sapa": sapa_version,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "torch": torch.__version__,
            "pandas": pd.__version__,
            "pyarrow": pyarrow.__version__,
        },
    }


def _write_parquet(path: Path, df: pd.DataFrame, meta: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"sapa": json.dumps(meta, sort_keys=True).encode()})
    table = seal_table(table)  # content checksum, verified when the file is read back
    atomic_write(path, lambda fh: pq.write_table(table, fh))


def read_metadata(path: str | Path) -> dict:
    """The ``sapa`` provenance dict stored in a Parquet file written by this module."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta.get(b"sapa", b"{}"))


def _part_done(path: Path, cid: str) -> bool:
    """True if ``path`` is a finished part file of cell ``cid`` (absent, damaged or foreign: False)."""
    if not path.is_file():
        return False
    try:
        ours = read_metadata(path).get("cell_id") == cid
    except Exception:  # not Parquet, truncated, not ours: recompute the cell
        return False
    return ours and _part_intact(path)


def _part_intact(path: Path) -> bool:
    """True if the part file's content matches its checksum; else warn (one line) so that it is recomputed."""
    from sapa.common.integrity import CorruptResult, read_parquet_verified

    try:
        read_parquet_verified(path)
    except CorruptResult as exc:
        warn_recompute(exc)
        return False
    except Exception:  # unreadable beyond its footer: recompute the cell
        return False
    return True


def _read_part(path: Path) -> pd.DataFrame:
    """A finished part file, checksum verified; a file damaged since the start of this run is an error naming it."""
    from sapa.common.integrity import CorruptResult, read_parquet_verified

    try:
        return read_parquet_verified(path)
    except CorruptResult as exc:
        raise InputError(f"{exc}; run the sweep again to recompute it") from None


STALE_TMP_S = 600.0  # a temporary part file this old was left by a killed process


def _remove_stale_tmp(parts: Path) -> None:
    """Delete temporary part files (``.<name>.*.tmp.parquet``) left by a process killed mid-write.

    Only files untouched for :data:`STALE_TMP_S` go, so a concurrent writer is never hit.
    Readers never see them anyway: part files are found by exact name. The folder is listed and its files removed
    through a directory handle (:func:`sapa.common.atomic.open_dir`): a link planted at ``parts`` removes nothing elsewhere.
    """
    import fnmatch
    import stat
    import time

    from sapa.common.atomic import open_dir

    try:
        dfd = open_dir(parts, create=False)
    except FileNotFoundError:
        return
    try:
        now = time.time()
        for name in fnmatch.filter(os.listdir(dfd), ".*.tmp.parquet"):
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_TMP_S:
                    os.unlink(name, dir_fd=dfd)
    finally:
        os.close(dfd)
