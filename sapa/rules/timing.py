"""``timing-ratio``: is one implementation within a factor of another? (the reviewers' runtime question).

Evidence: per cell, the ratio of the fastest repeat of the candidate to the fastest repeat of the
reference, measured in one run on one machine (load-dependent: a ratio of minima is far steadier
than a ratio of medians, but a shared machine still moves it). With the declared relative
measurement noise NOISE a cell is *within* if ratio ≤ FACTOR/(1 + NOISE), *outside* if ratio >
FACTOR·(1 + NOISE), *marginal* otherwise. The statement "within FACTOR in every cell": ``HOLDS`` if
every measured cell is within; ``FAILS`` if none is within and some are outside; ``HOLDS_IN_REGIME``
if some are within and some outside; ``UNDETERMINED`` otherwise (only marginal or unmeasured cells).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sapa.rules.base import Rule

FACTOR = 1.5        # the ledger's default factor (a reading may ask for another: TimingEvidence.factor)
NOISE = 0.4         # a ratio of minima moves by < 40 % between runs (σ ≈ 0.1 log-normal, 3.4σ: family-safe over 16 cells)
SIM_CELLS = 16      # (mask, pass, N) cells per p in the quick grid
SIM_SPREAD = 0.10   # log-normal σ of a measured ratio around its true value


@dataclass(frozen=True)
class TimingEvidence:
    """Per cell: (name, ratio or None when the cell could not be timed); the factor the statement claims."""

    cells: tuple[tuple[str, float | None], ...]
    factor: float = FACTOR


def cell_class(ratio: float | None, factor: float = FACTOR) -> str:
    """'within', 'outside', 'marginal' or 'unmeasured' against ``factor`` with the NOISE band."""
    if ratio is None:
        return "unmeasured"
    if ratio <= factor / (1 + NOISE):
        return "within"
    if ratio > factor * (1 + NOISE):
        return "outside"
    return "marginal"


def decide(ev: TimingEvidence) -> str:
    """HOLDS all within; FAILS none within, some outside; HOLDS_IN_REGIME both; else UNDETERMINED."""
    cls = [cell_class(r, ev.factor) for _, r in ev.cells]
    measured = [c for c in cls if c != "unmeasured"]
    if measured and all(c == "within" for c in measured) and len(measured) == len(cls):
        return "HOLDS"
    if "within" in cls and "outside" in cls:
        return "HOLDS_IN_REGIME"
    if "outside" in cls and "within" not in cls:
        return "FAILS"
    return "UNDETERMINED"


def simulate(truth: str, rng: np.random.Generator) -> TimingEvidence:
    """holds: every true ratio exactly FACTOR (the edge); fails: every true ratio 2·FACTOR; log-normal spread."""
    true = FACTOR if truth == "holds" else 2 * FACTOR
    r = true * np.exp(SIM_SPREAD * rng.standard_normal(SIM_CELLS))
    return TimingEvidence(tuple((f"cell{k}", float(v)) for k, v in enumerate(r)))


RULES = (Rule(
    name="timing-ratio",
    summary=f"within {FACTOR}× per cell if ratio of minima ≤ {FACTOR}/(1+{NOISE}), outside if > {FACTOR}·(1+{NOISE}); "
            "HOLDS all within, FAILS none within, HOLDS_IN_REGIME mixed",
    thresholds={"factor": FACTOR, "noise": NOISE},
    decide=decide,
    simulate=simulate,
    design={"holds": f"every true ratio = {FACTOR}", "fails": f"every true ratio = {2 * FACTOR}",
            "spread": f"log-normal σ = {SIM_SPREAD}", "cells": SIM_CELLS},
),)
