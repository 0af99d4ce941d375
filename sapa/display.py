"""Text a person reads: numbers to significant digits, aligned key–value lines and tables, a dash for a gap.

Every command that prints for a reader (not ``--json``) formats through these helpers, so a ratio of 0.16 never
prints as ``0×``, a missing value never prints as ``None`` and columns line up.
"""

from __future__ import annotations

import math
import numbers
from typing import Iterable, Sequence

MISSING = "—"


def sig(x: float | int | None, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, without an exponent for 1e-4 ≤ |x| < 1e6: 0.16, 1.7, 12, 1234.

    Integers below 10⁶ and floats from 10^(digits−1) on print whole (768, 1234, not 1.23e+03); a value outside it prints as 1.2e+07;
    None, NaN and ±inf print as ``—``.
    """
    if x is None or isinstance(x, bool):
        return MISSING if x is None else str(x)
    if isinstance(x, numbers.Integral) and abs(x) < 10**6:
        return str(int(x))
    x = float(x)
    if not math.isfinite(x):
        return MISSING
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if -4 <= mag < 6:
        decimals = max(digits - 1 - mag, 0)
        text = f"{x:.{decimals}f}"
        return text if float(text) != 0 else f"{x:.{digits - 1}e}"
    return f"{x:.{digits - 1}e}"


def ratio(x: float | None, digits: int = 2) -> str:
    """A ratio with a times sign: 0.16×, 1.7×, 12×, 340× (``—`` when missing)."""
    s = sig(x, digits)
    return s if s == MISSING else s + "×"


def value_or_reason(x, why: str, digits: int = 4) -> str:
    """``sig(x)`` for a number, ``str(x)`` for text, and ``— (why)`` when the value is missing."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return f"{MISSING} ({why})" if why else MISSING
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return sig(x, digits)
    return str(x)


def key_values(pairs: Iterable[tuple[str, object]], sep: str = " : ") -> list[str]:
    """Lines ``key : value`` with the keys padded to one width, so the values start in one column."""
    pairs = [(str(k), v) for k, v in pairs]
    w = max((len(k) for k, _ in pairs), default=0)
    return [f"{k:<{w}}{sep}{v}" for k, v in pairs]


def text_table(headers: Sequence[str], rows: Iterable[Sequence[object]], right: Sequence[bool] | None = None,
               gap: str = "  ") -> list[str]:
    """An aligned plain-text table: header, a rule of dashes, one line per row (``right[k]``: right-align column k)."""
    rows = [[MISSING if c is None else str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(headers)]
    right = list(right) if right is not None else [False] * len(headers)

    def line(cells: Sequence[str]) -> str:
        return gap.join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()

    return [line(list(headers)), gap.join("-" * w for w in widths)] + [line(r) for r in rows]


def arm_name(arm: str) -> str:
    """The one display name of a training arm, everywhere it is printed or drawn: ``x_sqrtN`` → ``x/√N``, ``x3_alpha``
    → ``x³/α*`` (:func:`sapa.empirics.training.study_config.arm_label`); ``expr`` (an audited φ) → ``φ``."""
    from sapa.empirics.training.study_config import arm_label

    return arm_label(arm)
