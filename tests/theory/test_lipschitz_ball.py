"""Tests for `theory/lipschitz_ball.py`: each step of the proof of U_φ(n), symbolically or against autograd."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
import torch

from sapa.common.seeds import rng_for, torch_gen_for
from sapa.theory import lipschitz_ball as LB


# ------------------------------------------------------------------ (L1) ‖diag(p) − ppᵀ‖₂ ≤ ½

def test_gershgorin_radius_is_half_minus_a_square():
    p = sp.symbols("p", real=True)
    assert sp.simplify(sp.Rational(1, 2) - 2 * p * (1 - p) - sp.Rational(1, 2) * (2 * p - 1) ** 2) == 0


def test_softmax_jacobian_norm_at_most_half_on_random_simplices():
    rng = rng_for(0, "test_lipschitz_ball", "L1")
    worst = 0.0
    for n in (2, 3, 5, 20):
        for _ in range(200):
            p = rng.dirichlet(np.full(n, 0.3))
            worst = max(worst, float(np.linalg.eigvalsh(np.diag(p) - np.outer(p, p))[-1]))
    assert worst <= 0.5 + 1e-12
    p = np.array([0.5, 0.5])  # attained: two equal logits
    assert np.linalg.eigvalsh(np.diag(p) - np.outer(p, p))[-1] == pytest.approx(0.5)


# ------------------------------------------------------------------ (L2) ‖J^{1/2} X‖₂ ≤ R

def test_covariance_of_tokens_under_a_row_is_at_most_R_squared():
    rng = rng_for(0, "test_lipschitz_ball", "L2")
    for _ in range(100):
        n, D, R = 7, 4, 1.7
        X = rng.standard_normal((n, D))
        X *= R * rng.uniform(0, 1, (n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
        p = rng.dirichlet(np.ones(n))
        C = X.T @ (np.diag(p) - np.outer(p, p)) @ X
        assert np.linalg.eigvalsh(C)[-1] <= R**2 * (1 + 1e-12)


# ------------------------------------------------------------------ (L3) column sums

def test_largest_softmax_weight_with_bounded_logits_is_the_closed_form():
    b, n = sp.symbols("beta n", positive=True)
    extreme = sp.exp(b) / (sp.exp(b) + (n - 1) * sp.exp(-b))
    assert sp.simplify(extreme - 1 / (1 + (n - 1) * sp.exp(-2 * b))) == 0
    assert sp.limit(n * extreme, n, sp.oo) == sp.exp(2 * b)  # κ → e^{2β}: the mean-field saturation


def test_column_sums_of_softmax_with_bounded_logits_stay_below_kappa():
    rng = rng_for(0, "test_lipschitz_ball", "L3")
    for beta in (0.5, 2.0, 4.0):
        for n in (2, 8, 50):
            for _ in range(50):
                S = rng.uniform(-beta, beta, (n, n))
                S[:, 0] = beta  # every query's largest logit on key 0
                S[:, 1:] = np.minimum(S[:, 1:], -beta * rng.uniform(0.9, 1.0, (n, n - 1)))
                P = np.exp(S) / np.exp(S).sum(1, keepdims=True)
                k = LB.column_sum_bound(n, beta)
                assert P.sum(0).max() <= k * (1 + 1e-12)
                assert np.linalg.norm(P, 2) <= math.sqrt(k) * (1 + 1e-12)


# ------------------------------------------------------------------ the bound against autograd

def _head(seed: int, D: int, act: str):
    from sapa.empirics.kernels.head_jacobian import Head

    g = torch_gen_for(seed, "test_lipschitz_ball", "head", D)
    WQ, WK, WV = (torch.randn(D, D, generator=g, dtype=torch.float64) / math.sqrt(D) for _ in range(3))
    return Head(WQ @ WK.T, WV, D, act)


def _dense_sigma(h, X):
    from sapa.empirics.kernels.head_jacobian import forward

    n, D = X.shape
    J = torch.autograd.functional.jacobian(lambda Y: forward(h, Y[None])[0], X).reshape(-1, n * D)
    return float(torch.linalg.matrix_norm(J, 2))


def _inputs(h, n: int, R: float, gen):
    from sapa.empirics.kernels.ball_ascent import project_ball, starts

    out = list(starts(h, n, R, 3, gen))
    for scale in (0.3, 1.0, 3.0):  # inside, on and (projected) beyond the sphere
        out.append(project_ball(scale * R * torch.randn(n, h.W.shape[0], generator=gen, dtype=torch.float64)
                                / math.sqrt(h.W.shape[0]), R))
    return out


@pytest.mark.parametrize("act", ["softmax", "poly1", "poly3"])
def test_dense_sigma_never_exceeds_the_bound_and_the_ascent_stays_below(act):
    from sapa.empirics.kernels.ball_ascent import AscentConfig, maximise_sigma

    for seed, n, R in ((0, 3, 0.8), (1, 6, 1.6), (2, 10, 2.5)):
        h = _head(seed, 4, act)
        w, v = float(torch.linalg.matrix_norm(h.W, 2)), float(torch.linalg.matrix_norm(h.W_V, 2))
        beta = LB.logit_bound(w, R, h.d)
        U = LB.ball_bound(act, n, beta, v)
        gen = torch_gen_for(seed, "test_lipschitz_ball", act)
        for X in _inputs(h, n, R, gen):
            assert _dense_sigma(h, X) <= U
        best = maximise_sigma(h, n, R, AscentConfig(restarts=4, steps=30), gen)
        assert _dense_sigma(h, best.X) <= U and best.lower <= U


def test_term_bounds_of_the_softmax_proof_hold_at_sampled_inputs():
    """‖P‖₂ ≤ √κ (term 2) and ‖dP X‖_F ≤ cR(Rw + wR√min(n/2, κ)) for unit dX (term 1), from autograd's dP."""
    from sapa.empirics.kernels.head_jacobian import attention, logits

    h = _head(3, 4, "softmax")
    w = float(torch.linalg.matrix_norm(h.W, 2))
    gen = torch_gen_for(3, "test_lipschitz_ball", "terms")
    for n, R in ((4, 1.0), (9, 2.0), (16, 3.0)):
        beta = LB.logit_bound(w, R, h.d)
        k = LB.column_sum_bound(n, beta)
        for X in _inputs(h, n, R, gen):
            P = attention(h, logits(h, X[None]))[0]
            assert float(torch.linalg.matrix_norm(P, 2)) <= math.sqrt(k) * (1 + 1e-12)
            dX = torch.randn(n, 4, generator=gen, dtype=torch.float64)
            dX /= torch.linalg.vector_norm(dX)
            _, dP = torch.autograd.functional.jvp(lambda Y: attention(h, logits(h, Y[None]))[0], X, dX)
            lhs = float(torch.linalg.vector_norm(dP @ X))
            assert lhs <= h.c * R * (R * w + w * R * math.sqrt(min(n / 2, k))) * (1 + 1e-12)


