"""The argument types of the ``sapa`` commands and their parser class: errors in one line, exit code 2 (light: no heavy
import)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sapa.common.validate import InputError

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line and exits 2."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse hook
        raise InputError(message)


def int_from(text: str, lo: int, what: str) -> int:
    """An integer in [lo, 2**53] parsed from ``text`` (sizes reach float64 formulas: keep them exact)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}") from None
    if v < lo:
        raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}")
    if v > 2**53:
        raise argparse.ArgumentTypeError(f"expected a {what} integer ≤ 2**53, got {len(text.strip())} digits")
    return v


def positive_int(text: str) -> int:
    return int_from(text, 1, "positive")


def nonneg_int(text: str) -> int:
    return int_from(text, 0, "non-negative")


def finite_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


def positive_factor(text: str) -> float:
    v = finite_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive factor, got {text!r}")
    return v


def path_arg(text: str) -> Path:
    """A path that names something: '' (which would mean the current folder) is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r} (give '.' to mean the current folder)")
    return Path(text)


def positive_seconds(text: str) -> float:
    v = finite_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return v
