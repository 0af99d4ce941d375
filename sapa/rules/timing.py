"""``timing-ratio``: is one implementation within a factor of another? (the reviewers' runtime question).

Evidence: per cell, the candidate/reference ratio in each of ≥ ``MIN_ROUNDS`` interleaved rounds (round r
times every method once, in turn, so a burst of load hits all alike), measured in one run on one machine,
and that machine's state: its cores and its load while the timings ran.

* **Load gate.** If the load (the mean number of runnable tasks sampled during the timings, the timed work
  included; for data stored without it, the larger 1-minute load average before or after) exceeds the cores,
  every timing competes for a core: the reading is ``UNDETERMINED`` with that reason, whatever the ratios say.
* **Round gate.** A cell's between-round interval is [min, max] of its per-round ratios. If the rounds
  disagree beyond the declared band — max/min > (1 + NOISE)² (±NOISE about their geometric centre) — in any
  measured cell, or a cell has fewer than ``MIN_ROUNDS`` rounds, the reading is ``UNDETERMINED`` with that reason.
* Otherwise a cell is *within* if its median round ratio is ≤ FACTOR/(1 + NOISE) and its whole interval ≤
  FACTOR·(1 + NOISE); *outside* if its median is > FACTOR·(1 + NOISE) and its whole interval > FACTOR; *marginal*
  otherwise (the band NOISE also covers the drift of a ratio between runs, which one run's rounds cannot show). The statement "within FACTOR in every cell": ``HOLDS`` if every measured cell is within;
  ``FAILS`` if none is within and some are outside; ``HOLDS_IN_REGIME`` if some are within and some outside
  (the regime: the cells within); ``UNDETERMINED`` otherwise.

:func:`why` says which gate or which cells decided, in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sapa.rules.base import Rule

FACTOR = 1.5        # the ledger's default factor (a reading may ask for another: TimingEvidence.factor)
NOISE = 0.4         # declared band: the rounds of one cell may differ by ±40 % about their centre
MIN_ROUNDS = 5      # rounds per cell the rule needs
SIM_CELLS = 16      # (mask, pass, N) cells per p in the quick grid
SIM_SPREAD = 0.10   # log-normal σ of a cell's true ratio around the claimed one (between cells)
SIM_ROUND = 0.06    # log-normal σ of one round's ratio around its cell's (quiet machine, 1 thread; interleaved)


@dataclass(frozen=True)
class TimingEvidence:
    """Per cell: (name, per-round ratios; empty when the cell could not be timed); the factor; the machine state."""

    cells: tuple[tuple[str, tuple[float, ...]], ...]
    factor: float = FACTOR
    load: float | None = None     # runnable tasks during the timings (mean), or the 1-minute load average
    cores: int | None = None      # usable cores of the machine


def interval(rounds) -> tuple[float, float] | None:
    """The between-round interval [min, max] of a cell's per-round ratios (None: not timed)."""
    r = [float(x) for x in (rounds or ()) if x is not None and math.isfinite(x) and x > 0]
    return (min(r), max(r)) if r else None


def cell_class(rounds, factor: float = FACTOR) -> str:
    """'within', 'outside', 'marginal', 'unsteady' (rounds disagree beyond the band, or too few) or 'unmeasured'."""
    iv = interval(rounds)
    if iv is None:
        return "unmeasured"
    lo, hi = iv
    if len(rounds) < MIN_ROUNDS or hi / lo > (1 + NOISE) ** 2:
        return "unsteady"
    med = float(np.median([float(x) for x in rounds]))
    if med <= factor / (1 + NOISE) and hi <= factor * (1 + NOISE):
        return "within"
    if med > factor * (1 + NOISE) and lo > factor:
        return "outside"
    return "marginal"


def overloaded(ev: TimingEvidence) -> bool:
    """True when the machine's load during the timings exceeds its cores."""
    return ev.load is not None and ev.cores is not None and ev.load > ev.cores


def decide(ev: TimingEvidence, factor: float | None = None) -> str:
    """Load gate, round gate, then HOLDS / FAILS / HOLDS_IN_REGIME / UNDETERMINED as the module docstring says."""
    if overloaded(ev):
        return "UNDETERMINED"
    f = ev.factor if factor is None else factor
    cls = [cell_class(r, f) for _, r in ev.cells]
    if "unsteady" in cls:
        return "UNDETERMINED"
    measured = [c for c in cls if c != "unmeasured"]
    if measured and all(c == "within" for c in measured) and len(measured) == len(cls):
        return "HOLDS"
    if "within" in cls and "outside" in cls:
        return "HOLDS_IN_REGIME"
    if "outside" in cls and "within" not in cls:
        return "FAILS"
    return "UNDETERMINED"


