"""Tests for `empirics/experiments/lipschitz_ball.py`: the sweep's rows, its seeding, and the exponent fit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from sapa.common.seeds import rng_for
from sapa.empirics.experiments.lipschitz_ball import BallConfig, BallResult, fit_exponent, make_head, radius_for, run_ball
from sapa.empirics.kernels.ball_ascent import AscentConfig
from sapa.theory.lipschitz_ball import ball_bound, logit_bound

SMALL = BallConfig(ns=(2, 4, 8), betas=(2.0,), D=4, d=4, d_v=4, ascent=AscentConfig(restarts=4, steps=15))


def test_radius_gives_the_requested_largest_logit():
    h = make_head(0, 8, 8, 8, "softmax")
    R = radius_for(h, 3.0)
    assert logit_bound(float(torch.linalg.matrix_norm(h.W, 2)), R, 8) == pytest.approx(3.0, rel=1e-12)


def test_rows_are_seeded_below_the_bound_and_round_trip():
    a, b = run_ball(SMALL), run_ball(SMALL)
    assert a.rows == b.rows and len(a.rows) == 3 * 3
    for r in a.rows:
        assert 0 < r["sigma_lower"] <= r["bound"]
        assert r["bound"] == pytest.approx(ball_bound(r["activation"], r["n"], r["beta"], a.v))
    again = BallResult.from_json(a.to_json())
    assert again.rows == a.rows
    s = a.series("poly1", 2.0)
    assert list(s["n"]) == [2, 4, 8] and np.all(np.diff(s["sigma_lower"]) > 0)


def test_an_expression_has_lower_bounds_and_no_upper_bound():
    res = run_ball(BallConfig(ns=(2, 4), betas=(2.0,), activations=("expr:Max(x, 0)/N",), D=4, d=4, d_v=4,
                              ascent=AscentConfig(restarts=3, steps=5, polish_iters=20)))
    assert [r["bound"] for r in res.rows] == [None, None] and all(r["sigma_lower"] > 0 for r in res.rows)
    assert np.isnan(res.series("expr:Max(x, 0)/N", 2.0)["bound"]).all()


def test_fit_is_ols_with_a_t_interval():
    rng = rng_for(0, "test_lipschitz_ball_fit")
    n = np.array([8, 11, 16, 22, 32, 45, 64], dtype=float)
    y = 1.3 * n**0.47 * np.exp(0.02 * rng.standard_normal(n.size))
    f = fit_exponent(n, y, 0.99)
    ref = stats.linregress(np.log(n), np.log(y))
    t = stats.t.ppf(0.995, n.size - 2)
    assert f.slope == pytest.approx(ref.slope, rel=1e-12)
    assert f.hi - f.slope == pytest.approx(t * ref.stderr, rel=1e-10)
    exact = fit_exponent(n, 2.0 * np.sqrt(n), 0.99)
    assert exact.slope == pytest.approx(0.5, abs=1e-12) and exact.hi - exact.lo < 1e-10
    with pytest.raises(ValueError):
        fit_exponent(n[:2], y[:2], 0.99)


def test_fit_interval_covers_the_true_exponent_at_its_level():
    """Gaussian log-noise about an exact power law: the 90 % interval covers b in 90 % ± 3 se of 400 fits."""
    rng = rng_for(1, "test_lipschitz_ball_fit")
    n = np.geomspace(8, 64, 7)
    cover = 0
    for _ in range(400):
        f = fit_exponent(n, n**0.5 * np.exp(0.05 * rng.standard_normal(7)), 0.9)
        cover += f.lo <= 0.5 <= f.hi
    assert abs(cover / 400 - 0.9) <= 3 * math.sqrt(0.9 * 0.1 / 400)
