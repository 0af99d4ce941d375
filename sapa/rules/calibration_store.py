"""Stored calibrations: calibrate(rule) at its default trials and seed 0, kept in ``calibrations.json``.

Calibrating every rule costs minutes (2 000 synthetic evidences per truth and rule, some of them
permutation tests), and a calibration is a pure function of what the rule computes. So the ledger
cites stored rates whose **fingerprint** matches the rule as it behaves now, and recalibrates only a
rule whose fingerprint changed. The fingerprint is of behaviour, not of text: a fixed seeded panel
(:data:`PANEL` synthetic evidences per truth from the rule's own ``simulate``, and the verdict ``decide``
gives each) in two parts, :class:`Fingerprint`:

* ``digest`` — sha256 of everything that is not a number: the rule's name, thresholds, design and trial
  count, the verdicts, and the panel's structure (field names, texts, flags, lengths) with each number
  replaced by a placeholder. Compared exactly.
* ``numbers`` — the panel's numbers in order, stored to :data:`STORED_DIGITS` significant digits. Two
  fingerprints agree when each pair is within ``RTOL·max(|a|, |b|) + ATOL`` (NaN with NaN, ±∞ with itself).

Why a tolerance and not the numbers to 9 digits, hashed (the old fingerprint): a hash of rounded numbers
changes whenever one number crosses a rounding boundary, however small the move, and the numbers move
from one numpy, scipy or BLAS build to the next — the censored trend's L-BFGS-B fits stop at a gradient
tolerance and its Wald se differentiates the log-likelihood numerically with step 10⁻⁴, so round-off
reaches ~10⁻⁸ there. Measured on this panel: numpy 2.2.6 / scipy 1.15.3 against 2.4.6 / 1.17.1 move
at most 6·10⁻⁹ relatively (1.5·10⁻⁹ absolutely; 9 digits could not hold, and did not), and starting every
L-BFGS-B fit 10⁻⁶ away moves at most 3.5·10⁻⁸ absolutely; every other rule's panel is bit-identical.
:data:`RTOL` = 10⁻⁵ and :data:`ATOL` = 10⁻⁶ sit ≥ 30× above both. They sit as far below anything that
matters: a change that moves every number of a rule's evidence by less than 10⁻⁵ can flip a verdict only
for an evidence within 10⁻⁵ of a threshold, an expected ~10⁻⁵·(density there) of the 2 000 a calibration
draws — far less than one count, when a rate's Monte Carlo resolution is one count in 1 000 — so the
stored rates stay the rule's rates; and a change of behaviour moves numbers far more (the test's − v/2
mutant moves an exponent estimate by 3·10⁻³, 300×) or flips a verdict, which the digest catches.
So the fingerprint moves when anything the rule computes moves, its dependencies included (a changed
estimator in ``sapa.empirics.montecarlo.stats`` changes ``growth-upper``'s evidence), and not when only a
comment, a docstring, an import path, a library release or a BLAS build does.

``sapa calibrate --store`` rewrites the file; a test requires every stored fingerprint to be
current, and a slow test recomputes every rule's rates at a fresh seed and compares them with the
stored ones within their Monte Carlo (binomial) error.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from sapa.rules.base import Calibration, Rule

__all__ = ["STORE", "Fingerprint", "fingerprint", "stored", "write_store", "RTOL", "ATOL"]

STORE = Path(__file__).with_name("calibrations.json")
SEED = 0  # the seed the ledger's calibrations use


PANEL = 4      # synthetic evidences per truth in the fingerprint
RTOL = 1e-5    # relative tolerance of a panel number (module docstring: ≥ 30× the round-off seen across releases)
ATOL = 1e-6    # absolute tolerance, for numbers near 0
STORED_DIGITS = 8  # significant digits a number is stored to (its rounding, ≤ 5·10⁻⁹, is 2 000× below RTOL)
_NUMBER = "#"  # the placeholder of a number in the digest


@dataclass(frozen=True, eq=False)
class Fingerprint:
    """A rule's behaviour on the panel: ``digest`` (sha256 of all but its numbers) and its ``numbers``, in order.

    ``==`` is agreement: the same digest and every number within ``RTOL·max(|a|, |b|) + ATOL``."""

    digest: str
    numbers: tuple[float, ...]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fingerprint):
            return NotImplemented
        return (self.digest == other.digest and len(self.numbers) == len(other.numbers)
                and all(_close(a, b) for a, b in zip(self.numbers, other.numbers)))

    __hash__ = None  # agreement within a tolerance is not an equivalence: no hash

    def as_json(self) -> dict:
        """``{"fingerprint": digest, "numbers": "n n …"}`` (numbers to STORED_DIGITS significant digits)."""
        return {"fingerprint": self.digest, "numbers": " ".join(f"{x:.{STORED_DIGITS}g}" for x in self.numbers)}

    @classmethod
    def from_json(cls, e: dict) -> Fingerprint:
        return cls(str(e["fingerprint"]), tuple(float(x) for x in str(e.get("numbers", "")).split()))


def _close(a: float, b: float) -> bool:
    """|a − b| ≤ RTOL·max(|a|, |b|) + ATOL; a NaN agrees with a NaN, an infinity with itself."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b or (math.isnan(a) and math.isnan(b))
    return abs(a - b) <= RTOL * max(abs(a), abs(b)) + ATOL


