"""Input validation shared by every public function: one clear message per bad input.

Every check raises :class:`InputError` (a ``ValueError``) whose message is a single line
naming the argument; the command line turns it into ``sapa: error: ...`` and exit code 2.
"""

from __future__ import annotations

import math
import numbers

import numpy as np


class InputError(ValueError):
    """A user-supplied value is unusable (bad size, non-finite, wrong shape, ...)."""


def positive_int(name: str, value: object) -> int:
    """Return ``value`` as an ``int`` if it is an integer ≥ 1, else raise InputError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        else:
            raise InputError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def positive_float(name: str, value: object) -> float:
    """Return ``value`` as a ``float`` if it is finite and > 0, else raise InputError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{name} must be a positive finite number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise InputError(f"{name} must be a positive finite number, got {value!r}")
    return v


def unit_interval(name: str, value: object, lo: float = -1.0, hi: float = 1.0) -> float:
    """Return ``value`` as a float in [lo, hi], else raise InputError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{name} must be a number in [{lo}, {hi}], got {value!r}")
    v = float(value)
    if not math.isfinite(v) or not lo <= v <= hi:
        raise InputError(f"{name} must be a number in [{lo}, {hi}], got {value!r}")
    return v


def finite_matrix(name: str, a: object, shape: tuple[int | None, ...] | None = None) -> np.ndarray:
    """Return ``a`` as a finite float64 array of rank ``len(shape)``; ``None`` entries are free."""
    try:
        is_complex = np.iscomplexobj(a)
    except (TypeError, ValueError):  # ragged and the like: the conversion below says so
        is_complex = False
    if is_complex:  # a cast to float64 would drop the imaginary part with only a warning
        raise InputError(f"{name} must be real, got a complex array")
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # float128 1e4000 → inf: refused below, in one line
            arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"{name} must be a numeric array ({' '.join(str(exc).split())})") from None
    if shape is not None:
        if arr.ndim != len(shape):
            raise InputError(f"{name} must have {len(shape)} dimensions, got shape {arr.shape}")
        for axis, want in enumerate(shape):
            if want is not None and arr.shape[axis] != want:
                raise InputError(f"{name} has shape {arr.shape}; axis {axis} must be {want}")
    if arr.size == 0:
        raise InputError(f"{name} is empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name} contains NaN or inf (or a value beyond float64's range, ±1.8e308)")
    return arr


def choice(name: str, value: object, options: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``options``, else raise InputError listing them."""
    if value not in options:
        raise InputError(f"{name} must be one of {', '.join(options)}; got {value!r}")
    return str(value)
