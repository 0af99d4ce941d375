"""``mc-agreement``: do Monte Carlo intervals cover the exact values as often as their nominal level says?

Evidence: a family of n first-pass comparisons (each a nominal-level interval from Monte Carlo that
should contain an exact value) of which k missed. Under honest intervals k ~ Binom(n, 1 − nominal).
``FAILS`` (Monte Carlo and exact theory disagree) if P(Binom(n, 1 − nominal) ≥ k) < ALPHA;
``HOLDS`` otherwise. A claim whose Monte Carlo disagrees with its exact theory is UNDETERMINED.

Count *independent* comparisons: two intervals from the same Monte Carlo draws (x³/√N and x³ are
one sample times a coefficient) miss together, and counting both doubles the miss count (with 28
such pairs, one honest miss in 28 would read as k = 2 of 56, and P(FAILS) under honest intervals
would be 3 % instead of ≤ 1 %). ``sapa.evidence.monte_carlo.monte_carlo_summary(ctx)["independent"]`` has the counts.

Calibration (binomial, exact): with n = 56 the gate FAILS from k ≥ 4 misses: false FAILS 0.24 %,
false HOLDS 2.4 % at the designed effect (actual coverage 85 %). A coverage of 90 % is caught only
82 % of the time at this n (false HOLDS 17.6 %; the gate needs n ≳ 100 for that):
``calibrate`` with ``simulate(truth, rng, bad_coverage=0.90)`` measures it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from sapa.rules.base import Rule

ALPHA = 0.01           # false-disagreement rate of the gate
SIM_SERIES = 56        # independent comparisons in the ledger (28 growth series + fig1 + causal checks)
SIM_NOMINAL = 0.99
SIM_BAD_COVERAGE = 0.85  # designed effect: intervals that cover only 85 % (power ≥ 95 % at n = 56)


@dataclass(frozen=True)
class AgreementEvidence:
    """n independent first-pass comparisons at a nominal level, ``missed`` of them missed."""

    n: int
    missed: int
    nominal: float


def tail_p(ev: AgreementEvidence) -> float:
    """P(Binom(n, 1 − nominal) ≥ k)."""
    if ev.missed <= 0:
        return 1.0
    return float(stats.binom.sf(ev.missed - 1, ev.n, 1.0 - ev.nominal))


def decide(ev: AgreementEvidence) -> str:
    """FAILS if the miss count is improbable for honest intervals (tail p < ALPHA); HOLDS otherwise."""
    if ev.n <= 0:
        return "UNDETERMINED"
    return "FAILS" if tail_p(ev) < ALPHA else "HOLDS"


def simulate(truth: str, rng: np.random.Generator, *, bad_coverage: float = SIM_BAD_COVERAGE) -> AgreementEvidence:
    """k ~ Binom(n, 1 − c): holds c = nominal (honest 99 % intervals); fails c = ``bad_coverage`` (85 %)."""
    cover = SIM_NOMINAL if truth == "holds" else bad_coverage
    return AgreementEvidence(SIM_SERIES, int(rng.binomial(SIM_SERIES, 1 - cover)), SIM_NOMINAL)



RULES = (Rule(
    name="mc-agreement",
    summary=f"Monte Carlo agrees with exact theory unless the first-pass miss count has binomial tail p < {ALPHA}",
    thresholds={"alpha": ALPHA},
    decide=decide,
    simulate=simulate,
    design={"holds": f"{SIM_SERIES} independent honest {SIM_NOMINAL:.0%} intervals: misses ~ Binom({SIM_SERIES}, "
                     f"{1 - SIM_NOMINAL:.2f})", "fails": f"actual coverage {SIM_BAD_COVERAGE:.0%}"},
    trials=4000,
),)
