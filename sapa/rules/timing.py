"""``timing-ratio``: is one implementation within a factor of another? (the reviewers' runtime question).

Evidence: per cell, the candidate/reference ratio in each of ≥ ``MIN_ROUNDS`` interleaved rounds (round r
times one block of calls of every method, in a shuffled order, so a burst of load hits all alike), measured in one
run on one machine, on the clock the evidence names, and that machine's state: its cores and its load.

* **Clock.** On a CPU clock (``process`` or ``thread`` CPU time) a competing process costs wall time, not CPU time:
  the load is recorded, never a gate, and the band is NOISE_CPU (±15 %: the CPU-time rounds of one cell agree to a
  few per cent, and the band also covers the drift of a ratio between runs). On the wall clock the band is NOISE
  (±40 %) and the load gate applies.
* **Load gate (wall clock only).** If the load (the mean number of runnable tasks sampled during the timings, the
  timed work included; for data stored without it, the larger 1-minute load average before or after) exceeds the
  cores, every timing competes for a core: the reading is ``UNDETERMINED`` with that reason, whatever the ratios say.
* **Round gate.** A cell's between-round interval is [min, max] of its per-round ratios; with ≥ 5 rounds on a CPU
  clock, of the rounds left when the single lowest and highest are set aside (one block hit by a cache flush or a
  frequency step does not speak for the cell). If the interval's max/min > (1 + band)² in any measured cell, or a
  cell has fewer than ``MIN_ROUNDS`` rounds, the reading is ``UNDETERMINED`` with that reason.
* Otherwise a cell is *within* if its median round ratio is ≤ FACTOR/(1 + band) and its interval ≤
  FACTOR·(1 + band); *outside* if its median is > FACTOR·(1 + band) and its interval > FACTOR; *marginal*
  otherwise. The statement "within FACTOR in every cell": ``HOLDS`` if every measured cell is within;
  ``FAILS`` if none is within and some are outside; ``HOLDS_IN_REGIME`` if some are within and some outside
  (the regime: the cells within); ``UNDETERMINED`` otherwise.

:func:`why` says which gate or which cells decided, in one line. The calibration simulates the ledger's design:
CPU-clock rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sapa.rules.base import Rule

FACTOR = 1.5        # the ledger's default factor (a reading may ask for another: TimingEvidence.factor)
NOISE = 0.4         # wall clock: the rounds of one cell may differ by ±40 % about their centre
NOISE_CPU = 0.15    # CPU clock: ±15 % (measured rounds agree to ≲ 5 %; the rest covers drift between runs)
CPU_CLOCKS = ("process", "thread")
MIN_ROUNDS = 5      # rounds per cell the rule needs
SIM_CELLS = 16      # (mask, pass, N) cells per p in the quick grid
SIM_SPREAD = 0.10   # log-normal σ of a cell's true ratio around the claimed one (between cells)
SIM_ROUND = 0.03    # log-normal σ of one CPU-time round's ratio around its cell's (1 thread; interleaved blocks)
SIM_OUTLIER = 0.25  # one round in each cell is off by up to ±25 % (a block hit by a cache flush)


@dataclass(frozen=True)
class TimingEvidence:
    """Per cell: (name, per-round ratios; empty when the cell could not be timed); the factor; the machine state."""

    cells: tuple[tuple[str, tuple[float, ...]], ...]
    factor: float = FACTOR
    load: float | None = None     # runnable tasks during the timings (mean), or the 1-minute load average
    cores: int | None = None      # usable cores of the machine
    clock: str = "wall"           # "process" | "thread" (CPU time) | "wall"


def band(ev: TimingEvidence) -> float:
    """The declared band of ``ev``'s clock: NOISE_CPU on a CPU clock, NOISE on the wall clock."""
    return NOISE_CPU if ev.clock in CPU_CLOCKS else NOISE


def interval(rounds, trim: bool = False) -> tuple[float, float] | None:
    """The between-round interval [min, max] of a cell's per-round ratios (None: not timed); ``trim`` with ≥ 5
    rounds: of the rounds left without the single lowest and highest."""
    r = sorted(float(x) for x in (rounds or ()) if x is not None and math.isfinite(x) and x > 0)
    if trim and len(r) >= 5:
        r = r[1:-1]
    return (r[0], r[-1]) if r else None


def cell_class(rounds, factor: float = FACTOR, noise: float = NOISE, trim: bool = False) -> str:
    """'within', 'outside', 'marginal', 'unsteady' (rounds disagree beyond the band, or too few) or 'unmeasured'."""
    iv = interval(rounds, trim)
    if iv is None:
        return "unmeasured"
    lo, hi = iv
    if len(rounds) < MIN_ROUNDS or hi / lo > (1 + noise) ** 2:
        return "unsteady"
    med = float(np.median([float(x) for x in rounds]))
    if med <= factor / (1 + noise) and hi <= factor * (1 + noise):
        return "within"
    if med > factor * (1 + noise) and lo > factor:
        return "outside"
    return "marginal"


