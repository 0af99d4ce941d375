"""Rule ``head-fraction``: is the fraction of a model's heads whose norm grows no faster than N^{½ + TOL} high or low?

Cor 4.3 / 4.5 of arXiv 2410.18613 say ‖x^p/√N‖_F = O(√N); the reviews ask whether a real
model's heads sit in that regime. Evidence: one growth-exponent interval [lo_h, hi_h] per head
(the paired bootstrap over texts of :func:`sapa.empirics.realmodel.real.paired_rms_exponents`, two-sided
level ``LEVEL``) and the band B the reading allows: (−∞, ½ + TOL] for the upper-bound reading
O(√N) (the paper's notation; the headline reading), [½ − TOL, ½ + TOL] for the two-sided
reading "grows like √N" (reported beside it).

Per head: *within* if [lo, hi] ⊂ B (demonstrably in the band), *consistent* if [lo, hi] meets
B (not demonstrably outside). The statement judged is "at least ``HIGH`` = 90 % of the heads
are in the band" (the regime describes the model, up to a few exceptional heads):

* ``HOLDS`` if the fraction *within* is ≥ HIGH — every head counted must be shown in the band;
* ``FAILS`` if the fraction *consistent* is < ``FAIL_BELOW`` — even counting every unclear head
  as in the band, too few are;
* ``UNDETERMINED`` otherwise (or on empty / non-finite evidence).

Why *consistent* (lower end ≤ ½ + TOL) for FAILS and *within* (upper end ≤ ½ + TOL) for HOLDS:
each verdict counts the unclear heads against itself, so neither is reached by a head the data
cannot place. FAIL_BELOW is set from the calibration: at the least favourable truth (exactly
90 % of heads at the band's edge ½ + TOL, where each is wrongly called outside with probability
≈ 7 % on average, but up to ≈ 25 % together when the texts drawn share a tilt: the heads share
their 8 texts) a FAILS must stay ≤ 1 %. The price is power: half the heads at ½ + 2·TOL is
seen about half the time (the widest intervals cannot tell 0.65 from 0.55).

Synthetic evidence (``simulate``) is shaped like the all-MiniLM-L6-v2 analysis: 72 heads, 8
texts, N = 8 … 256, per-head norms v_{h,t}(N) = N^{e_h}·exp(a_{h,t} + δ_{h,t}(log N − mean) + ε_{h,t,N})
with per-text slope deviations δ of standard deviation σ_h (median over heads drawn in
0.02 … 0.12, log-spread 0.55: the range measured over the four protocols and p = 1, 3), a text
effect shared by all heads (correlation ``SIM_RHO`` = 0.15, the largest measured: 0.02 – 0.14), heavy tails
(a scale mixture, kurtosis ≈ 5.4), residual curvature ε (1.7 σ, measured 1.5 – 1.8 σ), and
the real estimator with its 1000 resamples. Because δ and ε are symmetric and the log-N grid is
symmetric, ½ log E_t v² has slope exactly e_h: the truth is known. (The full budget fits 11
lengths in the same range with 5000 resamples: narrower intervals, so the quick calibration is the
conservative one.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sapa.rules.base import Rule
from sapa.rules.growth import TOL

A = 0.5                 # the claimed exponent: x^p/√N = O(N^½)
EDGE = A + TOL          # upper end of the band of the upper-bound reading
LEVEL = 0.9             # two-sided level of the per-head intervals the rule reads (the analysis' level)
HIGH = 0.9              # "the heads sit in the regime": at least 90 % of them
FAIL_BELOW = 0.6        # FAILS when fewer than 60 % of heads are even consistent with the band (calibrated:
                        # at the least favourable truth P(fraction consistent < 0.6) = 0.5 %, < 0.65: 1.5 %)
DESIGN_LOW = 0.5        # designed effect: only half the heads in the band, the others at a + 2·TOL

SIM_HEADS = 72          # all-MiniLM-L6-v2: 6 layers × 12 heads
SIM_TEXTS = 8           # shipped passages
SIM_N = (8, 16, 32, 64, 128, 256)  # the quick grid (the verdict's fit range)
SIM_BOOT = 1000         # paired bootstrap resamples (sapa.empirics.realmodel.real.QUICK.n_boot)
SIM_SD = (0.02, 0.12)   # median over heads of the per-text slope sd (measured 0.020 … 0.120)
SIM_SD_SPREAD = 0.55    # sd of log σ_h over heads (measured 0.48 … 0.58)
SIM_RESID = 1.7         # residual sd of log v about a text's line, in units of σ_h (measured 1.5 … 1.8)
SIM_OFFSET = 1.4        # sd of the per-text level a_{h,t}, in units of σ_h (measured ≈ 1.4)
SIM_RHO = 0.15          # share of a text's slope deviation common to all heads (measured 0.02 … 0.14)
SIM_TAIL = ((0.7, 0.9), (3.7, 0.1))  # (variance factor, probability): unit mean, kurtosis 3·(0.9·0.49 + 0.1·13.69)


@dataclass(frozen=True)
class HeadFractionEvidence:
    """Per-head exponent intervals [lo_h, hi_h] and the band [band_lo, band_hi] the reading allows."""

    lo: tuple[float, ...]
    hi: tuple[float, ...]
    band_lo: float = -math.inf  # −∞: upper-bound reading O(√N); ½ − TOL: two-sided "like √N"
    band_hi: float = EDGE

    def within(self) -> np.ndarray:
        """(H,) bool: interval inside the band (demonstrably in it)."""
        lo, hi = np.asarray(self.lo, float), np.asarray(self.hi, float)
        return (lo >= self.band_lo) & (hi <= self.band_hi)

    def consistent(self) -> np.ndarray:
        """(H,) bool: interval meets the band (not demonstrably outside it)."""
        lo, hi = np.asarray(self.lo, float), np.asarray(self.hi, float)
        return (lo <= self.band_hi) & (hi >= self.band_lo)

    @property
    def fraction_within(self) -> float:
        return float(self.within().mean()) if self.lo else math.nan

    @property
    def fraction_consistent(self) -> float:
        return float(self.consistent().mean()) if self.lo else math.nan


def decide(ev: HeadFractionEvidence, high: float = HIGH, fail_below: float = FAIL_BELOW) -> str:
    """HOLDS if ≥ HIGH of the heads lie within the band; FAILS if < FAIL_BELOW are consistent with it; else UNDETERMINED.

    ``high`` and ``fail_below`` are varied only for robustness (the ledger's thresholds are the module's).
    """
    lo, hi = np.asarray(ev.lo, float), np.asarray(ev.hi, float)
    if lo.size == 0 or lo.shape != hi.shape or not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        return "UNDETERMINED"
    if ev.fraction_within >= high:
        return "HOLDS"
    if ev.fraction_consistent < fail_below:
        return "FAILS"
    return "UNDETERMINED"


def heads_to_flip(ev: HeadFractionEvidence, high: float = HIGH, fail_below: float = FAIL_BELOW) -> dict:
    """How many heads would have to change for the verdict to change (a distance, in heads).

    FAILS: consistent heads to add until ≥ fail_below·H (then UNDETERMINED); HOLDS: heads within to lose until
    < high·H; UNDETERMINED: the smaller of the heads to gain for HOLDS and to lose for FAILS.
    """
    H = len(ev.lo)
    w, c = int(ev.within().sum()), int(ev.consistent().sum())
    need_c, need_w = math.ceil(fail_below * H - 1e-9), math.ceil(high * H - 1e-9)
    v = decide(ev, high, fail_below)
    if v == "FAILS":
        n, to = need_c - c, "UNDETERMINED"
    elif v == "HOLDS":
        n, to = w - need_w + 1, "UNDETERMINED"
    else:
        n, to = min(need_w - w, c - need_c + 1), "HOLDS or FAILS"
    return {"verdict": v, "heads": H, "within": w, "consistent": c, "high_threshold": high * H,
            "fail_threshold": fail_below * H, "heads_to_flip": int(n), "flips_to": to}


def synthetic_norms(exponents: np.ndarray, rng: np.random.Generator, sd_median: float,
                    texts: int = SIM_TEXTS) -> np.ndarray:
    """Norms (H, T, K) of heads with known exponents, shaped like the real analysis (see the module docstring).

    On the symmetric log-N grid ``SIM_N`` the slope of ½ log E_t v² is exactly ``exponents`` (h).
    """
    H, T = len(exponents), int(texts)
    x = np.log(np.asarray(SIM_N, dtype=np.float64))
    xc = x - x.mean()
    sd = sd_median * np.exp(SIM_SD_SPREAD * rng.standard_normal(H))  # (H,) per-head σ_h
    (v1, p1), (v2, _) = SIM_TAIL
    mix = np.sqrt(np.where(rng.random((H, T)) < p1, v1, v2))  # (H, T) heavy-tail scale
    shared = rng.standard_normal(T)  # (T,) text effect common to the heads
    z = math.sqrt(SIM_RHO) * shared + math.sqrt(1 - SIM_RHO) * rng.standard_normal((H, T))
    delta = sd[:, None] * mix * z  # (H, T) slope deviations
    level = SIM_OFFSET * sd[:, None] * rng.standard_normal((H, T))
    eps = SIM_RESID * sd[:, None, None] * rng.standard_normal((H, T, x.size))
    logv = (np.asarray(exponents, float)[:, None, None] * x + level[..., None] + delta[..., None] * xc + eps)
    return np.exp(logv)  # (H, T, K)


def truth_exponents(truth: str, rng: np.random.Generator) -> np.ndarray:
    """Per-head exponents: holds — HIGH of the heads at the edge ½ + TOL, the rest far above; fails — DESIGN_LOW at ½ − TOL, the rest at ½ + 2·TOL."""
    H = SIM_HEADS
    if truth == "holds":
        n_in = math.ceil(HIGH * H)
        out = EDGE + 2 * TOL + rng.exponential(0.3, H - n_in)  # clearly above: counted against the statement
        return np.concatenate([np.full(n_in, EDGE), out])
    if truth == "fails":
        n_in = round(DESIGN_LOW * H)
        return np.concatenate([np.full(n_in, A - TOL), np.full(H - n_in, A + 2 * TOL)])
    raise ValueError(f"truth must be 'holds' or 'fails', got {truth!r}")


def simulate(truth: str, rng: np.random.Generator) -> HeadFractionEvidence:
    """Synthetic evidence of known truth from the analysis' own estimator (upper-bound reading)."""
    from sapa.empirics.realmodel.real import paired_rms_exponents

    e = truth_exponents(truth, rng)
    sd_median = float(np.exp(rng.uniform(math.log(SIM_SD[0]), math.log(SIM_SD[1]))))
    V = synthetic_norms(e, rng, sd_median)
    f = paired_rms_exponents(SIM_N, V, n_boot=SIM_BOOT, level=LEVEL, rng=rng)
    return HeadFractionEvidence(lo=tuple(float(v) for v in f["lo"]), hi=tuple(float(v) for v in f["hi"]))


