"""``audit-like-softmax``: does an activation's attention norm "grow like softmax's" — O(√N), constant within K×?

The scale rules of arXiv 2410.18613 (x^p/√N) and of the other softmax alternatives (ReLU/N, sigmoid
with bias −log N, normalised polynomials) all claim that, with their scale, the attention norm grows
like softmax's. Read charitably, as softmax's own Theorem 4.1: ‖φ(S)‖_F = O(√N) *and* of the same
size as softmax's bound √N within a declared factor K (a rate alone says nothing about a 10⁴× larger
norm at the sizes people train at).

Evidence: an interval for the largest local growth exponent of the E-RMS norm (exact or quadrature:
zero width; Monte Carlo: a fitted interval), the asymptotic exponent, and an interval for the
constant ratio = E-RMS ‖φ‖_F / √N at the audited N.

Two readings, judged apart (one standard for every activation family, arXiv 2410.18613's x^p/√N included):

* **rate** (:func:`decide_rate`): ``FAILS`` if the exponent interval lies wholly above ½ + TOL (and the asymptotic
  exponent is not within it); ``HOLDS`` if it lies at or below ½ + TOL; ``HOLDS_IN_REGIME`` if only the asymptotic
  exponent (large N) is within ½ + TOL; else ``UNDETERMINED``. The sup is taken from the practical minimum
  ``N_MIN`` on (a claim may set its own); every window where the local exponent exceeds ½ + TOL is reported.
* **size** (:func:`decide_size`, rule ``size-within-factor``): ``FAILS`` if the ratio interval lies wholly above
  K, ``HOLDS`` if at or below K, else ``UNDETERMINED``. K = SIZE_FACTOR is declared once here (default 10×;
  ``sapa audit --size-factor`` changes it).

:func:`decide` ("like softmax", rule ``audit-like-softmax``) is their conjunction: FAILS if either fails,
UNDETERMINED if either is undetermined, HOLDS_IN_REGIME if the rate holds only in its regime, else HOLDS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sapa.rules.base import Rule

TOL = 0.05        # practical tolerance on the exponent (as growth-upper)
SIZE_FACTOR = 10.0  # "within K× of softmax's √N": an order of magnitude (declared once; `--size-factor`)
K = SIZE_FACTOR
N_MIN = 16        # the practical minimum N from which the rate is judged (windows below it are reported)
LEVEL = 0.99      # Monte Carlo interval level
A = 0.5           # softmax's exponent (Thm 4.1)
SIM_N = (64, 128, 256)   # the ledger's Monte Carlo grid for row-normalised activations
SIM_TRIALS = 48


@dataclass(frozen=True)
class LikeSoftmaxEvidence:
    """Exponent interval (sup over N), asymptotic exponent, ratio interval at the audited N."""

    exp_lo: float
    exp_hi: float
    asymptotic: float     # NaN if unknown (Monte Carlo)
    ratio_lo: float
    ratio_hi: float
    exact: bool


def decide_rate(ev: LikeSoftmaxEvidence, tol: float = TOL) -> str:
    """The rate reading: O(√N) from the exponent interval (sup over N ≥ N_MIN) and the asymptotic exponent."""
    if not all(math.isfinite(v) for v in (ev.exp_lo, ev.exp_hi)):
        return "UNDETERMINED"
    edge = A + tol
    asym_ok = math.isfinite(ev.asymptotic) and ev.asymptotic <= edge
    if ev.exp_lo > edge and not asym_ok:
        return "FAILS"
    if ev.exp_hi <= edge:
        return "HOLDS"
    if asym_ok:
        return "HOLDS_IN_REGIME"
    return "UNDETERMINED"


def decide_size(ev: LikeSoftmaxEvidence, factor: float = SIZE_FACTOR) -> str:
    """The size reading: E-RMS ‖φ‖_F / √N within ``factor`` (interval wholly at or below it: HOLDS; above: FAILS)."""
    if not all(math.isfinite(v) for v in (ev.ratio_lo, ev.ratio_hi)):
        return "UNDETERMINED"
    if ev.ratio_lo > factor:
        return "FAILS"
    if ev.ratio_hi <= factor:
        return "HOLDS"
    return "UNDETERMINED"


def combine(rate: str, size: str) -> str:
    """"Like softmax" = rate and size: FAILS if either fails; UNDETERMINED if either is; else the rate's verdict."""
    if "FAILS" in (rate, size):
        return "FAILS"
    if "UNDETERMINED" in (rate, size):
        return "UNDETERMINED"
    return rate


def decide(ev: LikeSoftmaxEvidence, factor: float = SIZE_FACTOR, tol: float = TOL) -> str:
    """FAILS / HOLDS / HOLDS_IN_REGIME / UNDETERMINED: :func:`combine` of the rate and size readings."""
    return combine(decide_rate(ev, tol), decide_size(ev, factor))


def why_failed(rate: str, size: str) -> str:
    """Which reading made "like softmax" fail or stay open, in words ('' when it holds)."""
    bad = [name for name, v in (("rate", rate), ("size", size)) if v == "FAILS"]
    if bad:
        return "fails on " + " and ".join(bad)
    open_ = [name for name, v in (("rate", rate), ("size", size)) if v == "UNDETERMINED"]
    return ("undetermined on " + " and ".join(open_)) if open_ else ""


