"""Tests for `empirics/realmodel/real_geometry.py`: reduction, bias shift, invariants, canonical correlations, per-head growth.

The pure tests run on synthetic matrices; the exact moments on a real head need the optional
extra ``real`` (``pytest.importorskip``). Nothing may touch the network.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch

from sapa.empirics.realmodel import real
from sapa.empirics.kernels.norms import attention_norms
from sapa.theory.families import power, softmax
from sapa.theory.moments import exact_moments

# offline, sockets refused (tests/conftest.py); one torch thread (conftest.py here)
pytestmark = pytest.mark.usefixtures("no_network", "real_one_thread")


def _synthetic_qk(rng, D=24, d=4, layer=0, head=0) -> real.HeadQK:
    return real.HeadQK(layer, head, rng.standard_normal((D, d)) / math.sqrt(D), rng.standard_normal(d),
                       rng.standard_normal((D, d)) / math.sqrt(D), rng.standard_normal(d))

def test_bias_is_an_exact_token_shift():
    rng = np.random.default_rng(1)
    qk = _synthetic_qk(rng)
    g = real.head_geometry(qk)
    X = rng.standard_normal((7, 24))
    S = (X @ qk.W_Q + qk.b_Q) @ (X @ qk.W_K + qk.b_K).T / math.sqrt(qk.d)  # (N, d) @ (d, N)
    Xr = g.reduce(X)
    assert g.U.shape == (24, 8) and g.shift_residual < 1e-12
    np.testing.assert_allclose(Xr @ g.W_r @ Xr.T, S, rtol=1e-12, atol=1e-12)

@pytest.mark.parametrize("act", [softmax(), power(1, 0.5), power(3, 0.5)])
def test_reduced_norms_equal_autograd_with_biases(act):
    """‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F with biases (X in R^{N×D}) from the reduced kernel vs torch.func.jacrev."""
    rng = np.random.default_rng(2)
    qk = _synthetic_qk(rng)
    g = real.head_geometry(qk)
    X = rng.standard_normal((6, 24))
    r = attention_norms(g.reduce(X), g.W_r, act)
    t = lambda a: torch.from_numpy(a)

    def phi(x):
        S = (x @ t(qk.W_Q) + t(qk.b_Q)) @ (x @ t(qk.W_K) + t(qk.b_K)).T / math.sqrt(qk.d)
        return torch.softmax(act.coef * S, -1) if act.kernel == "softmax" else act.coef * S**act.p

    J = torch.func.jacrev(phi)(t(X))  # (N, N, N, D)
    assert r.fro == pytest.approx(float(phi(t(X)).norm()), rel=1e-10)
    assert r.jac_fro == pytest.approx(float(J.norm()), rel=1e-10)

def test_invariants_closed_form_matches_exact_p1():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((10, 10)) + 2 * np.eye(10)
    inv = real.invariants(W)
    em = exact_moments(1, "shared", 64, W=W)
    assert inv.n_star_p1_identity == pytest.approx(em.crossover_n, rel=1e-12)
    assert inv.trace == pytest.approx(np.trace(W)) and 0 < inv.sym_share <= 1
    assert inv.ws_positive_mass > 0.5  # the +2I makes W_s mostly positive

def test_reduction_preserves_exact_moments():
    """exact_moments on W (D, D) with Σ equals exact_moments on W_r = UᵀWU with UᵀΣU."""
    rng = np.random.default_rng(4)
    qk = _synthetic_qk(rng, D=40, d=4)
    g = real.head_geometry(qk)
    A = rng.standard_normal((40, 40))
    Sigma = A @ A.T / 40 + 0.1 * np.eye(40)
    for p in (1, 3):
        full = exact_moments(p, "shared", 50, W=qk.W, sigma_x=Sigma)
        red = exact_moments(p, "shared", 50, W=g.W_r, sigma_x=g.sigma_r(Sigma))
        assert red.crossover_n == pytest.approx(full.crossover_n, rel=1e-9)
        assert red.crossover_n_jac == pytest.approx(full.crossover_n_jac, rel=1e-9)

def test_grid_slope_limits():
    Ns = (8, 16, 32, 64, 128, 256)
    assert real.grid_slope(Ns, 2.0) == pytest.approx(0.5, abs=1e-12)  # N − 2 + 2 = N
    assert real.grid_slope(Ns, 1e9) == pytest.approx(0.0, abs=1e-6)
    assert 0 < real.grid_slope(Ns, 100.0) < real.grid_slope(Ns, 10.0) < 0.5

def test_paired_rms_exponent_recovers_a_power_law():
    Ns = np.array([8, 16, 32, 64, 128])
    a = np.random.default_rng(5).uniform(0.5, 2.0, size=(6, 1))
    exact = real.paired_rms_exponent(Ns, a * Ns**0.5, n_boot=200, seed=0)
    assert exact["slope"] == pytest.approx(0.5, abs=1e-12)
    assert exact["ci"] == pytest.approx([0.5, 0.5], abs=1e-12)  # paired: per-text constants drop out
    noisy = a * Ns**0.3 * np.exp(0.05 * np.random.default_rng(6).standard_normal((6, 5)))
    f1 = real.paired_rms_exponent(Ns, noisy, n_boot=400, seed=1)
    assert f1 == real.paired_rms_exponent(Ns, noisy, n_boot=400, seed=1)  # seeded
    assert f1["ci"][0] <= f1["slope"] <= f1["ci"][1] and abs(f1["slope"] - 0.3) < 0.1
    with pytest.raises(real.InputError):
        real.paired_rms_exponent(Ns, -noisy)

def test_ab_correlation_sees_shared_x():
    rng = np.random.default_rng(7)
    D, d = 30, 5
    WQ = rng.standard_normal((D, d))
    same = real.HeadQK(0, 0, WQ, np.zeros(d), WQ.copy(), np.zeros(d))  # tied: A = B
    X = rng.standard_normal((4000, D))
    out = real.ab_correlation(X, same)
    assert out.sample.matched_abs_mean == pytest.approx(1.0) and out.sample.canonical_top == pytest.approx(1.0)
    assert out.null.canonical_top < 0.15  # a permutation destroys the pairing
    assert out.n_tokens == 4000 and out == real.ab_correlation(X, same)  # the default null stream is seeded
    # X ~ N(0, I): the sample statistics approach the reviewer's Cov(A, B) = W_QᵀW_K
    qk = _synthetic_qk(rng, D=D, d=d)
    out = real.ab_correlation(X, qk)
    assert out.sample.canonical_top == pytest.approx(out.identity.canonical_top, abs=0.05)

def test_paired_rms_exponents_vectorised_equals_per_head():
    rng = np.random.default_rng(8)
    Ns = np.array([8, 16, 32, 64])
    V = rng.uniform(0.5, 2.0, size=(3, 5, 1)) * Ns ** np.array([0.2, 0.5, 0.9])[:, None, None] \
        * np.exp(0.05 * rng.standard_normal((3, 5, 4)))  # (H, T, K)
    f = real.paired_rms_exponents(Ns, V, n_boot=300, level=0.9, rng=np.random.default_rng(3))
    assert f["slope"].shape == f["lo"].shape == (3,) and f["local"].shape == (3, 3)
    assert np.all(f["lo"] <= f["slope"]) and np.all(f["slope"] <= f["hi"])
    assert f["slope"] == pytest.approx([0.2, 0.5, 0.9], abs=0.08)
    for h in range(3):
        one = real.paired_rms_exponent(Ns, V[h], n_boot=300)
        assert one["slope"] == pytest.approx(f["slope"][h], rel=1e-12)  # the point estimate has no randomness
    with pytest.raises(real.InputError):
        real.paired_rms_exponents(Ns, V[0], rng=rng)

def test_participation_ratio():
    assert real.participation_ratio(np.eye(40)) == pytest.approx(40.0)
    v = np.arange(1.0, 6.0)
    assert real.participation_ratio(np.outer(v, v)) == pytest.approx(1.0)
    assert real.participation_ratio(np.diag([1.0, 1.0, 0.0])) == pytest.approx(2.0)

def test_random_weight_canonical_draws_independent_weights():
    """W_Q, W_K are two separate draws; tied weights would give 1, isotropic tokens give ≈ 0.52 at d = 32, D = 384."""
    D, d = 384, 32
    Sigma = np.eye(D)
    rng = np.random.default_rng(9)
    r = real.random_weight_canonical(Sigma, d, np.random.default_rng(9))
    W_Q = rng.standard_normal((D, d)) / math.sqrt(D)  # the same stream: first W_Q, then W_K
    W_K = rng.standard_normal((D, d)) / math.sqrt(D)
    assert r == pytest.approx(real.top_canonical(Sigma, W_Q, W_K), rel=1e-12)
    assert real.top_canonical(Sigma, W_Q, W_Q) == pytest.approx(1.0)
    iso = [real.random_weight_canonical(Sigma, d, np.random.default_rng(k)) for k in range(10)]
    assert 0.4 < np.mean(iso) < 0.65
    # anisotropic tokens (a few dominant directions): independent projections share them
    lam = np.r_[np.full(4, 100.0), np.full(D - 4, 0.1)]
    aniso = [real.random_weight_canonical(np.diag(lam), d, np.random.default_rng(k)) for k in range(10)]
    assert np.mean(aniso) > 0.9 > np.mean(iso)

def test_top_canonical_matches_sample_canonical():
    """From Σ̂ it is the sample canonical correlation of A = XW_Q + b_Q, B = XW_K + b_K (biases drop out)."""
    rng = np.random.default_rng(10)
    qk = _synthetic_qk(rng, D=20, d=3)
    X = rng.standard_normal((500, 20)) @ rng.standard_normal((20, 20))
    assert real.top_canonical(np.cov(X.T), qk.W_Q, qk.W_K) == pytest.approx(
        real.ab_correlation(X, qk).sample.canonical_top, rel=1e-9)

@pytest.fixture(scope="module")
def real_head_and_sigma(weights, tok):
    """Layer-2 head 3 and the reduced covariance of its real attention inputs (one passage prefix + sentences)."""
    corpus = real.load_corpus()
    X = [real.forward(weights, real.prefix_ids(real.encode(tok, corpus.passages[sorted(corpus.passages)[1]]), 256))[2]]
    X += [real.forward(weights, real.encode(tok, s))[2] for s in corpus.sentences[:10]]
    X = torch.cat(X).double().numpy()  # (n, D)
    g = real.head_geometry(real.head_qk(weights, 2, 3))
    return g, g.sigma_r(np.cov(X.T))

def _mc_check(samples: np.ndarray, expected: float) -> float:
    """z of a sample mean against an exact expectation."""
    se = samples.std(ddof=1) / math.sqrt(samples.size)
    return (samples.mean() - expected) / se

@pytest.mark.parametrize("p", [1, 3])
@pytest.mark.parametrize("proxy", ["identity", "measured"])
def test_exact_moments_on_real_w_agree_with_monte_carlo(real_head_and_sigma, p, proxy):
    """m_off = E S_12^{2p}, m_diag = E S_11^{2p}, j_off on the real W, against 200 000 seeded Gaussian pairs.

    |z| < 4.5 for each of the three means (a two-sided 7e-6 test); a failure is retried once on
    fresh samples (scipy's habit), because S^6 is heavy-tailed and its standard error noisy.
    """
    g, Sr = real_head_and_sigma
    Sigma = None if proxy == "identity" else real._spd(Sr)
    em = exact_moments(p, "shared", 2, W=g.W_r, sigma_x=Sigma)
    W = g.W_r
    L = None if Sigma is None else np.linalg.cholesky(Sigma)
    dot = functools.partial(np.einsum, "nr,nr->n")  # row-wise dot products, without an (n, r) temporary
    for attempt in range(2):
        rng = np.random.default_rng([11, p, attempt, proxy == "identity"])
        x1, x2 = (rng.standard_normal((200_000, len(W))) for _ in range(2))  # (n, r) rows ~ N(0, I)
        if L is not None:
            x1, x2 = x1 @ L.T, x2 @ L.T  # rows ~ N(0, Σ_r)
        z1, y2 = x1 @ W, x2 @ W.T  # rows Wᵀx_1, W x_2
        s12 = dot(z1, x2)  # x_1ᵀ W x_2
        s11 = dot(z1, x1)
        jw = dot(y2, y2) + dot(z1, z1)  # ‖W x_2‖² + ‖Wᵀ x_1‖²
        zs = [_mc_check(s12 ** (2 * p), float(em.m_off)), _mc_check(s11 ** (2 * p), float(em.m_diag)),
              _mc_check(s12 ** (2 * p - 2) * jw, float(em.j_off))]
        if max(abs(z) for z in zs) < 4.5:
            break
    assert max(abs(z) for z in zs) < 4.5, zs
