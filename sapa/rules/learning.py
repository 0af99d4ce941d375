"""Learning-dynamics rules: does the slowdown log2(t_exit(arm)/t_exit(softmax)) grow with N? does the final gap?

``slowdown-trend`` — tested statement: "the arm's slowdown relative to softmax, in steps to leave the
floor, does not grow by more than a factor 2^MARGIN_SLOW over the studied N range". Evidence
(:class:`SlowdownEvidence`): per N cell and paired seed, s = log2(t_exit(arm)/t_exit(softmax)); an arm
that never left the floor within the cap enters as log2(cap/t_exit(softmax)) and is flagged censored
(its true s is larger). Δ, se and df are :func:`empirics.training.study_analysis.gap_trend`'s OLS trend of
the cell means on log2 N. Censoring is handled conservatively, never by a hand-made survival model:

* censored members in any cell but the largest N: **UNDETERMINED** (an underestimate at small N would
  inflate Δ, one at large N deflate it: the sign of the bias is unknown);
* censored members only at the largest N: Δ is underestimated, so only **FAILS** can be read
  (Δ − t_{1−ALPHA_FAILS}·se > MARGIN_SLOW), never HOLDS;
* no censoring: HOLDS if Δ + t_{1−ALPHA_HOLDS}·se < MARGIN_SLOW; FAILS if Δ − t_{1−ALPHA_FAILS}·se > MARGIN_SLOW.

``final-gap-trend`` — the ``stability-trend`` decision on the final accuracy gap to softmax (paired
seeds, best lr), calibrated at the per-seed spread of the real study (sd 0.14 of a paired gap, the
0.13–0.15 the full study measured), with one condition: a FAILS read while members of the arm had
not converged within the cap (:func:`empirics.training.learning_curves.flat`) is UNDETERMINED — a gap
that may still close is not a degradation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from empirics.training.learning_curves import SlowdownEvidence, slowdown_evidence
from sapa.rules.base import Rule
from sapa.rules.stability import ALPHA_FAILS, ALPHA_HOLDS, MARGIN, _decide

__all__ = ["SlowdownEvidence", "slowdown_evidence", "decide_slowdown", "FinalGapEvidence", "decide_final_gap",
           "MARGIN_SLOW", "RULES"]

MARGIN_SLOW = 1.0  # a doubling of the slowdown ratio over the studied N range
SIM_SLOW_SD = 0.7  # sd of log2 t_exit over seeds (the independent runs: exits at 1k … 3k steps, seed-dependent)
SIM_GAP_SD = 0.14  # sd of a paired final-accuracy gap over seeds (the real study: 0.13–0.15)
SIM_CENSOR = 0.15  # probability that a synthetic study has censored members at its largest N


def decide_slowdown(ev: SlowdownEvidence, margin: float = MARGIN_SLOW) -> str:
    """HOLDS / FAILS / UNDETERMINED as the module docstring states (censoring only ever removes HOLDS).

    ``margin`` (log2; default MARGIN_SLOW) is varied only for robustness.
    """
    t = ev.trend
    d, se, df = t.delta, t.se, t.df
    if not (math.isfinite(d) and math.isfinite(se) and df >= 1 and se > 0):
        return "UNDETERMINED"
    if any(ev.censored[:-1]):
        return "UNDETERMINED"
    lo = d - float(stats.t.ppf(1 - ALPHA_FAILS, df)) * se
    hi = d + float(stats.t.ppf(1 - ALPHA_HOLDS, df)) * se
    if lo > margin:
        return "FAILS"
    if hi < margin and not ev.censored[-1]:
        return "HOLDS"
    return "UNDETERMINED"


def simulate_slowdown(truth: str, rng: np.random.Generator) -> SlowdownEvidence:
    """Synthetic studies: 2–4 N cells ×2 apart, 2–5 seeds; log2 t_softmax ~ N(μ, 0.5²), log2 t_arm = log2 t_softmax +
    m(N) + N(0, SIM_SLOW_SD²) with m rising by Δ over the range (holds: Δ = MARGIN_SLOW; fails: 2·MARGIN_SLOW); the cap
    sits 2^2.5 above the arm's median exit at the largest N, and with probability SIM_CENSOR lower, so that exits
    there are censored (entered at the cap, as the study does)."""
    K, R = int(rng.choice((2, 3, 4))), int(rng.choice((2, 3, 4, 5)))
    x = 4.0 + np.arange(K)
    delta = MARGIN_SLOW if truth == "holds" else 2 * MARGIN_SLOW
    m = rng.uniform(0, 2) + delta * (x - x[0]) / (x[-1] - x[0])  # (K,)
    mu = rng.uniform(6, 9)
    cap = 2.0 ** (mu + m[-1] + (rng.uniform(0, 0.7) if rng.random() < SIM_CENSOR else 2.5))
    vals, cens = [], []
    for k in range(K):
        ts = 2.0 ** (mu + 0.5 * rng.standard_normal(R))
        ta = ts * 2.0 ** (m[k] + SIM_SLOW_SD * rng.standard_normal(R))
        c = ta > cap
        vals.append(np.log2(np.where(c, cap, ta) / ts))
        cens.append(c)
    return slowdown_evidence((2.0 ** x).astype(int), vals, cens)


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


def simulate_final_gap(truth: str, rng: np.random.Generator) -> FinalGapEvidence:
    """Paired final gaps with known trend at the real study's spread: 2–4 N cells ×2 apart, 2–5 seeds; cell k's gap
    is m_k + σ_k·t₄ (unit variance), m rising linearly by Δ (holds: Δ = −MARGIN, the edge; fails: −2·MARGIN),
    σ_k = SIM_GAP_SD·exp(0.5·z_k) (unequal spreads across N); every member converged."""
    from empirics.training.study_analysis import gap_trend

    K, R = int(rng.choice((2, 3, 4))), int(rng.choice((2, 3, 4, 5)))
    x = 4.0 + np.arange(K)
    delta = -MARGIN if truth == "holds" else -2 * MARGIN
    m = rng.uniform(-0.3, 0.05) + delta * (x - x.mean()) / (x[-1] - x[0])  # (K,)
    gaps = [m[k] + SIM_GAP_SD * math.exp(0.5 * rng.standard_normal()) * rng.standard_t(4, size=R) / math.sqrt(2)
            for k in range(K)]
    return FinalGapEvidence(gap_trend((2.0 ** x).astype(int), gaps, quantity="final_acc"), 0)


SLOWDOWN_TREND = Rule(
    name="slowdown-trend",
    summary=f"Unit: the (arm, N) cell, seeds nested. s = log2(steps to leave the floor, arm / softmax) per paired seed "
            f"(an arm censored at the cap enters at the cap); Δ = OLS trend of the cell means over log2 N: HOLDS if "
            f"Δ + t_{{{1 - ALPHA_HOLDS:g}}}·se < {MARGIN_SLOW} and nothing is censored; FAILS if "
            f"Δ − t_{{{1 - ALPHA_FAILS:g}}}·se > {MARGIN_SLOW} and nothing is censored below the largest N; else "
            f"UNDETERMINED",
    thresholds={"margin_log2": MARGIN_SLOW, "alpha_holds_one_sided": ALPHA_HOLDS, "alpha_fails_one_sided": ALPHA_FAILS},
    decide=decide_slowdown,
    simulate=simulate_slowdown,
    design={"holds": f"the slowdown grows by exactly 2^{MARGIN_SLOW:g} over the N range (edge); 2–4 N cells, 2–5 "
                     f"seeds, log2-exit sd {SIM_SLOW_SD} (arm) and 0.5 (softmax); censoring at the largest N in "
                     f"{SIM_CENSOR:.0%} of studies",
            "fails": f"it grows by 2^{2 * MARGIN_SLOW:g}", "estimator": "empirics.training.study_analysis.gap_trend"},
    trials=2000,
)

FINAL_GAP_TREND = Rule(
    name="final-gap-trend",
    summary=f"stability-trend's decision on the final accuracy gap to softmax (margin {MARGIN}), calibrated at a "
            f"per-seed gap sd of {SIM_GAP_SD}; a FAILS while members had not converged within the cap is UNDETERMINED",
    thresholds={"margin": MARGIN, "alpha_holds_one_sided": ALPHA_HOLDS, "alpha_fails_one_sided": ALPHA_FAILS},
    decide=decide_final_gap,
    simulate=simulate_final_gap,
    design={"holds": f"true Δ = −{MARGIN} (edge), 2–4 N cells × 2–5 seeds, gap sd {SIM_GAP_SD} (per-cell log-sd "
                     f"0.5), t4 noise",
            "fails": f"true Δ = −{2 * MARGIN}", "estimator": "empirics.training.study_analysis.gap_trend"},
    trials=2000,
)

RULES = (SLOWDOWN_TREND, FINAL_GAP_TREND)