def why(ev: TimingEvidence, factor: float | None = None) -> str:
    """The decisive numbers in one line: the gate that stopped the reading, or the counts of cells per class."""
    f = ev.factor if factor is None else factor
    if overloaded(ev):
        return f"machine load {ev.load:.2f} exceeds its {ev.cores} cores: timings compete for a core (load gate)"
    cls = {name: cell_class(r, f) for name, r in ev.cells}
    bad = [n for n, c in cls.items() if c == "unsteady"]
    ivs = [interval(r) for _, r in ev.cells if interval(r) is not None]
    rng = f"round ratios {min(a for a, _ in ivs):.2f}–{max(b for _, b in ivs):.2f}" if ivs else "no cell measured"
    if bad:
        worst = max(bad, key=lambda n: (lambda iv: iv[1] / iv[0])(interval(dict(ev.cells)[n])))
        lo, hi = interval(dict(ev.cells)[worst])
        return (f"{rng}; rounds disagree beyond ±{NOISE:.0%} (or fewer than {MIN_ROUNDS} rounds) in {len(bad)} cell(s), "
                f"worst {worst}: {lo:.2f}–{hi:.2f} (round gate)")
    counts = {k: list(cls.values()).count(k) for k in ("within", "marginal", "outside", "unmeasured")}
    text = (f"{rng}; within {counts['within']}, marginal {counts['marginal']}, outside {counts['outside']}, "
            f"unmeasured {counts['unmeasured']} (median and between-round interval against {f:g}, band ±{NOISE:.0%})")
    verdict = decide(ev, f)
    if verdict == "HOLDS_IN_REGIME":  # the regime: the cells within
        text += f"; holds in the cells within: {_names(cls, 'within')}"
    elif verdict == "FAILS":          # what failed: the cells outside
        text += f"; fails in the cells outside: {_names(cls, 'outside')}"
    return text


def _names(cls: dict, kind: str, most: int = 6) -> str:
    """The names of the cells of class ``kind``, the first ``most`` of them ('a, b, … (+3 more)')."""
    names = [n for n, c in cls.items() if c == kind]
    return ", ".join(names[:most]) + (f", … (+{len(names) - most} more)" if len(names) > most else "")


def simulate(truth: str, rng: np.random.Generator) -> TimingEvidence:
    """holds: every true ratio exactly FACTOR (the edge); fails: 2·FACTOR; per-round log-normal spread, quiet machine."""
    true = FACTOR if truth == "holds" else 2 * FACTOR
    cells = []
    for k in range(SIM_CELLS):
        c = true * math.exp(SIM_SPREAD * rng.standard_normal()) if truth == "fails" else true
        cells.append((f"cell{k}", tuple(float(c * math.exp(SIM_ROUND * z)) for z in rng.standard_normal(MIN_ROUNDS))))
    return TimingEvidence(tuple(cells), load=0.5, cores=2)


RULES = (Rule(
    name="timing-ratio",
    summary=f"within {FACTOR}× per cell if the median of ≥ {MIN_ROUNDS} round ratios ≤ {FACTOR}/(1+{NOISE}) (all ≤ "
            f"{FACTOR}·(1+{NOISE})), outside if the median > {FACTOR}·(1+{NOISE}) (all > {FACTOR}); UNDETERMINED when the load exceeds the cores or a cell's rounds disagree beyond ±{NOISE:.0%}; "
            "HOLDS all within, FAILS none within, HOLDS_IN_REGIME mixed",
    thresholds={"factor": FACTOR, "noise": NOISE, "min_rounds": MIN_ROUNDS},
    decide=decide,
    simulate=simulate,
    design={"holds": f"every true ratio = {FACTOR} (the edge)", "fails": f"every true ratio = {2 * FACTOR}, "
            f"log-normal σ = {SIM_SPREAD} between cells", "rounds": f"{MIN_ROUNDS}, log-normal σ = {SIM_ROUND} each",
            "cells": SIM_CELLS, "machine": "quiet (load 0.5 on 2 cores)"},
),)
