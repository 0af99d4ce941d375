"""Tests for `empirics/norm_accuracy.py`: Spearman intervals recover a monotone relation, cover 0 at about the
nominal rate for independent data, respect strata; the paired contrast sees the reviewer's pattern."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from empirics.norm_accuracy import _rho_rows, analyse, contrast_reproduced, paired_contrast, spearman_ci
from theory.validate import InputError


def test_rho_rows_is_spearmanr():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(6, 12)), rng.normal(size=(6, 12))
    x[0, :3] = np.inf  # ties and infinities rank like spearmanr's
    y[1] = np.round(y[1])
    want = [stats.spearmanr(a, b).statistic for a, b in zip(x, y)]
    np.testing.assert_allclose(_rho_rows(x, y), want, rtol=0, atol=1e-12)
    assert _rho_rows(np.ones(5), np.arange(5.0)) == 0.0  # constant resample: no association


def test_recovers_a_known_monotone_relation():
    rng = np.random.default_rng(1)
    x = rng.lognormal(size=40)
    y = 1 / (1 + x) + 0.02 * rng.normal(size=40)  # decreasing in x
    r = spearman_ci(x, y, seed=2)
    assert r.rho == pytest.approx(stats.spearmanr(x, y).statistic)
    assert r.rho < -0.8 and r.hi < -0.6 and r.lo >= -1.0
    assert r.lo <= r.rho <= r.hi and r.n == 40


def test_interval_level_matches_scipy_percentile():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=20), rng.normal(size=20)
    r = spearman_ci(x, y, level=0.9, n_boot=2000, seed=4)
    assert r.interval(0.9) == pytest.approx((r.lo, r.hi), abs=1e-12)
    lo99, hi99 = r.interval(0.99)
    assert lo99 <= r.lo and hi99 >= r.hi
    again = spearman_ci(x, y, level=0.9, n_boot=2000, seed=4)
    assert (again.lo, again.hi) == (r.lo, r.hi)  # seeded


@pytest.mark.parametrize("stratified", [False, True])
def test_independent_data_cover_zero_at_about_the_nominal_rate(stratified):
    """R = 150 independent (x, y) samples of n = 24: the 90% interval should hold 0 in ≈ 90% of them.

    Binomial(150, 0.9) has sd 3.7 (2.4 %): the accepted 126…145 (84 %…96.7 %) is about ±2.5 sd, wide
    enough for the percentile bootstrap's small-n bias, narrow enough to catch an interval that is
    far too wide (~100 %) or too narrow. Fixed seed, so the test is deterministic.
    """
    rng = np.random.default_rng(20261129)
    strata = np.repeat([0.0, 0.05], 12) if stratified else None
    hits = 0
    R = 150
    for r in range(R):
        x, y = rng.normal(size=24), rng.normal(size=24)
        c = spearman_ci(x, y, strata, level=0.9, n_boot=400, seed=r)
        hits += c.lo <= 0 <= c.hi
    assert 126 <= hits <= 145, hits


def test_strata_remove_a_between_strata_effect():
    """Simpson: within each weight decay the relation is increasing, between them the offset makes it decreasing."""
    rng = np.random.default_rng(5)
    xa, xb = rng.uniform(0, 1, 20), rng.uniform(10, 11, 20)
    x = np.concatenate([xa, xb])
    y = np.concatenate([xa + 5, xb - 10]) + 0.01 * rng.normal(size=40)
    s = np.repeat([0.0, 0.05], 20)
    pooled, within = spearman_ci(x, y, seed=6), spearman_ci(x, y, s, seed=6)
    assert pooled.hi < 0 and within.lo > 0.9
    assert set(within.strata) == {0.0, 0.05} and all(v["rho"] > 0.9 for v in within.strata.values())


def test_infinite_norms_rank_last():
    x = np.array([1.0, 2.0, 3.0, np.inf, np.inf, 0.5])
    y = np.array([0.9, 0.8, 0.7, 0.1, 0.1, 0.95])
    assert spearman_ci(x, y, n_boot=200).rho == pytest.approx(-1.0)


def test_bad_inputs():
    with pytest.raises(InputError):
        spearman_ci([1, 2], [3, 4])
    with pytest.raises(InputError):
        spearman_ci([1, 2, np.nan], [3, 4, 5])
    with pytest.raises(InputError):
        spearman_ci([1, 2, 3, 4], [1, 2, 3, 4], strata=[0, 0, 0, 1])


def _final(rng, n_seeds=6, x3_low_and_bad=True):
    rows = []
    for wd in (0.0, 0.05):
        for s in range(n_seeds):
            for arm, norm, acc in (("x_16", 1.0, 0.9), ("x3", 0.01, 0.5), ("softmax", 2.0, 0.95)):
                if not x3_low_and_bad and arm == "x3":
                    norm, acc = 10.0, 0.4
                rows.append({"task": "digits", "arm": arm, "label": arm, "weight_decay": wd, "seed": s,
                             "diverged": False, "test_acc": acc + 0.01 * rng.normal(),
                             "test_loss": 1.0, "attn_fro": norm * math.exp(0.1 * rng.normal()),
                             "jac_fro": norm * 2, "attn_fro_init": norm, "jac_fro_init": norm, "w_fro": 1.0})
    return pd.DataFrame(rows)


def test_paired_contrast_sees_the_reviewer_pattern():
    rng = np.random.default_rng(7)
    c = paired_contrast(_final(rng), "digits", family_level=0.99)
    assert c["pairs"] == 12
    assert c["log10_attn_fro"]["median_diff"] == pytest.approx(-2, abs=0.2) and c["log10_attn_fro"]["ci"][1] < 0
    assert c["test_acc"]["ci"][1] < 0 and contrast_reproduced(c) and contrast_reproduced(c, "ci@0.99")
    c2 = paired_contrast(_final(rng, x3_low_and_bad=False), "digits")
    assert not contrast_reproduced(c2) and c2["log10_attn_fro"]["ci"][0] > 0


def test_paired_contrast_both_diverged_counts_as_equal():
    f = _final(np.random.default_rng(8), n_seeds=2)
    f.loc[f["arm"].isin(["x3", "x_16"]), ["attn_fro", "jac_fro"]] = np.inf
    c = paired_contrast(f, "digits")
    assert c["log10_attn_fro"]["diffs"] == [0.0] * 4 and c["log10_attn_fro"]["ci"] == [0.0, 0.0]


def test_analyse_shapes():
    f = _final(np.random.default_rng(9))
    f.loc[0, ["diverged", "attn_fro", "jac_fro"]] = [True, np.inf, np.inf]
    a = analyse(f, n_boot=300)
    assert a["family_level"] == pytest.approx(1 - 0.05 / 5)  # one task: 2 norms × 2 subsets + 1 contrast
    t = a["tasks"]["digits"]
    assert t["n_runs"] == 36 and t["n_diverged"] == 1
    cor = t["correlations"]["attn_fro"]
    assert set(cor) == {"pooled", "stratified", "wd=0", "wd=0.05", "finite_stratified"}
    assert cor["finite_stratified"]["n"] == 35 and a["family_key"] in cor["stratified"]
    assert len(t["arms"]) == 6 and t["contrast"]["reproduced"]
