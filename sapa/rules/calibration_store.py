"""Stored calibrations: calibrate(rule) at its default trials and seed 0, kept in ``calibrations.json``.

Calibrating every rule costs minutes (2 000 synthetic evidences per truth and rule, some of them
permutation tests), and a calibration is a pure function of what the rule computes. So the ledger
cites stored rates whose **fingerprint** matches the rule as it behaves now, and recalibrates only a
rule whose fingerprint changed. The fingerprint is of behaviour, not of text: sha256 of the rule's
thresholds, design and trial count, and of a fixed seeded panel (:data:`PANEL` synthetic evidences
per truth from the rule's own ``simulate``, each evidence's numbers to :data:`DIGITS` significant
digits, and the verdict ``decide`` gives it). So it moves when anything the rule computes moves,
its dependencies included (a changed estimator in ``empirics.montecarlo.stats`` changes
``growth-upper``'s evidence), and not when only a comment, a docstring or an import path does.
``sapa calibrate --store`` rewrites the file; a test requires every stored fingerprint to be
current, and a slow test recomputes every rule's rates at a fresh seed and compares them with the
stored ones within their Monte Carlo (binomial) error.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sapa.rules.base import Calibration, Rule

__all__ = ["STORE", "fingerprint", "stored", "write_store"]

STORE = Path(__file__).with_name("calibrations.json")
SEED = 0  # the seed the ledger's calibrations use


PANEL = 4      # synthetic evidences per truth in the fingerprint
DIGITS = 9     # significant digits of each number of an evidence (platform-stable, fine enough to see a change)


_CACHE: dict = {}


def fingerprint(rule: Rule) -> str:
    """sha256 of the rule's thresholds, design, trials and its behaviour on a fixed seeded panel (module docstring)."""
    key = (rule.name, rule.decide, rule.simulate, repr(rule.thresholds), repr(rule.design), rule.trials)
    if key not in _CACHE:  # the functions are module-level objects: one panel per rule and process
        _CACHE[key] = _fingerprint(rule)
    return _CACHE[key]


def _fingerprint(rule: Rule) -> str:
    from common.seeds import rng_for

    panel = []
    for truth in ("holds", "fails"):
        for k in range(PANEL):
            ev = rule.simulate(truth, rng_for(SEED, "fingerprint", rule.name, truth, k))
            panel.append([truth, _digest(ev), rule.decide(ev)])
    doc = {"thresholds": rule.thresholds, "design": rule.design, "trials": rule.trials, "name": rule.name,
           "panel": panel}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode("utf-8")).hexdigest()


def _digest(v: object) -> object:
    """``v`` as JSON-ready data with every number to DIGITS significant digits (dataclasses, dicts, sequences, arrays)."""
    import dataclasses

    import numpy as np

    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _digest(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): _digest(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_digest(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_digest(x) for x in v.tolist()]
    if isinstance(v, (bool, np.bool_, str)) or v is None:
        return v if not isinstance(v, np.bool_) else bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return f"{float(v):.{DIGITS}g}"
    return repr(v)


def _read(path: Path = STORE) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def stored(rule: Rule, path: Path = STORE) -> Calibration | None:
    """The stored calibration of ``rule`` if its fingerprint is current, else None."""
    e = _read(path).get(rule.name)
    if not isinstance(e, dict) or e.get("fingerprint") != fingerprint(rule):
        return None
    c = e["calibration"]
    return Calibration(**c)


def write_store(cals: list[tuple[Rule, Calibration]], path: Path = STORE) -> None:
    """Merge these (rule, calibration) pairs into the store, atomically."""
    from common.atomic import atomic_write_json

    data = _read(path)
    for rule, c in cals:
        if c.seed != SEED or c.trials != rule.trials:
            raise ValueError(f"only default calibrations are stored (seed {SEED}, {rule.trials} trials): {rule.name}")
        data[rule.name] = {"fingerprint": fingerprint(rule), "calibration": c.as_dict()}
    atomic_write_json(path, dict(sorted(data.items())))
