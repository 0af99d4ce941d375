"""A folder at a predictable place that only this user can use, made safely: a cache must never follow a planted link.

``sapa`` keeps matplotlib's font cache in ``$TMPDIR/sapa-matplotlib-$UID`` (never in ``$HOME``), a name anyone can
guess: another user who makes it first as a link to a folder of the victim's has the font list written there.
:func:`private_dir` makes the folder with mode 0700, or takes an existing one only if it is a real folder (opened
with ``O_NOFOLLOW``, checked with ``fstat`` on that handle) owned by this user with no permission for anyone else;
otherwise it makes a fresh one with :func:`tempfile.mkdtemp` (random name, mode 0700). In a sticky ``/tmp`` nobody
else can then rename or replace it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["private_dir"]


def private_dir(path: str | os.PathLike) -> Path:
    """``path`` if it is (or could be made) a folder of this user's, mode 0700, not a link; else a fresh private one.

    >>> import tempfile; d = private_dir(Path(tempfile.mkdtemp()) / "cache")
    >>> oct(d.stat().st_mode & 0o777)
    '0o700'
    """
    path = Path(path)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return _fresh(path)
    if _ours(path):
        return path
    return _fresh(path)


def _ours(path: Path) -> bool:
    """True if ``path`` is a real folder (not a link) owned by this user, with no permission for group or others."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # a link (ELOOP), a file (ENOTDIR), no access
        return False
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _fresh(path: Path) -> Path:
    """A new private folder (``tempfile.mkdtemp``: random name, 0700) named after ``path``."""
    return Path(tempfile.mkdtemp(prefix=f"{path.name}-"))
