"""Tests for `empirics/training/censored_trend.py`: exit intervals, the interval-censored trend against independent
references (least squares where nothing is censored, the exact Holm definition, Monte Carlo power), and its behaviour
under right-censoring."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sapa.common.validate import InputError
from sapa.empirics.training import censored_trend as C

NS = (16, 32, 64, 128)


def test_exit_interval_reads_the_grid_and_censors_at_the_cap():
    steps = [0, 8, 16, 32, 64]
    assert C.exit_interval(steps, [0.1, 0.4, 0.5, 0.9, 1.0], 0.5) == (8.0, 16.0)  # reached at 16: in (8, 16]
    assert C.exit_interval(steps, [0.1, 0.6, 0.7, 0.9, 1.0], 0.5) == (1.0, 8.0)  # the first evaluation: a step ≥ 1
    assert C.exit_interval(steps, [0.1, 0.2, 0.3, 0.4, 0.45], 0.5) == (64.0, math.inf)
    assert C.exit_interval(steps, [0.1, 0.2, None, None, None], 0.5) == (64.0, math.inf)  # stopped (diverged)


def test_paired_intervals_bound_every_difference_of_points_inside():
    rng = np.random.default_rng(0)
    a = [(16.0, 19.0), (40.0, math.inf)]
    s = [(8.0, 10.0), (5.0, 6.0)]
    iv = C.paired_log2_intervals(a, s)
    for (alo, ahi), (slo, shi), (lo, hi) in zip(a, s, iv):
        for _ in range(200):
            ta = rng.uniform(alo, min(ahi, 1e6))
            ts = rng.uniform(slo, shi)
            assert lo <= math.log2(ta / ts) <= hi
    with pytest.raises(InputError):
        C.paired_log2_intervals(a, s[:1])


def _exact_cells(rng, slope, sd=0.8, R=10):
    cells, xs, ys = [], [], []
    for k, N in enumerate(NS):
        v = slope * k + sd * rng.standard_normal(R)
        cells.append(np.column_stack([v, v]))
        xs += [math.log2(N)] * R
        ys += list(v)
    return cells, np.array(xs), np.array(ys)


@pytest.mark.parametrize("slope, m", [(0.0, 0.0), (0.3, 0.0), (0.3, 1.0), (-0.2, 0.5)])
def test_without_censoring_the_test_is_the_least_squares_t_test(slope, m):
    """Λ = n·log(1 + t²/(n − 2)) in a normal linear model: the profile-likelihood p equals scipy.stats.linregress's."""
    cells, xs, ys = _exact_cells(np.random.default_rng(3), slope)
    tr = C.interval_trend(NS, cells, (m,))
    ref = stats.linregress(xs, ys)
    L = math.log2(NS[-1] / NS[0])
    t = (ref.slope - m / L) / ref.stderr
    assert tr.delta == pytest.approx(ref.slope * L, rel=1e-6, abs=1e-8)
    assert tr.p_greater[m] == pytest.approx(stats.t.sf(t, len(xs) - 2), rel=1e-6, abs=1e-12)
    assert tr.p_less[m] == pytest.approx(stats.t.cdf(t, len(xs) - 2), rel=1e-6, abs=1e-12)
    assert tr.df == len(xs) - 2


def test_narrow_intervals_approach_the_exact_values():
    cells, _, _ = _exact_cells(np.random.default_rng(4), 0.3)
    exact = C.interval_trend(NS, cells, (0.0,))
    narrow = C.interval_trend(NS, [np.column_stack([c[:, 0] - 1e-4, c[:, 0] + 1e-4]) for c in cells], (0.0,))
    assert narrow.delta == pytest.approx(exact.delta, abs=1e-3)
    assert narrow.p_greater[0.0] == pytest.approx(exact.p_greater[0.0], rel=1e-2)


