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
LEVEL = 0.99       # two-sided level of the Monte Carlo intervals the evidence carries
FAMILY = 0.005     # false FAILS over all cases (half the 1 % target): each of k sampled intervals is widened to one-sided FAMILY/k
SIM_CASES = 8      # 2 models × 2 powers × 2 criteria, as in the ledger
SIM_SE = 0.02      # standard error of a Monte Carlo exponent (typical criterion), half the cases exact


@dataclass(frozen=True)
class DirectionEvidence:
    """Per case: (name, lo, hi) of the exponent b in s(N) ∝ N^b."""

    cases: tuple[tuple[str, float, float], ...]


def case_direction(lo: float, hi: float, tol: float = TOL) -> str:
    """'decreases' (lo > tol), 'increases' (hi < −tol), 'flat' (within ±tol) or 'unresolved'."""
    if lo > tol:
        return "decreases"
    if hi < -tol:
        return "increases"
    if -tol <= lo and hi <= tol:
        return "flat"
    return "unresolved"


def family_intervals(cases) -> list[tuple[float, float]]:
    """Sampled (non-zero-width) intervals widened about their centre so that the k of them together keep false FAILS
    ≤ FAMILY: half-width × z(1 − FAMILY/k)/z(½ + LEVEL/2) (never narrowed); exact (zero-width) cases unchanged."""
    from scipy.stats import norm

    k = sum(hi > lo for _, lo, hi in cases)
    f = max(1.0, float(norm.ppf(1 - FAMILY / k) / norm.ppf(0.5 + LEVEL / 2))) if k else 1.0
    return [(lo, hi) if hi <= lo else ((lo + hi) / 2 - f * (hi - lo) / 2, (lo + hi) / 2 + f * (hi - lo) / 2)
            for _, lo, hi in cases]


def decide(ev: DirectionEvidence, tol: float = TOL) -> str:
    """FAILS if some case increases; HOLDS if all decrease; HOLDS_IN_REGIME if decrease/flat; else UNDETERMINED."""
    dirs = [case_direction(lo, hi, tol) for lo, hi in family_intervals(ev.cases)]
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
    """holds: every Monte Carlo case at the edge b = −TOL (flat, least favourable), exact cases flat (b = 0);
    fails: one case with b = −3·TOL.

    Half the cases carry a 99 % interval b̂ ± 2.576·SE (Monte Carlo: the perturbation the real evidence has),
    half are exact (zero width: a zero-width value exactly at the edge is decided by the tolerance's own
    definition, not by noise, so they sit at b = 0).
    """
    b = np.zeros(SIM_CASES)
    b[1::2] = -TOL if truth == "holds" else 0.0
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
    thresholds={"tolerance": TOL, "interval_level": LEVEL, "family_false_fails": FAMILY},
    decide=decide,
    simulate=simulate,
    design={"holds": f"Monte Carlo cases at the edge b = −{TOL} (flat), exact cases at 0", "fails": f"one case with true exponent −{3 * TOL:g}",
            "cases": SIM_CASES, "mc_se": SIM_SE},
),)