# ------------------------------------------------------------------ closed forms

def test_local_exponent_is_sympys_derivative_on_both_branches():
    n, b = sp.symbols("n beta", positive=True)
    k = n / (1 + (n - 1) * sp.exp(-2 * b))
    for m in (n / 2, k):
        U = sp.sqrt(k) + b + b * sp.sqrt(m)
        e = sp.lambdify((n, b), sp.simplify(n * sp.diff(U, n) / U))
        for beta in (0.5, 1.0, 4.0):
            for nn in (1.5, 3.0, 10.0, 1e3, 1e6):
                below = nn / 2 <= LB.column_sum_bound(nn, beta)
                if below == (m is not k):
                    assert LB.local_exponent("softmax", nn, beta) == pytest.approx(float(e(nn, beta)), rel=1e-10)
    assert LB.local_exponent("poly3", 7.0, 2.0) == 0.5


def test_softmax_bound_rate_and_mean_field_limit():
    for beta in (0.5, 1.0, 4.0):
        grid = np.geomspace(1, 1e9, 400)
        assert max(LB.local_exponent("softmax", x, beta) for x in grid) <= 0.5
        assert LB.softmax_bound(1e12, beta, 2.0) == pytest.approx(LB.mean_field_limit(beta, 2.0), rel=1e-5)
        for x in grid:  # ≤ the plain √n form at every n
            assert LB.softmax_bound(x, beta, 1.0) <= math.sqrt(x) + beta + beta * math.sqrt(x / 2) + 1e-9
    assert LB.asymptotic_exponent("softmax") == 0.0 and LB.asymptotic_exponent("poly1") == 0.5


def test_poly_bound_is_attained_in_rate_by_aligned_tokens():
    """Every token R·u₁: σ₁ ∝ √n exactly (dense SVD), so the bound's √n is the true rate."""
    from sapa.empirics.kernels.ball_ascent import starts

    h = _head(4, 4, "poly3")
    s = [_dense_sigma(h, starts(h, n, 1.3, 1, torch_gen_for(0, "unused"))[0]) for n in (2, 8, 32)]
    assert s[1] / s[0] == pytest.approx(2.0, rel=1e-9) and s[2] / s[1] == pytest.approx(2.0, rel=1e-9)
    with pytest.raises(ValueError):
        LB.poly_bound(4, 0, 1.0, 1.0)
