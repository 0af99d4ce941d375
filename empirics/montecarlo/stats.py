"""Monte Carlo statistics for the growth claims of arXiv 2410.18613 (Thm 4.2–Cor 4.5), on scipy.stats.

The one place for these ideas (import them, do not rewrite them):

* :func:`loglog_slope` — b̂ = Σ(u−ū)(v−v̄)/Σ(u−ū)², u = log N, v = log y: the exponent of
  ``y ≈ a N^b`` (an RMS exponent is ``0.5 * loglog_slope(N, mean_sq)``); :func:`ols_slopes`
  on already-logged values, :func:`local_slopes` between neighbouring N;
* :func:`bootstrap` — a seeded percentile (or BCa/basic) interval of any statistic of K
  samples, ``scipy.stats.bootstrap`` with one-value samples held fixed;
* :func:`fit_exponent` — the growth exponent ``b`` in ``E‖·‖ ≈ a N^b`` as the log-log slope of
  the means with a seeded percentile-bootstrap interval (trials resampled within each N);
* per-cell summaries (mean, standard error, quantiles); z-scores of Monte Carlo means of
  squared norms against exact ``E‖·‖²``; a regime label ("sqrt_n", "flat", "other") for a
  series; the heavy-tail RMS exponent interval and the trial design of the growth checks.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np

from sapa.common.validate import InputError, choice, positive_int, unit_interval

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
MAX_BOOT = 1_000_000  # bootstrap replicates at most: they are held in memory, n_boot × Σ n_k values


def summarise_values(values: Sequence[float], quantiles: Sequence[float] = QUANTILES) -> dict:
    """mean, se = s/√n, std, n and the given quantiles (``q05`` …) of a 1-D sample."""
    v = np.asarray(values, dtype=np.float64).ravel()  # (n,)
    if v.size == 0:
        raise InputError("values is empty")
    n = v.size
    std = float(v.std(ddof=1)) if n > 1 else math.nan
    out = {"n": n, "mean": float(v.mean()), "std": std, "se": std / math.sqrt(n) if n > 1 else math.nan}
    for q, val in zip(quantiles, np.quantile(v, quantiles)):
        out[f"q{round(100 * q):02d}"] = float(val)
    return out


def ols_slopes(x: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Row-wise OLS slope ``Σ(x−x̄)(y−ȳ) / Σ(x−x̄)²`` of each row of Y (B, K) on x (K,)."""
    xc = x - x.mean()  # (K,)
    return (Y - Y.mean(axis=-1, keepdims=True)) @ xc / (xc @ xc)  # (B,)


def local_slopes(N: Sequence[float], means: Sequence[float]) -> list[float]:
    """``log(m_{k+1}/m_k) / log(N_{k+1}/N_k)`` for neighbouring grid points."""
    ln, lm = np.log(np.asarray(N, float)), np.log(np.asarray(means, float))
    return [float(v) for v in np.diff(lm) / np.diff(ln)]


def loglog_slope(N: Sequence[float], y) -> float | np.ndarray:
    """b̂ = Σ(u−ū)(v−v̄)/Σ(u−ū)², u = log N, v = log y: the OLS exponent of ``y ≈ a N^b``.

    ``y`` is (K,) (returns a float) or (..., K) (returns the (...) slopes of its rows, one
    matrix product). The RMS exponent of squared norms is ``0.5 * loglog_slope(N, mean_sq)``.

    >>> round(loglog_slope([8, 64, 512], [3.0 * n**1.4 for n in (8, 64, 512)]), 12)
    1.4
    """
    x, Y = np.log(np.asarray(N, dtype=np.float64)), np.log(np.asarray(y, dtype=np.float64))  # (K,), (..., K)
    if x.ndim != 1 or x.size < 2 or Y.shape[-1:] != x.shape:
        raise InputError(f"loglog_slope needs ≥ 2 sizes N and values y (..., K) on them, got N {x.shape}, y {Y.shape}")
    if Y.ndim == 1:
        return float(ols_slopes(x, Y[None, :])[0])
    return ols_slopes(x, Y)


@dataclass(frozen=True)
class BootstrapInterval:
    """A statistic, its bootstrap interval [lo, hi] at ``level`` and its bootstrap standard error."""

    estimate: float  # the statistic of the samples themselves
    lo: float
    hi: float
    level: float
    se: float  # std (ddof 1) of the bootstrap distribution
    n_boot: int
    distribution: np.ndarray = field(compare=False, repr=False)  # (n_boot,) replicates


