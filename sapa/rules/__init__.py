"""Verdict rules of the claims ledger: pure ``decide(evidence)`` functions, each calibrated on synthetic truth.

Every reading of every ledger entry names the rule that decided it; ``sapa calibrate`` measures
each rule's false-FAILS and false-HOLDS rates and its power (targets: ≤ 1 %, ≤ 5 %).
"""

from __future__ import annotations

from functools import lru_cache

from sapa.rules.base import (CLAIM_VERDICTS, FALSE_FAILS_TARGET, FALSE_HOLDS_TARGET, HOLDING, QUESTION_VERDICTS,
                             Calibration, Rule, calibrate)


def all_rules() -> tuple[Rule, ...]:
    """Every rule, in the order ``sapa calibrate`` prints them: each module of this package that defines ``RULES``
    (a tuple of :class:`Rule`) contributes its rules, modules by name. Adding a rule is one module (or one entry of
    a module's ``RULES``) and ``sapa calibrate --rule NAME --store`` for the calibration the ledger cites."""
    import importlib
    import pkgutil

    import sapa.rules as package

    rules = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        rules.extend(getattr(importlib.import_module(f"sapa.rules.{info.name}"), "RULES", ()))
    return tuple(rules)


def rule_named(name: str) -> Rule:
    """The rule called ``name`` (KeyError with the known names otherwise)."""
    for r in all_rules():
        if r.name == name:
            return r
    raise KeyError(f"unknown rule {name!r}; known: {', '.join(r.name for r in all_rules())}")


@lru_cache(maxsize=None)
def cached_calibration(name: str, seed: int = 0) -> Calibration:
    """``calibrate(rule_named(name))`` at its default trial count: stored (:mod:`sapa.rules.calibration_store`) when current."""
    from sapa.rules.calibration_store import SEED, stored

    rule = rule_named(name)
    if seed == SEED:
        hit = stored(rule)
        if hit is not None:
            return hit
    return calibrate(rule, seed=seed)


__all__ = ["CLAIM_VERDICTS", "QUESTION_VERDICTS", "HOLDING", "FALSE_FAILS_TARGET", "FALSE_HOLDS_TARGET", "Rule",
           "Calibration", "calibrate", "all_rules", "rule_named", "cached_calibration"]
