"""Tests for `empirics/experiments/softmax_bounds.py`: the numerical side of Theorem 4.1 / Eq. 4.2 (arXiv 2410.18613)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sapa.common.seeds import rng_for
from sapa.empirics.experiments.softmax_bounds import (
    adversarial_logits,
    autograd_jacobian_ratio,
    autograd_jacobian_search,
    jacobian_wrt_x_growth,
    norm_search,
    row_jacobian_search,
    softmax_rows,
)


def test_adversarial_rows_are_probability_vectors():
    z = adversarial_logits(5, rng_for(0, "t"), 64)
    assert z.shape == (64 + 8, 5) and np.all(np.isfinite(z))
    P = softmax_rows(z)
    assert np.allclose(P.sum(1), 1, atol=1e-12) and P.min() >= 0
    assert np.allclose(P[-8:, :2], 0.5, atol=1e-8)  # the two-way ties


def test_norm_search_stays_below_the_bound_and_reaches_it():
    per_n, worst = norm_search([2, 16], 64, seed=3)
    assert 0 < worst <= 1 + 1e-12 and [r["N"] for r in per_n] == [2, 16]
    for r in per_n:
        lim = r["one_hot_limit_ratio_at_gaps_1_10_30_700"]
        assert lim == sorted(lim) and lim[-1] == pytest.approx(1.0, abs=1e-12)


def test_row_jacobian_never_exceeds_the_sharp_half():
    """‖diag(s) − ssᵀ‖_F ≤ 1/2 for every row (sapa.theory.softmax: p2 − 2p3 + p2² ≤ 1/4)."""
    n, worst = row_jacobian_search([2, 4], 128, seed=1)
    assert n == 2 * (128 + 16) + 256 * 2 and 0.45 < worst <= 0.5 + 1e-12


def test_autograd_attains_half_at_two_point_rows():
    S = torch.full((4, 4), -60.0, dtype=torch.float64)
    S[:, :2] = 0.0
    assert autograd_jacobian_ratio(S) == pytest.approx(0.5, abs=1e-12)
    rows, worst = autograd_jacobian_search(seed=0)
    assert [r["N"] for r in rows] == [2, 3, 4, 8] and worst <= 0.5 + 1e-12
    assert all(r["ratio_at_two_point_rows"] == pytest.approx(0.5, abs=1e-12) for r in rows)


def test_jacobian_wrt_x_grows_with_the_weight_scale():
    out = jacobian_wrt_x_growth(seed=0)
    w = [r["jac_fro_over_sqrtN"] for r in out["tied_pair_witness"]]
    assert w == sorted(w) and w[-1] > 2 and out["exceeds_2sqrtN"] and out["max_ratio"] == max(
        r["jac_fro_over_sqrtN"] for r in out["series"] + out["tied_pair_witness"])
    assert math.isfinite(out["max_ratio"])
