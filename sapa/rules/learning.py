"""Learning-dynamics rules: does the slowdown log2(t_arm/t_softmax) grow with N — at all, by more than 2×? the final gap?

Two questions about the same trend, each with its own rule. Evidence (:class:`SlowdownTest`): the
interval-censored trend of the paired log2 slowdown s = log2(steps to the threshold, arm / softmax) over
log2 N (:func:`sapa.empirics.training.censored_trend.interval_trend`: exits are intervals on the evaluation
grid, right-censored at the cap, fitted by maximum likelihood; Δ = the fitted change over the studied N
range; p-values from the profile likelihood), with the p-values **Holm-adjusted over the readings of the
ledger entry** (its family-wise error is its own):

* ``slowdown-growth`` — statement "the slowdown does not grow with N": FAILS when p(Δ ≤ 0) ≤ ALPHA_FAILS
  (it grows); HOLDS when p(Δ ≥ GROWTH_HOLDS_MARGIN) ≤ ALPHA_HOLDS (it grows by less than half a doubling,
  ×√2, over the range: a practical no-growth); else UNDETERMINED.
* ``slowdown-doubling`` — statement "the slowdown grows by no more than 2× over the studied N": FAILS when
  p(Δ ≤ 1) ≤ ALPHA_FAILS; HOLDS when p(Δ ≥ 1) ≤ ALPHA_HOLDS; else UNDETERMINED.

ALPHA_FAILS = 0.01 and ALPHA_HOLDS = 0.05 are family-wise levels (Holm keeps them over the entry's
readings). The calibrations draw synthetic studies with the pilot's spread on the real evaluation grid
and cap (exits → intervals → the same estimator), each trend read by both questions with Holm over the two
(the smallest family an entry has; without censoring the test is exactly the least-squares t-test, so at
the edge its false-FAILS rate is the level itself).

``final-gap-trend`` — the ``stability-trend`` decision on the final accuracy gap to softmax (paired
seeds, best lr), calibrated at the per-seed spread of the real study (sd 0.14 of a paired gap, the
0.13–0.15 the full study measured), with one gate: a FAILS read while members of the arm had not converged
within the cap is UNDETERMINED (a gap that may still close is not a degradation). :func:`final_gap_reason`
says which condition left a reading undecided — the gate only where it turned a FAILS, the design's power
(and the seeds that would decide it) otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from sapa.empirics.training.censored_trend import IntervalTrend, holm, interval_trend, paired_log2_intervals
from sapa.rules.base import Rule
from sapa.rules.stability import ALPHA_FAILS as ALPHA_FAILS_GAP, ALPHA_HOLDS as ALPHA_HOLDS_GAP, MARGIN, _decide

__all__ = ["SlowdownTest", "slowdown_test", "decide_slowdown", "verdicts_line", "FinalGapEvidence", "decide_final_gap",
           "final_gap_reason", "ALPHA_FAILS", "ALPHA_HOLDS", "GROWTH_HOLDS_MARGIN", "DOUBLING_MARGIN", "MARGINS",
           "QUESTIONS", "RULES"]

ALPHA_FAILS = 0.01  # family-wise level of the FAILS side (Holm over the entry's readings)
ALPHA_HOLDS = 0.05  # family-wise level of the HOLDS side
GROWTH_HOLDS_MARGIN = 0.5  # log2: "does not grow" is read as Δ < ½ (less than ×√2 over the studied N range)
DOUBLING_MARGIN = 1.0  # log2: "more than 2×" is Δ > 1
QUESTIONS = {"growth": (0.0, GROWTH_HOLDS_MARGIN), "doubling": (DOUBLING_MARGIN, DOUBLING_MARGIN)}  # (FAILS, HOLDS)
MARGINS = (0.0, GROWTH_HOLDS_MARGIN, DOUBLING_MARGIN)  # every margin a trend is tested against

# The synthetic studies of the calibration (the pilot of docs/training.md: per-seed sd of the log2 slowdown at the
# 0.5 threshold 0.4–0.9; softmax's own log2 steps rise ≈ 0.9 per doubling of N with sd ≈ 0.3).
SIM_SD = (0.4, 1.0)  # per-seed sd of the arm's log2 exit relative to softmax's, drawn uniformly per study
SIM_SOFT_SD = 0.3
SIM_SEEDS = (8, 12, 16)
SIM_NS = (16, 32, 64, 128)
SIM_CAP = 2000  # the full budget's step cap of the probes
SIM_GAP_SD = 0.14  # sd of a paired final-accuracy gap over seeds (the real study: 0.13–0.15)


@dataclass(frozen=True)
class SlowdownTest:
    """One reading's evidence: the trend, its question's margins and the entry's Holm-adjusted p-values."""

    trend: IntervalTrend
    question: str  # "growth" | "doubling"
    p_fails: float  # adjusted p of "Δ ≤ FAILS margin" (small: the slowdown grows beyond it)
    p_holds: float  # adjusted p of "Δ ≥ HOLDS margin" (small: it grows by less)

    def as_dict(self) -> dict:
        f = lambda v: None if not math.isfinite(v) else round(float(v), 6)  # noqa: E731
        return {**self.trend.as_dict(), "question": self.question, "p_fails_adjusted": f(self.p_fails),
                "p_holds_adjusted": f(self.p_holds)}


