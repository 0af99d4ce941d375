"""Helpers several ``sapa`` commands share: names selected from a list, a flat result as readable lines, a finite
number or None, a user's ``.npy`` loaded safely, and ``--out`` held for one run at a time."""

from __future__ import annotations

import contextlib
from pathlib import Path

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


def finite_or_none(v: float) -> float | None:
    """``v``, or None for ±inf/NaN (log₁₀ 0 = −inf is not valid JSON)."""
    import math

    return v if math.isfinite(v) else None


LOG10_MIN_NORMAL = -307.6526555685888  # log₁₀ of float64's smallest normal number, 2.2250738585072014e−308


def mark_below_range(out: dict, keys) -> dict[str, str]:
    """Where ``out["log10_" + k]`` is below float64's normal range, ``out[k] = None`` and k joins
    ``out["below_double_range"]`` (created, empty when none): a nonzero value never reads 0. Returns, per such key,
    the reason the readable output shows in place of the value."""
    below = [k for k in keys if out.get(f"log10_{k}") is not None and out[f"log10_{k}"] < LOG10_MIN_NORMAL]
    for k in below:
        out[k] = None
    out["below_double_range"] = out.get("below_double_range", []) + below
    return below_reasons(out)


def below_reasons(out: dict) -> dict[str, str]:
    """Per key of ``out["below_double_range"]``: what the readable output shows in place of its null value."""
    return {k: f"below float64's range: 10^{out[f'log10_{k}']:.10g} (log10_{k})" for k in out.get("below_double_range", [])
            if out.get(f"log10_{k}") is not None}


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
