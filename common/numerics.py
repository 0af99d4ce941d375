"""Pinned CPU kernel dispatch, so a seed gives the same numbers on any x86-64 machine with AVX2.

aten, MKL and oneDNN otherwise pick AVX-512 or AVX2 code paths by machine, and their float32 (and
float64) sums differ in the last bits; over hundreds of training steps those bits grow into different
accuracies. Each library reads its variable once, when it first dispatches, so the variables must be
in the environment before ``torch`` is imported: ``empirics`` and ``sapa`` set them on import (a value
the user already set is kept), and spawned worker processes inherit them.
"""

from __future__ import annotations

import os

PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def pin_kernel_dispatch() -> dict[str, str]:
    """Set every PINNED variable that is not set yet; return the values in force."""
    for k, v in PINNED.items():
        os.environ.setdefault(k, v)
    return {k: os.environ[k] for k in PINNED}
