"""Dose-response rules: b = d(accuracy)/d(log10 ‖φ(S)‖_F) over the doses c of x^p/c at each lr, against −δ; the family
at matched norm.

``dose-association`` — tested statement: "within one activation family x^p/c, at every learning rate of the grid, a
10× lower final attention norm goes with a test accuracy at least DELTA higher" (b < −DELTA per decade), with the
**dose** as the unit: each value of c at one lr, seeds averaged
(:func:`sapa.empirics.training.dose_response.dose_table`). Evidence (:class:`DoseEvidence`): per lr stratum, the OLS
slope b over the doses with its Student-t se on D − 2 df (:func:`sapa.empirics.training.dose_response.dose_slope`) and
two one-sided p-values against −DELTA, Holm-adjusted over every stratum of the entry:

* ``FAILS``  if some stratum's adjusted p(b ≤ −DELTA) ≤ ALPHA_FAILS (at that lr a lower norm buys less than DELTA
  per decade, or costs accuracy);
* ``HOLDS``  if every stratum's adjusted p(b ≥ −DELTA) ≤ ALPHA_HOLDS;
* ``UNDETERMINED`` otherwise — a slope too close to −DELTA for the seeds: :func:`seeds_to_decide` says how many
  would decide it, and :func:`power_at_null` is the design's chance to say FAILS when the norm does not matter.

A rank correlation cannot decide "no association" however many seeds are trained (the ranks of a flat response are
noise); a slope against a margin can, as its se shrinks.

``matched-norm`` — tested statement: "at matched norm, the family does not matter" (x³/c as accurate as
x/c where both reach the same norm at the same lr). Evidence (:class:`MatchedEvidence`): per (lr, dose) of x³/c
inside x/c's norm range at that lr, the accuracy difference to x/c interpolated at that norm
(:func:`sapa.empirics.training.dose_response.matched_norm_contrast`); FAILS if the Holm-adjusted Student-t p that
the mean difference lies beyond ±EQUIVALENCE is ≤ ALPHA_FAILS (the family matters by more than the margin);
HOLDS if the 90 % t interval of the mean difference lies inside ±EQUIVALENCE (two one-sided tests at 5 %);
else UNDETERMINED.

ALPHA_FAILS = 0.01 and ALPHA_HOLDS = 0.05 are family-wise over the entry's readings (Holm). Calibration
draws dose-responses shaped like the study's (2–3 lr strata × 8 doses × 3 seeds; log-norm falling with log c; seed
noise with t3 tails and the doses' own scatter about the line).
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
DELTA = 0.02  # accuracy per decade of norm: the smallest dose-response the thesis needs (the same 2 points)
POWER_TARGET = 0.8
MAX_SEEDS = 1000  # seeds_to_decide answers "more than" beyond this
MAX_DOSES = 1000  # doses_to_decide likewise

SIM_DOSES = 8
SIM_STRATA = (2, 3)  # learning rates per family (text: 2, digits: 3)
SIM_SEEDS = 3
SIM_SEED_SD = (0.005, 0.03)  # one seed's accuracy sd (text x/c … digits x³/c at lr 0.01 is 0.07: the wide end)
SIM_LOF_SD = 0.005  # the doses' scatter about the line
SIM_NORM_PER_DECADE_C = (0.3, 0.9)  # decades of norm per decade of c
SIM_T_DF = 3


@dataclass(frozen=True)
class DoseEvidence:
    """Per lr stratum: the slope (a DoseSlope) and its Holm-adjusted one-sided p-values against −DELTA."""

    strata: tuple  # (DoseSlope, ...), one per lr
    p_fails: tuple[float, ...]  # adjusted p(b ≤ −DELTA): small when a lower norm buys less than DELTA per decade
    p_holds: tuple[float, ...]  # adjusted p(b ≥ −DELTA)

    def as_dict(self) -> dict:
        f = lambda v: None if not math.isfinite(v) else round(float(v), 6)  # noqa: E731
        return {"delta_per_decade": DELTA, "strata": [{**s.as_dict(), "p_fails_adjusted": f(pf), "p_holds_adjusted":
                                                       f(ph)} for s, pf, ph in zip(self.strata, self.p_fails,
                                                                                   self.p_holds)]}


def raw_p(s, delta: float = DELTA) -> tuple[float, float]:
    """(p(b ≤ −delta), p(b ≥ −delta)): one-sided Student-t p-values of the stratum's slope against −delta (nan if
    undefined; se = 0 gives 0 or 1)."""
    if not (math.isfinite(s.b) and math.isfinite(s.se)) or s.df < 1:
        return math.nan, math.nan
    if s.se == 0:
        return (0.0, 1.0) if s.b > -delta else (1.0, 0.0) if s.b < -delta else (1.0, 1.0)
    t = (s.b + delta) / s.se
    return float(stats.t.sf(t, s.df)), float(stats.t.cdf(t, s.df))


def decide_dose(ev: DoseEvidence, a_fails: float = ALPHA_FAILS, a_holds: float = ALPHA_HOLDS) -> str:
    """FAILS if some stratum's p_fails ≤ a_fails; HOLDS if every stratum's p_holds ≤ a_holds; else UNDETERMINED
    (nan: UNDETERMINED; no strata: UNDETERMINED). The levels are varied only for robustness."""
    if any(math.isfinite(p) and p <= a_fails for p in ev.p_fails):
        return "FAILS"
    if ev.p_holds and all(math.isfinite(p) and p <= a_holds for p in ev.p_holds):
        return "HOLDS"
    return "UNDETERMINED"


def _se_at(s, seeds: float) -> float:
    """The stratum's se with ``seeds`` per dose: (lack-of-fit + seed variance / seeds) / Σ(x − x̄)²."""
    sv = s.seed_var if math.isfinite(s.seed_var) else 0.0
    return math.sqrt((s.lack_of_fit_var + sv / seeds) / s.sxx)


