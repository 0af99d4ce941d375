"""Dose-response rules: ρ_S(log10 norm, accuracy) over the doses c of x^p/c, and the family at matched norm.

``dose-association`` — tested statement: "within one activation family x^p/c, a lower final attention norm
goes with a higher test accuracy" (ρ < 0), with the **dose** as the unit: each value of c at its best
learning rate, seeds averaged (:func:`empirics.training.dose_response.dose_table`). Evidence
(:class:`DoseEvidence`): Spearman ρ over the doses with its exact permutation p-values (all D! pairings,
:func:`empirics.training.dose_response.exact_spearman`), Holm-adjusted over the entry's readings:

* ``HOLDS``  if the adjusted p(ρ < 0) ≤ ALPHA_HOLDS (a lower norm, a higher accuracy);
* ``FAILS``  if the adjusted p(ρ > 0) ≤ ALPHA_FAILS (a higher norm goes with a higher accuracy);
* ``UNDETERMINED`` otherwise (no monotone association shown: the accuracy may peak inside the grid).

``matched-norm`` — tested statement: "at matched norm, the family does not matter" (x³/c as accurate as
x/c where both reach the same norm). Evidence (:class:`MatchedEvidence`): per dose of x³/c inside x/c's
norm range, the accuracy difference to x/c interpolated at that norm
(:func:`empirics.training.dose_response.matched_norm_contrast`); FAILS if the Holm-adjusted Student-t p that
the mean difference lies beyond ±EQUIVALENCE is ≤ ALPHA_FAILS (the family matters by more than the margin);
HOLDS if the 90 % t interval of the mean difference lies inside ±EQUIVALENCE (two one-sided tests at 5 %);
else UNDETERMINED.

ALPHA_FAILS = 0.01 and ALPHA_HOLDS = 0.05 are family-wise over the entry's readings (Holm). Calibration
draws dose-responses shaped like the study's (8 doses × 3 seeds; log-norm falling with log c; run noise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from sapa.rules.base import Rule

ALPHA_FAILS = 0.01
ALPHA_HOLDS = 0.05
EQUIVALENCE = 0.02  # accuracy: "the family does not matter" within ±2 points at matched norm

SIM_DOSES = (8, 9)  # doses per family (the full budget: 8)
SIM_SEEDS = 3
SIM_RHO = 0.8  # designed effect: the dose means' accuracy rises with their norm (correlation of the true effects)
SIM_SEED_SD = 0.5  # seed noise of a dose's accuracy and log-norm, in units of the dose-effect sd
SIM_T_DF = 3


@dataclass(frozen=True)
class DoseEvidence:
    """Spearman ρ over the doses and its Holm-adjusted one-sided p-values."""

    assoc: object  # empirics.training.dose_response.Association (raw p-values)
    p_holds: float  # adjusted p(ρ < 0)
    p_fails: float  # adjusted p(ρ > 0)

    def as_dict(self) -> dict:
        f = lambda v: None if not math.isfinite(v) else round(float(v), 6)  # noqa: E731
        return {**self.assoc.as_dict(), "p_less_adjusted": f(self.p_holds), "p_greater_adjusted": f(self.p_fails)}


def decide_dose(ev: DoseEvidence, a_fails: float = ALPHA_FAILS, a_holds: float = ALPHA_HOLDS) -> str:
    """FAILS if p_fails ≤ ALPHA_FAILS; HOLDS if p_holds ≤ ALPHA_HOLDS; else UNDETERMINED (nan: UNDETERMINED).

    The levels are varied only for robustness."""
    if math.isfinite(ev.p_fails) and ev.p_fails <= a_fails:
        return "FAILS"
    if math.isfinite(ev.p_holds) and ev.p_holds <= a_holds:
        return "HOLDS"
    return "UNDETERMINED"


def simulate_dose(truth: str, rng: np.random.Generator) -> DoseEvidence:
    """One family's dose-response: D doses × SIM_SEEDS seeds; log-norm = −log2 c + dose effect + seed noise,
    accuracy = its own dose effect + seed noise (t3 tails), the dose effects correlated 0 ("holds": no association,
    the false-FAILS edge) or +SIM_RHO ("fails": a higher norm with a higher accuracy); the rule reads seed means."""
    from empirics.training.dose_response import exact_spearman

    D = int(rng.choice(SIM_DOSES))
    rho = 0.0 if truth == "holds" else SIM_RHO
    eff = rng.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], size=D)  # (D, 2): (norm, accuracy)
    noise = SIM_SEED_SD * rng.standard_t(SIM_T_DF, size=(2, D, SIM_SEEDS)) / math.sqrt(SIM_T_DF / (SIM_T_DF - 2))
    a = exact_spearman(eff[:, 0] + noise[0].mean(1), eff[:, 1] + noise[1].mean(1))
    return DoseEvidence(a, a.p_less, a.p_greater)


@dataclass(frozen=True)
class MatchedEvidence:
    """The matched-norm differences (a Contrast), the Holm-adjusted two-sided p and the equivalence interval."""

    contrast: object  # empirics.training.dose_response.Contrast
    p_fails: float  # adjusted p that |difference| > EQUIVALENCE: small when the family matters
    lo: float  # 90 % t interval of the mean difference (two one-sided 5 % tests)
    hi: float

    def as_dict(self) -> dict:
        f = lambda v: None if not math.isfinite(v) else round(float(v), 6)  # noqa: E731
        return {**self.contrast.as_dict(), "p_two_sided_adjusted": f(self.p_fails), "equivalence_interval":
                [f(self.lo), f(self.hi)], "equivalence_margin": EQUIVALENCE}


def matched_evidence(contrast, p_fails: float | None = None) -> MatchedEvidence:
    """The evidence of ``contrast``: p that the mean difference lies beyond ±EQUIVALENCE — 2·min of the one-sided
    Student t p-values of d̄ − EQUIVALENCE > 0 and d̄ + EQUIVALENCE < 0 (or the entry's adjusted p) — and the 90 %
    t interval of d̄ (the doses compared are the units)."""
    d = np.asarray(contrast.diffs, float)
    raw = lo = hi = math.nan
    if d.size >= 2 and d.std(ddof=1) > 0:
        se = float(d.std(ddof=1)) / math.sqrt(d.size)
        df, m = d.size - 1, float(d.mean())
        raw = min(1.0, 2 * min(float(stats.t.sf((m - EQUIVALENCE) / se, df)),
                               float(stats.t.cdf((m + EQUIVALENCE) / se, df))))
        half = float(stats.t.ppf(0.95, df)) * se
        lo, hi = m - half, m + half
    return MatchedEvidence(contrast, raw if p_fails is None else p_fails, lo, hi)


def decide_matched(ev: MatchedEvidence, a_fails: float = ALPHA_FAILS) -> str:
    """FAILS if the adjusted p ≤ ALPHA_FAILS (varied only for robustness); HOLDS if the 90 % interval lies inside
    (−EQUIVALENCE, EQUIVALENCE)."""
    if math.isfinite(ev.p_fails) and ev.p_fails <= a_fails:
        return "FAILS"
    if math.isfinite(ev.lo) and -EQUIVALENCE < ev.lo and ev.hi < EQUIVALENCE:
        return "HOLDS"
    return "UNDETERMINED"


def simulate_matched(truth: str, rng: np.random.Generator) -> MatchedEvidence:
    """Matched-norm differences over 5–8 compared doses, each a mean of SIM_SEEDS seeds (accuracy sd 0.03 per seed,
    t3 tails): "holds" — true difference exactly ±EQUIVALENCE (the edge, sign at random); "fails" — 0.06."""
    from empirics.training.dose_response import Contrast

    n = int(rng.integers(5, 9))
    mu = EQUIVALENCE * (1 if rng.random() < 0.5 else -1) if truth == "holds" else 0.06
    z = rng.standard_t(SIM_T_DF, size=(n, SIM_SEEDS)) / math.sqrt(SIM_T_DF / (SIM_T_DF - 2))
    d = mu + 0.03 * z.mean(1)
    return matched_evidence(Contrast(tuple(d), tuple(np.zeros(n)), float(d.mean()), math.nan, math.nan, n))


DOSE_ASSOCIATION = Rule(
    name="dose-association",
    summary=f"Within one family x^p/c (unit: the dose c at its best learning rate, seeds averaged), Spearman "
            f"ρ(log10 final norm, test accuracy) over the doses with exact permutation p-values (all D! pairings), "
            f"Holm-adjusted over the entry's readings: HOLDS (lower norm, higher accuracy) if p(ρ < 0) ≤ "
            f"{ALPHA_HOLDS}; FAILS if p(ρ > 0) ≤ {ALPHA_FAILS}; else UNDETERMINED",
    thresholds={"alpha_fails_familywise": ALPHA_FAILS, "alpha_holds_familywise": ALPHA_HOLDS},
    decide=decide_dose,
    simulate=simulate_dose,
    design={"holds": f"no association of the dose effects (ρ = 0), {'/'.join(map(str, SIM_DOSES))} doses × "
                     f"{SIM_SEEDS} seeds, seed sd {SIM_SEED_SD} of the dose-effect sd, t{SIM_T_DF} tails; one reading",
            "fails": f"dose effects correlated +{SIM_RHO} (a higher norm with a higher accuracy)",
            "estimator": "empirics.training.dose_response.exact_spearman"},
    trials=1000,
)

MATCHED_NORM = Rule(
    name="matched-norm",
    summary=f"x³/c against x/c at matched final ‖φ(S)‖_F (each x³/c dose against x/c interpolated in log10 norm, "
            f"inside x/c's range; unit: the dose): FAILS (the family matters) if the Holm-adjusted Student-t p that "
            f"the mean difference lies beyond ±{EQUIVALENCE} is ≤ {ALPHA_FAILS}; HOLDS if the 90 % t interval of the "
            f"mean difference lies within ±{EQUIVALENCE}; else UNDETERMINED",
    thresholds={"alpha_fails_familywise": ALPHA_FAILS, "equivalence_margin": EQUIVALENCE,
                "equivalence_level_one_sided": 0.05},
    decide=decide_matched,
    simulate=simulate_matched,
    design={"holds": f"true difference ±{EQUIVALENCE} (the equivalence edge), 5–8 compared doses × {SIM_SEEDS} seeds, "
                     f"accuracy sd 0.03 per seed, t{SIM_T_DF}",
            "fails": "true difference 0.06 (three margins)", "estimator": "empirics.training.dose_response.matched_norm_contrast"},
    trials=1000,
)

RULES = (DOSE_ASSOCIATION, MATCHED_NORM)
