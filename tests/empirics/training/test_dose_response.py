"""Tests for `empirics/training/dose_response.py`: exact Spearman p by brute force with scipy's ρ, the dose table from a
runs table (every lr kept, diverged members at chance), the slope and its se against scipy.stats.linregress with the
seed variance by hand, and the matched-norm contrast by hand, each lr matched to itself."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sapa.empirics.training.dose_response import (Contrast, DoseSlope, dose_slope, dose_table, exact_spearman,
                                             matched_norm_contrast, spearman_rho)


@pytest.mark.parametrize("seed", range(5))
def test_exact_p_is_the_share_of_all_pairings_at_least_as_extreme(seed):
    rng = np.random.default_rng(seed)
    n = 6
    x, y = rng.normal(size=n), np.round(rng.normal(size=n), 1)  # ties in y
    a = exact_spearman(x, y)
    rho = stats.spearmanr(x, y).statistic
    null = [stats.spearmanr(x[list(p)], y).statistic for p in itertools.permutations(range(n))]
    assert a.rho == pytest.approx(rho, abs=1e-12) and a.exact and a.n == n
    assert a.p_greater == pytest.approx(np.mean([r >= rho - 1e-12 for r in null]), abs=1e-12)
    assert a.p_less == pytest.approx(np.mean([r <= rho + 1e-12 for r in null]), abs=1e-12)


def test_beyond_the_exact_size_monte_carlo_agrees_with_the_t_approximation():
    rng = np.random.default_rng(1)
    x = rng.normal(size=12)
    y = x + rng.normal(size=12)
    a = exact_spearman(x, y, seed=3)
    assert not a.exact
    r = a.rho
    t = r * math.sqrt(10 / (1 - r * r))
    assert a.p_greater == pytest.approx(stats.t.sf(t, 10), abs=0.02)  # a good approximation at n = 12


@pytest.mark.parametrize("seed", range(6))
def test_rho_alone_is_the_rho_of_the_permutation_test_and_scipys(seed):
    """spearman_rho (what dose_slope keeps, without the n! pairings) gives exact_spearman's ρ bit for bit, and scipy's
    within round-off, with ties and non-finite pairs; nan where exact_spearman gives nan."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 12))
    x, y = rng.normal(size=n), np.round(rng.normal(size=n), 1)  # ties in y
    x[rng.integers(n)] = [np.nan, np.inf, 0.0][seed % 3]
    ok = np.isfinite(x) & np.isfinite(y)
    assert spearman_rho(x, y) == exact_spearman(x, y).rho  # the same function of the same ranks
    if ok.sum() >= 3:
        assert spearman_rho(x, y) == pytest.approx(stats.spearmanr(x[ok], y[ok]).statistic, abs=1e-14)
    for a, b in (([1, 1, 1, 1], [1, 2, 3, 4]), ([1, 2], [3, 4]), ([1, 2, np.nan], [1, 2, 3])):
        assert math.isnan(spearman_rho(a, b)) and math.isnan(exact_spearman(a, b).rho)


def test_constant_or_short_input_is_nan():
    assert math.isnan(exact_spearman([1, 1, 1, 1], [1, 2, 3, 4]).rho)
    assert math.isnan(exact_spearman([1, 2], [1, 2]).p_less)
    assert exact_spearman([1, 2, 3, float("nan"), 5], [5, 4, 3, 2, 1]).n == 4


def _runs() -> pd.DataFrame:
    rows = []
    for arm, p in (("x_dose", 1), ("x3_alpha", 3), ("softmax_tau", 0)):
        for c in (1.0, 4.0, 16.0):
            for lr, bonus in ((1e-3, 0.0), (1e-2, 0.05)):
                for seed in range(3):
                    acc = 0.5 + 0.1 * math.log2(c) / 4 + bonus + 0.01 * seed
                    rows.append({"task": "digits", "N": 16, "arm": arm, "p": p, "alpha": c, "lr": lr, "seed": seed,
                                 "val_acc_final": acc, "test_acc": acc - 0.01, "diverged": False, "chance_acc": 0.1,
                                 "attn_fro": 10.0 / c, "jac_x_fro": 20.0 / c})
    rows.append({**rows[0], "N": 64})  # another N: not the dose grid's
    df = pd.DataFrame(rows)
    df.loc[(df["arm"] == "x_dose") & (df["alpha"] == 16.0) & (df["lr"] == 1e-2) & (df["seed"] == 0),
           ["diverged", "attn_fro"]] = [True, np.inf]
    return df


