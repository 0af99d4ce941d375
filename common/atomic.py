"""Atomic file writes: write to a temporary sibling, fsync, then ``os.replace``.

An interrupted run therefore never leaves a half-written file: readers see either the
old complete file or the new complete file.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Callable


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)`` then atomically move ``tmp_path`` onto ``path``.

    The file gets the permissions a plain ``open(path, "w")`` would give: ``0o666 & ~umask`` when
    new, the old mode when it replaces a file. A directory at ``path`` is refused by its own name, and so
    is any other existing thing that is not a regular file or a symbolic link (a device such as
    ``/dev/full``, a FIFO, a socket): renaming over it would replace it.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a directory is in the way of a result file", str(path))
    _refuse_special(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    made: list[str] = []  # the temporary file's name, recorded just before it is created: any interrupt removes it
    try:
        tmp = _create_sibling(path, made)
        _keep_mode(path, tmp)
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        _replace(tmp, path)
    except BaseException as exc:
        for t in made:
            if os.path.exists(t):
                os.unlink(t)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:  # disk full: name the file
            raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise
    return path


def _refuse_special(path: Path) -> None:
    """OSError if ``path`` exists and is neither a regular file nor a symbolic link (renaming replaces the link)."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise FileExistsError(errno.EEXIST, f"not a regular file ({file_kind(mode)}); a result never replaces it", str(path))


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "a special file"


def _create_sibling(path: Path, made: list[str]) -> str:
    """Create ``.<name>.<random>.tmp<suffix>`` beside ``path`` with mode 0o666 (the kernel applies the umask); its
    name is in ``made`` from just before it is created (O_EXCL: a name that exists already is never ours)."""
    while True:
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp{path.suffix}")
        made.append(tmp)
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666))
        except FileExistsError:
            made.remove(tmp)
            continue
        return tmp


def _keep_mode(path: Path, tmp: str) -> None:
    """Give ``tmp`` the permission bits of the regular file ``path`` it will replace (if any)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode):
        os.chmod(tmp, stat.S_IMODE(st.st_mode))


def _replace(tmp: str, path: Path) -> None:
    """``os.replace(tmp, path)``; a failure names ``path``, not the temporary file."""
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically replace ``path`` with ``text`` (UTF-8)."""

    def _write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return atomic_write(path, _write)


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