def test_right_censoring_is_not_read_as_the_cap():
    """True Δ = 2, three quarters of the largest cell beyond a cap: entering them at the cap (the old way) biases Δ low;
    the likelihood recovers it within its standard error, averaged over seeded studies."""
    rng = np.random.default_rng(7)
    ml, naive = [], []
    for _ in range(40):
        cells = []
        for k in range(4):
            v = 2.0 * k / 3 + 0.5 * rng.standard_normal(12)
            lo = np.floor(v / 0.2) * 0.2
            iv = np.column_stack([lo, lo + 0.2])
            if k == 3:
                cap = np.quantile(v, 0.25)
                iv[v > cap] = (cap, np.inf)
            cells.append(iv)
        ml.append(C.interval_trend(NS, cells, (0.0,), cell_means=False).delta)
        naive.append(np.polyfit(np.repeat(np.arange(4.0), 12), np.concatenate(
            [np.where(np.isinf(c[:, 1]), c[:, 0], c.mean(1)) for c in cells]), 1)[0] * 3)
    se = np.std(ml, ddof=1) / math.sqrt(len(ml))
    assert abs(np.mean(ml) - 2.0) < 3 * se + 0.02
    assert np.mean(naive) < 2.0 - 5 * np.std(naive, ddof=1) / math.sqrt(len(naive))


def test_cell_means_are_scipys_censored_fit():
    iv = np.array([[0.0, 0.2], [0.4, 0.6], [0.2, 0.4], [1.0, np.inf]])
    tr = C.interval_trend((16, 32), [iv, iv + 1.0], (0.0,))
    loc, _ = stats.norm.fit(stats.CensoredData.interval_censored(low=iv[:, 0], high=iv[:, 1]))
    assert tr.cell_mean[0] == pytest.approx(loc, rel=1e-9)
    assert tr.censored == (1, 1)


def test_too_little_data_is_nan_and_bad_input_one_error():
    tr = C.interval_trend((16,), [np.array([[0.0, 0.2]])], (0.0,))
    assert math.isnan(tr.delta) and math.isnan(tr.p_greater[0.0])
    with pytest.raises(InputError):
        C.interval_trend((16, 32), [np.array([[0.3, 0.2]]), np.array([[0.0, 0.1]])])
    with pytest.raises(InputError):
        C.interval_trend((16, 16), [np.array([[0.0, 0.2]]), np.array([[0.0, 0.1]])])


def test_shifted_adds_exactly_the_injected_rise():
    cells, _, _ = _exact_cells(np.random.default_rng(5), 0.1)
    tr = C.interval_trend(NS, cells, (0.0, 1.0))
    sh = tr.shifted(4.0)
    assert sh.delta == pytest.approx(tr.delta + 4.0, abs=1e-6) and sh.sigma == pytest.approx(tr.sigma, rel=1e-5)


