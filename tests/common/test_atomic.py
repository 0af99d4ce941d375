"""Tests for `common/atomic.py`: permissions like a plain open(), a directory in the way named by its own path."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from sapa.common.atomic import atomic_write, atomic_write_json, atomic_write_text


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

    def boom(fh) -> None:
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "b.txt", boom)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_an_interrupt_right_after_the_temporary_file_is_created_leaves_nothing(tmp_path, monkeypatch):
    """Ctrl-C can land between creating the temporary file and the write (here: in the close after the O_EXCL open);
    an interrupted `sapa sweep` once left such a file beside its part files."""
    import sapa.common.atomic as atomic

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
        atomic_write(target, lambda fh: called.append(fh))
    assert info.value.filename == str(target) and ".tmp" not in str(info.value)
    assert (info.value.errno, info.value.strerror) == (21, "a directory is in the way of a result file")
    assert not called and [p.name for p in target.parent.iterdir()] == ["abc.parquet"]


def test_a_failed_replace_names_the_target(tmp_path, monkeypatch):
    """If os.replace itself fails (e.g. a directory appears meanwhile), the error names the target."""

    def fail(src, dst, **dir_fds):
        raise IsADirectoryError(21, "Is a directory", src, None, dst)

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(IsADirectoryError) as info:
        atomic_write_text(tmp_path / "x.json", "{}")
    assert info.value.filename == str(tmp_path / "x.json")
    assert (info.value.errno, info.value.strerror) == (21, "Is a directory")
    assert not list(tmp_path.iterdir())

    def fail_plain(src, dst, **dir_fds):  # an OSError without errno/strerror keeps its text
        raise OSError("replace failed")

    monkeypatch.setattr(os, "replace", fail_plain)
    with pytest.raises(OSError) as info:
        atomic_write_text(tmp_path / "y.json", "{}")
    assert (info.value.errno, info.value.strerror, info.value.filename) == (None, "replace failed", str(tmp_path / "y.json"))


def test_the_temporary_file_is_a_hidden_sibling(tmp_path):
    """Written beside the target (same directory, so same file system: os.replace is atomic), never elsewhere."""
    seen = []

    def write(fh) -> None:
        seen.extend(p for p in tmp_path.rglob("*") if p.is_file())  # what exists while the writer writes
        fh.write(b"x")

    atomic_write(tmp_path / "cells" / "abc.parquet", write)
    [tmp] = seen
    assert tmp.parent == tmp_path / "cells" and tmp.name.startswith(".abc.parquet.") and tmp.name.endswith(".tmp.parquet")
    assert [p.name for p in (tmp_path / "cells").iterdir()] == ["abc.parquet"]


def test_an_existing_temporary_name_is_never_reused(tmp_path, monkeypatch):
    """Two writers must not share a temporary file: a name that exists already is skipped (O_EXCL), not opened."""
    import secrets

    names = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(names))
    first = []
    atomic_write(tmp_path / "a.txt", lambda fh: (first.append(fh), fh.write(b"1")))
    other = tmp_path / ".b.txt.aaaa.tmp.txt"  # another writer's temporary file, by chance the next name drawn
    other.write_text("theirs")
    atomic_write(tmp_path / "b.txt", lambda fh: fh.write(b"mine"))
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


# --------------------------------------------------------------------------- writes confined to a results folder
# Issue 52, case 5: the link check ran at start-up only, and `ln -s elsewhere R1/data` three seconds into a run sent
# causal_masking.json elsewhere. Every write below a held folder now walks from it without following links.


@pytest.fixture
def held(tmp_path):
    """(OUT held as a run's results folder, a folder outside it that must stay empty)."""
    from sapa.common.atomic import confined

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    with confined(out):
        yield out, elsewhere


def test_a_link_as_an_intermediate_folder_is_refused(held):
    from sapa.common.atomic import LinkRefused, make_dirs

    out, elsewhere = held
    (out / "data").symlink_to(elsewhere)
    with pytest.raises(LinkRefused, match=r"data is a symbolic link \(to .*elsewhere\)"):
        atomic_write_text(out / "data" / "causal_masking.json", "{}")
    (out / "a").mkdir()
    (out / "a" / "b").symlink_to(elsewhere)
    with pytest.raises(LinkRefused, match="b is a symbolic link"):
        atomic_write_text(out / "a" / "b" / "c" / "x.json", "{}")
    with pytest.raises(LinkRefused):
        make_dirs(out / "data" / "cells")
    assert list(elsewhere.iterdir()) == []
    assert sorted(p.name for p in out.rglob("*")) == ["a", "b", "data"]  # no temporary, no folder made


def test_a_link_as_the_final_name_is_replaced_never_written_through(held):
    out, elsewhere = held
    victim = elsewhere / "victim.json"
    victim.write_text("theirs")
    (out / "ledger.json").symlink_to(victim)
    atomic_write_json(out / "ledger.json", {"a": 1})
    assert victim.read_text() == "theirs" and not (out / "ledger.json").is_symlink()
    assert json.loads((out / "ledger.json").read_text()) == {"a": 1}


def test_a_link_swapped_in_between_the_walk_and_the_rename_changes_nothing_outside(held):
    """While the writer writes (after the folders were opened, before the rename), the folder is moved away and a
    link put in its place, and a link is planted at the final name: the file lands in the folder that was opened."""
    out, elsewhere = held
    (out / "data").mkdir()

    def write(fh) -> None:
        (out / "data").rename(out / "moved")
        (out / "data").symlink_to(elsewhere)
        (out / "moved" / "x.json").symlink_to(elsewhere / "victim.json")
        fh.write(b"mine")

    atomic_write(out / "data" / "x.json", write)
    assert list(elsewhere.iterdir()) == []
    assert (out / "moved" / "x.json").read_text() == "mine" and not (out / "moved" / "x.json").is_symlink()
    assert sorted(p.name for p in (out / "moved").iterdir()) == ["x.json"]


def test_a_link_planted_between_two_steps_of_the_walk_is_refused(held, monkeypatch):
    """The check is the open itself (O_NOFOLLOW): a link planted just before a folder is opened is refused."""
    import sapa.common.atomic as atomic
    from sapa.common.atomic import LinkRefused

    out, elsewhere = held
    (out / "train").mkdir()
    real_open = os.open

    def plant_then_open(name, flags, *args, dir_fd=None, **kw):
        if name == "train" and dir_fd is not None and not (out / "train").is_symlink():
            (out / "train").rename(out / "train.old")
            (out / "train").symlink_to(elsewhere)
        return real_open(name, flags, *args, dir_fd=dir_fd, **kw)

    monkeypatch.setattr(atomic.os, "open", plant_then_open)
    with pytest.raises(LinkRefused, match="train is a symbolic link"):
        atomic_write_text(out / "train" / "chunks" / "c.json", "{}")
    monkeypatch.setattr(atomic.os, "open", real_open)
    assert list(elsewhere.iterdir()) == []


def test_a_file_where_a_folder_belongs_is_named(held):
    from sapa.common.atomic import LinkRefused

    out, _ = held
    (out / "data").write_text("x")
    with pytest.raises(LinkRefused, match="data is a file where a folder belongs"):
        atomic_write_text(out / "data" / "x.json", "{}")


def test_the_held_folder_guards_writes_from_every_thread(held):
    """The training study writes its chunks from a background thread: the guard holds there too."""
    import threading

    from sapa.common.atomic import LinkRefused

    out, elsewhere = held
    (out / "train").symlink_to(elsewhere)
    caught = []

    def write() -> None:
        try:
            atomic_write_text(out / "train" / "study.json", "{}")
        except LinkRefused as exc:
            caught.append(exc)

    t = threading.Thread(target=write)
    t.start()
    t.join()
    assert len(caught) == 1 and list(elsewhere.iterdir()) == []


def test_the_folder_a_user_names_may_itself_be_a_link(tmp_path):
    """--out is the user's choice (it may be a link); only what is below it is guarded."""
    from sapa.common.atomic import confined

    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out").symlink_to(real)
    with confined(tmp_path / "out"):
        atomic_write_text(tmp_path / "out" / "data" / "x.json", "{}")
    assert (real / "data" / "x.json").read_text() == "{}"


def test_outside_a_held_folder_only_the_named_folder_is_trusted(tmp_path):
    from sapa.common.atomic import LinkRefused, confined

    with pytest.raises(LinkRefused, match="not inside"):  # an explicit root: nothing outside it
        atomic_write(tmp_path / "x.json", lambda fh: fh.write(b"{}"), root=tmp_path / "out")
    with confined(tmp_path / "out"):
        atomic_write_text(tmp_path / "y.json", "{}")  # not below the held folder: written as before
    assert (tmp_path / "y.json").read_text() == "{}" and not (tmp_path / "x.json").exists()
