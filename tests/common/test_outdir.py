"""Tests for `common/outdir.py`: unwritable result locations are refused before any work, without creating
anything; one run at a time holds a results directory (checked with two processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from sapa.common.outdir import LOCK_NAME, check_dir, check_file, exclusive
from sapa.common.validate import InputError



@pytest.mark.parametrize("where, needle", [
    ("/proc/x", "cannot write in /proc"),
    ("/proc", "cannot write in /proc"),
    ("/dev/null/x", "/dev/null is not a directory"),
    ("/dev/null/x/y", "/dev/null is not a directory"),
])
def test_system_locations_are_refused(where, needle):
    with pytest.raises(InputError, match=needle):
        check_dir(where)
    with pytest.raises(InputError, match=needle):
        check_file(f"{where}/out.json")


def test_an_existing_file_given_as_a_directory(tmp_path):
    f = tmp_path / "ledger.json"
    f.write_text("{}")
    with pytest.raises(InputError, match="exists and is not a directory"):
        check_dir(f, "--out")
    with pytest.raises(InputError, match="is not a directory"):
        check_dir(f / "sub", "--out")
    with pytest.raises(InputError, match="is a directory"):
        check_file(tmp_path, "--out")


def test_a_read_only_directory_is_refused(read_only_dir):
    ro = read_only_dir  # read-only for root too (tests/conftest.py): CI runs as root
    for target in (ro, ro / "new"):
        with pytest.raises(InputError, match="cannot write in"):
            check_dir(target)
    with pytest.raises(InputError, match="cannot write in"):
        check_file(ro / "x.json")


def test_a_refused_write_through_the_probe(tmp_path, monkeypatch):
    """Whatever the reason creating a file fails (read-only mount, permissions), the check says so (root too)."""
    import tempfile

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", refuse)
    with pytest.raises(InputError, match=r"--out .*: cannot write in .* \(Permission denied\)"):
        check_dir(tmp_path / "new")


def test_the_check_creates_nothing(tmp_path):
    check_dir(tmp_path / "a" / "b")
    check_file(tmp_path / "c" / "x.json")
    assert list(tmp_path.iterdir()) == []


def test_lock_is_released_and_a_refused_run_leaves_nothing(tmp_path):
    out = tmp_path / "res"
    with exclusive(out):
        assert (out / LOCK_NAME).read_text().strip() == str(os.getpid())
    assert not out.exists()  # created here, nothing but the lock: removed again
    out.mkdir()
    (out / "ledger.json").write_text("{}")
    with exclusive(out):
        pass
    with exclusive(out):  # released: can be taken again
        pass
    assert sorted(p.name for p in out.iterdir()) == ["ledger.json"]  # a finished run leaves only its results
    with pytest.raises(KeyboardInterrupt), exclusive(out):
        raise KeyboardInterrupt  # an interrupted one too
    assert sorted(p.name for p in out.iterdir()) == ["ledger.json"]


def test_a_stale_lock_file_from_a_killed_run_is_taken_over_and_removed(tmp_path):
    out = tmp_path / "res"
    out.mkdir()
    (out / LOCK_NAME).write_text("999999\n")  # what SIGKILL leaves: the file, no lock on it
    with exclusive(out):
        assert (out / LOCK_NAME).read_text().strip() == str(os.getpid())
    assert list(out.iterdir()) == []


def test_a_holder_that_locked_a_removed_file_locks_the_new_one(tmp_path, monkeypatch):
    # the race the inode check closes: between our open and our flock the previous holder removes the file
    import sapa.common.outdir as O

    out = tmp_path / "res"
    out.mkdir()
    real_flock, removed = O.fcntl.flock, []

    def flock_after_removal(fd, op):
        if not removed:
            removed.append(True)
            os.unlink(out / LOCK_NAME)  # the previous holder finishing
        return real_flock(fd, op)

    monkeypatch.setattr(O.fcntl, "flock", flock_after_removal)
    with exclusive(out):
        assert (out / LOCK_NAME).exists() and removed == [True]
        monkeypatch.setattr(O.fcntl, "flock", real_flock)
        with pytest.raises(InputError, match="is in use by another sapa run"), exclusive(out):
            pass


def _holder(out, seconds: float = 30.0) -> subprocess.Popen:
    """Another process that holds ``out`` until killed; returns once it holds it."""
    code = textwrap.dedent(f"""
        import sys, time
        from sapa.common.outdir import exclusive
        with exclusive({str(out)!r}):
            print("held", flush=True)
            time.sleep({seconds})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_is_refused_at_once(tmp_path):
    out = tmp_path / "res"
    proc = _holder(out)
    try:
        with (pytest.raises(InputError, match=rf"--out {out} is in use by another sapa run \(pid {proc.pid}\)"),
              exclusive(out, "--out")):
            pytest.fail("two runs held one results directory")
        assert proc.poll() is None  # refused while the holder still held it: not by waiting for it (no clock)
    finally:
        proc.kill()
        proc.wait()
    with exclusive(out):  # the lock died with its process
        pass


