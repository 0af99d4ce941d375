"""``timing-ratio``: is log(ratio) < log(FACTOR)? A t-test on a cell's rounds plus the between-run drift σ_b.

Evidence: per cell, the candidate/reference ratio in each of ≥ ``MIN_ROUNDS`` interleaved rounds of one run (round
r times one block of calls of every method, in a shuffled order, so a burst of load hits all alike), on the clock
the evidence names; for a cell the first run leaves undecided, the rounds of further runs, each in a fresh process;
and the machine's state: its cores and its load.

* **Model.** In log ratios, round i of run j is x_{j,i} = μ + b_j + e_{j,i}: the rounds of one run share that
  run's drift b_j ~ (0, σ_b²) (one memory layout, one CPU state, one moment of the machine, and what the machine's
  other processes do), and only fresh runs average it away. σ_b is declared per clock (``DRIFT``), measured by
  :mod:`sapa.empirics.timing.drift` across machine states: five stored runs of the quick grid in each of a quiet machine,
  a compute load and a memory-bandwidth load, each run in its own process (a test recomputes it; a quiet machine's
  drift alone, ``DRIFT_QUIET``, is a robustness row); e's variance is the cell's own pooled
  within-run variance s². With K runs of R_j rounds, the estimate is the mean m of the run means and
  se² = Σ_j (s²/R_j + σ_b²)/K², on Welch–Satterthwaite degrees of freedom (σ_b counted as known).
* **Two looks.** A cell is tested on its first run, and — if that leaves it marginal and further runs exist — on
  all its runs; its p-value is twice the smaller of its looks' (Bonferroni over the two looks), so stopping after
  one look or going on to the second cannot inflate an error rate. When the further runs time k candidate forms
  of the cell and the form is chosen on all runs (the claim's second look: the first run's choice can be a
  disturbed block's), p(within) is also multiplied by k (Bonferroni over the forms: "some form is within").
* **A cell** is *within* if p(H₀: ratio ≥ FACTOR) ≤ ALPHA_HOLDS; *outside* if p(H₀: ratio ≤ FACTOR) survives Holm
  over the reading's cells at ALPHA_FAILS; *marginal* otherwise; *short* with fewer than MIN_ROUNDS rounds in its
  first run; *unmeasured* without rounds.
* **The reading** "within FACTOR in every cell" (an intersection-union test: each cell at level ALPHA_HOLDS is a
  level-ALPHA_HOLDS test of "every cell"): ``HOLDS`` if every cell is within; ``FAILS`` if some are outside and
  none within; ``HOLDS_IN_REGIME`` if some are within and some outside (the regime: the cells within);
  ``UNDETERMINED`` otherwise, or when a cell is short.
* **Load gate (wall clock only).** On a CPU clock a neighbour that only computes costs wall time, not CPU time,
  but one that saturates the memory bus costs CPU time too — unequally, since the form that streams an N×N matrix
  stalls on memory and the fused kernel hardly does: that is what measuring σ_b across machine states covers. The
  load is recorded, never a gate, on a CPU clock. On the wall clock, if the load (mean runnable tasks during the
  timings) exceeds the cores, every reading is ``UNDETERMINED`` whatever the ratios say.

:func:`why` says which cells decided, in one line; for an undecided reading, the power of the design at the
observed ratio of its hardest cell and the runs that would reach POWER_TARGET (:func:`runs_to_decide`). More
runs always decide a cell whose true ratio is not exactly FACTOR: the drift falls as σ_b/√K.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from sapa.empirics.training.censored_trend import holm, smallest_count
from sapa.rules.base import Rule

FACTOR = 1.5          # the ledger's default factor (a reading may ask for another: TimingEvidence.factor)
ALPHA_HOLDS = 0.05    # a cell is within at this one-sided level (the ledger's false-HOLDS target)
ALPHA_FAILS = 0.01    # cells outside: Holm over the reading's cells at this family-wise level (false-FAILS target)
LOOKS = 2             # first run, then all runs: a cell's p-value is LOOKS × the smaller of its looks'
# σ_b of a log ratio between runs, per clock: sapa.empirics.timing.drift over empirics/data/overhead_repeat_runs.json,
# series "machine-states" (5 runs in each of quiet, compute load, memory-bandwidth load × 36 cells × 5 rounds; pooled
# moment estimate, its 95 % bootstrap upper bound beside it); DRIFT_QUIET: series "quiet-7" (7 quiet runs), a
# robustness row. CUDA events ("cuda_event"): no GPU runs are stored, so the wall clock's drift, the largest
# measured, stands in for it until they are
DRIFT = {"process": 0.038, "thread": 0.038, "wall": 0.086, "cuda_event": 0.086}
DRIFT_UPPER = {"process": 0.045, "thread": 0.045, "wall": 0.108, "cuda_event": 0.108}
DRIFT_QUIET = {"process": 0.025, "thread": 0.025, "wall": 0.030, "cuda_event": 0.030}
CPU_CLOCKS = ("process", "thread")
MIN_ROUNDS = 5        # rounds per cell the first run needs
EXTRA_RUNS = 3        # further runs, each in a fresh process, for a cell the first look leaves marginal
POWER_TARGET = 0.8    # "the runs that would decide it": the fewest with this power at the observed ratio
MAX_RUNS = 1000       # beyond this many runs a reading is "out of reach"
SIM_CELLS = 16        # (mask, pass, N) cells per p in the quick grid
SIM_SPREAD = 0.10     # log-normal σ of a cell's true ratio around the claimed one (between cells)
SIM_ROUND = 0.05      # log-normal σ of one CPU-time round (measured: 0.054 pooled, outliers included)
SIM_OUTLIER = 0.25    # one round in each run of a cell is off by up to ±25 % (a block hit by a cache flush)


@dataclass(frozen=True)
class TimingEvidence:
    """Per cell: (name, rounds), the rounds one run's tuple of ratios or a tuple of runs' tuples (first run first;
    empty when the cell could not be timed); the factor; the machine state; the drift (None: the clock's DRIFT)."""

    cells: tuple[tuple[str, tuple], ...]
    factor: float = FACTOR
    load: float | None = None     # runnable tasks during the timings (mean), or the 1-minute load average
    cores: int | None = None      # usable cores of the machine
    clock: str = "wall"           # "process" | "thread" (CPU time) | "wall" | "cuda_event" (CUDA events)
    drift: float | None = None    # σ_b override (the robustness row at DRIFT_UPPER)
    choices: tuple[tuple[str, int], ...] = ()  # (cell, k): its runs are the form the second look chose among k


@dataclass(frozen=True)
class CellTest:
    """One cell's test: the estimate m = mean log ratio, its se and df, the runs and rounds behind it, and the
    looks-adjusted one-sided p-values of "ratio ≥ factor" (small: within) and "ratio ≤ factor" (small: outside)."""

    m: float
    se: float
    df: float
    runs: int
    rounds: int
    p_within: float
    p_outside: float
    s2: float           # pooled within-run variance of one round's log ratio
    drift: float        # σ_b

    @property
    def per_run_var(self) -> float:
        """s²/R + σ_b²: the variance of one run's mean, which K runs divide by K."""
        return self.s2 / self.rounds + self.drift**2

    def df_at(self, runs: int) -> float:
        """Welch–Satterthwaite degrees of freedom of ``runs`` runs of this cell's rounds (σ_b known)."""
        within = self.s2 / self.rounds / runs
        return math.inf if within <= 0 else (self.per_run_var / runs) ** 2 / (within**2 / (runs * (self.rounds - 1)))


def drift_of(ev: TimingEvidence) -> float:
    """σ_b of ``ev``: its override, else the declared drift of its clock."""
    return DRIFT[ev.clock] if ev.drift is None else float(ev.drift)


def runs_of(rounds) -> tuple[tuple[float, ...], ...]:
    """A cell's rounds as runs of positive finite ratios: one run's flat tuple, or a tuple of runs (empty runs kept)."""
    rounds = tuple(rounds or ())
    nested = rounds and all(isinstance(r, (tuple, list)) for r in rounds)
    runs = rounds if nested else (rounds,)
    return tuple(tuple(float(x) for x in r if x is not None and math.isfinite(x) and x > 0) for r in runs)


def _look(runs: tuple[tuple[float, ...], ...], factor: float, drift: float) -> tuple[float, float, float, float, float,
                                                                                       float]:
    """(m, se, df, p(ratio ≥ factor), p(ratio ≤ factor), s²) from the runs (each ≥ 2 rounds)."""
    logs = [[math.log(x) for x in r] for r in runs]
    means = [_mean(x) for x in logs]
    K = len(logs)
    df_w = sum(len(x) - 1 for x in logs)
    s2 = math.fsum((v - mu) ** 2 for x, mu in zip(logs, means) for v in x) / df_w  # pooled within-run variance
    m = _mean(means)
    within = sum(s2 / len(x) for x in logs) / K**2
    var = within + drift**2 / K
    d = math.log(factor) - m
    if var <= 0:  # identical rounds and no drift: the sign decides exactly
        return m, 0.0, math.inf, float(d <= 0), float(d >= 0), s2
    se = math.sqrt(var)
    df = var**2 / (within**2 / df_w) if within > 0 else math.inf
    t = d / se
    return m, se, df, float(special.stdtr(df, -t)), float(special.stdtr(df, t)), s2  # Student t sf and cdf at t


def _mean(x: list[float]) -> float:
    """The mean, and exactly the common value of equal values (fsum(x)/len(x) may miss it by an ulp, and an ulp off
    a factor with no spread is a "significant" difference)."""
    return x[0] if min(x) == max(x) else math.fsum(x) / len(x)


def cell_test(rounds, factor: float = FACTOR, drift: float = DRIFT["process"], choices: int = 1) -> CellTest | None:
    """The cell's test (module docstring), or None when its first run has fewer than 2 rounds; ``choices``: the
    forms the second look chose the runs' form among (Bonferroni: p(within) times that many)."""
    runs = [r for r in runs_of(rounds)]
    if not runs or len(runs[0]) < 2:
        return None
    runs = [runs[0]] + [r for r in runs[1:] if len(r) >= 2]
    m, se, df, pw, po, s2 = _look(tuple(runs[:1]), factor, drift)
    if len(runs) > 1:
        m, se, df, pw2, po2, s2 = _look(tuple(runs), factor, drift)
        pw, po = min(pw, pw2), min(po, po2)
    return CellTest(m=m, se=se, df=df, runs=len(runs), rounds=len(runs[0]), p_within=min(1.0, LOOKS * choices * pw),
                    p_outside=min(1.0, LOOKS * po), s2=s2, drift=drift)


def classes(ev: TimingEvidence, factor: float | None = None) -> dict[str, str]:
    """{cell: 'within' | 'outside' | 'marginal' | 'short' | 'unmeasured'} (module docstring)."""
    f = ev.factor if factor is None else factor
    tests = tests_of(ev, f)
    tested = [n for n, t in tests.items() if t is not None]
    outside = {n for n, p in zip(tested, holm([tests[n].p_outside for n in tested])) if p <= ALPHA_FAILS}
    out = {}
    for name, rounds in ev.cells:
        first = runs_of(rounds)[0] if runs_of(rounds) else ()
        t = tests[name]
        if not first:
            out[name] = "unmeasured"
        elif len(first) < MIN_ROUNDS or t is None:
            out[name] = "short"
        elif t.p_within <= ALPHA_HOLDS:
            out[name] = "within"
        elif name in outside:
            out[name] = "outside"
        else:
            out[name] = "marginal"
    return out


def tests_of(ev: TimingEvidence, factor: float | None = None) -> dict[str, CellTest | None]:
    """{cell: its CellTest (None: fewer than 2 rounds)} at ``factor`` (default: the evidence's)."""
    f = ev.factor if factor is None else factor
    k = dict(ev.choices)
    return {name: cell_test(rounds, f, drift_of(ev), k.get(name, 1)) for name, rounds in ev.cells}


def overloaded(ev: TimingEvidence) -> bool:
    """True when the machine's load during wall-clock or CUDA-event timings exceeds its cores (the host launches a
    GPU's kernels; a CPU clock has no load gate)."""
    return ev.clock not in CPU_CLOCKS and ev.load is not None and ev.cores is not None and ev.load > ev.cores


def decide(ev: TimingEvidence, factor: float | None = None) -> str:
    """Load gate, then HOLDS / FAILS / HOLDS_IN_REGIME / UNDETERMINED from the cells' classes (module docstring)."""
    if overloaded(ev):
        return "UNDETERMINED"
    cls = list(classes(ev, factor).values())
    if "short" in cls:
        return "UNDETERMINED"
    if cls and all(c == "within" for c in cls):
        return "HOLDS"
    if "within" in cls and "outside" in cls:
        return "HOLDS_IN_REGIME"
    if "outside" in cls and "within" not in cls:
        return "FAILS"
    return "UNDETERMINED"


def needs_more_runs(ev: TimingEvidence, factor: float | None = None) -> list[str]:
    """The cells a second look could decide: marginal after one run (the claim times them in EXTRA_RUNS fresh runs)."""
    cls = classes(ev, factor)
    return [name for name, rounds in ev.cells if cls[name] == "marginal" and len(runs_of(rounds)) == 1]


def power(t: CellTest, factor: float, runs: int, n_cells: int = 1) -> float:
    """P(the cell is decided) with ``runs`` runs if its true ratio and spread are the observed ones: noncentral t on
    the design's Welch–Satterthwaite df, within when below the factor, outside (Bonferroni over ``n_cells`` for Holm)
    when above; each at the level of one of the LOOKS looks."""
    d = abs(math.log(factor) - t.m)
    alpha = ALPHA_HOLDS if t.m < math.log(factor) else ALPHA_FAILS / n_cells
    if t.per_run_var <= 0:
        return float(d > 0)
    df = min(t.df_at(runs), 1e6)
    return float(stats.nct.sf(stats.t.isf(alpha / LOOKS, df), df, d / math.sqrt(t.per_run_var / runs)))


def runs_to_decide(t: CellTest, factor: float, n_cells: int = 1, target: float = POWER_TARGET) -> int | None:
    """The fewest runs (of the first run's rounds) with ``target`` power at the observed ratio; None beyond MAX_RUNS
    (or at the factor itself, where no number of runs decides)."""
    if math.log(factor) == t.m:
        return None
    return smallest_count(lambda k: power(t, factor, k, n_cells) >= target, MAX_RUNS)  # power rises with the runs


def why(ev: TimingEvidence, factor: float | None = None) -> str:
    """The decisive numbers in one line: the gate, or the cells per class; the hardest undecided cell's power."""
    f = ev.factor if factor is None else factor
    if overloaded(ev):
        return f"machine load {ev.load:.2f} exceeds its {ev.cores} cores: timings compete for a core (load gate)"
    cls, tests = classes(ev, f), tests_of(ev, f)
    what = (f"{ev.clock} CPU-time" if ev.clock in CPU_CLOCKS else "CUDA-event" if ev.clock == "cuda_event"
            else "wall-clock")
    ms = [math.exp(t.m) for t in tests.values() if t is not None]
    rng = f"{what} ratios (geometric mean of rounds) {min(ms):.2f}–{max(ms):.2f}" if ms else "no cell measured"
    counts = {k: list(cls.values()).count(k) for k in ("within", "marginal", "outside", "short", "unmeasured")}
    text = (f"{rng}; within {counts['within']}, marginal {counts['marginal']}, outside {counts['outside']}"
            + (f", short {counts['short']}" if counts["short"] else "") + f", unmeasured {counts['unmeasured']} "
            f"(t on rounds + drift σ_b = {drift_of(ev):.3f} against {f:g}; within at {ALPHA_HOLDS:g}, outside by Holm "
            f"at {ALPHA_FAILS:g}, {LOOKS} looks)")
    verdict = decide(ev, f)
    if verdict == "HOLDS_IN_REGIME":
        text += f"; holds in the cells within: {_names(cls, 'within')}"
    elif verdict == "FAILS":
        text += f"; fails in the cells outside: {_names(cls, 'outside')}"
    elif counts["short"]:
        text += f"; fewer than {MIN_ROUNDS} rounds in: {_names(cls, 'short')}"
    elif counts["marginal"]:
        text += "; " + power_line(ev, f)
    return text


def power_line(ev: TimingEvidence, factor: float | None = None) -> str:
    """For the hardest marginal cell: its ratio with interval, the design's power there and the runs to decide it."""
    f = ev.factor if factor is None else factor
    cls, tests = classes(ev, f), tests_of(ev, f)
    marginal = {n: tests[n] for n, c in cls.items() if c == "marginal" and tests[n] is not None}
    if not marginal:
        return "no marginal cell"
    n_cells = sum(t is not None for t in tests.values())
    name, t = min(marginal.items(), key=lambda kv: power(kv[1], f, kv[1].runs, n_cells))
    need = runs_to_decide(t, f, n_cells)
    z = float(special.ndtri(0.95))  # the 90 % interval's quantile, exactly (1.645 moved an end by a printed digit)
    lo, hi = math.exp(t.m - z * t.se), math.exp(t.m + z * t.se)
    return (f"hardest cell {name}: {math.exp(t.m):.3f}× (90 % interval {lo:.3f}–{hi:.3f}) from {t.runs} run(s) of "
            f"{t.rounds} rounds; power {power(t, f, t.runs, n_cells):.0%} at that ratio; "
            + (f"{need} run(s) would give {POWER_TARGET:.0%}" if need is not None
               else f"out of reach: beyond {MAX_RUNS} runs at that ratio"))


def _names(cls: dict, kind: str, most: int = 6) -> str:
    """The names of the cells of class ``kind``, the first ``most`` of them ('a, b, … (+3 more)')."""
    names = [n for n, c in cls.items() if c == kind]
    return ", ".join(names[:most]) + (f", … (+{len(names) - most} more)" if len(names) > most else "")


def _run(c: float, rng: np.random.Generator) -> tuple[float, ...]:
    """One simulated run of a cell whose true ratio is c: its drift, MIN_ROUNDS rounds, one of them an outlier."""
    b = DRIFT["process"] * rng.standard_normal()
    r = [float(c * math.exp(b + SIM_ROUND * z)) for z in rng.standard_normal(MIN_ROUNDS)]
    r[int(rng.integers(MIN_ROUNDS))] *= 1 + SIM_OUTLIER * float(rng.uniform(-1, 1))
    return tuple(r)


def simulate(truth: str, rng: np.random.Generator) -> TimingEvidence:
    """The ledger's design on synthetic cells: one run each, then EXTRA_RUNS more for the cells the first look leaves
    marginal. holds: every true ratio exactly FACTOR (the edge); fails: 2·FACTOR with log-normal spread between
    cells. Rounds log-normal (SIM_ROUND) with an outlier; each run its own drift σ_b = DRIFT; a loaded machine
    (load 6 on 2 cores: a CPU clock has no load gate)."""
    true = [FACTOR if truth == "holds" else 2 * FACTOR * math.exp(SIM_SPREAD * rng.standard_normal())
            for _ in range(SIM_CELLS)]
    first = TimingEvidence(tuple((f"cell{k}", _run(c, rng)) for k, c in enumerate(true)), load=6.0, cores=2,
                           clock="process")
    more = set(needs_more_runs(first))
    cells = tuple((name, (r, *(_run(c, rng) for _ in range(EXTRA_RUNS))) if name in more else r)
                  for (name, r), c in zip(first.cells, true))
    return TimingEvidence(cells, load=6.0, cores=2, clock="process")


RULES = (Rule(
    name="timing-ratio",
    summary=f"per cell a one-sided t-test of the mean log ratio of its rounds against log {FACTOR}, se² = s²/R + σ_b² "
            f"per run (between-run drift σ_b = {DRIFT['process']} on a CPU clock, {DRIFT['wall']} on the wall "
            f"clock, measured over 7 stored runs); a cell the first run leaves marginal gets {EXTRA_RUNS} more runs "
            f"in fresh processes ({LOOKS} looks, Bonferroni); within at {ALPHA_HOLDS}, outside by Holm over the "
            f"reading's cells at {ALPHA_FAILS}; HOLDS all within, FAILS none within and some outside, "
            "HOLDS_IN_REGIME mixed; the wall clock also has a load gate",
    thresholds={"factor": FACTOR, "alpha_holds": ALPHA_HOLDS, "alpha_fails": ALPHA_FAILS, "looks": LOOKS,
                "drift": DRIFT, "min_rounds": MIN_ROUNDS, "extra_runs": EXTRA_RUNS},
    decide=decide,
    simulate=simulate,
    design={"holds": f"every true ratio = {FACTOR} (the edge)", "fails": f"every true ratio = {2 * FACTOR}, "
            f"log-normal σ = {SIM_SPREAD} between cells", "rounds": f"{MIN_ROUNDS} per run on the process CPU clock, "
            f"log-normal σ = {SIM_ROUND} each, one of them off by up to ±{SIM_OUTLIER:.0%}; each run its own drift "
            f"σ_b = {DRIFT['process']}", "runs": f"1, then {EXTRA_RUNS} more for a cell the first look leaves "
            "marginal", "cells": SIM_CELLS, "machine": "loaded (load 6 on 2 cores; no load gate on a CPU clock)"},
),)
