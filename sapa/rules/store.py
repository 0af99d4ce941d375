"""Stored calibrations: calibrate(rule) at its default trials and seed 0, kept in ``calibrations.json``.

Calibrating every rule costs minutes (2 000 synthetic evidences per truth and rule, some of them
permutation tests), and a calibration is a pure function of the rule: its module's source, its
thresholds, design and trial count. So the ledger cites stored rates whose **fingerprint** (sha256
of those) matches the rule as it is now, and recalibrates only a rule whose fingerprint changed.
``sapa calibrate --store`` rewrites the file; a test requires every stored fingerprint to be
current, and a slow test recomputes every entry and compares it exactly.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

from sapa.rules.base import Calibration, Rule

__all__ = ["STORE", "fingerprint", "stored", "write_store"]

STORE = Path(__file__).with_name("calibrations.json")
SEED = 0  # the seed the ledger's calibrations use


def fingerprint(rule: Rule) -> str:
    """sha256 of the rule's module source, thresholds, design and default trial count."""
    src = Path(inspect.getsourcefile(rule.decide)).read_bytes()
    meta = json.dumps({"thresholds": rule.thresholds, "design": rule.design, "trials": rule.trials, "name": rule.name},
                      sort_keys=True, default=repr).encode("utf-8")
    return hashlib.sha256(src + b"\0" + meta).hexdigest()


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