def test_messages_name_the_flag_and_the_path_given(tmp_path):
    """Each refusal names the flag (``--out`` by default) and the path the user gave, not an ancestor only."""
    for check, given in ((check_dir, "/proc/x/res"), (check_file, "/proc/x/out.json"),
                         (check_dir, "/dev/null/x/res"), (check_file, "/dev/null/x/out.json")):
        with pytest.raises(InputError, match=rf"^--out {given}: "):
            check(given)
        with pytest.raises(InputError, match=rf"^--report {given}: "):
            check(given, "--report")


def test_the_holder_pid_is_read_only_when_it_is_one(tmp_path):
    """The refusal names the holder's pid from the lock file; garbage (also non-ASCII) there is ignored, never raised."""
    from sapa.common.outdir import _holder

    lock = tmp_path / "lock"
    for content, want in ((b"123\n", " (pid 123)"), (b"abc\n", ""), (b"\xff\xfe12\n", ""), (b"", "")):
        lock.write_bytes(content)
        fd = os.open(lock, os.O_RDONLY)
        try:
            assert _holder(fd) == want, content
        finally:
            os.close(fd)
    fd = os.open(tmp_path, os.O_RDONLY)  # reading a directory fails: no pid, no error
    try:
        assert _holder(fd) == ""
    finally:
        os.close(fd)


def test_a_dangling_symbolic_link_is_named(tmp_path):
    link = tmp_path / "res"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(InputError, match=rf"^--out {link}/sub: {link} is a broken symbolic link$"):
        check_dir(link / "sub")


@pytest.mark.parametrize("exc, why", [(OSError(30, ""), "EROFS"), (OSError("no reason given"), "no reason given")])
def test_a_probe_error_without_text_is_still_explained(tmp_path, monkeypatch, exc, why):
    import tempfile

    def refuse(*a, **k):
        raise exc

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", refuse)
    with pytest.raises(InputError, match=rf"^--out {tmp_path}: cannot write in {tmp_path} \({why}\)$"):
        check_dir(tmp_path)


def test_a_results_directory_removed_during_the_run_is_no_error(tmp_path):
    import shutil

    out = tmp_path / "res"
    with exclusive(out):
        shutil.rmtree(out)
    assert not out.exists()


@pytest.mark.parametrize("inside", ["data", "sweep", "train/chunks"])
def test_a_symbolic_link_inside_the_results_folder_is_refused_before_anything_is_written(tmp_path, inside):
    out, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = out / inside
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere)
    with pytest.raises(InputError, match="symbolic link") as err:
        with exclusive(out):
            pass
    assert str(link) in str(err.value) and "\n" not in str(err.value)
    assert list(elsewhere.iterdir()) == [] and not (out / LOCK_NAME).exists()


def test_the_results_folder_itself_may_be_a_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "results").symlink_to(real)
    with exclusive(tmp_path / "results") as p:
        assert (p / LOCK_NAME).exists()


def test_a_subfolder_locked_inside_a_held_folder_is_never_reached_through_a_link(tmp_path):
    """verify holds OUT, then OUT/sweep and OUT/train: a link planted at OUT/train meanwhile gets no lock file, no
    folder, nothing (issue 52, case 5)."""
    from sapa.common.atomic import LinkRefused
    from sapa.common.outdir import exclusive

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    with exclusive(out):
        (out / "train").symlink_to(elsewhere)
        with pytest.raises(LinkRefused, match="train is a symbolic link"):
            with exclusive(out / "train"):
                pass
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in out.iterdir()) == ["train"]
