"""Tests for `empirics/montecarlo/stats.py`: summaries, log-log slopes, the bootstrap, exponent fits and coverage, z-scores, regimes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sapa.empirics.montecarlo.stats import (
    ExponentFit,
    bootstrap,
    classify_regime,
    design_trials,
    fit_exponent,
    local_slopes,
    loglog_slope,
    ols_slopes,
    rms_exponent_interval,
    summarise_values,
    z_score,
)
from sapa.common.validate import InputError

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
        (0.6, 0.5, 0.7, "sqrt_n"),  # the CI is closed: an endpoint at ½ holds ½ ...
        (0.4, 0.3, 0.5, "sqrt_n"),
        (0.3, 0.0, 0.6, "flat"),  # ... and an endpoint at 0 holds 0
        (-0.1, -0.2, 0.0, "flat"),
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


# --------------------------------------------------------------------------- heavy-tailed RMS exponent interval

QUICK_GRID = (8, 16, 32, 64, 128, 256, 512)  # the quick sweep's N grid


def _x3_like_squares(rng, N, trials, exponent):
    """E Y = N^{2e}; Y = N^{2e}·mean of N/4 i.i.d. z⁶/15 · (χ²_64/64)³/E(·): x³-like tails (CV² ≈ 30 at N = 8, 0.8 at 512).

    The same family as ``sapa.rules.growth.heavy_tailed_squares`` (restated here so that this test
    of ``empirics`` does not import ``sapa``); it sits at the heavy end of the quick sweep's x³ cells.
    """
    n = max(1, N // 4)
    z6 = (rng.standard_normal((trials, n)) ** 6).mean(axis=1) / 15.0
    g = rng.chisquare(64, size=trials) / 64
    return N ** (2 * exponent) * z6 * g**3 / (66 * 68 / 64**2)


def test_rms_exponent_interval_covers_heavy_tailed_series_at_its_nominal_level():
    # 300 seeded replications of an x³-like series under the quick design (design_trials). With a
    # true coverage of 99 %, misses ~ Binom(300, 0.01): P(misses ≥ 10) = 0.001, so "≥ 97 %"
    # (≤ 9 misses) fails an honest interval with probability 0.1 %. Misses above the truth are
    # the false-FAILS side of growth-upper: ≤ 6 of 300 (P(Binom(300, 0.005) ≥ 7) = 0.0009).
    # The former percentile bootstrap with 48 trials per N missed 8 % here, all above the truth.
    reps, e = 300, 0.55
    above = below = 0
    for r in range(reps):
        rng = np.random.default_rng([2410, 18613, r])
        sq = [_x3_like_squares(rng, n, design_trials(n, QUICK_GRID), e) for n in QUICK_GRID]
        f = rms_exponent_interval(QUICK_GRID, sq, level=0.99)
        above += f.lo > e
        below += f.hi < e
    assert stats.binom.sf(9, reps, 0.01) < 1.1e-3
    assert (above + below) <= 9, (above, below)
    assert above <= 6
    # precise enough to be useful: the interval is narrower than the growth rules' tolerance pair (± 0.1)
    assert (f.hi - f.lo) / 2 < 0.1


def test_rms_exponent_interval_exact_without_noise_and_analytic():
    N = [8, 16, 32, 64]
    sq = [np.full(5, 3.0 * n**1.4) for n in N]  # zero variance: the interval is the exact slope
    f = rms_exponent_interval(N, sq, level=0.99)
    assert f.estimate == pytest.approx(0.7, abs=1e-12) and f.lo == pytest.approx(f.hi, abs=1e-12) and f.level == 0.99
    rng = np.random.default_rng(0)
    noisy = [n * rng.chisquare(5, 50) / 5 for n in N]
    a = rms_exponent_interval(N, noisy, level=0.9)
    assert a == rms_exponent_interval(N, noisy, level=0.9)  # analytic: no resampling, same samples → same interval
    wide = rms_exponent_interval(N, noisy, level=0.99)
    assert wide.lo < a.lo <= a.estimate <= a.hi < wide.hi


def test_rms_exponent_interval_pools_the_variance_of_a_cell_that_missed_its_tail():
    # A small-N cell whose draws happen to be nearly constant cannot shrink its own interval below
    # the pooled 1/N variance model of the other cells.
    rng = np.random.default_rng(1)
    N = [8, 16, 32, 64]
    sq = [n * (1 + rng.normal(0, 2 / math.sqrt(n), 400).clip(-0.9)) for n in N]
    lucky = [np.full(400, 8.0) * (1 + 1e-6 * rng.standard_normal(400))] + sq[1:]
    assert rms_exponent_interval(N, lucky, level=0.99).hi - rms_exponent_interval(N, lucky, level=0.99).lo > 0.02


@pytest.mark.parametrize("bad", [
    {"N": [8], "sq": [[1.0, 2.0]]},  # one grid point
    {"N": [8, 8], "sq": [[1.0, 2.0]] * 2},  # repeated N
    {"N": [8, 16], "sq": [[1.0], [1.0, 2.0]]},  # a cell with one trial has no variance
    {"N": [8, 16], "sq": [[1.0, -2.0], [1.0, 2.0]]},  # squared norms are positive
    {"N": [8, 16], "sq": [[1.0, 2.0], [1.0, 2.0], [3.0, 4.0]]},  # one sample per N
])
def test_rms_exponent_interval_rejects_bad_input(bad):
    with pytest.raises(InputError):
        rms_exponent_interval(bad["N"], bad["sq"], level=0.99)
    with pytest.raises(InputError):
        rms_exponent_interval([8, 16], [[1.0, 2.0], [1.0, 2.0]], level=1.5)


def test_design_trials_is_fixed_in_advance_and_equalises_precision():
    T = [design_trials(n, QUICK_GRID) for n in QUICK_GRID]
    assert T == [768, 768, 768, 384, 192, 96, 48]  # min(768, ⌈48·512/N⌉)
    assert all(a >= b for a, b in zip(T, T[1:]))  # more trials where tails are worst and trials cheapest
    assert T[-1] == 48  # the largest N keeps the base count
    uncapped = [t * n for t, n in zip(T, QUICK_GRID) if t < 768]
    assert len(set(uncapped)) == 1  # T·N constant: equal CV²/T when CV² ∝ 1/N
    assert design_trials(100, [8, 100], base=10, cap=1000) == 10
    assert design_trials(8, [8, 4096], base=128, cap=2048) == 2048
    assert design_trials(3, [8, 16], base=5, cap=2) == 5  # never below the base
    with pytest.raises(InputError):
        design_trials(0, QUICK_GRID)
    with pytest.raises(InputError):
        design_trials(8, [])


# --------------------------------------------------------------------------- loglog_slope, bootstrap


def test_loglog_slope_is_the_ols_slope_of_the_logs():
    assert loglog_slope(N_GRID, 3.0 * N_GRID**0.7) == pytest.approx(0.7, abs=1e-12)
    rng = np.random.default_rng(4)
    y = rng.lognormal(size=(5, N_GRID.size))  # (5, K) rows, no power law
    got = loglog_slope(N_GRID, y)
    want = [stats.linregress(np.log(N_GRID), np.log(row)).slope for row in y]  # independent: scipy's OLS
    assert got.shape == (5,) and np.allclose(got, want, rtol=0, atol=1e-12)
    assert loglog_slope(N_GRID, y[2]) == pytest.approx(want[2], abs=1e-12)
    with pytest.raises(InputError):
        loglog_slope([8], [1.0])
    with pytest.raises(InputError):
        loglog_slope([8, 16], [1.0, 2.0, 3.0])


def test_bootstrap_is_resampling_by_hand():
    """Percentile interval of the mean = quantiles of means of index draws rng.integers(0, n, (B, n))."""
    v = np.random.default_rng(9).lognormal(size=25)
    b = bootstrap([v], np.mean, level=0.8, n_boot=300, seed=5)
    rng = np.random.default_rng(5)
    reps = v[rng.integers(0, v.size, size=(300, v.size))].mean(axis=1)  # (B,)
    assert np.array_equal(b.distribution, reps)
    assert (b.lo, b.hi) == pytest.approx(tuple(np.quantile(reps, [0.1, 0.9])), abs=1e-12)
    assert b.estimate == v.mean() and b.se == pytest.approx(reps.std(ddof=1), abs=1e-15)
    assert b == bootstrap([v], np.mean, level=0.8, n_boot=300, seed=5)  # seeded
    assert b.lo != bootstrap([v], np.mean, level=0.8, n_boot=300, seed=6).lo


def test_bootstrap_holds_one_value_samples_fixed_and_pairs_when_asked():
    rng = np.random.default_rng(2)
    a, c = rng.normal(size=6), rng.normal(size=4)

    def total(*xs, axis=-1):
        return sum(x.mean(axis=axis) for x in xs)

    b = bootstrap([a, [10.0], c], total, n_boot=50, seed=1)
    g = np.random.default_rng(1)  # only the free samples draw, in order
    ra, rc = a[g.integers(0, 6, size=(50, 6))], c[g.integers(0, 4, size=(50, 4))]
    assert np.array_equal(b.distribution, ra.mean(axis=1) + 10.0 + rc.mean(axis=1))
    fixed = bootstrap([[2.0], [3.0]], total, n_boot=20)
    assert (fixed.estimate, fixed.lo, fixed.hi, fixed.se) == (5.0, 5.0, 5.0, 0.0)
    x, y = rng.normal(size=8), rng.normal(size=8)
    p = bootstrap([x, y], lambda u, w, axis=-1: (u - w).mean(axis=axis), paired=True, n_boot=40, seed=3)
    i = np.random.default_rng(3).integers(0, 8, size=(40, 8))  # one index draw shared by both samples
    assert np.allclose(p.distribution, (x[i] - y[i]).mean(axis=1), rtol=0, atol=1e-15)


@pytest.mark.parametrize("kw", [{"n_boot": 1}, {"n_boot": 10**12}, {"level": 1.5}, {"method": "student"}, {"paired": True}])
def test_bootstrap_rejects_bad_input(kw):
    with pytest.raises(InputError):
        bootstrap([[1.0, 2.0], [1.0, 2.0, 3.0]], lambda *xs, axis=-1: xs[0].mean(axis=axis), **kw)
    with pytest.raises(InputError):
        bootstrap([[]], np.mean)


def test_fit_exponent_is_the_bootstrap_of_the_loglog_slope_by_hand():
    """The fit's interval = quantiles of slopes refitted on means of trials resampled within each N (by hand)."""
    rng = np.random.default_rng(8)
    samples = _power_law_samples(rng, 0.5, 12)
    samples[2] = samples[2][:1]  # a one-trial N is held fixed and draws nothing
    fit = fit_exponent(N_GRID, samples, level=0.9, n_boot=200, seed=4)
    g, x = np.random.default_rng(4), np.log(N_GRID)
    means = np.stack([s[g.integers(0, s.size, size=(200, s.size))].mean(axis=1) for s in samples], axis=1)  # (B, K)
    slopes = [stats.linregress(x, np.log(m)).slope for m in means]  # (B,)
    assert fit.ci == pytest.approx(tuple(np.quantile(slopes, [0.05, 0.95])), abs=1e-12)
    assert fit.boot_se == pytest.approx(np.std(slopes, ddof=1), abs=1e-12)
    assert fit.slope == pytest.approx(stats.linregress(x, np.log([s.mean() for s in samples])).slope, abs=1e-12)


