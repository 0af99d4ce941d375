"""Tests for `empirics/training/arm_statistics.py`: arm-level ρ̄ with exact permutation p (checked against brute-force
enumeration) and arm bootstrap; replicate-level pair contrasts; the bigram plateau; training determinism per seed.
Run-level (descriptive) Spearman intervals recover a monotone relation, cover 0 at about the nominal rate for
independent data, respect strata; the run-paired contrast sees the reviewer's pattern."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from empirics.training.arm_statistics import (_rho_rows, analyse, arm_association, arm_cube, arm_level, bigram_accuracy,
                                   contrast_reproduced, paired_contrast, paired_seed_test, seed_contrast, spearman_ci,
                                   study_arm_level)
from common.validate import InputError


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
    arm = a["arm_level"]["digits"]
    assert arm["n_arms"] == 3 and arm["n_strata"] == 2 and arm["n_replicates"] == 6
    assert set(arm["association"]) == {"attn_fro", "jac_fro"} and arm["association"]["attn_fro"]["n_perm"] == 6
    assert arm["contrast"]["test_acc"]["n"] == 6 and arm["contrast"]["test_acc"]["p_less"] == pytest.approx(1 / 64)


# --------------------------------------------------------------------------- arm level


def _brute_p(nm, am):
    """Exact one-sided p-values by enumerating every arm order, the same order in every stratum."""
    obs = np.mean([stats.spearmanr(nm[s], am[s]).statistic for s in range(len(nm))])
    null = np.array([np.mean([stats.spearmanr(nm[s], np.asarray(am[s])[list(perm)]).statistic
                              for s in range(len(nm))]) for perm in itertools.permutations(range(len(nm[0])))])
    tol = 1e-12
    return obs, float(np.mean(null <= obs + tol)), float(np.mean(null >= obs - tol)), len(null)


def test_permutation_p_by_hand_on_three_arms():
    """3 arms, 1 stratum, reversed order: ρ = −1; of the 3! = 6 orders ρ ∈ {1, ½, ½, −½, −½, −1}, so p(ρ < 0) = 1/6."""
    r = arm_association([[1.0, 2.0, 3.0]], [[0.9, 0.8, 0.7]], n_boot=200)
    assert r.rho == pytest.approx(-1.0) and r.p_less == pytest.approx(1 / 6) and r.p_greater == pytest.approx(1.0)
    assert r.n_perm == 6 and r.exact


@pytest.mark.parametrize("arms", [4, 5, 6])
def test_permutation_p_is_exact_against_brute_force(arms):
    rng = np.random.default_rng(arms)
    nm, am = rng.normal(size=(2, arms)), rng.normal(size=(2, arms))
    am[1] = np.round(am[1])  # ties
    obs, p_less, p_greater, n = _brute_p(nm, am)
    r = arm_association(nm, am, n_boot=200)
    assert r.rho == pytest.approx(obs, abs=1e-12) and r.n_perm == n == math.factorial(arms)
    assert r.p_less == pytest.approx(p_less, abs=1e-12) and r.p_greater == pytest.approx(p_greater, abs=1e-12)
    assert r.strata == pytest.approx([stats.spearmanr(nm[s], am[s]).statistic for s in range(2)])


def test_strata_are_permuted_jointly():
    """Opposite orders in the two strata: ρ_2(π) = −ρ_1(π) for every joint order π, so the null is identically 0
    and both p-values are 1 (permuting each stratum on its own would spread the null and give p < 1)."""
    nm = [[1, 2, 3, 4], [1, 2, 3, 4]]
    am = [[1, 2, 3, 4], [4, 3, 2, 1]]
    r = arm_association(nm, am, n_boot=200)
    assert r.rho == 0.0 and r.strata == (1.0, -1.0) and r.p_less == 1.0 and r.p_greater == 1.0


def test_arm_bootstrap_resamples_arms_and_is_seeded():
    nm = [np.arange(6.0), np.arange(6.0) + 0.3]
    am = [-np.arange(6.0), -np.arange(6.0)]
    r = arm_association(nm, am, level=0.98, n_boot=500, seed=3)
    assert r.lo == pytest.approx(-1.0) and r.hi <= 0.0 and r.p_less == pytest.approx(1 / 720)
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(2, 6)), rng.normal(size=(2, 6))
    a, b = arm_association(x, y, n_boot=500, seed=5), arm_association(x, y, n_boot=500, seed=5)
    assert (a.lo, a.hi) == (b.lo, b.hi) and a.lo <= a.rho <= a.hi


def test_arm_association_undefined_and_bad_inputs():
    r = arm_association([[1.0, 2.0, 3.0]], [[0.5, 0.5, 0.5]], n_boot=100)
    assert math.isnan(r.rho) and math.isnan(r.p_less) and r.as_dict()["rho"] is None
    with pytest.raises(InputError):
        arm_association([[1.0, 2.0]], [[1.0, 2.0]])
    with pytest.raises(InputError):
        arm_association([[1.0, np.nan, 3.0]], [[1.0, 2.0, 3.0]])


def test_diverged_arm_ranks_last():
    r = arm_association([[1.0, 2.0, 3.0, np.inf]], [[0.9, 0.8, 0.7, 0.1]], n_boot=100)
    assert r.rho == pytest.approx(-1.0) and r.as_dict()["log10_norm_means"][0][3] == "inf"


def test_paired_seed_test_against_sign_flips():
    d = np.array([-0.03, -0.01, 0.02, -0.04])
    flips = np.array([np.mean(d * s) for s in itertools.product((-1, 1), repeat=4)])
    r = paired_seed_test(d, level=0.9)
    assert r.p_less == pytest.approx(np.mean(flips <= d.mean() + 1e-15))
    assert r.p_greater == pytest.approx(np.mean(flips >= d.mean() - 1e-15))
    lo, hi = stats.t.interval(0.9, 3, loc=d.mean(), scale=d.std(ddof=1) / 2)
    assert (r.lo, r.hi) == pytest.approx((lo, hi)) and r.n == 4
    assert math.isnan(paired_seed_test([0.1]).p_less)  # one replicate: nothing to test


def test_seed_contrast_averages_the_paired_strata():
    f = _final(np.random.default_rng(10), n_seeds=3)
    c = seed_contrast(f, "digits")  # x3 − x_16 accuracy, ≈ 0.5 − 0.9
    cube, arms, wds, reps = arm_cube(f, "digits", "test_acc", arms=["x3", "x_16"])
    assert cube.shape == (2, 2, 3) and wds == [0.0, 0.05] and reps == [0, 1, 2]
    np.testing.assert_allclose(c.diffs, (cube[0] - cube[1]).mean(axis=0))
    assert c.n == 3 and c.mean == pytest.approx(-0.4, abs=0.03) and c.p_less == pytest.approx(1 / 8)
    n = seed_contrast(f, "digits", q="attn_fro")  # log10 norms
    assert n.mean == pytest.approx(-2, abs=0.2)


def test_arm_level_on_a_table():
    f = _final(np.random.default_rng(11), n_seeds=3)
    out = arm_level(f, level=0.98, n_boot=300)
    a = out["digits"]["association"]["attn_fro"]
    # arm means: x_16 (1, 0.9), x3 (0.01, 0.5), softmax (2, 0.95): norm and accuracy in the same order
    assert a["rho"] == pytest.approx(1.0) and a["p_greater"] == pytest.approx(1 / 6, abs=1e-6)
    assert a["arms"] == ["x_16", "x3", "softmax"]
    import json

    json.dumps(out, allow_nan=False)


def test_bigram_accuracy_by_hand():
    train = [0, 1, 0, 1, 0, 2]  # after 0: 1 (twice) beats 2; after 1: 0; 2 never precedes: most frequent (0)
    x = [[0, 1, 2]]
    y = [[1, 1, 0]]
    assert bigram_accuracy(train, x, y) == pytest.approx(2 / 3)


def test_arm_cube_takes_the_stratum_column():
    f = _final(np.random.default_rng(12), n_seeds=2).rename(columns={"weight_decay": "N"})
    f["N"] = np.where(f["N"] > 0, 64, 16)
    cube, arms, strata, reps = arm_cube(f, "digits", "test_acc", stratum="N")
    assert strata == [16.0, 64.0] and cube.shape == (len(arms), 2, 2) and not np.isnan(cube).any()
    ref, _, _, _ = arm_cube(_final(np.random.default_rng(12), n_seeds=2), "digits", "test_acc")
    np.testing.assert_array_equal(cube, ref)  # the same table, the same cube


def test_study_arm_level_reads_each_arm_at_its_best_lr():
    """Arm means per N stratum equal seed means at the best lr (computed independently); an arm missing at one N
    is left out with its name; the contrast pair is x³ against x/α*."""
    from empirics.training.study_analysis import best_lr
    from tests.empirics.training.study_fixture import make_study

    st = make_study(tasks={"digits": (16, 64)}, arms=("softmax", "x_sqrtN", "x3", "x_alpha", "x_N"), seeds=2,
                    history=False, lr_opt={"x3": 1e-2}, seed=3)
    runs = st.runs[~((st.runs["arm"] == "x_N") & (st.runs["N"] == 64))]  # x/N trained at N = 16 only
    out = study_arm_level(runs, n_boot=100)["digits"]
    assert out["Ns"] == [16, 64] and out["arms_left_out"] == ["x_N"] and out["n_arms"] == 4
    a = out["association"]["jac_x_fro"]
    best = best_lr(runs).set_index(["N", "arm"])["lr"]
    for s, N in enumerate((16, 64)):
        for k, arm in enumerate(a["arms"]):
            g = runs[(runs["N"] == N) & (runs["arm"] == arm) & (runs["lr"] == best[(N, arm)]) & runs["in_study"]]
            assert a["acc_means"][s][k] == round(float(g["test_acc"].mean()), 5)
            assert a["log10_norm_means"][s][k] == round(float(np.log10(g["jac_x_fro"]).mean()), 5)
    assert out["contrast"]["arms"] == ["x3", "x_alpha"] and "log10_jac_x_fro_init" in out["contrast"]
