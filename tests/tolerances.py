"""Relative tolerances per compute dtype, in one place: what a kernel may differ from its reference by.

float64: a kernel against a float64 reference (autograd, a direct sum) at the tests' small sizes (N ≤ 12, D ≤ 4);
observed ≤ 2e-12, so 1e-10 leaves round-off room and still catches any wrong term. float32: a float32 compute (its
sums accumulated in float64) against the float64 result at N = 64, D = 16; observed ~1e-6. ``SQRT_EPS`` is for
quantities that lose half their digits by construction (a difference of two float32 losses, a gradient by finite
differences).
"""

from __future__ import annotations

import numpy as np

RTOL: dict[str, float] = {"float64": 1e-10, "float32": 1e-4}
SQRT_EPS: dict[str, float] = {"float64": float(np.sqrt(np.finfo(np.float64).eps)),
                              "float32": float(np.sqrt(np.finfo(np.float32).eps))}


def rtol(dtype) -> float:
    """The relative tolerance of ``dtype`` (a torch or numpy dtype, or its name)."""
    return RTOL[str(dtype).rsplit(".", 1)[-1]]