def test_rms_exponent_interval_is_unbiased_and_covers_at_each_level_on_a_known_truth():
    # Synthetic truth: lognormal squared norms with E Y = N^{2e} exactly and CV²(N) = 20/N (the 1/N law the
    # pooled variance assumes), T = 100 draws per N, R = 2000 seeded replications. Tolerances come from R alone:
    # the mean estimate is within 4 standard errors of e (two-sided P ≈ 6e-5 for an unbiased estimator; the
    # log-mean correction + v/2 leaves O(1/T²) ≈ 1e-3·se), and each level's coverage is within 4 binomial
    # standard deviations of nominal. A biased log-mean (− v/2: +0.0054 ≈ 6.7 se) or a one-sided quantile
    # (ppf(level): 81 % at 90 %, 0 % at 50 %) fails.
    N, e, T, R = np.array([8, 16, 32, 64]), 0.5, 100, 2000
    s2 = np.log1p(20.0 / N)
    mu = 2 * e * np.log(N) - s2 / 2  # E exp(mu + s Z) = N^{2e}
    Y = np.exp(mu[None, :, None] + np.sqrt(s2)[None, :, None] * np.random.default_rng(23).standard_normal((R, 4, T)))
    est, covered = np.empty(R), {0.5: 0, 0.9: 0}
    for r in range(R):
        for level in covered:
            f = rms_exponent_interval(N, list(Y[r]), level=level)
            covered[level] += f.lo <= e <= f.hi
        est[r] = f.estimate
    assert abs(est.mean() - e) <= 4 * est.std(ddof=1) / math.sqrt(R), est.mean() - e
    for level, k in covered.items():
        assert abs(k / R - level) <= 4 * math.sqrt(level * (1 - level) / R), (level, k / R)