def regime_text(windows: list[dict], n_min: float, n_hi: float) -> str:
    """The regime a HOLDS_IN_REGIME rate rests on, in words: "N ≥ 450" (past the last window of the judged range,
    N ≥ ``n_min``, where the local exponent exceeds ½ + TOL), or "N beyond 2^20 (…)" when that window reaches the
    largest N examined and only the asymptotic exponent is within the edge."""
    judged = [w for w in windows if not w.get("below_n_min")]
    if not judged:
        return f"N ≥ {n_min:g}"
    end = max(w["to"] for w in judged)
    if end >= n_hi * (1 - 1e-9):
        return f"N beyond {n_hi:g} (the asymptotic exponent alone)"
    return f"N ≥ {end:.4g}"


def verdict_why(rate: str, size: str, regime: str = "") -> str:
    """The like-softmax verdict's reason in words, agreeing with :func:`combine` of the two readings.

    FAILS: the reading(s) that failed; UNDETERMINED: the reading(s) left open; HOLDS_IN_REGIME: the regime (from
    :func:`regime_text`; required); HOLDS: "holds on rate and size"."""
    verdict = combine(rate, size)
    if verdict in ("FAILS", "UNDETERMINED"):
        return why_failed(rate, size)
    if verdict == "HOLDS_IN_REGIME":
        if not regime:
            raise ValueError("a HOLDS_IN_REGIME reason must name its regime")
        return f"holds for {regime} only: the rate holds in that regime; the size holds"
    return "holds on rate and size"


def mc_evidence(N, sq_samples, N_ref: int, asymptotic: float = math.nan) -> LikeSoftmaxEvidence:
    """Evidence from Monte Carlo squared norms over a grid: the ledger's exponent interval and a t-interval for the ratio at N_ref."""
    from scipy import stats

    from sapa.empirics.montecarlo.stats import rms_exponent_interval

    fit = rms_exponent_interval(N, sq_samples, level=LEVEL)
    k = list(N).index(N_ref)
    v = np.asarray(sq_samples[k], dtype=np.float64)
    t = float(stats.t.ppf(0.5 + LEVEL / 2, v.size - 1))
    m, se = float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))
    lo, hi = max(m - t * se, 0.0), m + t * se
    return LikeSoftmaxEvidence(fit.lo, fit.hi, asymptotic, math.sqrt(lo / N_ref), math.sqrt(hi / N_ref), False)


def simulate(truth: str, rng: np.random.Generator) -> LikeSoftmaxEvidence:
    """Monte Carlo evidence of the ledger's shape (x³-like heavy tails, 48 trials per N).

    holds: exponent exactly ½ + TOL and ratio exactly K at N_ref (both edges at once);
    fails: the designed effect, exponent ½ + 2·TOL with the ratio at 2K.
    """
    from sapa.rules.growth import heavy_tailed_squares

    e, ratio = (A + TOL, K) if truth == "holds" else (A + 2 * TOL, 2 * K)
    n_ref = SIM_N[-1]
    # E‖·‖² = c²N^{2e} with c chosen so that √(E/N_ref) = ratio at N_ref
    c2 = ratio**2 * n_ref / n_ref ** (2 * e)
    sq = [c2 * heavy_tailed_squares(rng, n, SIM_TRIALS, e) for n in SIM_N]
    return mc_evidence(SIM_N, sq, n_ref)


def simulate_size(truth: str, rng: np.random.Generator) -> LikeSoftmaxEvidence:
    """The size reading's synthetic truth: ratio K at N_ref (holds, the edge) or 1.5·K (fails), exponent ½."""
    from sapa.rules.growth import heavy_tailed_squares

    ratio = SIZE_FACTOR if truth == "holds" else 1.5 * SIZE_FACTOR
    n_ref = SIM_N[-1]
    c2 = ratio**2 * n_ref / n_ref ** (2 * A)
    sq = [c2 * heavy_tailed_squares(rng, n, SIM_TRIALS, A) for n in SIM_N]
    return mc_evidence(SIM_N, sq, n_ref)


RULES = (Rule(
    name="audit-like-softmax",
    summary=f"grows like softmax: FAILS if the exponent interval is above ½ + {TOL} or the E-RMS/√N ratio interval "
            f"above K = {K:g}; HOLDS if both are at or below; HOLDS_IN_REGIME if only the asymptotic exponent is; "
            f"else UNDETERMINED (Monte Carlo intervals at {LEVEL:.0%}; exact = zero width)",
    thresholds={"tolerance": TOL, "K": K, "interval_level": LEVEL},
    decide=decide,
    simulate=simulate,
    design={"holds": f"exponent ½ + {TOL} and ratio {K:g} (both edges), heavy-tailed series, N = {SIM_N}, "
                     f"{SIM_TRIALS} trials", "fails": f"exponent ½ + {2 * TOL}, ratio {2 * K:g}"},
    trials=300,
), Rule(
    name="size-within-factor",
    summary=f"size like softmax's: FAILS if the E-RMS ‖φ‖_F/√N interval lies above K = {SIZE_FACTOR:g}, HOLDS if at "
            f"or below, else UNDETERMINED (Monte Carlo intervals at {LEVEL:.0%}; exact or quadrature: zero width, "
            "quadrature error far below the factor's resolution)",
    thresholds={"K": SIZE_FACTOR, "interval_level": LEVEL},
    decide=decide_size,
    simulate=simulate_size,
    design={"holds": f"ratio exactly K = {SIZE_FACTOR:g} at N_ref (the edge), heavy-tailed x³-like draws, N = {SIM_N}, "
                     f"{SIM_TRIALS} trials", "fails": f"ratio {1.5 * SIZE_FACTOR:g}"},
    trials=300,
))