HEAD_FRACTION = Rule(
    name="head-fraction",
    summary=f"≥ {HIGH:.0%} of heads in the band (upper-bound reading: exponent ≤ ½ + {TOL}): HOLDS if ≥ {HIGH:.0%} of "
            f"the heads' {LEVEL:.0%} intervals lie within it; FAILS if fewer than {FAIL_BELOW:.0%} even meet it; "
            "else UNDETERMINED",
    thresholds={"tolerance": TOL, "edge": EDGE, "interval_level": LEVEL, "high": HIGH, "fail_below": FAIL_BELOW},
    decide=decide,
    simulate=simulate,
    design={"holds": f"{HIGH:.0%} of {SIM_HEADS} heads at exponent ½ + {TOL} (edge), the rest above ½ + {3 * TOL:g}",
            "fails": f"{DESIGN_LOW:.0%} of heads at ½ − {TOL}, the rest at ½ + {2 * TOL:g}",
            "shape": f"{SIM_TEXTS} texts, N = {SIM_N[0]}…{SIM_N[-1]}, per-text slope sd {SIM_SD[0]}–{SIM_SD[1]} "
                     f"(log-spread {SIM_SD_SPREAD}), shared text effect ρ = {SIM_RHO}, kurtosis ≈ 5.4, "
                     f"{SIM_BOOT} paired resamples",
            "estimator": "sapa.empirics.realmodel.real.paired_rms_exponents"},
    trials=300,
)

RULES = (HEAD_FRACTION,)