def test_dose_table_keeps_every_lr_and_a_diverged_member_at_chance():
    t = dose_table(_runs(), "digits")
    assert set(t["family"]) == {"x/c", "x³/c", "softmax(S/τ)"} and len(t) == 18  # 3 families × 3 doses × 2 lrs
    assert sorted(set(t["lr"])) == [1e-3, 1e-2] and (t["seeds"] == 3).all()
    x16 = t[(t["family"] == "x/c") & (t["dose"] == 16.0) & (t["lr"] == 1e-2)].iloc[0]
    acc = 0.5 + 0.1 + 0.05 - 0.01
    assert x16["test_acc_seeds"] == pytest.approx([0.1, acc + 0.01, acc + 0.02])  # seed 0 diverged: chance
    assert x16["log10_attn_fro_seeds"][0] is None and x16["log10_attn_fro"] == pytest.approx(math.log10(10 / 16))
    assert dose_table(_runs(), "text").empty


def test_dose_slope_is_least_squares_over_the_dose_means_with_the_seed_variance():
    rng = np.random.default_rng(4)
    x = np.linspace(-1.0, 1.5, 8)
    seeds = 0.8 - 0.05 * x[:, None] + 0.01 * rng.standard_normal((8, 3))
    t = pd.DataFrame({"lr": 0.01, "log10_attn_fro": x, "test_acc": seeds.mean(1), "test_acc_seeds": list(seeds)})
    s, ref = dose_slope(t), stats.linregress(x, seeds.mean(1))
    assert s.b == pytest.approx(ref.slope, rel=1e-12) and s.se == pytest.approx(ref.stderr, rel=1e-10)
    assert s.df == 6 and s.n == 8 and s.seeds == 3 and s.lr == 0.01
    assert s.seed_var == pytest.approx(np.mean(seeds.var(axis=1, ddof=1)), rel=1e-12)
    assert s.sxx == pytest.approx(float(((x - x.mean()) ** 2).sum()), rel=1e-12)
    assert s.rho == pytest.approx(stats.spearmanr(x, seeds.mean(1)).statistic, abs=1e-12)
    resid = float(((seeds.mean(1) - ref.intercept - ref.slope * x) ** 2).sum()) / 6
    assert s.lack_of_fit_var == pytest.approx(max(0.0, resid - s.seed_var / 3), abs=1e-15)
    short = dose_slope(t.iloc[:2])
    assert math.isnan(short.b) and short.df == 0
    t.loc[3, "log10_attn_fro"] = np.inf  # a diverged dose's norm: left out
    assert dose_slope(t).n == 7


def test_matched_norm_contrast_interpolates_the_reference_in_log_norm():
    t = pd.DataFrame([
        {"family": "x/c", "dose": 1.0, "log10_attn_fro": 2.0, "test_acc": 0.9},
        {"family": "x/c", "dose": 4.0, "log10_attn_fro": 1.0, "test_acc": 0.7},
        {"family": "x/c", "dose": 16.0, "log10_attn_fro": 0.0, "test_acc": 0.5},
        {"family": "x³/c", "dose": 1.0, "log10_attn_fro": 1.5, "test_acc": 0.6},  # ref there: 0.8
        {"family": "x³/c", "dose": 4.0, "log10_attn_fro": 0.5, "test_acc": 0.5},  # ref there: 0.6
        {"family": "x³/c", "dose": 16.0, "log10_attn_fro": -1.0, "test_acc": 0.4},  # outside the reference's range
    ])
    c = matched_norm_contrast(t)
    assert c.n == 2 and c.diffs == pytest.approx((-0.2, -0.1)) and c.norms == pytest.approx((1.5, 0.5))
    assert c.mean == pytest.approx(-0.15) and c.p_less == pytest.approx(0.25)  # exact signed rank, 2 of 2 negative
    # a second lr whose x/c lies 0.3 higher: matched to its own lr, never across; 4 cells, exact p = 1/16
    two = pd.concat([t.assign(lr=1e-3), t.assign(lr=1e-2, test_acc=t["test_acc"] + 0.3 * (t["family"] == "x/c"))])
    c = matched_norm_contrast(two)
    assert c.n == 4 and c.diffs == pytest.approx((-0.2, -0.1, -0.5, -0.4)) and c.p_less == pytest.approx(1 / 16)


def test_each_family_carries_its_power_and_a_slope_without_seed_lists_has_one_seed():
    t = dose_table(_runs(), "digits")
    assert dict(t.groupby("family")["p"].first()) == {"x/c": 1, "x³/c": 3, "softmax(S/τ)": 0}
    bare = pd.DataFrame({"lr": 0.01, "log10_attn_fro": [0.0, 1.0, 2.0], "test_acc": [0.5, 0.7, 0.6]})
    s = dose_slope(bare)
    assert s.seeds == 1 and math.isnan(s.seed_var) and s.b == pytest.approx(0.05)