_CACHE: dict = {}


def fingerprint(rule: Rule) -> Fingerprint:
    """The rule's thresholds, design, trials and its behaviour on a fixed seeded panel (module docstring)."""
    key = (rule.name, rule.decide, rule.simulate, repr(rule.thresholds), repr(rule.design), rule.trials)
    if key not in _CACHE:  # the functions are module-level objects: one panel per rule and process
        _CACHE[key] = _fingerprint(rule)
    return _CACHE[key]


def _fingerprint(rule: Rule) -> Fingerprint:
    from sapa.common.seeds import rng_for

    panel, numbers = [], []
    for truth in ("holds", "fails"):
        for k in range(PANEL):
            ev = rule.simulate(truth, rng_for(SEED, "fingerprint", rule.name, truth, k))
            panel.append([truth, _split(ev, numbers), rule.decide(ev)])
    doc = {"thresholds": rule.thresholds, "design": rule.design, "trials": rule.trials, "name": rule.name,
           "panel": panel}
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode("utf-8")).hexdigest()
    return Fingerprint(digest, tuple(numbers))


def _split(v: object, numbers: list[float]) -> object:
    """``v`` as JSON-ready data with each number replaced by the placeholder and appended to ``numbers``.

    (Dataclasses, dicts, sequences and arrays are walked; bools, texts and None stay as they are.)"""
    import dataclasses

    import numpy as np

    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _split(getattr(v, f.name), numbers) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): _split(v[k], numbers) for k in v}
    if isinstance(v, (list, tuple)):
        return [_split(x, numbers) for x in v]
    if isinstance(v, np.ndarray):
        return [_split(x, numbers) for x in v.tolist()]
    if isinstance(v, (bool, np.bool_, str)) or v is None:
        return v if not isinstance(v, np.bool_) else bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        numbers.append(float(v))
        return _NUMBER
    return repr(v)


def _read(path: Path = STORE) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def stored(rule: Rule, path: Path = STORE) -> Calibration | None:
    """The stored calibration of ``rule`` if its fingerprint is current, else None."""
    e = _read(path).get(rule.name)
    if not isinstance(e, dict) or "fingerprint" not in e or Fingerprint.from_json(e) != fingerprint(rule):
        return None
    return Calibration(**e["calibration"])


def write_store(cals: list[tuple[Rule, Calibration]], path: Path = STORE) -> None:
    """Merge these (rule, calibration) pairs into the store, atomically."""
    from sapa.common.atomic import atomic_write_json

    data = _read(path)
    for rule, c in cals:
        if c.seed != SEED or c.trials != rule.trials:
            raise ValueError(f"only default calibrations are stored (seed {SEED}, {rule.trials} trials): {rule.name}")
        data[rule.name] = {**fingerprint(rule).as_json(), "calibration": c.as_dict()}
    atomic_write_json(path, dict(sorted(data.items())))