def bootstrap(
    samples: Sequence[Sequence[float]],
    statistic: Callable[..., np.ndarray],
    *,
    level: float = 0.9,
    n_boot: int = 1000,
    seed: int | np.random.SeedSequence | np.random.Generator = 0,
    paired: bool = False,
    method: str = "percentile",
) -> BootstrapInterval:
    """θ̂* = statistic(resampled samples): ``scipy.stats.bootstrap`` interval of a statistic of K samples.

    Args:
      samples: K one-dimensional samples; each is resampled with replacement on its own
        (``paired=False``, e.g. trials within each N) or all with the same indices
        (``paired=True``, e.g. texts shared by every N). A one-value sample (unpaired) is held
        fixed: resampling it could only repeat it, and it draws no random numbers.
      statistic: ``statistic(*samples, axis=-1)`` with sample k of shape (..., n_k) returns the
        (...) values (scipy's vectorised form), e.g. the slope of the log means on log N.
      level: two-sided level in [0, 1].
      n_boot: replicates (≥ 2).
      seed: seeds ``np.random.default_rng`` (or is the Generator); same seed, same interval.
      method: ``"percentile"``, ``"basic"`` or ``"bca"`` (scipy's).

    >>> b = bootstrap([[1.0, 2.0, 3.0, 4.0]], np.mean, n_boot=200, seed=0)
    >>> (b.estimate, b.lo <= b.estimate <= b.hi, b.distribution.shape)
    (2.5, True, (200,))
    """
    from scipy import stats

    unit_interval("level", level, 0.0, 1.0)
    n_boot = positive_int("n_boot", n_boot)
    if not 2 <= n_boot <= MAX_BOOT:
        raise InputError(f"n_boot must be between 2 (a spread needs two replicates) and {MAX_BOOT:,}, got {n_boot}")
    method = choice("method", method, ("percentile", "basic", "bca"))
    arrs = [np.asarray(a, dtype=np.float64).ravel() for a in samples]  # K × (n_k,)
    if not arrs or any(a.size == 0 for a in arrs):
        raise InputError("bootstrap needs at least one sample, and every sample needs a value")
    if paired and (len({a.size for a in arrs}) != 1 or arrs[0].size < 2):
        raise InputError(f"paired samples need one common size ≥ 2, got sizes {[a.size for a in arrs]}")
    estimate = float(statistic(*arrs, axis=-1))
    free = [k for k, a in enumerate(arrs) if a.size > 1 or paired]
    if not free:  # every sample is one value: every replicate is the estimate
        dist = np.full(n_boot, estimate)
        return BootstrapInterval(estimate, estimate, estimate, float(level), 0.0, n_boot, dist)

    def full(*resampled, axis=-1):
        """The K samples with the one-value ones broadcast to the replicates' shape (..., 1)."""
        batch = resampled[0].shape[:-1]
        parts = dict(zip(free, resampled))
        return statistic(*(parts[k] if k in parts else np.broadcast_to(a, batch + (1,)) for k, a in enumerate(arrs)), axis=axis)

    res = stats.bootstrap([arrs[k] for k in free], full, n_resamples=n_boot, vectorized=True, paired=paired,
                          confidence_level=level, method=method, rng=np.random.default_rng(seed))
    ci = res.confidence_interval
    return BootstrapInterval(estimate, float(ci.low), float(ci.high), float(level), float(res.standard_error), n_boot,
                             np.asarray(res.bootstrap_distribution, dtype=np.float64))


