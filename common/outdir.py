"""Where a command writes: checked before any work starts, and held by one run at a time.

A results location that cannot be written (read-only, ``/proc/x``, ``/dev/null/x``, an existing
file given as a directory) is refused up front with :class:`sapa.common.validate.InputError` (one line,
exit 2 in the CLI), not after minutes of work. The check creates nothing: it probes the directory,
or the nearest existing ancestor of one still to be made, by creating and removing a temporary file.
:func:`exclusive` serialises runs into one directory with ``fcntl.flock`` on ``DIR/.sapa.lock``
(non-blocking: a second run is refused, it does not wait). A results folder that holds a symbolic link
is refused too (:func:`refuse_foreign`), and so is a named pipe or device in it: sapa writes only inside the folder it was given, and a link there
(``OUT/data`` → elsewhere) would carry its writes out. That check is made once, at the start; a link planted later,
while the run writes, is refused at the moment of each write: :func:`exclusive` holds the folder as the run's
(:func:`sapa.common.atomic.confined`), so every write below it walks from it without following links.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sapa.common.atomic import confined, open_dir
from sapa.common.validate import InputError

LOCK_NAME = ".sapa.lock"


def check_dir(path: str | os.PathLike, flag: str = "--out") -> Path:
    """``path`` as a directory a run can write into (existing or creatable); InputError naming ``flag`` otherwise."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path} exists and is not a directory")
    _probe(_nearest_existing(path, path, flag), path, flag)
    return path


def check_file(path: str | os.PathLike, flag: str = "--out") -> Path:
    """``path`` as a file a run can (atomically) write; InputError naming ``flag`` otherwise.

    An existing target must be a regular file and not a symbolic link: the result is renamed over it,
    so ``/dev/null``, ``/dev/full``, a FIFO or the link ``/dev/stdout`` would be replaced, not written to.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{flag} {path} is a directory; give a file name")
    if path.is_symlink():  # the result is renamed over the link itself, in the link's folder (/dev/stdout: in /dev)
        raise InputError(f"{flag} {path} is a symbolic link; sapa replaces its output file, so give the file itself "
                         f"({path.resolve()}) or a new name")
    if path.exists() and not path.is_file():
        from sapa.common.atomic import file_kind

        raise InputError(f"{flag} {path} exists and is not a regular file ({file_kind(path.stat().st_mode)}); sapa "
                         "replaces its output file, so it never writes to a device or pipe: give a file name")
    _probe(_nearest_existing(path.parent, path, flag), path, flag)
    return path


@contextlib.contextmanager
def exclusive(path: str | os.PathLike, flag: str = "--out") -> Iterator[Path]:
    """Hold ``path/.sapa.lock`` (flock, non-blocking) for the block; a second holder gets InputError at once.

    The directory is created if needed; the lock file is removed when the block ends, however it ends (an error,
    an interrupt), so a finished run leaves only its results; if the directory was created here and holds nothing
    else, it is removed too (a refused run leaves nothing behind). Removing the file while it is still locked is
    safe because a new holder checks, once it holds the lock, that the file it locked is still the one at the path
    (else it locked a removed file, and tries again). Only a killed process (SIGKILL) leaves the file; its lock died
    with it, and the next run takes it over.
    """
    path = check_dir(path, flag)
    refuse_foreign(path, flag)
    created = not path.exists()
    try:  # made, and held by a handle (inside a folder held already, as verify's sweep/ and train/: no link followed)
        dfd = open_dir(path, create=True)
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot write there ({exc.strerror or exc})") from None
    try:
        fd = _lock(dfd, path, flag)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            with confined(path):  # every write below path, from now on: never through a link (sapa.common.atomic)
                yield path
        finally:
            with contextlib.suppress(OSError):
                os.unlink(LOCK_NAME, dir_fd=dfd)  # still holding the lock: a waiter re-checks the inode
            os.close(fd)  # releases the lock
    finally:
        os.close(dfd)
        if created:
            _remove_if_empty(path)


def refuse_foreign(path: str | os.PathLike, flag: str = "--out", limit: int = 1_000_000) -> None:
    """InputError naming the first symbolic link or special file (FIFO, device, socket) below ``path``.

    The folder given is the user's choice, so ``--out`` may itself be a link; anything *inside* it that is a
    link would send a result, a lock or a training chunk elsewhere, and a named pipe or device where a result
    belongs would block a reader or refuse the final write after all the work. Links are not followed; at most
    ``limit`` entries are looked at.
    """
    import stat

    from sapa.common.atomic import file_kind

    root = Path(path)
    if not root.is_dir():
        return
    seen = 0
    for top, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            seen += 1
            p = Path(top) / name
            try:
                mode = os.lstat(p).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                raise InputError(f"{flag} {root}: {p} is a symbolic link (to {os.readlink(p)}); sapa writes only "
                                 "inside its results folder and does not follow links there: replace the link by "
                                 f"the folder or file itself, or choose another {flag}")
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise InputError(f"{flag} {root}: {p} is {file_kind(mode)}; a results folder holds only files and "
                                 f"folders: remove it, or choose another {flag}")
            if seen >= limit:
                return


def _lock(dfd: int, path: Path, flag: str, tries: int = 5) -> int:
    """An fd of ``LOCK_NAME`` in the folder ``dfd`` (``path``) holding its exclusive flock, the file still there
    (InputError when another holds it); never a link (``O_NOFOLLOW``)."""
    lock = path / LOCK_NAME
    for _ in range(tries):
        try:
            fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666, dir_fd=dfd)
        except OSError as exc:
            raise InputError(f"{flag} {path}: cannot write there ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise InputError(f"{flag} {path} is in use by another sapa run{holder}; wait for it to finish "
                             f"or choose another {flag}") from None
        try:
            same = os.stat(LOCK_NAME, dir_fd=dfd, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the previous holder removed the file we locked: lock the one at the path now
    raise InputError(f"{flag} {path}: its lock file keeps being replaced; is another program removing {lock}?")


def _nearest_existing(start: Path, path: Path, flag: str) -> Path:
    """The deepest existing ancestor of ``start`` (itself included); it must be a directory (errors name ``path``)."""
    p = start.absolute()
    while not p.exists():
        if p.is_symlink():  # a dangling link: mkdir would fail on it
            raise InputError(f"{flag} {path}: {p} is a broken symbolic link")
        p = p.parent
    if not p.is_dir():
        raise InputError(f"{flag} {path}: {p} is not a directory")
    return p


def _probe(where: Path, path: Path, flag: str) -> None:
    """Create and remove a temporary file in ``where``; InputError (about ``path``) if that fails."""
    try:
        with tempfile.NamedTemporaryFile(dir=where, prefix=".sapa-probe-"):
            pass
    except OSError as exc:
        why = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise InputError(f"{flag} {path}: cannot write in {where} ({why})") from None


def _holder(fd: int) -> str:
    """`` (pid N)`` from the lock file, if it names one."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        if not any(path.iterdir()):
            path.rmdir()
