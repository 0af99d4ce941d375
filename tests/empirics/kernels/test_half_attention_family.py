"""Tests for `empirics/kernels/half_attention_family.py`: the closed form against the J·dX product and the dense
Jacobian (autograd), the construction inside the ball at the gap it promises, and its √(n−1) growth."""

from __future__ import annotations

import math

import pytest
import torch

from sapa.common.validate import InputError
from sapa.empirics.experiments.lipschitz_ball import make_head, radius_for
from sapa.empirics.kernels import half_attention_family as fam
from sapa.empirics.kernels.head_jacobian import forward, jvp


@pytest.fixture(scope="module")
def head_gap():
    h = make_head(0, 8, 8, 8, "softmax")
    R = radius_for(h, 4.0)
    return h, R, fam.largest_gap(h, R)


def _dense_sigma(h, X: torch.Tensor) -> float:
    """σ₁ of autograd's dense Jacobian of f at X (n, D): an independent computation."""
    n, D = X.shape
    J = torch.autograd.functional.jacobian(lambda Y: forward(h, Y[None])[0], X)  # (n, d_v, n, D)
    return float(torch.linalg.matrix_norm(J.reshape(n * h.W_V.shape[1], n * D), 2))


def test_the_gap_is_bounded_by_the_ball_and_found_near_it(head_gap):
    h, R, g = head_gap
    assert 0 < g.a_max <= 2 * h.c * float(torch.linalg.matrix_norm(h.W, 2)) * R**2 * (1 + 1e-12)  # ≤ 2β = 8
    assert float(g.u.norm()) == pytest.approx(R, rel=1e-12) and float(g.v.norm()) == pytest.approx(R, rel=1e-12)
    assert g.a_max == pytest.approx(float(h.c * ((g.u @ h.W) @ (g.v - g.u))), rel=1e-12)
    # no random point of the sphere does better than the ascent (400 seeded draws)
    gen = torch.Generator().manual_seed(1)
    U = torch.randn(400, 8, generator=gen, dtype=torch.float64)
    U = R * U / U.norm(dim=1, keepdim=True)
    a = h.c * (R * (U @ h.W).norm(dim=1) - ((U @ h.W) * U).sum(dim=1))
    assert float(a.max()) <= g.a_max * (1 + 1e-9)


@pytest.mark.parametrize("n", [2, 3, 5, 17, 64])
def test_every_query_moves_by_w_m_and_the_closed_form_is_a_lower_bound(head_gap, n):
    h, R, g = head_gap
    q = fam.family_point(h, g, n)
    assert q.in_regime and q.p == pytest.approx(0.5, abs=1e-12) and q.gap == pytest.approx(math.log(n - 1), abs=1e-12)
    assert float(q.X.norm(dim=1).max()) <= R * (1 + 1e-12)                 # inside the ball
    assert float(q.E.norm()) == pytest.approx(1.0, rel=1e-12) and int((q.E.abs().sum(dim=1) > 0).sum()) == 1
    JE = jvp(h, q.X[None], q.E[None])[0]                                   # (n, d_v)
    assert torch.allclose(JE[:-1], JE[0].expand(n - 1, -1), rtol=0, atol=1e-14)  # every query moves alike
    assert float(JE[0].norm()) * math.sqrt(n - 1) == pytest.approx(q.closed_form, rel=1e-12)
    assert q.sigma_lower**2 == pytest.approx(q.closed_form**2 + float(JE[-1].norm()) ** 2, rel=1e-12)


@pytest.mark.parametrize("n", [3, 6, 12])
def test_the_dense_jacobian_is_at_least_the_family_bound(head_gap, n):
    """σ₁ of autograd's dense Jacobian ≥ ‖J E‖ (a unit E), and ‖J E‖ equals autograd's J·E."""
    h, R, g = head_gap
    q = fam.family_point(h, g, n)
    assert _dense_sigma(h, q.X) >= q.sigma_lower * (1 - 1e-12)
    _, JE = torch.autograd.functional.jvp(lambda Y: forward(h, Y[None])[0], q.X, q.E)
    assert float(JE.norm()) == pytest.approx(q.sigma_lower, rel=1e-12)


def test_the_bound_grows_like_sqrt_n_inside_the_regime_and_falls_beyond(head_gap):
    h, R, g = head_gap
    end = 1 + math.exp(g.a_max)
    inside = [n for n in (8, 16, 32, 64, 128, 256, 512, 1024) if n <= end]
    assert len(inside) >= 4  # the β = 4 ball reaches lengths in the hundreds (e^{a_max})
    s = fam.family_series(h, R, inside)
    ratios = [x / math.sqrt(n - 1) for x, n in zip(s["closed_form"], s["n"])]
    assert min(ratios) > 0.1 * max(ratios)  # bounded away from 0: c√(n−1) with c = min ratio
    slope = math.log(s["closed_form"][-1] / s["closed_form"][0]) / math.log((inside[-1] - 1) / (inside[0] - 1))
    assert 0.4 < slope < 0.7
    n = int(4 * end)  # past the regime: the largest gap leaves the far token p = e^a/(n − 1 + e^a) < ½
    far = fam.family_point(h, g, n)
    assert not far.in_regime and far.gap == pytest.approx(g.a_max, rel=1e-12)
    assert far.p == pytest.approx(1 / (1 + (n - 1) * math.exp(-g.a_max)), rel=1e-12) and far.p < 0.3


def test_bad_inputs_are_refused(head_gap):
    h, R, g = head_gap
    with pytest.raises(InputError, match="n must be"):
        fam.family_point(h, g, 1)
    with pytest.raises(InputError, match="materialises n × n"):
        fam.family_point(h, g, fam.MAX_N + 1)
    with pytest.raises(InputError, match="softmax construction"):
        fam.largest_gap(make_head(0, 8, 8, 8, "poly3"), R)
    with pytest.raises(InputError, match="R must be"):
        fam.largest_gap(h, float("nan"))


def test_the_family_never_exceeds_the_proven_bound(head_gap):
    """Every σ̲ of the family is a certified lower bound, so sapa's proven U_softmax(n) must lie above it."""
    from sapa.theory.lipschitz_ball import ball_bound

    h, R, g = head_gap
    v = float(torch.linalg.matrix_norm(h.W_V, 2))
    for n in (8, 32, 128, 256, 1024):
        q = fam.family_point(h, g, n)
        assert q.sigma_lower < ball_bound("softmax", n, 4.0, v)
