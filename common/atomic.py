"""Atomic file writes that never leave their folder: a temporary sibling, fsync, then a rename, all relative to a
directory handle.

An interrupted run therefore never leaves a half-written file: readers see either the old complete file or the
new complete file. And a write never follows a symbolic link planted below the results folder while a run is
under way (``ln -s elsewhere OUT/data`` three seconds into ``sapa verify``): the folder a run holds is registered
with :func:`confined` (``sapa.common.outdir.exclusive`` does it), and every write below it walks from that folder one
path component at a time with ``O_DIRECTORY | O_NOFOLLOW`` (``openat``), creates its temporary file with
``O_CREAT | O_EXCL | O_NOFOLLOW`` in the directory so opened, hands the writer that open file (never a name to open
again) and renames it relative to the same directory handle (a rename replaces a link at the final name, it never
writes through it). A link met on the way is refused with :class:`LinkRefused` (one line, exit 2) at the moment of
the write, not only at start-up. Outside any registered folder, the folder named by the caller is trusted as given
(a user's choice) and only what is below it is guarded. :func:`make_dirs` creates folders the same way.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Callable

from sapa.common.validate import InputError

_ROOTS: list[str] = []  # the folders runs of this process hold now (absolute, as given); see :func:`confined`
_ROOTS_LOCK = threading.Lock()
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class LinkRefused(InputError):
    """A write below a results folder met a symbolic link (or something not a directory) where a folder belongs."""


@contextlib.contextmanager
def confined(root: str | os.PathLike) -> Iterator[Path]:
    """Inside the block, every write below ``root`` (by :func:`atomic_write` or :func:`make_dirs`, from any thread of
    this process) walks from ``root`` without following a link; ``root`` itself is the user's choice and may be one.

    The registry lists the results folders this process holds, as ``fcntl`` locks do: it is entered and left with
    the run (``sapa.common.outdir.exclusive``), and nested or repeated entries are counted.
    """
    top = os.path.abspath(root)
    with _ROOTS_LOCK:
        _ROOTS.append(top)
    try:
        yield Path(root)
    finally:
        with _ROOTS_LOCK:
            _ROOTS.remove(top)


def _anchor(folder: Path, root: str | os.PathLike | None) -> tuple[str, tuple[str, ...]]:
    """(the trusted folder, the components from it down to ``folder``): ``root`` when given, else the outermost
    registered folder that holds ``folder``, else ``folder`` itself."""
    where = os.path.abspath(folder)
    if root is not None:
        tops = [os.path.abspath(root)]
    else:
        with _ROOTS_LOCK:
            tops = sorted(set(_ROOTS), key=len)
    for top in tops:
        if where == top or where.startswith(top.rstrip(os.sep) + os.sep):
            rel = os.path.relpath(where, top)
            return top, tuple(p for p in rel.split(os.sep) if p not in ("", "."))
    if root is not None:
        raise LinkRefused(f"{folder} is not inside {root}; sapa writes only inside its results folder")
    return where, ()


def open_dir(path: str | os.PathLike, root: str | os.PathLike | None = None, create: bool = True) -> int:
    """A directory fd of ``path`` reached from its trusted folder (:func:`_anchor`) one component at a time, never
    through a link (``O_NOFOLLOW``); missing folders are made on the way when ``create``. The caller closes it."""
    path = Path(path)
    top, parts = _anchor(path, root)
    if create and not os.path.isdir(top):
        os.makedirs(top, exist_ok=True)  # the trusted folder itself: the user's choice, made as given
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for i, part in enumerate(parts):
            nxt = _step(fd, part, create, top, parts[:i + 1], path)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _step(fd: int, part: str, create: bool, top: str, walked: tuple[str, ...], path: Path) -> int:
    """The fd of the folder ``part`` inside the folder ``fd`` (made when missing and ``create``); LinkRefused if
    ``part`` is a link or not a folder."""
    for _ in range(3):
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise
            _refuse(fd, part, top, walked, path)
    raise FileNotFoundError(errno.ENOENT, "a folder on the way keeps disappearing", str(path))


def _refuse(fd: int, part: str, top: str, walked: tuple[str, ...], path: Path) -> None:
    """LinkRefused naming what sits at ``walked`` below ``top`` instead of a folder."""
    where = os.path.join(top, *walked)
    try:
        mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        try:
            to = os.readlink(part, dir_fd=fd)
        except OSError:
            to = "?"
        raise LinkRefused(f"{where} is a symbolic link (to {to}); sapa writes only inside its results folder and "
                          f"does not follow links there, so {path} was not written: replace the link by the folder "
                          "itself") from None
    what = "a file" if stat.S_ISREG(mode) else file_kind(mode) if mode else "not a folder"
    raise LinkRefused(f"{where} is {what} where a folder belongs; "
                      f"{path} was not written") from None


def make_dirs(path: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """``mkdir -p path`` that never makes a folder through a link below its trusted folder (:func:`open_dir`)."""
    os.close(open_dir(path, root, create=True))
    return Path(path)


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None],
                 root: str | os.PathLike | None = None) -> Path:
    """Call ``write(fh)`` on a new temporary sibling of ``path`` opened for binary writing, then atomically rename it
    onto ``path``; every folder on the way is reached without following a link (module docstring; ``root``: the
    trusted folder, else the registered one that holds ``path``).

    The file gets the permissions a plain ``open(path, "w")`` would give: ``0o666 & ~umask`` when
    new, the old mode when it replaces a file. A directory at ``path`` is refused by its own name, and so
    is any other existing thing that is not a regular file or a symbolic link (a device such as
    ``/dev/full``, a FIFO, a socket): renaming over it would replace it. A link at ``path`` itself is replaced,
    never written through.
    """
    path = Path(path)
    dfd = open_dir(path.parent, root, create=True)
    made: list[str] = []  # the temporary file's name, recorded just before it is created: any interrupt removes it
    try:
        _refuse_special(dfd, path)
        fd = _create_sibling(dfd, path, made)
        try:
            _keep_mode(dfd, path, fd)
            with os.fdopen(fd, "wb", closefd=False) as fh:
                write(fh)
            os.fsync(fd)
        finally:
            os.close(fd)
        _replace(dfd, made[-1], path)
    except BaseException as exc:
        for t in made:
            with contextlib.suppress(OSError):
                os.unlink(t, dir_fd=dfd)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:  # disk full: name the file
            raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise
    finally:
        os.close(dfd)
    return path


def _refuse_special(dfd: int, path: Path) -> None:
    """OSError if ``path`` exists and is neither a regular file nor a symbolic link (renaming replaces the link)."""
    try:
        mode = os.stat(path.name, dir_fd=dfd, follow_symlinks=False).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "a directory is in the way of a result file", str(path))
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise FileExistsError(errno.EEXIST, f"not a regular file ({file_kind(mode)}); a result never replaces it", str(path))


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "a special file"


def _create_sibling(dfd: int, path: Path, made: list[str]) -> int:
    """Create ``.<name>.<random>.tmp<suffix>`` beside ``path`` (in the folder ``dfd``) with mode 0o666 (the kernel
    applies the umask) and return its fd; its name is in ``made`` from just before it is created (O_EXCL: a name
    that exists already is never ours, and O_NOFOLLOW: never a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = f".{path.name}.{secrets.token_hex(6)}.tmp{path.suffix}"
        made.append(tmp)
        try:
            return os.open(tmp, flags, 0o666, dir_fd=dfd)
        except FileExistsError:
            made.remove(tmp)
            continue


def _keep_mode(dfd: int, path: Path, fd: int) -> None:
    """Give the new file ``fd`` the permission bits of the regular file ``path`` it will replace (if any)."""
    try:
        st = os.stat(path.name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode):
        os.fchmod(fd, stat.S_IMODE(st.st_mode))


def _replace(dfd: int, tmp: str, path: Path) -> None:
    """Rename ``tmp`` onto ``path``'s name, both in the folder ``dfd``; a failure names ``path``, not the temporary."""
    try:
        os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically replace ``path`` with ``text`` (UTF-8)."""

    data = text.encode("utf-8")
    return atomic_write(path, lambda fh: fh.write(data))


def atomic_write_json(path: str | os.PathLike, obj: object) -> Path:
    """Atomically replace ``path`` with ``obj`` as indented JSON."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_jsonable) + "\n")


def _jsonable(o: object) -> object:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
