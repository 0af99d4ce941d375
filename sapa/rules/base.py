"""The judgement layer's common types: a verdict rule, its calibration, and the verdict vocabularies.

A **rule** turns typed evidence into a verdict with a pure function ``decide(evidence) -> str``;
its thresholds are module constants declared once. Every rule also carries a ``simulate(truth,
rng) -> evidence`` that draws synthetic evidence *shaped like the real evidence* (same trial
counts, cluster structure, heavy tails) under a known truth:

* ``truth="holds"`` — the least favourable case in which the tested statement is still true
  (e.g. a growth exponent exactly at the tolerance edge); a ``FAILS`` there is a *false FAILS*;
* ``truth="fails"`` — the designed effect (the smallest violation the rule is built to see);
  any ``HOLDS*`` there is a *false HOLDS*, and ``FAILS`` is *power*.

:func:`calibrate` counts those rates; the targets are false FAILS ≤ 1 % and false HOLDS ≤ 5 %
(``sapa calibrate`` prints them; the ledger cites the calibration of the rule each reading used).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

CLAIM_VERDICTS = ("HOLDS", "HOLDS_LOOSE", "HOLDS_IN_REGIME", "FAILS", "UNDETERMINED")
QUESTION_VERDICTS = ("ANSWERED", "UNDETERMINED")
HOLDING = ("HOLDS", "HOLDS_LOOSE", "HOLDS_IN_REGIME")  # verdicts that say the statement is (partly) true

FALSE_FAILS_TARGET = 0.01
FALSE_HOLDS_TARGET = 0.05
EXACT_NOTE = "exact: no sampling error"  # what the ledger and `sapa calibrate` say of a rule on exact evidence


@dataclass(frozen=True)
class Rule:
    """A named, pure verdict rule with its synthetic-truth generator.

    Attributes:
      name: the id the ledger cites (``"growth-upper"``).
      summary: the rule in one sentence, thresholds included.
      thresholds: every constant the rule reads, by name (declared once, in the rule's module).
      decide: evidence → one of ``CLAIM_VERDICTS``.
      simulate: (truth ∈ {"holds", "fails"}, numpy Generator) → evidence of the same type.
      design: what "holds" (least favourable) and "fails" (designed effect) mean for this rule.
      trials: default number of synthetic evidences per truth in ``sapa calibrate``.
      evidence: ``"sampled"`` (Monte Carlo, bootstrap, timing: the calibration's rates are error rates) or
        ``"exact"`` (closed forms, sympy, float64 round-off far below the tolerance: there is no sampling error
        to calibrate, and the synthetic runs only check the decision logic — reported as :data:`EXACT_NOTE`).
    """

    name: str
    summary: str
    thresholds: dict
    decide: Callable[[Any], str]
    simulate: Callable[[str, np.random.Generator], Any]
    design: dict
    trials: int = 2000
    evidence: str = "sampled"


@dataclass(frozen=True)
class Calibration:
    """Measured error rates of one rule on synthetic evidence with a known truth."""

    rule: str
    false_fails_rate: float  # P(FAILS | statement true, least favourable case)
    false_holds_rate: float  # P(HOLDS* | designed effect)
    power: float             # P(FAILS | designed effect)
    undetermined_rate_null: float  # P(UNDETERMINED | statement true)
    trials: int
    seed: int
    meets_targets: bool
    design: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def calibrate(rule: Rule, trials: int | None = None, seed: int = 0) -> Calibration:
    """Run ``rule.decide`` on ``trials`` synthetic evidences per truth; count wrong verdicts."""
    from sapa.common.seeds import rng_for

    n = int(trials or rule.trials)
    null = [rule.decide(rule.simulate("holds", rng_for(seed, "calibrate", rule.name, "holds", k))) for k in range(n)]
    eff = [rule.decide(rule.simulate("fails", rng_for(seed, "calibrate", rule.name, "fails", k))) for k in range(n)]
    for v in null + eff:
        if v not in CLAIM_VERDICTS:
            raise ValueError(f"rule {rule.name} returned unknown verdict {v!r}")
    ff = sum(v == "FAILS" for v in null) / n
    fh = sum(v in HOLDING for v in eff) / n
    return Calibration(
        rule=rule.name, false_fails_rate=ff, false_holds_rate=fh, power=sum(v == "FAILS" for v in eff) / n,
        undetermined_rate_null=sum(v == "UNDETERMINED" for v in null) / n, trials=n, seed=seed,
        meets_targets=bool(ff <= FALSE_FAILS_TARGET and fh <= FALSE_HOLDS_TARGET), design=dict(rule.design),
    )