def slowdown_test(trend: IntervalTrend, question: str, p_fails: float | None = None,
                  p_holds: float | None = None) -> SlowdownTest:
    """The evidence of ``question`` on ``trend``: its raw p-values, or the entry's adjusted ones when given."""
    mf, mh = QUESTIONS[question]
    return SlowdownTest(trend, question, trend.p_greater.get(mf, math.nan) if p_fails is None else p_fails,
                        trend.p_less.get(mh, math.nan) if p_holds is None else p_holds)


def decide_slowdown(ev: SlowdownTest, a_fails: float = ALPHA_FAILS, a_holds: float = ALPHA_HOLDS) -> str:
    """FAILS if p_fails ≤ ALPHA_FAILS; HOLDS if p_holds ≤ ALPHA_HOLDS; else UNDETERMINED (nan: UNDETERMINED).

    The levels are varied only for robustness."""
    if math.isfinite(ev.p_fails) and ev.p_fails <= a_fails:
        return "FAILS"
    if math.isfinite(ev.p_holds) and ev.p_holds <= a_holds:
        return "HOLDS"
    return "UNDETERMINED"


def verdicts_line(trend: IntervalTrend) -> str:
    """Both questions' verdicts on one trend alone (Holm m = 1), for ``sapa train``'s printout."""
    g, d = (decide_slowdown(slowdown_test(trend, q)) for q in ("growth", "doubling"))
    return f"grows: {g}, more than 2×: {d} (one trend, unadjusted)"


def _grid_interval(t: np.ndarray, grid: np.ndarray, cap: int) -> np.ndarray:
    """(R, 2) grid intervals (t_{k−1}, t_k] of continuous exit steps t; (cap, ∞) beyond the cap."""
    k = np.searchsorted(grid, t, side="left")  # first grid step ≥ t
    lo = np.where(k > 0, grid[np.maximum(k - 1, 0)], 0.0)
    out = np.column_stack([np.maximum(lo, 1.0), grid[np.minimum(k, len(grid) - 1)]])
    out[t > cap] = (cap, np.inf)
    return out