def test_three_points_are_enough_for_spearman_and_two_reference_doses_for_a_match():
    a = exact_spearman([1, 2, 3], [1, 3, 2])
    assert a.n == 3 and a.rho == pytest.approx(0.5)
    t = pd.DataFrame([
        {"family": "x/c", "dose": 1.0, "lr": 0.01, "log10_attn_fro": 2.0, "test_acc": 0.9},
        {"family": "x/c", "dose": 4.0, "lr": 0.01, "log10_attn_fro": 0.0, "test_acc": 0.5},
        {"family": "x³/c", "dose": 1.0, "lr": 0.01, "log10_attn_fro": 1.0, "test_acc": 0.6},  # ref there: 0.7
        {"family": "x³/c", "dose": 2.0, "lr": 0.01, "log10_attn_fro": 1.5, "test_acc": 0.9},  # ref there: 0.8
    ])
    c = matched_norm_contrast(t)
    assert c.n == 2 and c.diffs == pytest.approx((-0.1, 0.1))


def test_lack_of_fit_is_the_residual_beyond_the_seed_noise_and_edges_of_the_slope():
    x = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])
    bump = np.array([0.0, 0.05, -0.05, 0.05, -0.05, 0.0])  # the doses' own scatter about the line
    seeds = (0.5 + 0.1 * x + bump)[:, None] + np.array([-0.01, 0.01])  # two seeds, ±0.01: seed variance 2e-4
    t = pd.DataFrame({"lr": 0.1, "log10_attn_fro": x, "test_acc": seeds.mean(1), "test_acc_seeds": list(seeds)})
    s = dose_slope(t)
    ref = stats.linregress(x, seeds.mean(1))
    resid = float(((seeds.mean(1) - ref.intercept - ref.slope * x) ** 2).sum()) / 4
    assert s.seeds == 2 and s.seed_var == pytest.approx(2e-4, rel=1e-9)
    assert s.lack_of_fit_var == pytest.approx(resid - 2e-4 / 2, rel=1e-9) and s.lack_of_fit_var > 1e-3
    unit = dose_slope(t.iloc[[0, 1, 2]])  # a norm range of exactly one decade is a range
    assert unit.n == 3 and math.isfinite(unit.b)
    flat = dose_slope(t.assign(log10_attn_fro=1.0))
    assert math.isnan(flat.b) and math.isnan(flat.se)
    d = s.as_dict()
    assert d["b_per_decade"] == round(s.b, 6) and flat.as_dict()["b_per_decade"] is None


def test_rounding_of_stored_seeds_and_json_ready_statistics():
    import json

    r = _runs()
    r.loc[r["arm"] == "x_dose", "test_acc"] = 1 / 3
    t = dose_table(r, "digits")
    x = t[(t["family"] == "x/c") & (t["dose"] == 1.0) & (t["lr"] == 1e-3)].iloc[0]
    assert x["test_acc_seeds"] == [0.333333] * 3
    a = exact_spearman(range(7), [2, 1, 4, 3, 6, 7, 5])
    assert a.as_dict()["rho"] == round(a.rho, 6) != round(a.rho, 7)  # ρ = 0.857142…: six digits stored
    nan = exact_spearman([1, 1, 1], [1, 2, 3]).as_dict()
    assert nan["rho"] is None and json.dumps(nan, allow_nan=False)
    assert exact_spearman([1, 2, 3], [0.0, 1.0, 0.5]).rho == pytest.approx(0.5)  # a y range of exactly 1 is a range
    assert exact_spearman([0.0, 1.0, 0.5], [1, 2, 3]).rho == pytest.approx(0.5)  # and an x range of exactly 1
    third = DoseSlope(0.01, 1 / 3, 1 / 3, 6, 1 / 3, 3, 1 / 3, 1 / 3, 8).as_dict()
    assert third["b_per_decade"] == 0.333333 and third["sxx"] == 0.333333  # six digits, as every stored statistic
    assert Contrast((1 / 3,), (1 / 3,), 1 / 3, 1 / 3, 1 / 3, 1).as_dict()["mean"] == 0.333333
    empty = matched_norm_contrast(pd.DataFrame(columns=["family", "dose", "lr", "log10_attn_fro", "test_acc"]))
    assert empty.n == 0 and empty.as_dict()["mean"] is None


def test_a_dose_at_exactly_the_reference_range_edge_is_matched():
    t = pd.DataFrame([
        {"family": "x/c", "dose": 1.0, "lr": 0.01, "log10_attn_fro": 2.0, "test_acc": 0.9},
        {"family": "x/c", "dose": 4.0, "lr": 0.01, "log10_attn_fro": 0.0, "test_acc": 0.5},
        {"family": "x³/c", "dose": 1.0, "lr": 0.01, "log10_attn_fro": 0.0, "test_acc": 0.6},  # at the low edge
        {"family": "x³/c", "dose": 2.0, "lr": 0.01, "log10_attn_fro": 2.0, "test_acc": 0.8},  # at the high edge
    ])
    assert matched_norm_contrast(t).diffs == pytest.approx((0.1, -0.1))
