"""A folder at a predictable place that only this user can use, made safely: a cache must never follow a planted link.

``sapa`` keeps matplotlib's font cache in ``$TMPDIR/sapa-matplotlib-$UID`` (never in ``$HOME``), a name anyone can
guess: another user who makes it first as a link to a folder of the victim's has the font list written there.
:func:`private_dir` makes the folder with mode 0700, or takes an existing one only if it is a real folder (opened
with ``O_NOFOLLOW``, checked with ``fstat`` on that handle) owned by this user that nobody else can write, and closes
it to everyone else (``fchmod`` 0700 on that handle: matplotlib makes a missing MPLCONFIGDIR with the umask's 0755,
which was refused before, so every process made a fresh folder and built the font list again, ~0.2 CPU-s, and left
the folder behind); otherwise it makes a fresh one with :func:`tempfile.mkdtemp` (random name, mode 0700). In a sticky
``/tmp`` nobody else can then rename or replace it.
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
    """True if ``path`` is a real folder (not a link) owned by this user that only this user can write; it is then
    made 0700 (through the handle checked, so never a link swapped in meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # a link (ELOOP), a file (ENOTDIR), no access
        return False
    try:
        st = os.fstat(fd)
        if not (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()) or st.st_mode & 0o022:
            return False  # another's, or others could have put files in it
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o700)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _fresh(path: Path) -> Path:
    """A new private folder (``tempfile.mkdtemp``: random name, 0700) named after ``path``."""
    return Path(tempfile.mkdtemp(prefix=f"{path.name}-"))