@dataclass(frozen=True)
class ExponentFit:
    """Growth exponent of ``mean ≈ a N^slope`` with a bootstrap interval."""

    slope: float
    intercept: float  # log a
    ci: tuple[float, float]  # percentile bootstrap interval at ``level``
    level: float
    n_boot: int
    N: tuple[float, ...]  # (K,) grid
    means: tuple[float, ...]  # (K,) sample means
    local: tuple[float, ...]  # (K−1,) local slopes
    boot_se: float  # std of the bootstrap slopes

    def as_dict(self) -> dict:
        """Plain-JSON form (tuples as lists)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


def fit_exponent(
    N: Sequence[float],
    samples: Sequence[Sequence[float]],
    *,
    level: float = 0.9,
    n_boot: int = 1000,
    seed: int | np.random.SeedSequence = 0,
) -> ExponentFit:
    """OLS slope of ``log(mean_k)`` on ``log N_k`` with a percentile-bootstrap CI.

    Args:
      N: (K,) sizes, K ≥ 2, distinct and positive.
      samples: K one-dimensional samples (the trials at each N), all positive.
      level: two-sided interval level.
      n_boot: bootstrap replicates; each resamples trials with replacement within each N,
        recomputes the K means and refits.
      seed: seeds ``np.random.default_rng``; same seed, same interval.
    """
    unit_interval("level", level, 0.0, 1.0)
    n_boot = positive_int("n_boot", n_boot)
    if n_boot < 2:
        raise InputError(f"n_boot must be at least 2 (the bootstrap spread needs two replicates), got {n_boot}")
    if not isinstance(seed, np.random.SeedSequence) and (
        isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0
    ):
        raise InputError(f"seed must be a non-negative integer or a SeedSequence, got {seed!r}")
    try:
        Ns = np.asarray(N, dtype=np.float64)
        n_samples = len(samples)
        arrs = [np.asarray(s, dtype=np.float64).ravel() for s in samples]
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"N and samples must be numeric ({' '.join(str(exc).split())})") from None
    if Ns.ndim != 1 or Ns.size < 2 or n_samples != Ns.size:
        raise InputError(f"need ≥ 2 grid points with one sample each, got N={Ns.tolist()} and {n_samples} samples")
    if not np.all(np.isfinite(Ns)) or np.any(Ns <= 0) or np.unique(Ns).size != Ns.size:
        raise InputError(f"N must be distinct, finite and positive, got {Ns.tolist()}")
    if any(a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0) for a in arrs):
        raise InputError("every sample must be non-empty, finite and positive")
    x = np.log(Ns)  # (K,)
    means = np.array([a.mean() for a in arrs])  # (K,)
    slope = loglog_slope(Ns, means)
    intercept = float(np.log(means).mean() - slope * x.mean())

    def slope_of_log_means(*resampled, axis=-1):  # K × (B, n_k) -> (B,)
        return loglog_slope(Ns, np.stack([r.mean(axis=axis) for r in resampled], axis=-1))  # (B, K) means

    boot = bootstrap(arrs, slope_of_log_means, level=level, n_boot=n_boot, seed=seed)
    return ExponentFit(
        slope=slope,
        intercept=intercept,
        ci=(boot.lo, boot.hi),
        level=float(level),
        n_boot=int(n_boot),
        N=tuple(float(v) for v in Ns),
        means=tuple(float(v) for v in means),
        local=tuple(local_slopes(Ns, means)),
        boot_se=boot.se,
    )


def z_score(squared: Sequence[float], expected: float) -> dict:
    """``z = (mean(v²-sample) − E) / se`` for a sample of squared norms against exact ``E‖·‖²``."""
    v = np.asarray(squared, dtype=np.float64).ravel()
    if v.size < 2:
        raise InputError("z_score needs at least 2 values")
    mean, se = float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))
    z = (mean - expected) / se if se > 0 else (0.0 if mean == expected else math.copysign(math.inf, mean - expected))
    return {"mean_sq": mean, "se_sq": se, "expected_sq": float(expected), "z": float(z), "rel_err": (mean - expected) / expected if expected else math.nan}


def classify_regime(fit: ExponentFit, *, flat_below: float = 0.15) -> tuple[str, dict]:
    """"sqrt_n" if the CI holds 0.5 and excludes 0; else "flat" if it holds 0 or slope < 0.15; else "other"."""
    lo, hi = fit.ci
    has_half, has_zero = lo <= 0.5 <= hi, lo <= 0.0 <= hi
    if has_half and not has_zero:
        label = "sqrt_n"
    elif has_zero or fit.slope < flat_below:
        label = "flat"
    else:
        label = "other"
    evidence = {
        "slope": fit.slope,
        "ci": list(fit.ci),
        "level": fit.level,
        "ci_contains_half": has_half,
        "ci_contains_zero": has_zero,
        "flat_below": flat_below,
        "local_slopes": list(fit.local),
        "N": list(fit.N),
    }
    return label, evidence


@dataclass(frozen=True)
class ExponentInterval:
    """An exponent estimate with a two-sided interval at ``level``."""

    estimate: float
    lo: float
    hi: float
    level: float


def rms_exponent_interval(N: Sequence[float], sq_samples: Sequence[Sequence[float]], *, level: float) -> ExponentInterval:
    """b̂ = ½ Σ_k w_k [log Ȳ_k + v_k/2] ± z·½√(Σ_k w_k² v_k), w = OLS weights of log N, v_k = max(ĈV²_k, c̄/N_k)/T_k.

    The exponent of √E‖·‖² against N (half the OLS slope of log E‖·‖² on log N), from K samples of
    squared norms Y (T_k trials at N_k), with a delta-method interval built for heavy tails. The one
    estimator the ledger's Monte Carlo checks and the calibration of ``growth-upper`` share.

    Why this form (checked in ``tests/empirics/montecarlo/test_stats.py`` and ``sapa calibrate``): squared
    norms of x³ are degree-12 Gaussian polynomials (CV² of ‖S^{∘3}‖²_F ≈ 2–40 at N = 8, skewness
    20–60). A cell whose T draws miss the rare large values has a low mean *and* a low variance
    estimate, so intervals that trust each cell's own spread (the percentile bootstrap over trials,
    BCa, the plain delta method) are narrowest exactly when they are wrong, and every miss lies
    above the truth (small-N means low → slope high). Two corrections:

    * pooled variance: the squared-norm CV² of these series falls like 1/N (N(N−1) entries, about
      N independent rows), so c̄ = mean_k(N_k·ĈV²_k) pools all K cells, and each cell's variance is
      the larger of its own estimate and c̄/N_k — one cell's missing tail no longer shrinks its interval;
    * bias: E log Ȳ ≈ log E Y − CV²/(2T), so v_k/2 is added back to each log-mean.

    The interval is analytic: the same samples give the same interval (no resampling, no seed).

    Args:
      N: (K,) sizes, K ≥ 2, distinct and positive.
      sq_samples: K one-dimensional samples of squared norms (≥ 2 trials each, all positive).
      level: two-sided level in (0, 1).
    """
    unit_interval("level", level, 0.0, 1.0)
    Ns = np.asarray(N, dtype=np.float64)
    arrs = [np.asarray(a, dtype=np.float64).ravel() for a in sq_samples]
    if Ns.ndim != 1 or Ns.size < 2 or len(arrs) != Ns.size:
        raise InputError(f"need ≥ 2 grid points with one sample each, got N={Ns.tolist()} and {len(arrs)} samples")
    if not np.all(np.isfinite(Ns)) or np.any(Ns <= 0) or np.unique(Ns).size != Ns.size:
        raise InputError(f"N must be distinct, finite and positive, got {Ns.tolist()}")
    if any(a.size < 2 or not np.all(np.isfinite(a)) or np.any(a <= 0) for a in arrs):
        raise InputError("every sample needs ≥ 2 finite, positive values")
    from scipy import stats

    x = np.log(Ns)
    xc = x - x.mean()
    w = xc / (xc @ xc)  # (K,) OLS weights: slope = w · y
    T = np.array([a.size for a in arrs], dtype=np.float64)  # (K,)
    m = np.array([a.mean() for a in arrs])  # (K,)
    cv2 = np.array([a.var(ddof=1) for a in arrs]) / m**2  # (K,)
    pooled = float(np.mean(Ns * cv2))  # c̄ in CV²(N) ≈ c̄/N
    v = np.maximum(cv2, pooled / Ns) / T  # (K,) variance of log Ȳ_k
    est = 0.5 * float(w @ (np.log(m) + v / 2))
    se = 0.5 * math.sqrt(float((w * w) @ v))
    z = float(stats.norm.ppf(0.5 + level / 2))
    return ExponentInterval(est, est - z * se, est + z * se, float(level))


DESIGN_BASE = 48   # trials at the largest N of the grid (the quick sweep's ``trials``)
DESIGN_CAP = 768   # at most this many trials at small N (the quick sweep's ``tail_trials_max``)


def design_trials(N: int, grid: Sequence[int], *, base: int = DESIGN_BASE, cap: int = DESIGN_CAP) -> int:
    """T(N) = min(cap, ⌈base·max(grid)/N⌉) (at least ``base``): trials fixed in advance for a heavy-tailed series.

    The CV² of ‖x^p‖² (p ≥ 2) falls like 1/N (measured on 20 000-trial pilot cells of the quick
    sweep's x³ series: N·CV² ≈ 110–250 at D = 16, 10–30 at D = 64, flat in N), so T ∝ 1/N gives
    every grid point the same standard error of log mean(‖·‖²), and puts the most trials where
    the tails are worst and a trial is cheapest (cost O(N²D)). ``cap`` bounds the per-trial
    overhead at the smallest N (sampling X, W dominates there).
    """
    N = positive_int("N", N)
    g = [positive_int("grid", n) for n in grid]
    if not g:
        raise InputError("grid must not be empty")
    base, cap = positive_int("base", base), positive_int("cap", cap)
    return int(max(base, min(cap, math.ceil(base * max(g) / N))))
