"""Python's cyclic garbage collector runs less often: gc.set_threshold(10 000, 10, 10) instead of (700, 10, 10).

A collection of generation 0 runs every ``threshold0`` net allocations of container objects, and every 10th of
those collects generation 1, every 10th of those all generations: the whole heap, which after importing torch,
sympy, scipy and matplotlib holds about 10⁶ long-lived objects (~0.3 s a full pass). sympy expressions, matplotlib
artists and pandas frames allocate containers by the million, so at 700 the full passes add up: 8.8 of 136 CPU-s
in the theory, figure and claim tests (gen 0/1/2: 1.0 / 0.8 / 6.9 s, 20 full passes), 4.5 s at 10 000 (3 full
passes), 126.8 CPU-s in all (one run each, 2026-12-02; peak memory 1.34 → 1.46 GB). Only when cycles are freed
changes; reference counting frees everything else at once, and no number computed depends on either.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 10, 10)


def collect_less_often() -> tuple[int, int, int]:
    """Set :data:`THRESHOLDS` with ``gc.set_threshold``; returns the thresholds that were in force."""
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    return before
