"""``bound``: a for-all-inputs bound ‖f(x)‖ ≤ C·g(N) (arXiv 2410.18613, Thm 4.1), judged with a sharp constant.

Evidence: the claimed constant C, the sharp constant C* proven by the theory (sup of ‖f‖/g), and
the largest ratio ‖f‖/g found numerically over random and adversarial inputs (with the round-off
allowance of that computation). Rule:

* ``FAILS`` if some input exceeds the claimed bound by more than round-off (found > C(1 + ε));
* ``UNDETERMINED`` if numerics exceed the proven sharp constant (theory and numerics disagree);
* ``HOLDS_LOOSE`` if C* < C(1 − LOOSE): true, but the claimed constant is more than LOOSE too big;
* ``HOLDS`` otherwise (true and sharp to within LOOSE).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sapa.rules.base import Rule

LOOSE = 0.05       # a claimed constant more than 5 % above the sharp one is "loose"
ROUNDOFF = 1e-9    # relative allowance for float64 evaluation of O(1) ratios
EFFECT = 0.01      # designed effect: the true supremum exceeds the claimed constant by 1 %


@dataclass(frozen=True)
class BoundEvidence:
    """Claimed constant, proven sharp constant (math.inf if none exists), largest ratio found."""

    claimed: float
    sharp: float
    found: float
    roundoff: float = ROUNDOFF


def decide(ev: BoundEvidence, loose: float = LOOSE) -> str:
    """FAILS / UNDETERMINED / HOLDS_LOOSE / HOLDS as in the module docstring (``loose`` varied only for robustness)."""
    if not math.isfinite(ev.found):
        return "UNDETERMINED"
    if ev.found > ev.claimed * (1 + ev.roundoff):
        return "FAILS"
    if ev.found > ev.sharp * (1 + ev.roundoff):
        return "UNDETERMINED"
    if ev.sharp < ev.claimed * (1 - loose):
        return "HOLDS_LOOSE"
    return "HOLDS"


def simulate(truth: str, rng: np.random.Generator) -> BoundEvidence:
    """A search that gets within a random 0–0.5 % of the true supremum; fails: sup = C(1 + EFFECT)."""
    claimed = float(rng.uniform(0.5, 2.0))
    sup = claimed if truth == "holds" else claimed * (1 + EFFECT)
    found = sup * (1 - rng.uniform(0, 0.005)) * (1 + 1e-15 * rng.standard_normal())
    sharp = sup if truth == "holds" else math.inf  # a wrong claim has no proof of a sharp constant ≤ C
    return BoundEvidence(claimed=claimed, sharp=sharp, found=found)


RULES = (Rule(
    name="bound",
    summary=f"for-all bound: FAILS if an input exceeds C(1+{ROUNDOFF:g}); UNDETERMINED if numerics exceed the proven "
            f"sharp constant; HOLDS_LOOSE if the sharp constant is < (1−{LOOSE})·C; else HOLDS",
    thresholds={"loose": LOOSE, "roundoff": ROUNDOFF},
    decide=decide,
    simulate=simulate,
    design={"holds": "sharp constant = claimed; search within 0.5 % of the supremum",
            "fails": f"true supremum {EFFECT:.0%} above the claimed constant"},
    evidence="exact",
),)
