"""Tests for `empirics/stats.py`: summaries, exponent fits and bootstrap coverage, z-scores, regimes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from empirics.stats import (
    ExponentFit,
    classify_regime,
    fit_exponent,
    local_slopes,
    ols_slopes,
    summarise_values,
    z_score,
)
from theory.validate import InputError

N_GRID = np.array([8, 16, 32, 64, 128, 256])


def _power_law_samples(rng, b, trials, sigma=0.3, a=2.0):
    """values = a N^b · LogNormal(0, σ²): E value = a e^{σ²/2} N^b, so the true slope of log-mean is b."""
    return [a * n**b * rng.lognormal(0.0, sigma, size=trials) for n in N_GRID]


def test_summarise_values_matches_numpy():
    v = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    s = summarise_values(v)
    assert s["n"] == 5 and s["mean"] == 6.2
    assert math.isclose(s["se"], v.std(ddof=1) / math.sqrt(5))
    assert s["q50"] == 4.0 and s["q05"] == np.quantile(v, 0.05) and s["q95"] == np.quantile(v, 0.95)
    with pytest.raises(InputError):
        summarise_values([])


def test_ols_and_local_slopes_exact_on_power_laws():
    x = np.log(N_GRID)
    Y = np.stack([0.5 * x + 1.0, 1.0 * x - 2.0, 0 * x + 3.0])
    assert np.allclose(ols_slopes(x, Y), [0.5, 1.0, 0.0], atol=1e-12)
    assert np.allclose(local_slopes(N_GRID, 3.0 * N_GRID**0.5), 0.5, atol=1e-12)


def test_fit_noiseless_power_law_is_exact():
    fit = fit_exponent(N_GRID, [np.full(5, 7 * n**1.0) for n in N_GRID], n_boot=50)
    assert math.isclose(fit.slope, 1.0, abs_tol=1e-12)
    assert math.isclose(fit.intercept, math.log(7), abs_tol=1e-9)
    assert fit.ci[0] == pytest.approx(1.0, abs=1e-12) and fit.ci[1] == pytest.approx(1.0, abs=1e-12)
    assert fit.as_dict()["N"] == [float(n) for n in N_GRID]


@pytest.mark.parametrize("b", [0.0, 0.5, 1.0, 1.5])
def test_fit_recovers_known_slope(b):
    rng = np.random.default_rng(1234)
    fit = fit_exponent(N_GRID, _power_law_samples(rng, b, 200), n_boot=500, seed=1)
    assert fit.ci[0] <= b <= fit.ci[1]
    assert abs(fit.slope - b) < 0.05
    assert len(fit.local) == len(N_GRID) - 1


def test_bootstrap_is_seeded():
    rng = np.random.default_rng(0)
    samples = _power_law_samples(rng, 0.5, 30)
    f1, f2 = fit_exponent(N_GRID, samples, seed=7), fit_exponent(N_GRID, samples, seed=7)
    f3 = fit_exponent(N_GRID, samples, seed=8)
    assert f1 == f2
    assert f1.ci != f3.ci and f1.slope == f3.slope


def test_bootstrap_interval_coverage_is_near_nominal():
    # 200 synthetic replicates; the number of 90% intervals that cover the true slope is
    # Binomial(200, ≈0.9) if the interval is calibrated: it must lie in the central 99.9% band.
    rng = np.random.default_rng(20241018)
    reps, level, b = 200, 0.9, 0.5
    covered = 0
    for r in range(reps):
        fit = fit_exponent(N_GRID, _power_law_samples(rng, b, 40, sigma=0.5), level=level, n_boot=400, seed=r)
        covered += fit.ci[0] <= b <= fit.ci[1]
    lo, hi = stats.binom.ppf(0.0005, reps, level), stats.binom.ppf(0.9995, reps, level)
    assert lo <= covered <= hi, (covered, lo, hi)


def test_fit_rejects_bad_input():
    with pytest.raises(InputError):
        fit_exponent([8], [[1.0]])
    with pytest.raises(InputError):
        fit_exponent([8, 8], [[1.0], [2.0]])
    with pytest.raises(InputError):
        fit_exponent([8, 16], [[1.0], [-2.0]])
    with pytest.raises(InputError):
        fit_exponent([8, 16], [[1.0]])


def test_z_score_of_squared_norms():
    rng = np.random.default_rng(3)
    sq = rng.chisquare(5, size=4000)  # E = 5
    good, bad = z_score(sq, 5.0), z_score(sq, 5.5)
    assert abs(good["z"]) < 4 and bad["z"] < -6  # expected z ≈ −0.5/(√10/√4000) = −10
    assert math.isclose(good["se_sq"], sq.std(ddof=1) / math.sqrt(sq.size))
    assert z_score([2.0, 2.0], 2.0)["z"] == 0.0


def _fit(slope, lo, hi):
    return ExponentFit(slope, 0.0, (lo, hi), 0.9, 100, (8.0, 16.0, 32.0), (1.0, 1.0, 1.0), (slope, slope), 0.1)


@pytest.mark.parametrize(
    "slope,lo,hi,label",
    [
        (0.5, 0.45, 0.55, "sqrt_n"),
        (0.3, 0.1, 0.6, "sqrt_n"),
        (0.2, -0.1, 0.6, "flat"),  # CI holds 0.5 but also 0
        (0.02, -0.03, 0.07, "flat"),
        (0.1, 0.05, 0.14, "flat"),  # slope < 0.15
        (1.0, 0.95, 1.05, "other"),
        (0.3, 0.25, 0.35, "other"),
    ],
)
def test_classify_regime(slope, lo, hi, label):
    got, evidence = classify_regime(_fit(slope, lo, hi))
    assert got == label
    assert evidence["slope"] == slope and evidence["ci"] == [lo, hi]
    assert set(evidence) >= {"ci_contains_half", "ci_contains_zero", "local_slopes", "N"}


def test_classify_synthetic_sqrt_n_and_flat_series():
    rng = np.random.default_rng(5)
    assert classify_regime(fit_exponent(N_GRID, _power_law_samples(rng, 0.5, 100), seed=0))[0] == "sqrt_n"
    assert classify_regime(fit_exponent(N_GRID, _power_law_samples(rng, 0.0, 100), seed=0))[0] == "flat"
    assert classify_regime(fit_exponent(N_GRID, _power_law_samples(rng, 1.0, 100), seed=0))[0] == "other"