def simulate_slowdown(question: str, truth: str, rng: np.random.Generator) -> SlowdownTest:
    """A synthetic mechanism study: SIM_NS cells, SIM_SEEDS seeds, exits on the real grid and cap, one reading.

    log2 t_softmax = 5.5 + 0.9k + SIM_SOFT_SD·z (cell k), log2 t_arm = log2 t_softmax + m_k + σ·t₄/√2 (heavy tails,
    unit variance), m rising linearly by Δ over the range from a uniform offset in [0, 1], σ ~ U(SIM_SD); Δ is the
    question's edge for "holds" (growth: 0; doubling: 1) and a designed effect for "fails" (growth: 1; doubling: 2).
    """
    from sapa.empirics.training.mechanism import grid_steps

    delta = {"growth": (0.0, 1.0), "doubling": (DOUBLING_MARGIN, 2 * DOUBLING_MARGIN)}[question][truth == "fails"]
    R, sd = int(rng.choice(SIM_SEEDS)), float(rng.uniform(*SIM_SD))
    grid = np.asarray(grid_steps(SIM_CAP), float)
    K = len(SIM_NS)
    off = rng.uniform(0, 1)
    cells = []
    for k in range(K):
        ls = 5.5 + 0.9 * k + SIM_SOFT_SD * rng.standard_normal(R)
        la = ls + off + delta * k / (K - 1) + sd * rng.standard_t(4, R) / math.sqrt(2)
        cells.append(paired_log2_intervals(_grid_interval(2.0 ** la, grid, SIM_CAP),
                                           _grid_interval(2.0 ** ls, grid, SIM_CAP)))
    tr = interval_trend(SIM_NS, cells, MARGINS, cell_means=False)
    both = [slowdown_test(tr, q) for q in QUESTIONS]  # an entry reads every trend with both questions: Holm m = 2
    pf, ph = holm([t.p_fails for t in both]), holm([t.p_holds for t in both])
    k = list(QUESTIONS).index(question)
    return slowdown_test(tr, question, pf[k], ph[k])


def _rule(question: str) -> Rule:
    mf, mh = QUESTIONS[question]
    said = {"growth": "the slowdown does not grow with N", "doubling": "the slowdown grows by no more than 2×"}[question]
    edge, eff = {"growth": (0, 1), "doubling": (DOUBLING_MARGIN, 2 * DOUBLING_MARGIN)}[question]
    return Rule(
        name=f"slowdown-{question}",
        summary=f"Statement: {said} over the studied N. s = log2(steps to the threshold, arm / softmax) per paired seed, "
                f"exits interval-censored on the evaluation grid (right-censored at the cap); Δ = the maximum-likelihood "
                f"change of s over the N range; profile-likelihood p-values, Holm-adjusted over the entry's readings: "
                f"FAILS if p(Δ ≤ {mf:g}) ≤ {ALPHA_FAILS}; HOLDS if p(Δ ≥ {mh:g}) ≤ {ALPHA_HOLDS}; else UNDETERMINED",
        thresholds={"fails_margin_log2": mf, "holds_margin_log2": mh, "alpha_fails_familywise": ALPHA_FAILS,
                    "alpha_holds_familywise": ALPHA_HOLDS},
        decide=decide_slowdown,
        simulate=lambda truth, rng: simulate_slowdown(question, truth, rng),
        design={"holds": f"Δ = {edge:g} (the edge); N = {', '.join(map(str, SIM_NS))}; {'/'.join(map(str, SIM_SEEDS))} "
                         f"seeds; per-seed sd U{SIM_SD} with t4 tails, softmax sd {SIM_SOFT_SD}; the full budget's grid "
                         f"(ratio 2^0.2) and cap {SIM_CAP}; the trend read by both questions, Holm over the two (the "
                         f"smallest family an entry has)",
                "fails": f"Δ = {eff:g}", "estimator": "sapa.empirics.training.censored_trend.interval_trend"},
        trials=1000,
    )


@dataclass(frozen=True)
class FinalGapEvidence:
    """The GapTrend of the final accuracy gap and the arm's members not converged within the cap."""

    trend: object
    unconverged: int = 0

    def as_dict(self) -> dict:
        return {**self.trend.as_dict(), "unconverged": int(self.unconverged)}


def decide_final_gap(ev: FinalGapEvidence) -> str:
    """stability-trend's decision (margin 0.05); FAILS with unconverged members → UNDETERMINED."""
    v = _decide(ev.trend, MARGIN)
    return "UNDETERMINED" if v == "FAILS" and ev.unconverged else v


