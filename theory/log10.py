"""log₁₀|v| of an exact number (int, Fraction, sympy Rational or expression), exact where float64 under- or overflows.

``sapa exact`` computes its moments as exact rationals; at σ = 1e-300 they are ~1e-1800, which
float64 prints as 0.0. The ``log10_*`` fields it reports come from here: log₁₀ p − log₁₀ q of the
numerator and denominator (Python's ``math.log10`` takes integers of any size).
"""

from __future__ import annotations

import math
from fractions import Fraction

import sympy as sp

__all__ = ["log10_abs"]


def log10_abs(v: object) -> float:
    """log₁₀|v| (−inf for 0) for an exact number, without passing through float64.

    >>> log10_abs(Fraction(1, 10**1800))
    -1800.0
    """
    if isinstance(v, sp.Basic):
        v = sp.nsimplify(v) if isinstance(v, sp.Float) else v
        if isinstance(v, sp.Rational):
            v = Fraction(int(v.p), int(v.q))
        else:
            val = sp.Abs(v).evalf(30)
            return -math.inf if val == 0 else float(sp.log(val, 10).evalf(30))
    if isinstance(v, float):
        return math.log10(abs(v)) if v else -math.inf
    v = Fraction(v)
    if v == 0:
        return -math.inf
    return math.log10(abs(v.numerator)) - math.log10(v.denominator)
