"""Numbers at float64's edges in a flat result: None for a non-finite value, and a norm below the normal range
kept as its exact log₁₀ (the value itself null), so a nonzero value never reads 0."""

from __future__ import annotations

import math

__all__ = ["LOG10_MIN_NORMAL", "below_reasons", "finite_or_none", "mark_below_range"]

LOG10_MIN_NORMAL = -307.6526555685888  # log₁₀ of float64's smallest normal number, 2.2250738585072014e−308


def finite_or_none(v: float) -> float | None:
    """``v``, or None for ±inf/NaN (log₁₀ 0 = −inf is not valid JSON).

    >>> finite_or_none(float("-inf")) is None, finite_or_none(2.0)
    (True, 2.0)
    """
    return v if math.isfinite(v) else None


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