def _power(true_b: float, se: float, df: int, level: float, side: str, delta: float = DELTA) -> float:
    """P(the one-sided t test of b against −delta rejects at ``level``) when b = true_b (noncentral t)."""
    if not (math.isfinite(se) and se > 0 and df >= 1):
        return math.nan
    nc = (true_b + delta) / se * (1 if side == "fails" else -1)
    return float(stats.nct.sf(stats.t.ppf(1 - level, df), df, nc))


def power_at_null(ev: DoseEvidence, m: int, a_fails: float = ALPHA_FAILS) -> float:
    """The reading's chance to say FAILS if the norm did not matter (b = 0 at every lr), at its strata's se and the
    Bonferroni level a_fails/m (Holm's first step: a lower bound of its power)."""
    ps = [_power(0.0, s.se, s.df, a_fails / m, "fails") for s in ev.strata]
    ps = [p for p in ps if math.isfinite(p)]
    return 1 - float(np.prod([1 - p for p in ps])) if ps else math.nan


def _defined(s) -> bool:
    """A stratum whose slope, se and spread allow a power calculation."""
    return math.isfinite(s.b) and math.isfinite(s.se) and s.df >= 1 and s.sxx > 0


def _side(s, m: int, a_fails: float, a_holds: float) -> tuple[str, float]:
    """The test a count is sized for: FAILS at a_fails/m when b > −DELTA, else HOLDS at a_holds/m."""
    return ("fails", a_fails / m) if s.b > -DELTA else ("holds", a_holds / m)


def seeds_to_decide(s, m: int, a_fails: float = ALPHA_FAILS, a_holds: float = ALPHA_HOLDS) -> float:
    """Seeds per dose at which the stratum's test, at its observed slope, decides with POWER_TARGET (FAILS side at
    a_fails/m if b > −DELTA, else HOLDS at a_holds/m); inf beyond MAX_SEEDS — in particular when the doses' scatter
    alone keeps it out of reach, which no seed count shrinks; nan if undefined."""
    from sapa.empirics.training.censored_trend import smallest_count

    if not _defined(s):
        return math.nan
    side, level = _side(s, m, a_fails, a_holds)
    k = smallest_count(lambda k: _power(s.b, _se_at(s, k), s.df, level, side) >= POWER_TARGET, MAX_SEEDS)
    return math.inf if k is None else float(k)


def doses_to_decide(s, m: int, a_fails: float = ALPHA_FAILS, a_holds: float = ALPHA_HOLDS) -> float:
    """Doses at which the stratum's test, at its observed slope, decides with POWER_TARGET (sides and levels as
    :func:`seeds_to_decide`): the dose is the unit, so D doses at the stratum's seeds per dose, spread over the norm
    like its own (Σ(x − x̄)² grows like D − 1) and scattered like its own about the line, give
    se_D = se·√((n − 1)/(D − 1)) on D − 2 df — the lever that also shrinks the doses' scatter, which seeds cannot.
    inf beyond MAX_DOSES; nan if undefined."""
    from sapa.empirics.training.censored_trend import smallest_count

    if not _defined(s):
        return math.nan
    side, level = _side(s, m, a_fails, a_holds)
    if s.se == 0:
        return float(s.n)

    def ok(d: int) -> bool:
        return d >= 3 and _power(s.b, s.se * math.sqrt((s.n - 1) / (d - 1)), d - 2, level, side) >= POWER_TARGET

    k = smallest_count(ok, MAX_DOSES)
    return math.inf if k is None else float(k)


