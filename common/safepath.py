"""Where sapa writes is chosen by the user, never by a name read from a file: plain names, paths kept inside.

Results folders are exchanged between people, so a name stored in one (a figure's file stem) may be
hostile: ``"../../escape"``, ``"/etc/x"``, ``".."``. :func:`plain_name` refuses every name that is not a
single ordinary path component, and :func:`inside` refuses a path that, once symbolic links are
resolved, leaves its root folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sapa.common.validate import InputError

__all__ = ["MAX_NAME", "plain_name", "inside"]

MAX_NAME = 200  # bytes of a file stem (Linux allows 255 for the whole name, suffix and temporary prefix included)
_PLAIN = re.compile(r"^[A-Za-z0-9_+=,@-][A-Za-z0-9_+=,@.-]*$")


def plain_name(name: object, what: str = "file name") -> str:
    """``name`` if it is one ordinary path component (letters, digits, ``_+=,@-.``; no leading dot, no ``..``).

    >>> plain_name("norm_vs_n_D64_trials200")
    'norm_vs_n_D64_trials200'
    """
    if not isinstance(name, str) or not _PLAIN.fullmatch(name) or ".." in name or len(name.encode()) > MAX_NAME:
        raise InputError(f"{what} {name!r} is not a plain file name (no folders, no leading dot, "
                         f"at most {MAX_NAME} characters of A-Z a-z 0-9 _ + = , @ - .)")
    return name


def inside(path: str | os.PathLike, root: str | os.PathLike, what: str = "output") -> Path:
    """``path`` if its parent, symbolic links resolved, is ``root`` resolved or below it; InputError otherwise."""
    path, root = Path(path), Path(root)
    parent, top = path.parent.resolve(), root.resolve()
    if parent != top and top not in parent.parents:
        raise InputError(f"{what} {path} would be written outside {root} (at {parent / path.name})")
    return path