def final_gap_reason(ev: FinalGapEvidence) -> tuple[str, int | None]:
    """(why, seeds) of a final-gap reading, naming the condition that bound: the convergence gate only when it turned a
    FAILS; otherwise the interval against −MARGIN, and for an undecided one the seeds per cell at which the same Δ and
    spread would decide (se ∝ 1/√seeds; None when decided, or when Δ sits on the margin)."""
    from sapa.rules.stability import bounds

    t = ev.trend
    lo, hi = bounds(t)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "Δ or its se undefined (fewer than 2 cells or no spread)", None
    raw = _decide(t, MARGIN)
    iv = f"lower bound {lo:+.3f}, upper bound {hi:+.3f} against −{MARGIN}"
    if raw == "FAILS" and ev.unconverged:
        return f"{iv}: a degradation, but {ev.unconverged} member(s) had not converged within the cap (the gate)", None
    if raw != "UNDETERMINED":
        return iv, None
    per_cell = max(t.n)
    if t.delta < -MARGIN:  # a FAILS needs Δ + t·se < −MARGIN
        need, what = per_cell * ((hi - t.delta) / (-MARGIN - t.delta)) ** 2, "FAILS"
    elif t.delta > -MARGIN:  # a HOLDS needs Δ − t·se > −MARGIN
        need, what = per_cell * ((t.delta - lo) / (t.delta + MARGIN)) ** 2, "HOLDS"
    else:
        return f"{iv}: Δ sits on the margin: no number of seeds decides it", None
    n = math.ceil(need)
    return (f"{iv}: beyond this design's power ({per_cell} seeds per cell, not the convergence gate); ≈ {n} seeds per "
            f"cell would read {what} at this Δ and spread"), n


def simulate_final_gap(truth: str, rng: np.random.Generator) -> FinalGapEvidence:
    """Paired final gaps with known trend at the real study's spread: 2–4 N cells ×2 apart, 2–5 seeds; cell k's gap
    is m_k + σ_k·t₄ (unit variance), m rising linearly by Δ (holds: Δ = −MARGIN, the edge; fails: −2·MARGIN),
    σ_k = SIM_GAP_SD·exp(0.5·z_k) (unequal spreads across N); every member converged."""
    from sapa.empirics.training.study_analysis import gap_trend

    K, R = int(rng.choice((2, 3, 4))), int(rng.choice((2, 3, 4, 5)))
    x = 4.0 + np.arange(K)
    delta = -MARGIN if truth == "holds" else -2 * MARGIN
    m = rng.uniform(-0.3, 0.05) + delta * (x - x.mean()) / (x[-1] - x[0])  # (K,)
    gaps = [m[k] + SIM_GAP_SD * math.exp(0.5 * rng.standard_normal()) * rng.standard_t(4, size=R) / math.sqrt(2)
            for k in range(K)]
    return FinalGapEvidence(gap_trend((2.0 ** x).astype(int), gaps, quantity="final_acc"), 0)


SLOWDOWN_GROWTH = _rule("growth")
SLOWDOWN_DOUBLING = _rule("doubling")

FINAL_GAP_TREND = Rule(
    name="final-gap-trend",
    summary=f"stability-trend's decision on the final accuracy gap to softmax (margin {MARGIN}), calibrated at a "
            f"per-seed gap sd of {SIM_GAP_SD}; a FAILS while members had not converged within the cap is UNDETERMINED",
    thresholds={"margin": MARGIN, "alpha_holds_one_sided": ALPHA_HOLDS_GAP, "alpha_fails_one_sided": ALPHA_FAILS_GAP},
    decide=decide_final_gap,
    simulate=simulate_final_gap,
    design={"holds": f"true Δ = −{MARGIN} (edge), 2–4 N cells × 2–5 seeds, gap sd {SIM_GAP_SD} (per-cell log-sd "
                     f"0.5), t4 noise",
            "fails": f"true Δ = −{2 * MARGIN}", "estimator": "sapa.empirics.training.study_analysis.gap_trend"},
    trials=2000,
)

RULES = (SLOWDOWN_GROWTH, SLOWDOWN_DOUBLING, FINAL_GAP_TREND)
