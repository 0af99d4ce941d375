"""Helpers several ``sapa`` commands share: names selected from a list, a flat result as readable lines, a user's
``.npy`` loaded safely, and ``--out`` held for one run at a time (a finite number or None, and norms below float64's
range: :mod:`sapa.api.floats`, importable from here too)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from sapa.api.floats import LOG10_MIN_NORMAL, below_reasons, finite_or_none, mark_below_range  # noqa: F401
from sapa.common.validate import InputError


def select(items, wanted: list[str] | None, name_of, what: str) -> list:
    """``items`` whose name is in ``wanted`` (all when None), in their own order; an unknown name is an InputError."""
    items = list(items)
    if not wanted:
        return items
    known = {name_of(x) for x in items}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise InputError(f"unknown {what} {unknown[0]!r}; known: {', '.join(sorted(known))}")
    return [x for x in items if name_of(x) in wanted]


def readable(out: dict, why_missing: dict[str, str]) -> str:
    """A command's flat result as aligned ``key : value`` lines; a missing value as ``— (why)``."""
    from sapa.display import key_values, value_or_reason

    return "\n".join(key_values((k, value_or_reason(v, why_missing.get(k, "not applicable"), digits=6))
                                for k, v in out.items()))


def load_npy(path: Path, name: str):
    """A numeric array from a user's .npy: header, dtype and size are checked before loading (sapa.npyfile)."""
    from sapa import npyfile

    return npyfile.load_npy(path, name)


def lock_out(out: Path, subdirs: tuple[str, ...] = ()) -> contextlib.ExitStack:
    """Hold ``out`` and ``out/SUB`` for each of ``subdirs`` (one run at a time); a refused lock releases the others."""
    from sapa.common.outdir import exclusive

    with contextlib.ExitStack() as taking:
        taking.enter_context(exclusive(out, "--out"))
        for sub in subdirs:
            taking.enter_context(exclusive(out / sub, "--out"))
        return taking.pop_all()
