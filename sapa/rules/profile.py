"""``uniform-profile``: is a per-row norm profile flat in the row index i? (causal masking question).

Evidence: an interval for the log-log slope β of a row-norm profile against i (one case per N, p
and reading). A case is "uniform" if the interval lies within ±TOL, "non-uniform" if it lies
wholly outside, "inconclusive" otherwise. The statement "the rows are uniform": ``HOLDS`` if every
case is uniform; ``FAILS`` if every case is non-uniform; ``HOLDS_IN_REGIME`` if some are uniform
and none inconclusive; ``UNDETERMINED`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sapa.rules.base import Rule

TOL = 0.1          # |β| ≤ 0.1: the row norm changes < 2× over 1000 rows
SIM_CASES = 4      # N ∈ {256, 1024} × p ∈ {1, 3}
SIM_SE = 0.01      # standard error of a fitted profile slope (bootstrap over trials)


@dataclass(frozen=True)
class ProfileEvidence:
    """Per case: (name, lo, hi) of the row-profile slope β."""

    cases: tuple[tuple[str, float, float], ...]


def case_shape(lo: float, hi: float, tol: float = TOL) -> str:
    """'uniform' (within ±tol), 'non-uniform' (wholly outside) or 'inconclusive'."""
    if -tol <= lo and hi <= tol:
        return "uniform"
    if lo > tol or hi < -tol:
        return "non-uniform"
    return "inconclusive"


def decide(ev: ProfileEvidence, tol: float = TOL) -> str:
    """HOLDS all uniform; FAILS all non-uniform; HOLDS_IN_REGIME some uniform, none inconclusive; else UNDETERMINED."""
    shapes = [case_shape(lo, hi, tol) for _, lo, hi in ev.cases]
    if not shapes or "inconclusive" in shapes:
        return "UNDETERMINED"
    if all(s == "uniform" for s in shapes):
        return "HOLDS"
    if all(s == "non-uniform" for s in shapes):
        return "FAILS"
    return "HOLDS_IN_REGIME"


def simulate(truth: str, rng: np.random.Generator) -> ProfileEvidence:
    """holds: true β = TOL in every case (uniform, at the edge); fails: β = 3·TOL everywhere (designed effect)."""
    beta = TOL if truth == "holds" else 3 * TOL
    cases = []
    for k in range(SIM_CASES):
        est = beta + SIM_SE * rng.standard_normal()
        cases.append((f"case{k}", est - 2.576 * SIM_SE, est + 2.576 * SIM_SE))
    return ProfileEvidence(tuple(cases))


RULES = (Rule(
    name="uniform-profile",
    summary=f"row profile uniform if its slope interval lies within ±{TOL}: HOLDS all uniform, FAILS all non-uniform, "
            "HOLDS_IN_REGIME mixed, UNDETERMINED if any inconclusive",
    thresholds={"tolerance": TOL},
    decide=decide,
    simulate=simulate,
    design={"holds": f"true slope {TOL:g} (the edge) in every case", "fails": f"true slope {3 * TOL:g}", "mc_se": SIM_SE},
),)
