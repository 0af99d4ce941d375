"""Tests for `empirics/training/study_analysis.py`: lr selection, paired gaps, the cell-level trend (against scipy.stats and an
independent matrix computation), divergence counts and the report tables, on synthetic studies of the real schema."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sapa.common.validate import InputError
from sapa.empirics.training import study_analysis as SA
from tests.empirics.training.study_fixture import CHANCE, make_study


def test_best_lr_is_the_argmax_of_the_seed_median_with_edges():
    st = make_study(tasks={"digits": (16, 64)}, lr_opt={"x": 1e-2, "x3": 1e-3}, noise=1e-4, seed=1)
    b = SA.best_lr(st.runs).set_index(["task", "N", "arm"])
    for N in (16, 64):
        assert b.loc[("digits", N, "softmax"), "lr"] == 3e-3 and b.loc[("digits", N, "softmax"), "edge"] == ""
        assert b.loc[("digits", N, "x"), "lr"] == 1e-2 and b.loc[("digits", N, "x"), "edge"] == "high"
        assert b.loc[("digits", N, "x3"), "lr"] == 1e-3 and b.loc[("digits", N, "x3"), "edge"] == "low"
    # independently: median over seeds per lr, max
    r = st.runs[(st.runs["arm"] == "x_sqrtN") & (st.runs["N"] == 16)]
    med = r.groupby("lr")["val_acc_final"].median()
    assert b.loc[("digits", 16, "x_sqrtN"), "lr"] == med.idxmax()
    assert b.loc[("digits", 16, "x_sqrtN"), "val_median"] == med.max()


def test_ties_go_to_the_smaller_lr_and_out_of_study_rows_do_not_count():
    st = make_study(tasks={"digits": (16,)}, arms=("softmax", "x_alpha"), seeds=2, history=False)
    runs = st.runs.copy()
    runs.loc[runs["arm"] == "softmax", "val_acc_final"] = 0.5  # every lr ties
    b = SA.best_lr(runs).set_index("arm")
    assert b.loc["softmax", "lr"] == min(runs["lr"])
    # the non-selected α rows are worse by construction; making them best must not change the choice
    runs.loc[~runs["in_study"], "val_acc_final"] = 1.0
    assert SA.best_lr(runs).set_index("arm").loc["x_alpha", "lr"] == b.loc["x_alpha", "lr"]


def test_diverged_members_enter_at_chance():
    st = make_study(tasks={"text": (32, 64)}, arms=("softmax", "x"), seeds=3, history=False,
                    diverge=lambda t, a, N, lr, r: a == "x" and N == 64 and r == 0)
    runs = st.runs.copy()
    runs.loc[runs["diverged"], "test_acc"] = 0.99  # a stale value must not survive
    rows = SA.study_rows(runs)
    assert (rows.loc[rows["diverged"], "test_acc"] == CHANCE["text"]).all()
    g = SA.paired_gaps(runs)
    d = g[(g["N"] == 64) & (g["seed"] == 0)]
    assert d["arm_value"].iloc[0] == CHANCE["text"] and bool(d["arm_diverged"].iloc[0])


def test_paired_gaps_pair_by_seed_at_each_arms_best_lr():
    st = make_study(tasks={"digits": (16, 64)}, arms=("softmax", "x_sqrtN", "x3"), lr_opt={"x3": 1e-3},
                    gap=lambda t, a, N: -0.1 if a == "x3" and N == 64 else 0.0, seed=2, history=False)
    g = SA.paired_gaps(st.runs)
    best = SA.best_lr(st.runs).set_index(["N", "arm"])["lr"]
    runs = st.runs[st.runs["in_study"]]
    for row in g.itertuples():  # recomputed by hand from the table
        a = runs[(runs["arm"] == row.arm) & (runs["N"] == row.N) & (runs["seed"] == row.seed)
                 & (runs["lr"] == best[(row.N, row.arm)])]["test_acc"].item()
        s = runs[(runs["arm"] == "softmax") & (runs["N"] == row.N) & (runs["seed"] == row.seed)
                 & (runs["lr"] == best[(row.N, "softmax")])]["test_acc"].item()
        assert row.gap == a - s
    assert len(g) == 2 * 2 * 3  # arms × N × seeds
    tr = SA.accuracy_trends(st.runs)
    assert tr[("digits", "x3")].delta < -0.08 and abs(tr[("digits", "x_sqrtN")].delta) < 0.03


def test_gap_trend_with_two_cells_is_the_pooled_two_sample_t():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 4), rng.normal(0.5, 1, 3)
    ev = SA.gap_trend((16, 64), (a, b))
    t = stats.ttest_ind(b, a, equal_var=True)
    assert ev.delta == pytest.approx(b.mean() - a.mean(), rel=1e-12)
    assert ev.delta / ev.se == pytest.approx(t.statistic, rel=1e-12) and ev.df == t.df == 5
    assert ev.slope == pytest.approx(ev.delta / 2, rel=1e-12)  # two doublings


def test_gap_trend_matches_generalised_least_squares_and_linregress():
    rng = np.random.default_rng(1)
    Ns, n = (32, 64, 128, 256, 512), (3, 2, 4, 3, 5)
    gaps = [rng.normal(0.01 * k, 0.02, size=m) for k, m in enumerate(n)]
    ev = SA.gap_trend(Ns, gaps)
    # independent: OLS on cell means with Cov(ḡ) = s_p² diag(1/n_k), sandwich covariance of the coefficients
    x = np.log2(Ns)
    X = np.stack([np.ones(5), x], axis=1)  # (K, 2)
    m = np.array([g.mean() for g in gaps])
    sp2 = sum(((g - g.mean()) ** 2).sum() for g in gaps) / sum(m_ - 1 for m_ in n)
    A = np.linalg.inv(X.T @ X) @ X.T  # (2, K)
    beta = A @ m
    cov = A @ np.diag(sp2 / np.array(n)) @ A.T
    L = x[-1] - x[0]
    assert ev.slope == pytest.approx(beta[1], rel=1e-12) and ev.delta == pytest.approx(L * beta[1], rel=1e-12)
    assert ev.se == pytest.approx(L * math.sqrt(cov[1, 1]), rel=1e-12) and ev.df == sum(n) - 5
    eq = [rng.normal(0.01 * k, 0.02, size=3) for k in range(5)]  # equal n: slope of cell means = slope of all points
    lr = stats.linregress(np.repeat(x, 3), np.concatenate(eq))
    assert SA.gap_trend(Ns, eq).slope == pytest.approx(lr.slope, rel=1e-12)


def test_gap_trend_degenerate_and_bad_input():
    one = SA.gap_trend((16,), ([0.1, 0.2],))
    assert math.isnan(one.delta) and one.df == 1
    single = SA.gap_trend((16, 64), ([0.1], [0.2]))
    assert single.delta == pytest.approx(0.1) and single.df == 0 and math.isnan(single.se)
    with pytest.raises(InputError):
        SA.gap_trend((16, 16), ([0.1, 0.2], [0.1, 0.3]))
    with pytest.raises(InputError):
        SA.gap_trend((16, 64), ([0.1, math.inf], [0.1, 0.3]))
    with pytest.raises(InputError, match="lacks column"):
        SA.best_lr(pd.DataFrame({"task": ["digits"]}))


def test_divergence_counts_and_stability_gaps():
    div = lambda t, a, N, lr, r: a == "x3" and lr == 1e-2 and (N == 64 or r == 0)  # noqa: E731
    st = make_study(tasks={"digits": (16, 64)}, arms=("softmax", "x3"), seeds=3, diverge=div, history=False)
    c = SA.divergence_counts(st.runs).set_index(["N", "arm"])
    assert c.loc[(16, "x3"), "grid_diverged"] == 1 and c.loc[(64, "x3"), "grid_diverged"] == 3
    assert c.loc[(64, "x3"), "grid_runs"] == 9 and c.loc[(64, "x3"), "best_diverged"] == 0  # best lr avoids them
    assert c.loc[(16, "softmax"), "grid_diverged"] == 0
    g = SA.stability_gaps(st.runs)
    g16 = g[g["N"] == 16].set_index("seed")["gap"]
    assert g16[0] == -1 / 3 and g16[1] == 0.0
    assert (g[g["N"] == 64]["gap"] == -1 / 3).all()
    tr = SA.divergence_trends(st.runs)[("digits", "x3")]
    assert tr.quantity == "stable_fraction" and tr.delta == pytest.approx(-1 / 3 + 1 / 9)
    assert tr.diverged == (1, 3)


def test_lr_sensitivity_and_accuracy_table():
    st = make_study(tasks={"digits": (16, 64)}, arms=("softmax", "x"), seeds=5, history=False, seed=3)
    s = SA.lr_sensitivity(st.runs)
    assert len(s) == 2 * 2 * 3 and (s["seeds"] == 5).all()
    t = SA.accuracy_table(st.runs)
    best = SA.best_lr(st.runs).set_index(["N", "arm"])["lr"]
    for row in t.itertuples():
        v = st.runs[(st.runs["arm"] == row.arm) & (st.runs["N"] == row.N) & (st.runs["lr"] == best[(row.N, row.arm)])
                    ]["test_acc"].to_numpy()
        assert row.median == np.median(v) and row.lo == v.min() and row.hi == v.max()
        assert row.coverage == 1 - 2 * 0.5**5
    med, lo, hi, cov = SA.median_interval([0.3, 0.1, 0.2])
    assert (med, lo, hi, cov) == (0.2, 0.1, 0.3, 0.75)


def test_median_interval_coverage_is_what_it_says():
    """P(min ≤ median ≤ max) over 3 draws = 0.75: checked by simulation within a 99.9 % binomial band."""
    rng = np.random.default_rng(5)
    x = rng.exponential(size=(20000, 3))
    hit = ((x.min(axis=1) <= math.log(2)) & (x.max(axis=1) >= math.log(2))).mean()
    lo, hi = stats.binom.interval(0.999, 20000, 0.75)
    assert lo / 20000 <= hit <= hi / 20000


def test_flattening_finds_where_the_median_curve_stops_rising():
    """t_flat = first t with max_{t' ≥ t} c(t') − c(t) ≤ tol; c = median over seeds at the arm's best lr only."""
    from sapa.empirics.training.study_analysis import flattening

    steps = [0, 100, 200, 300, 400]
    curves = {  # (task, N): per seed (3), val_acc at each step; the median curve is the middle seed
        ("text", 32): [[0.0, 0.30, 0.35, 0.355, 0.356], [0.0, 0.31, 0.36, 0.365, 0.366], [0.0, 0.2, 0.2, 0.2, 0.2]],
        ("text", 64): [[0.0, 0.1, 0.2, 0.3, 0.4]] * 3,  # still rising at the end
        ("digits", 16): [[0.1, 0.5, 0.7, 0.68, 0.6]] * 3,  # peaks, then falls: flat from the peak
    }
    rows = []
    for (task, N), seeds in curves.items():
        for r, c in enumerate(seeds):
            for t, v in zip(steps, c):
                rows.append({"task": task, "N": N, "arm": "softmax", "alpha": np.nan, "lr": 1e-2, "seed": r, "step": t,
                             "quantity": "val_acc", "value": v})
                # another lr and another arm must be ignored
                rows.append({"task": task, "N": N, "arm": "softmax", "alpha": np.nan, "lr": 1e-3, "seed": r,
                             "step": t, "quantity": "val_acc", "value": 0.9 * t / 400})
                rows.append({"task": task, "N": N, "arm": "x_sqrtN", "alpha": np.nan, "lr": 1e-2, "seed": r,
                             "step": t, "quantity": "val_acc", "value": t / 400})
    hist = pd.DataFrame(rows)
    best = pd.DataFrame([{"task": t, "N": N, "arm": a, "lr": 1e-2} for (t, N) in curves for a in ("softmax", "x_sqrtN")])
    f = flattening(hist, best).set_index(["task", "N"])
    assert f.loc[("text", 32), "flat_step"] == 200 and bool(f.loc[("text", 32), "past"])  # 0.30→0.35 (+.05), then +.005
    assert f.loc[("text", 64), "flat_step"] == 400 and not bool(f.loc[("text", 64), "past"])
    assert f.loc[("text", 64), "last_gain"] == pytest.approx(0.1)
    assert f.loc[("digits", 16), "flat_step"] == 200 and f.loc[("digits", 16), "final"] == pytest.approx(0.6)
    g = flattening(hist, best, arm="x_sqrtN", tol=0.3).set_index(["task", "N"])
    assert (g["flat_step"] == 300).all()  # t/400 rises by 0.25 over the last 100 steps: within 0.3 from 300 on