def test_rms_exponent_interval_on_two_draws_per_cell_by_hand():
    # The smallest samples it accepts (two draws per N), worked by hand from the docstring's formulas:
    # N = (8, 32): x = log N, w = ±1/log 4; cell 8: values (1, 3), mean 2, sample variance (ddof 1) 2, CV² ½;
    # cell 32: (4, 12), mean 8, variance 32, CV² ½. Pooled c̄ = mean(8·½, 32·½) = 10; v = max(CV², c̄/N)/T =
    # (max(½, 10/8)/2, max(½, 10/32)/2) = (5/8, 1/4). Estimate ½·w·(log m + v/2), se ½·√(w²·v).
    f = rms_exponent_interval([8, 32], [[1.0, 3.0], [4.0, 12.0]], level=0.9)
    L = math.log(4.0)
    est = 0.5 * ((math.log(8) + 1 / 8) - (math.log(2) + 5 / 16)) / L
    se = 0.5 * math.sqrt((5 / 8 + 1 / 4) / L**2)
    z = stats.norm.ppf(0.95)
    assert f.estimate == pytest.approx(est, rel=1e-12)
    assert (f.lo, f.hi) == (pytest.approx(est - z * se, rel=1e-12), pytest.approx(est + z * se, rel=1e-12))


def test_a_ci_ending_at_zero_is_reported_as_holding_zero():
    # mutation run: `0.0 <= hi` → `0.0 < hi` kept every label (slope ≤ hi = 0 is flat anyway) but not the evidence
    assert classify_regime(_fit(-0.1, -0.2, 0.0))[1]["ci_contains_zero"] is True
    assert classify_regime(_fit(0.6, 0.5, 0.7))[1]["ci_contains_half"] is True
