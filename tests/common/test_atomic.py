"""Tests for `common/atomic.py`: permissions like a plain open(), a directory in the way named by its own path."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from common.atomic import atomic_write, atomic_write_json, atomic_write_text


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture
def umask():
    """Set a umask for one test and restore the old one."""
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077, 0o027])
def test_new_file_gets_plain_open_permissions(tmp_path, umask, mask):
    umask(mask)
    with open(tmp_path / "plain.txt", "w") as fh:
        fh.write("x")
    atomic_write_text(tmp_path / "atomic.txt", "x")
    assert _mode(tmp_path / "atomic.txt") == _mode(tmp_path / "plain.txt") == 0o666 & ~mask


def test_replacing_a_file_keeps_its_mode(tmp_path, umask):
    umask(0o077)  # would give 0600 to a new file
    p = tmp_path / "ledger.json"
    p.write_text("{}")
    os.chmod(p, 0o644)
    atomic_write_json(p, {"a": 1})
    assert _mode(p) == 0o644 and p.read_text().strip().startswith("{")
    os.chmod(p, 0o640)
    atomic_write_text(p, "again")
    assert _mode(p) == 0o640 and p.read_text() == "again"


def test_no_temporary_file_is_left(tmp_path):
    atomic_write_text(tmp_path / "a.txt", "x")

    def boom(tmp: str) -> None:
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "b.txt", boom)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_an_interrupt_right_after_the_temporary_file_is_created_leaves_nothing(tmp_path, monkeypatch):
    """Ctrl-C can land between creating the temporary file and the write (here: in the close after the O_EXCL open);
    an interrupted `sapa sweep` once left such a file beside its part files."""
    import common.atomic as atomic

    real_close = os.close

    def interrupted(fd: int) -> None:
        real_close(fd)
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(tmp_path / "a.txt", "x")
    monkeypatch.setattr(atomic.os, "close", real_close)
    assert list(tmp_path.iterdir()) == []


def test_a_directory_in_the_way_is_named(tmp_path):
    """A result file replaced by a directory: the error names that path, never a temporary file."""
    target = tmp_path / "cells" / "abc.parquet"
    target.mkdir(parents=True)
    called = []
    with pytest.raises(IsADirectoryError) as info:
        atomic_write(target, lambda tmp: called.append(tmp))
    assert info.value.filename == str(target) and ".tmp" not in str(info.value)
    assert (info.value.errno, info.value.strerror) == (21, "a directory is in the way of a result file")
    assert not called and [p.name for p in target.parent.iterdir()] == ["abc.parquet"]


def test_a_failed_replace_names_the_target(tmp_path, monkeypatch):
    """If os.replace itself fails (e.g. a directory appears meanwhile), the error names the target."""

    def fail(src, dst):
        raise IsADirectoryError(21, "Is a directory", src, None, dst)

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(IsADirectoryError) as info:
        atomic_write_text(tmp_path / "x.json", "{}")
    assert info.value.filename == str(tmp_path / "x.json")
    assert (info.value.errno, info.value.strerror) == (21, "Is a directory")
    assert not list(tmp_path.iterdir())

    def fail_plain(src, dst):  # an OSError without errno/strerror keeps its text
        raise OSError("replace failed")

    monkeypatch.setattr(os, "replace", fail_plain)
    with pytest.raises(OSError) as info:
        atomic_write_text(tmp_path / "y.json", "{}")
    assert (info.value.errno, info.value.strerror, info.value.filename) == (None, "replace failed", str(tmp_path / "y.json"))


def test_the_temporary_file_is_a_hidden_sibling(tmp_path):
    """Written beside the target (same directory, so same file system: os.replace is atomic), never elsewhere."""
    seen = []

    def write(tmp: str) -> None:
        seen.append(tmp)
        Path(tmp).write_text("x")

    atomic_write(tmp_path / "cells" / "abc.parquet", write)
    tmp = Path(seen[0])
    assert tmp.parent == tmp_path / "cells" and tmp.name.startswith(".abc.parquet.") and tmp.name.endswith(".tmp.parquet")
    assert [p.name for p in (tmp_path / "cells").iterdir()] == ["abc.parquet"]


def test_an_existing_temporary_name_is_never_reused(tmp_path, monkeypatch):
    """Two writers must not share a temporary file: a name that exists already is skipped (O_EXCL), not opened."""
    import secrets

    names = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(names))
    first = []
    atomic_write(tmp_path / "a.txt", lambda tmp: (first.append(tmp), Path(tmp).write_text("1")))
    other = tmp_path / ".b.txt.aaaa.tmp.txt"  # another writer's temporary file, by chance the next name drawn
    other.write_text("theirs")
    atomic_write(tmp_path / "b.txt", lambda tmp: Path(tmp).write_text("mine"))
    assert other.read_text() == "theirs" and (tmp_path / "b.txt").read_text() == "mine"


def test_json_is_indented_in_insertion_order_and_takes_numpy_values(tmp_path):
    import json

    import numpy as np

    obj = {"z": np.float64(0.5), "a": np.arange(2), "p": Path("out/x"), "n": np.int64(3)}
    atomic_write_json(tmp_path / "r.json", obj)
    want = {"z": 0.5, "a": [0, 1], "p": "out/x", "n": 3}
    assert (tmp_path / "r.json").read_text() == json.dumps(want, indent=2) + "\n"
    with pytest.raises(TypeError, match="not JSON serialisable: object"):
        atomic_write_json(tmp_path / "bad.json", {"o": object()})
    assert not (tmp_path / "bad.json").exists()


def test_missing_parent_directories_are_created(tmp_path):
    atomic_write_text(tmp_path / "a" / "b" / "c.txt", "x")
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "x"
