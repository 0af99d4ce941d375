"""Tests for `empirics/training/dose_response.py`: exact Spearman p by brute force with scipy's ρ, the dose table from a
runs table (best lr per dose, diverged members at chance), and the matched-norm contrast by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from empirics.training.dose_response import dose_table, exact_spearman, matched_norm_contrast


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


def test_dose_table_takes_each_dose_at_its_best_lr_and_a_diverged_member_at_chance():
    t = dose_table(_runs(), "digits")
    assert set(t["family"]) == {"x/c", "x³/c", "softmax(S/τ)"} and len(t) == 9
    assert (t["lr"] == 1e-2).all()  # the higher median validation accuracy everywhere
    x16 = t[(t["family"] == "x/c") & (t["dose"] == 16.0)].iloc[0]
    acc = 0.5 + 0.1 + 0.05 - 0.01
    assert x16["test_acc_seeds"] == pytest.approx([0.1, acc + 0.01, acc + 0.02])  # seed 0 diverged: chance
    assert x16["log10_attn_fro_seeds"][0] is None and x16["log10_attn_fro"] == pytest.approx(math.log10(10 / 16))
    assert dose_table(_runs(), "text").empty


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