def _holm_by_definition(p, alpha):
    """Reject H_(i) iff p_(j) ≤ α/(m − j + 1) for every j ≤ i (the step-down procedure, spelled out)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    rej = set()
    for j, i in enumerate(order):
        if p[i] > alpha / (len(p) - j):
            break
        rej.add(i)
    return rej


@pytest.mark.parametrize("seed", range(20))
def test_holm_adjusted_p_rejects_exactly_what_the_step_down_procedure_rejects(seed):
    rng = np.random.default_rng(seed)
    p = list(rng.uniform(0, 0.05, size=int(rng.integers(1, 9))) ** rng.uniform(1, 3))
    adj = C.holm(p)
    for alpha in (0.01, 0.05):
        assert {i for i, a in enumerate(adj) if a <= alpha} == _holm_by_definition(p, alpha)
    assert all(a >= q for a, q in zip(adj, p))


def test_holm_keeps_nan_out_of_the_family():
    adj = C.holm([0.01, float("nan"), 0.02])
    assert adj[0] == pytest.approx(0.02) and math.isnan(adj[1]) and adj[2] == pytest.approx(0.02)


def test_design_power_is_the_monte_carlo_rejection_rate_of_the_least_squares_test():
    n, sd, d1, alpha = [6, 6, 6, 6], 0.8, 1.0, 0.01
    want = C.design_power(n, NS, sd, d1, alpha)
    rng = np.random.default_rng(11)
    x = np.repeat(np.log2(NS), 6)
    L = math.log2(NS[-1] / NS[0])
    trials = 3000
    Y = d1 * (x - x[0]) / L + sd * rng.standard_normal((trials, x.size))  # one study a row (the draws of a loop)
    xc = x - x.mean()
    slope = (Y - Y.mean(1, keepdims=True)) @ xc / (xc @ xc)  # each row's least-squares fit, as stats.linregress
    resid = Y - Y.mean(1, keepdims=True) - slope[:, None] * xc
    stderr = np.sqrt((resid * resid).sum(1) / (x.size - 2) / (xc @ xc))
    first = stats.linregress(x, Y[0])
    assert (first.slope, first.stderr) == pytest.approx((slope[0], stderr[0]), rel=1e-12)
    hits = int((stats.t.sf(slope / stderr, x.size - 2) <= alpha).sum())
    sd_mc = math.sqrt(want * (1 - want) / trials)
    assert abs(hits / trials - want) < 4 * sd_mc


def test_seeds_for_power_is_the_smallest_that_reaches_the_target():
    r = C.seeds_for_power(NS, 0.8, 1.0, 0.01 / 12, 0.8)
    assert C.design_power([r] * 4, NS, 0.8, 1.0, 0.01 / 12) >= 0.8 > C.design_power([r - 1] * 4, NS, 0.8, 1.0,
                                                                                      0.01 / 12)
    assert C.seeds_for_power(NS, 0.8, 1e-6, 0.01, 0.8, most=50) is None


@pytest.mark.slow
def test_false_growth_rate_at_the_edge_is_the_level():
    """At Δ = 0 with interval-censored exits on the real grid (normal noise), p(Δ ≤ 0) ≤ 0.05 in 5 % of studies."""
    from sapa.rules.learning import simulate_slowdown

    from sapa.common.seeds import rng_for

    ps = [simulate_slowdown("growth", "holds", rng_for(3, "edge", k)).trend.p_greater[0.0] for k in range(1500)]
    rate = np.mean(np.array(ps) <= 0.05)
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 1500)


# ----------------------------------------------------------------------------- references for the pieces one by one
def _mp_log_prob(lo, hi, mu, log_sigma):
    """log P(lo < μ + σε ≤ hi) in 50-digit mpmath (the log density when lo == hi)."""
    import mpmath as mp

    s = mp.exp(log_sigma)
    if lo == hi:
        z = (mp.mpf(lo) - mu) / s
        return -z * z / 2 - mp.log(mp.sqrt(2 * mp.pi)) - mp.log(s)
    cdf = lambda v: mp.mpf(0) if v == -math.inf else (mp.mpf(1) if v == math.inf else mp.ncdf((mp.mpf(v) - mu) / s))  # noqa: E731
    return mp.log(cdf(hi) - cdf(lo))


@pytest.mark.parametrize("lo, hi, mu, sigma", [
    (0.2, 0.7, 0.1, 0.8), (-math.inf, -0.3, 0.4, 0.5), (1.0, math.inf, 0.2, 0.6), (-math.inf, 4.0, 0.0, 0.3),
    (3.0, 3.5, -1.0, 0.4), (-4.0, -3.8, 1.0, 0.5), (0.35, 0.35, 0.1, 0.7), (-2.0, -2.0, 0.5, 1.3)])
def test_log_prob_and_its_gradient_are_mpmaths(lo, hi, mu, sigma):
    """The log probability of an interval (open ends, both tails, an exact value's log density) and its derivatives in
    μ and log σ against 50-digit mpmath and mpmath's numerical differentiation."""
    import mpmath as mp

    mp.mp.dps = 50
    try:
        out, dmu, dls = C._log_prob(np.array([lo]), np.array([hi]), np.array([mu]), sigma, grad=True)
        ls = math.log(sigma)
        assert out[0] == pytest.approx(float(_mp_log_prob(lo, hi, mp.mpf(mu), mp.mpf(ls))), rel=1e-10)
        assert dmu[0] == pytest.approx(float(mp.diff(lambda m: _mp_log_prob(lo, hi, m, mp.mpf(ls)), mp.mpf(mu))),
                                       rel=1e-8, abs=1e-12)
        assert dls[0] == pytest.approx(float(mp.diff(lambda v: _mp_log_prob(lo, hi, mp.mpf(mu), v), mp.mpf(ls))),
                                       rel=1e-8, abs=1e-12)
        assert C._log_prob(np.array([lo]), np.array([hi]), np.array([mu]), sigma)[0] == out[0]
    finally:
        mp.mp.dps = 15


def test_paired_intervals_are_the_log2_ratios_of_the_ends():
    """lo = log2(a_lo/s_hi), hi = log2(a_hi/s_lo), written out with math.log2."""
    iv = C.paired_log2_intervals([(3.0, 5.0), (16.0, 32.0), (64.0, math.inf)], [(2.0, 7.0), (8.0, 16.0), (1.0, 8.0)])
    want = [[math.log2(3 / 7), math.log2(5 / 2)], [0.0, 2.0], [3.0, math.inf]]
    np.testing.assert_allclose(iv, want, rtol=1e-14, atol=0)


def _ls_reference(xs, ys):
    """Least squares by numpy: slope, its t-test se (df = n − 2) and the maximum-likelihood σ̂ = √(RSS/n)."""
    X = np.column_stack([np.ones_like(xs), xs])
    coef, rss, *_ = np.linalg.lstsq(X, ys, rcond=None)
    rss = float(rss[0]) if len(rss) else float(((ys - X @ coef) ** 2).sum())
    cov = np.linalg.inv(X.T @ X)
    return coef[1], math.sqrt(rss / (len(ys) - 2) * cov[1, 1]), math.sqrt(rss / len(ys)), cov[1, 1], coef


@pytest.mark.parametrize("Ns, sizes", [((16, 32), (2, 1)), ((16, 64), (3, 4)), ((32, 64, 256), (1, 1, 1))])
def test_two_cells_and_one_degree_of_freedom_are_enough(Ns, sizes):
    """The smallest designs the fit accepts (two cells; n = 3, df = 1) give the least-squares t-test exactly."""
    rng = np.random.default_rng(sum(sizes))
    cells = [np.repeat(rng.normal(0.4 * k, 0.7, size=(r, 1)), 2, axis=1) for k, r in enumerate(sizes)]
    tr = C.interval_trend(Ns, cells, (0.0, 1.0), cell_means=False)
    xs = np.concatenate([np.full(r, math.log2(N)) for N, r in zip(Ns, sizes)])
    ys = np.concatenate([c[:, 0] for c in cells])
    slope, se, *_ = _ls_reference(xs, ys)
    L = math.log2(Ns[-1] / Ns[0])
    assert tr.df == sum(sizes) - 2 and tr.delta == pytest.approx(slope * L, rel=1e-6)
    for m in (0.0, 1.0):
        assert tr.p_greater[m] == pytest.approx(stats.t.sf((slope - m / L) / se, tr.df), rel=1e-5)


def test_without_censoring_the_wald_se_sigma_and_fitted_line_are_least_squares():
    """Without censoring the observed information of b at the MLE is Σ(x − x̄)²/σ̂² (σ̂² = RSS/n, the MLE):
    se(Δ̂) = σ̂·L·√[(XᵀX)⁻¹]_bb from numpy least squares, σ is that σ̂, and the fitted line at each cell is least
    squares' prediction at its log2 N."""
    cells, xs, ys = _exact_cells(np.random.default_rng(8), 0.2, R=5)
    tr = C.interval_trend(NS, cells, (0.0,), cell_means=False)
    _, _, sigma_ml, cbb, coef = _ls_reference(xs, ys)
    np.testing.assert_allclose(tr.fitted, coef[0] + coef[1] * np.log2(NS), rtol=1e-6, atol=1e-8)
    L = math.log2(NS[-1] / NS[0])
    assert tr.sigma == pytest.approx(sigma_ml, rel=1e-5)
    assert tr.se == pytest.approx(sigma_ml * L * math.sqrt(cbb), rel=1e-4)


def test_shifted_on_two_cells_spreads_the_rise_over_their_distance():
    """N = 16, 64 (two doublings): the larger cell's intervals move by exactly ``add``, the smaller not at all."""
    cells = [np.array([[0.1, 0.3], [0.5, 0.8], [-0.2, 0.0]]), np.array([[0.9, 1.1], [1.4, np.inf], [0.7, 1.0]])]
    tr = C.interval_trend((16, 64), cells, (0.0,), cell_means=False)
    sh = tr.shifted(0.75)
    assert np.array_equal(np.array(sh.data[0]), cells[0])
    assert np.array_equal(np.array(sh.data[1]), cells[1] + 0.75)


def _power_reference(n, Ns, sigma, delta1, alpha):
    """Noncentral t with se(Δ̂) = σ·L·√[(XᵀX)⁻¹]_bb of the design's least-squares fit (numpy)."""
    xs = np.concatenate([np.full(r, math.log2(N)) for N, r in zip(Ns, n)])
    X = np.column_stack([np.ones_like(xs), xs])
    se = sigma * math.log2(max(Ns) / min(Ns)) * math.sqrt(np.linalg.inv(X.T @ X)[1, 1])
    df = len(xs) - 2
    return stats.nct.sf(stats.t.ppf(1 - alpha, df), df, delta1 / se)


def test_design_power_is_the_noncentral_t_of_the_least_squares_design_and_nan_without_one():
    assert C.design_power([3, 5, 2], (16, 32, 128), 0.7, 1.0, 0.01) == pytest.approx(
        _power_reference([3, 5, 2], (16, 32, 128), 0.7, 1.0, 0.01), rel=1e-9)
    assert math.isnan(C.design_power([6], (16,), 0.7, 1.0, 0.01))  # one cell: no slope
    assert math.isnan(C.design_power([1, 1], (16, 32), 0.7, 1.0, 0.01))  # df = 0
    assert math.isnan(C.design_power([4, 4], (16, 32), 0.0, 1.0, 0.01))  # no spread


def test_seeds_for_power_defaults_to_a_power_of_eight_tenths():
    """The default target is 0.8: the first r of a scan of the reference power."""
    r = next(r for r in range(1, 200) if _power_reference([r] * 4, NS, 0.8, 1.0, 0.01) >= 0.8)
    assert C.seeds_for_power(NS, 0.8, 1.0, 0.01) == r


@pytest.mark.parametrize("Ns, sigma, delta1, want", [(NS, 0.1, 2.0, 1), ((16, 32, 64), 0.05, 2.0, 1),
                                                     ((16, 32), 0.1, 2.0, 2), (NS, 0.45, 1.0, 3)])
def test_seeds_for_power_answers_one_seed_when_one_suffices(Ns, sigma, delta1, want):
    """The smallest r, one included: one seed per cell of three or more cells has df ≥ 1 and may reach the target
    (the search once started at two and answered 2 there); two cells need two (df = 0 at one)."""
    scan = [r for r in range(1, 50) if _power_reference([r] * len(Ns), Ns, sigma, delta1, 0.05) >= 0.8]
    assert scan[0] == want
    assert C.seeds_for_power(Ns, sigma, delta1, 0.05) == want


def test_the_grid_resolution_is_the_median_finite_width_over_root_twelve():
    """Every seed inside one grid interval of width 0.94: σ̂ runs to its floor, and power is read at 0.94/√12 instead;
    right-censored intervals (infinite width) do not enter the median."""
    one = np.array([[2.1, 3.04]] * 3)
    cens = np.array([[2.1, 3.04], [2.6, np.inf], [2.6, np.inf]])
    tr = C.interval_trend((64, 128), [one, cens])
    assert tr.resolution == pytest.approx(0.94 / math.sqrt(12), rel=1e-12)
    assert tr.sigma < tr.resolution and tr.sigma_for_power == tr.resolution
    assert tr.as_dict()["resolution"] == pytest.approx(0.94 / math.sqrt(12), abs=1e-6)


def test_a_spread_the_grid_resolves_is_used_as_fitted():
    """Seeds spread over several narrow intervals: σ̂ is above w/√12 and power is read at σ̂ itself."""
    rng = np.random.default_rng(3)
    cells = [np.column_stack([v := m + rng.standard_normal(12), v + 0.1]) for m in (0.0, 1.0)]
    tr = C.interval_trend((16, 32), cells)
    assert tr.resolution == pytest.approx(0.1 / math.sqrt(12), rel=1e-9)
    assert tr.sigma > tr.resolution and tr.sigma_for_power == tr.sigma


def test_smallest_count_is_the_first_true_of_a_monotone_predicate_and_none_beyond_most():
    from sapa.empirics.training.censored_trend import smallest_count

    for first in (1, 2, 3, 7, 64, 65, 999, 1000):
        calls = []
        assert smallest_count(lambda r: calls.append(r) or r >= first, 1000) == first
        assert len(calls) <= 2 * 11  # doubling then bisection: logarithmic in the answer
    assert smallest_count(lambda r: False, 1000) is None
