"""Refuse huge literal powers in an activation before sympy evaluates them: 9**9**9 has 3.7·10⁸ digits.

sympy evaluates integer powers while it parses (``2**2**40*x`` would take hours and terabytes), and a
polynomial power of a symbolic base is expanded later (``(x + 1)**(10**6)``). The expression is
therefore first parsed with ``evaluate=False`` and its tree walked: a power of constants may have at
most :data:`MAX_DIGITS` decimal digits (estimated from logarithms, never computed), a floating-point literal
at most :data:`MAX_DIGITS` digits of precision (``Float(1, 10**7)`` made sympy print ten million digits inside
one C call, where no alarm can stop it), and a constant
exponent on anything with a symbol may be at most :data:`MAX_EXPONENT` in size (no activation the audit can
use needs more: a polynomial of degree > 24 is refused anyway as growing faster than its moments allow). What passes is
then parsed (and evaluated) as usual; the rest is refused with one line.
"""

from __future__ import annotations

import math

import sympy as sp

from sapa.common.validate import InputError

__all__ = ["MAX_DIGITS", "MAX_EXPONENT", "check_powers"]

MAX_DIGITS = 1000    # 10**400 passes (and then overflows float64: refused later by its own message)
MAX_EXPONENT = 100  # x**100 passes (and is refused later as growing too fast); (x + 1)**999 would take minutes to expand


def check_powers(text: str, tree: sp.Basic) -> None:
    """InputError if the unevaluated ``tree`` of ``text`` holds a power too large to evaluate (see module docstring)."""
    _log10(text, tree)


def _log10(text: str, e: sp.Basic) -> float | None:
    """An upper estimate of log₁₀|e| for a tree of constants; None when ``e`` has a symbol (checked all the same)."""
    if isinstance(e, sp.Integer):
        return math.log10(abs(int(e))) if e != 0 else -math.inf
    if isinstance(e, sp.Rational):
        return math.log10(abs(int(e.p))) - math.log10(int(e.q))
    if isinstance(e, sp.Float):
        digits = e._prec * math.log10(2)
        if digits > MAX_DIGITS:  # Float(1, 10**7): every later step would carry ten million digits
            raise InputError(f"activation {text!r}: a number with {digits:.0f} digits of precision (at most "
                             f"{MAX_DIGITS}); write it with fewer digits")
        sign, man, exp, bc = e._mpf_  # log₁₀|e| from the binary exponent: nothing is printed or evaluated
        return (exp + bc) * math.log10(2) if man else -math.inf
    if isinstance(e, sp.Pow):
        return _pow(text, *e.args)
    kids = [_log10(text, a) for a in e.args]
    if not e.args or any(k is None for k in kids) or e.free_symbols:
        return None
    if isinstance(e, sp.Mul):
        return sum(kids)
    if isinstance(e, sp.Add):
        return max(kids) + math.log10(len(kids))
    return 0.0  # a function of constants (exp(1000), ...): sympy keeps it unevaluated; float64 overflow is caught later


def _pow(text: str, base: sp.Basic, exp: sp.Basic) -> float | None:
    lb, le = _log10(text, base), _log10(text, exp)
    if le is not None and le > math.log10(MAX_EXPONENT) and (lb is None or (lb != 0.0 and lb != -math.inf)):
        if lb is None:
            raise InputError(f"activation {text!r}: the power {sp.sstr(exp)} is too large (at most {MAX_EXPONENT} "
                             "on an expression in x, N or i)")
        if le > 300 or abs(lb) * 10**le > MAX_DIGITS:
            raise InputError(f"activation {text!r}: the constant {_short(base)}**{_short(exp)} has about "
                             f"{_digits(lb, le)} digits (at most {MAX_DIGITS}); write a smaller number")
    if lb is None or le is None:
        return None
    if lb in (0.0, -math.inf):  # ±1 or 0 to any power
        return lb
    val = float(exp.evalf(20))  # |exp| ≤ 10**300 here
    out = lb * val
    if abs(out) > MAX_DIGITS:  # 2**-(10**6) is a rational of 3·10⁵ digits
        raise InputError(f"activation {text!r}: the constant {_short(base)}**{_short(exp)} has about "
                         f"{_digits(lb, le)} digits (at most {MAX_DIGITS}); write a smaller number")
    return out


def _digits(lb: float, le: float) -> str:
    lg = math.log10(abs(lb)) + le if lb else 0.0
    return f"10^{lg:.3g}" if lg > 15 else f"{abs(lb) * 10**le:.3g}"


def _short(e: sp.Basic) -> str:
    s = sp.sstr(e)
    s = s if len(s) <= 30 else s[:27] + "..."
    return s if e.is_Atom else f"({s})"
