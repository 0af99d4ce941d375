"""Tests for `empirics/montecarlo/sweep/analysis.py`: summaries, growth exponents, exact z-scores, softmax typical norm."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import sapa.empirics.montecarlo.sweep as sw
from sapa.empirics.montecarlo.sweep import (
    cells,
    fit_exponents,
    run_sweep,
    softmax_typical_norm,
    summarise,
)
from tests.empirics.montecarlo.sweep.sweep_fixture import tiny


def test_summarise_and_fit_exponents(tmp_path):
    cfg = tiny(trials=16, N=[8, 16, 32, 64], weight_model=["paper"], d=[4], activation=[{"kind": "poly", "p": 1, "scale": ["const", "inv_sqrt_n"], "c": 1.0}])
    df = run_sweep(cfg, tmp_path, progress=False)
    s = summarise(df)
    assert {"n", "mean", "se", "q05", "q50", "q95", "mean_sq", "se_sq"} <= set(s.columns)
    assert (s["n"] == 16).all() and len(s) == len(cells(cfg)) * 3
    fits = fit_exponents(df, n_boot=200)
    f = fits.set_index(["scale_policy", "quantity"])
    # paper model, φ(x) = x: E‖S‖²_F = N² d, so slope 1; with c = 1/√N, slope 1/2
    assert abs(f.loc[("const", "fro"), "slope"] - 1.0) < 0.1
    assert abs(f.loc[("inv_sqrt_n", "fro"), "slope"] - 0.5) < 0.1
    assert f.loc[("inv_sqrt_n", "fro"), "regime"] == "sqrt_n"
    assert fits.equals(fit_exponents(df, n_boot=200))  # seeded per series
    assert json.loads(f.loc[("const", "fro"), "evidence"])["N"] == [8.0, 16.0, 32.0, 64.0]


def test_attach_exact_z_scores_are_moderate(tmp_path):
    pytest.importorskip("sapa.theory.moments")
    # p = 1 only: for p ≥ 2 the squared norms are so heavy-tailed (degree ≥ 8 in Gaussians)
    # that 64 trials usually miss the tail, biasing both mean and se down (z ≈ −10 seen at
    # p = 2, corr, N = 4, although 2·10⁶-sample moments match sapa.theory.moments).
    cfg = tiny(trials=64, N=[4, 16], d=[2], weight_model=["paper", "iid", "tied", "corr"], activation=[{"kind": "poly", "p": 1, "scale": ["inv_sqrt_n", "const"], "c": 0.5}])
    df = run_sweep(cfg, tmp_path, progress=False)
    z = sw.attach_exact(summarise(df), cfg)
    zz = z[z["expected_sq"].notna()]
    assert len(zz) == len(cells(cfg)) * 2
    # 32 z-scores of squared norms; |z| < 4.5 each (skewed, so z is only roughly normal)
    assert zz["z"].abs().max() < 4.5, zz[["weight_model", "p", "N", "quantity", "mean_sq", "expected_sq", "z"]]


def test_softmax_typical_norm_is_far_below_sqrt_n():
    df = softmax_typical_norm([8, 64, 512], d=16, trials=4, seed=0)
    assert ((df["fro"] >= 1 - 1e-12) & (df["fro"] <= df["bound"])).all()
    r = df.groupby("N")["ratio"].mean()
    assert r.is_monotonic_decreasing and r.loc[512] < 0.2
    pd.testing.assert_frame_equal(df, softmax_typical_norm([8, 64, 512], d=16, trials=4, seed=0))
