"""``direction``: which way must a scale move as N decreases? (arXiv 2410.18613, Figure 1, L240–245).

Evidence: per case (weight model × p × criterion), an interval for the exponent b of the scale's
power law s(N) ∝ N^b over the N grid (exact criteria: zero-width). Per case, with the
practical-significance tolerance TOL:

* "decreases as N decreases" if lo > TOL;  "increases" if hi < −TOL;
* "flat" if the whole interval lies in [−TOL, TOL];  "unresolved" otherwise.

The statement "the scale decreases as N decreases": ``FAILS`` if some case increases; ``HOLDS`` if
every case decreases; ``HOLDS_IN_REGIME`` if every case decreases or is flat (the direction is
right wherever the scale has one); ``UNDETERMINED`` if some case is unresolved.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sapa.rules.base import Rule

TOL = 0.1          # |b| ≤ 0.1 over the grid: the scale is flat (changes < 2× over 1000× in N)
SIM_CASES = 8      # 2 models × 2 powers × 2 criteria, as in the ledger
SIM_SE = 0.02      # standard error of a Monte Carlo exponent (typical criterion), half the cases exact


@dataclass(frozen=True)
class DirectionEvidence:
    """Per case: (name, lo, hi) of the exponent b in s(N) ∝ N^b."""

    cases: tuple[tuple[str, float, float], ...]


def case_direction(lo: float, hi: float) -> str:
    """'decreases' (lo > TOL), 'increases' (hi < −TOL), 'flat' (within ±TOL) or 'unresolved'."""
    if lo > TOL:
        return "decreases"
    if hi < -TOL:
        return "increases"
    if -TOL <= lo and hi <= TOL:
        return "flat"
    return "unresolved"


def decide(ev: DirectionEvidence) -> str:
    """FAILS if some case increases; HOLDS if all decrease; HOLDS_IN_REGIME if decrease/flat; else UNDETERMINED."""
    dirs = [case_direction(lo, hi) for _, lo, hi in ev.cases]
    if not dirs:
        return "UNDETERMINED"
    if "increases" in dirs:
        return "FAILS"
    if "unresolved" in dirs:
        return "UNDETERMINED"
    if all(d == "decreases" for d in dirs):
        return "HOLDS"
    return "HOLDS_IN_REGIME"


def simulate(truth: str, rng: np.random.Generator) -> DirectionEvidence:
    """holds: every true b = 0 (flat: the least favourable true case); fails: one case with b = −3·TOL.

    Half the cases carry a 99 % interval b̂ ± 2.576·SE (Monte Carlo), half are exact (zero width).
    """
    b = np.zeros(SIM_CASES)
    if truth == "fails":
        b[rng.integers(SIM_CASES)] = -3 * TOL
    cases = []
    for k, bk in enumerate(b):
        if k % 2:
            est = bk + SIM_SE * rng.standard_normal()
            cases.append((f"case{k}", est - 2.576 * SIM_SE, est + 2.576 * SIM_SE))
        else:
            cases.append((f"case{k}", bk, bk))
    return DirectionEvidence(tuple(cases))


RULES = (Rule(
    name="direction",
    summary=f"scale direction as N decreases: per case 'decreases' (b > {TOL}), 'increases' (b < −{TOL}), 'flat' "
            f"(|b| ≤ {TOL}); FAILS if any increases, HOLDS if all decrease, HOLDS_IN_REGIME if decrease/flat",
    thresholds={"tolerance": TOL},
    decide=decide,
    simulate=simulate,
    design={"holds": "every true exponent 0 (flat)", "fails": f"one case with true exponent −{3 * TOL:g}",
            "cases": SIM_CASES, "mc_se": SIM_SE},
),)