def _classes(ev: TimingEvidence, factor: float) -> dict[str, str]:
    cpu = ev.clock in CPU_CLOCKS
    return {name: cell_class(r, factor, band(ev), trim=cpu) for name, r in ev.cells}


def overloaded(ev: TimingEvidence) -> bool:
    """True when the machine's load during wall-clock timings exceeds its cores (a CPU clock has no load gate)."""
    return ev.clock not in CPU_CLOCKS and ev.load is not None and ev.cores is not None and ev.load > ev.cores


def decide(ev: TimingEvidence, factor: float | None = None) -> str:
    """Load gate, round gate, then HOLDS / FAILS / HOLDS_IN_REGIME / UNDETERMINED as the module docstring says."""
    if overloaded(ev):
        return "UNDETERMINED"
    f = ev.factor if factor is None else factor
    cls = list(_classes(ev, f).values())
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
    cls = _classes(ev, f)
    trim, noise = ev.clock in CPU_CLOCKS, band(ev)
    bad = [n for n, c in cls.items() if c == "unsteady"]
    ivs = [interval(r, trim) for _, r in ev.cells if interval(r, trim) is not None]
    what = f"{ev.clock} CPU-time" if trim else "wall-clock"
    rng = f"{what} round ratios {min(a for a, _ in ivs):.2f}–{max(b for _, b in ivs):.2f}" if ivs else "no cell measured"
    if bad:
        worst = max(bad, key=lambda n: (lambda iv: iv[1] / iv[0])(interval(dict(ev.cells)[n], trim)))
        lo, hi = interval(dict(ev.cells)[worst], trim)
        return (f"{rng}; rounds disagree beyond ±{noise:.0%} (or fewer than {MIN_ROUNDS} rounds) in {len(bad)} cell(s), "
                f"worst {worst}: {lo:.2f}–{hi:.2f} (round gate)")
    counts = {k: list(cls.values()).count(k) for k in ("within", "marginal", "outside", "unmeasured")}
    text = (f"{rng}; within {counts['within']}, marginal {counts['marginal']}, outside {counts['outside']}, "
            f"unmeasured {counts['unmeasured']} (median and between-round interval against {f:g}, band ±{noise:.0%})")
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
    """holds: every true ratio exactly FACTOR (the edge); fails: 2·FACTOR; CPU-clock rounds with log-normal spread and
    one outlier round per cell, on a loaded machine (load 6 on 2 cores: a CPU clock has no load gate)."""
    true = FACTOR if truth == "holds" else 2 * FACTOR
    cells = []
    for k in range(SIM_CELLS):
        c = true * math.exp(SIM_SPREAD * rng.standard_normal()) if truth == "fails" else true
        r = [float(c * math.exp(SIM_ROUND * z)) for z in rng.standard_normal(MIN_ROUNDS)]
        r[int(rng.integers(MIN_ROUNDS))] *= 1 + SIM_OUTLIER * float(rng.uniform(-1, 1))
        cells.append((f"cell{k}", tuple(r)))
    return TimingEvidence(tuple(cells), load=6.0, cores=2, clock="process")


RULES = (Rule(
    name="timing-ratio",
    summary=f"within {FACTOR}× per cell if the median of ≥ {MIN_ROUNDS} round ratios ≤ {FACTOR}/(1+band) (the "
            f"interval ≤ {FACTOR}·(1+band)), outside if the median > {FACTOR}·(1+band) (the interval > {FACTOR}); band "
            f"±{NOISE_CPU:.0%} on a CPU clock (the interval without the lowest and highest round), ±{NOISE:.0%} on the "
            "wall clock (which also has a load gate); UNDETERMINED when a cell's rounds disagree beyond the band; "
            "HOLDS all within, FAILS none within, HOLDS_IN_REGIME mixed",
    thresholds={"factor": FACTOR, "noise_cpu": NOISE_CPU, "noise_wall": NOISE, "min_rounds": MIN_ROUNDS},
    decide=decide,
    simulate=simulate,
    design={"holds": f"every true ratio = {FACTOR} (the edge)", "fails": f"every true ratio = {2 * FACTOR}, "
            f"log-normal σ = {SIM_SPREAD} between cells", "rounds": f"{MIN_ROUNDS} on the process CPU clock, log-normal "
            f"σ = {SIM_ROUND} each, one of them off by up to ±{SIM_OUTLIER:.0%}",
            "cells": SIM_CELLS, "machine": "loaded (load 6 on 2 cores; no load gate on a CPU clock)"},
),)