def simulate_dose(truth: str, rng: np.random.Generator) -> DoseEvidence:
    """One family's dose-response at 2–3 learning rates: SIM_DOSES doses × SIM_SEEDS seeds each; log10 norm =
    −k·log10 c + 0.1 scatter (k in SIM_NORM_PER_DECADE_C), accuracy = b·log10 norm + the doses' scatter + seed noise
    (t3 tails, sd in SIM_SEED_SD); b = −DELTA at every lr ("holds": the edge, where FAILS must be rare) or 0 at every
    lr ("fails": the norm does not matter). Holm over the reading's strata."""
    import pandas as pd

    from sapa.empirics.training.censored_trend import holm
    from sapa.empirics.training.dose_response import dose_slope

    b = -DELTA if truth == "holds" else 0.0
    c = np.log10(2.0 ** np.arange(SIM_DOSES))
    strata = []
    for lr in range(int(rng.choice(SIM_STRATA))):
        x = -rng.uniform(*SIM_NORM_PER_DECADE_C) * c + 0.1 * rng.standard_normal(SIM_DOSES)
        sd = rng.uniform(*SIM_SEED_SD)
        z = rng.standard_t(SIM_T_DF, size=(SIM_DOSES, SIM_SEEDS)) / math.sqrt(SIM_T_DF / (SIM_T_DF - 2))
        acc = (b * x + SIM_LOF_SD * rng.standard_normal(SIM_DOSES))[:, None] + sd * z
        strata.append(dose_slope(pd.DataFrame({"lr": float(lr), "log10_attn_fro": x, "test_acc": acc.mean(1),
                                               "test_acc_seeds": list(acc)})))
    raw = [raw_p(s) for s in strata]
    return DoseEvidence(tuple(strata), tuple(holm([r[0] for r in raw])), tuple(holm([r[1] for r in raw])))


@dataclass(frozen=True)
class MatchedEvidence:
    """The matched-norm differences (a Contrast), the Holm-adjusted two-sided p and the equivalence interval."""

    contrast: object  # sapa.empirics.training.dose_response.Contrast
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
    from sapa.empirics.training.dose_response import Contrast

    n = int(rng.integers(5, 9))
    mu = EQUIVALENCE * (1 if rng.random() < 0.5 else -1) if truth == "holds" else 0.06
    z = rng.standard_t(SIM_T_DF, size=(n, SIM_SEEDS)) / math.sqrt(SIM_T_DF / (SIM_T_DF - 2))
    d = mu + 0.03 * z.mean(1)
    return matched_evidence(Contrast(tuple(d), tuple(np.zeros(n)), float(d.mean()), math.nan, math.nan, n))


DOSE_ASSOCIATION = Rule(
    name="dose-association",
    summary=f"Within one family x^p/c at each learning rate (unit: the dose c, seeds averaged), the OLS slope b of test "
            f"accuracy on log10 final norm over the doses, Student-t on D − 2 df against −{DELTA} per decade, "
            f"Holm-adjusted over every stratum of the entry: FAILS if at some lr p(b ≤ −{DELTA}) ≤ {ALPHA_FAILS} (a "
            f"10× lower norm buys less than {DELTA} accuracy, or costs it); HOLDS if at every lr p(b ≥ −{DELTA}) ≤ "
            f"{ALPHA_HOLDS}; else UNDETERMINED",
    thresholds={"alpha_fails_familywise": ALPHA_FAILS, "alpha_holds_familywise": ALPHA_HOLDS,
                "delta_accuracy_per_decade": DELTA},
    decide=decide_dose,
    simulate=simulate_dose,
    design={"holds": f"b = −{DELTA} per decade at every lr (the edge), {'/'.join(map(str, SIM_STRATA))} lrs × "
                     f"{SIM_DOSES} doses × {SIM_SEEDS} seeds, seed sd {SIM_SEED_SD[0]}–{SIM_SEED_SD[1]} with "
                     f"t{SIM_T_DF} tails, the doses' scatter sd {SIM_LOF_SD}; one reading",
            "fails": "b = 0 at every lr (the norm does not matter)",
            "estimator": "sapa.empirics.training.dose_response.dose_slope"},
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
            "fails": "true difference 0.06 (three margins)", "estimator": "sapa.empirics.training.dose_response.matched_norm_contrast"},
    trials=1000,
)

RULES = (DOSE_ASSOCIATION, MATCHED_NORM)
