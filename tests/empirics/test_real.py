"""Tests for `empirics/real.py`: all-MiniLM-L6-v2 heads (arXiv 2410.18613, Cor 4.3 / 4.5 on a real model).

Tests that need the optional extra ``real`` skip without it (``pytest.importorskip``); the
pure ones (fits, invariants, bias shift, reduction) run on synthetic matrices. No test may
touch the network: every test runs with the hub's offline variables set and with
``socket.connect`` / ``create_connection`` raising.
"""

from __future__ import annotations

import math
import socket
from dataclasses import replace

import numpy as np
import pytest
import torch

from empirics import real
from empirics.norms import Activation, attention_norms
from theory.moments import exact_moments


pytestmark = pytest.mark.usefixtures("no_network")  # tests/conftest.py: offline, sockets refused


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The module's own policy (see ``real.single_thread``): small products, 2 shared cores."""
    with real.single_thread():
        yield


def _need_extra():
    for m in real.REQUIRED_MODULES:
        pytest.importorskip(m)


@pytest.fixture(scope="module")
def weights():
    _need_extra()
    return real.load_weights()


@pytest.fixture(scope="module")
def tok():
    _need_extra()
    return real.load_tokenizer()


def _synthetic_qk(rng, D=24, d=4, layer=0, head=0) -> real.HeadQK:
    return real.HeadQK(layer, head, rng.standard_normal((D, d)) / math.sqrt(D), rng.standard_normal(d),
                       rng.standard_normal((D, d)) / math.sqrt(D), rng.standard_normal(d))


# --------------------------------------------------------------------------- pure (no extra needed)


def test_socket_guard_is_active():
    with pytest.raises(OSError, match="network"):
        socket.create_connection(("127.0.0.1", 9))


def test_bias_is_an_exact_token_shift():
    rng = np.random.default_rng(1)
    qk = _synthetic_qk(rng)
    g = real.head_geometry(qk)
    X = rng.standard_normal((7, 24))
    S = (X @ qk.W_Q + qk.b_Q) @ (X @ qk.W_K + qk.b_K).T / math.sqrt(qk.d)  # (N, d) @ (d, N)
    Xr = g.reduce(X)
    assert g.U.shape == (24, 8) and g.shift_residual < 1e-12
    np.testing.assert_allclose(Xr @ g.W_r @ Xr.T, S, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("act", [Activation("softmax"), Activation("poly", 1, 0.5), Activation("poly", 3, 0.5)])
def test_reduced_norms_equal_autograd_with_biases(act):
    """‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F with biases (X in R^{N×D}) from the reduced kernel vs torch.func.jacrev."""
    rng = np.random.default_rng(2)
    qk = _synthetic_qk(rng)
    g = real.head_geometry(qk)
    X = rng.standard_normal((6, 24))
    r = attention_norms(g.reduce(X), g.W_r, act)
    t = lambda a: torch.from_numpy(a)  # noqa: E731

    def phi(x):
        S = (x @ t(qk.W_Q) + t(qk.b_Q)) @ (x @ t(qk.W_K) + t(qk.b_K)).T / math.sqrt(qk.d)
        return torch.softmax(act.scale * S, -1) if act.kind == "softmax" else act.scale * S**act.p

    J = torch.func.jacrev(phi)(t(X))  # (N, N, N, D)
    assert r.fro == pytest.approx(float(phi(t(X)).norm()), rel=1e-10)
    assert r.jac_fro == pytest.approx(float(J.norm()), rel=1e-10)


def test_invariants_closed_form_matches_exact_p1():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((10, 10)) + 2 * np.eye(10)
    inv = real.invariants(W)
    em = exact_moments(1, "shared", 64, W=W)
    assert inv["n_star_p1_identity"] == pytest.approx(em.crossover_n, rel=1e-12)
    assert inv["trace"] == pytest.approx(np.trace(W)) and 0 < inv["sym_share"] <= 1
    assert inv["ws_positive_mass"] > 0.5  # the +2I makes W_s mostly positive


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
    assert out["matched_abs_mean"] == pytest.approx(1.0) and out["canonical_top"] == pytest.approx(1.0)
    assert out["null_canonical_top"] < 0.15  # a permutation destroys the pairing
    # X ~ N(0, I): the sample statistics approach the reviewer's Cov(A, B) = W_QᵀW_K
    qk = _synthetic_qk(rng, D=D, d=d)
    out = real.ab_correlation(X, qk)
    assert out["canonical_top"] == pytest.approx(out["identity_canonical_top"], abs=0.05)


CLS, SEP = 101, 102


@pytest.mark.parametrize("N", [4, 8, 13, 24])
def test_protocol_token_sets_are_the_documented_ones(N):
    """The table of the module docstring, on a synthetic encoding [CLS] 1..30 [SEP] with longest grid prefix M = 24."""
    ids = np.array([CLS, *range(1, 31), SEP])
    M = 24
    got = {pr.name: list(pr.token_ids(ids, N, M)) for pr in real.PROTOCOLS}
    assert got["prefix"] == [CLS, *range(1, N - 1), SEP]
    assert got["prefix-content"] == list(range(1, N - 1))
    assert got["fixed"] == ([CLS, *range(1, N)] if N < M else [CLS, *range(1, M - 1), SEP])
    assert got["fixed-content"] == list(range(1, N - 1))
    for pr in real.PROTOCOLS:
        assert len(got[pr.name]) == pr.size(N) == (N if pr.specials else N - 2)
        assert pr.pass_length(N, M) == (N if pr.context == "prefix" else M)
    assert real.PROTOCOL_NAMES == ("prefix", "prefix-content", "fixed", "fixed-content")
    with pytest.raises(real.InputError):
        real.protocol_named("first-n")
    with pytest.raises(real.InputError):
        real.PROTOCOLS[0].token_ids(ids, M + 1, M)


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
        real.ab_correlation(X, qk)["canonical_top"], rel=1e-9)


# --------------------------------------------------------------------------- the real model


def test_weights_load(weights):
    c = weights.config
    assert (c.n_layers, c.hidden, c.n_heads, c.d_head, c.max_len) == (6, 384, 12, 32, 512)
    qk = real.head_qk(weights, 2, 5)
    Wq = weights.t("encoder.layer.2.attention.self.query.weight").double().numpy()  # (out, in)
    np.testing.assert_array_equal(qk.W_Q, Wq[5 * 32 : 6 * 32].T)
    assert qk.W_K.shape == (384, 32) and qk.b_K.shape == (32,)
    assert all(real.head_geometry(real.head_qk(weights, l, h)).shift_residual < 1e-10 for l in (0, 5) for h in (0, 11))


def test_forward_matches_transformers(weights, tok):
    """Hidden states of our forward pass vs transformers.BertModel (output_hidden_states), float32 tolerance."""
    transformers = pytest.importorskip("transformers")
    folder = real.model_dir()
    model = transformers.BertModel.from_pretrained(str(folder), local_files_only=True).eval()
    ref_tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    corpus = real.load_corpus()
    for text, N in ((corpus.sentences[12], None), (corpus.passages[sorted(corpus.passages)[0]], 40)):
        ids = real.encode(tok, text)
        assert list(ids) == ref_tok(text)["input_ids"]
        if N is not None:
            ids = real.prefix_ids(ids, N)
        ours = real.forward(weights, ids)  # (L+1, N, D) float32
        with torch.no_grad():
            out = model(torch.as_tensor(ids)[None], output_hidden_states=True)
        ref = torch.stack(out.hidden_states)[:, 0]
        assert ours.shape == ref.shape == (7, len(ids), 384)
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(real.forward(weights, ids, dtype=torch.float64), ref.double(), rtol=1e-4, atol=1e-4)


def test_prefix_ids(tok):
    ids = real.encode(tok, "The old dog slept well.")
    assert len(ids) == 8 and ids[0] == 101 and ids[-1] == 102  # [CLS] … [SEP]
    p = real.prefix_ids(ids, 5)
    assert list(p) == list(ids[:4]) + [102]
    with pytest.raises(real.InputError):
        real.prefix_ids(ids, 9)


def test_corpus_lengths(tok):
    corpus = real.load_corpus()
    lengths = [len(real.encode(tok, s)) for s in corpus.sentences]
    assert min(lengths) == 8 and max(lengths) > 200
    assert len(corpus.passages) == 8 and all(len(real.encode(tok, t)) >= 512 for t in corpus.passages.values())


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
    L = np.eye(len(W)) if Sigma is None else np.linalg.cholesky(Sigma)
    for attempt in range(2):
        rng = np.random.default_rng([11, p, attempt, proxy == "identity"])
        x1 = rng.standard_normal((200_000, len(W))) @ L.T  # (n, r) rows ~ N(0, Σ_r)
        x2 = rng.standard_normal((200_000, len(W))) @ L.T
        z1, y2 = x1 @ W, x2 @ W.T  # rows Wᵀx_1, W x_2
        s12 = (z1 * x2).sum(1)  # x_1ᵀ W x_2
        s11 = (z1 * x1).sum(1)
        jw = (y2 * y2).sum(1) + (z1 * z1).sum(1)  # ‖W x_2‖² + ‖Wᵀ x_1‖²
        zs = [_mc_check(s12 ** (2 * p), float(em.m_off)), _mc_check(s11 ** (2 * p), float(em.m_diag)),
              _mc_check(s12 ** (2 * p - 2) * jw, float(em.j_off))]
        if max(abs(z) for z in zs) < 4.5:
            break
    assert max(abs(z) for z in zs) < 4.5, zs


@pytest.fixture(scope="module")
def small_result(tmp_path_factory):
    _need_extra()
    cfg = replace(real.QUICK, name="test", Ns=(8, 16, 32), n_texts=2, n_boot=100)
    cache = tmp_path_factory.mktemp("real")
    return real.analyse(cfg, cache_dir=cache), cfg, cache


def test_analyse_small(small_result):
    res, cfg, cache = small_result
    assert len(res["heads"]) == 72 and res["Ns"] == [8, 16, 32] and res["Ns_real"] == [8, 16, 32]
    assert res["meta"]["softmax_norm_le_sqrt_n"] and res["meta"]["max_shift_residual"] < 1e-10
    h = res["heads"][0]
    for key in ("identity_p3_n_star", "measured_p1_n_star", "matched_p3_n_reg", "ab_canonical_top",
                "meas_p1_fro_slope", "meas_softmax_jac_ci", "inv_sym_share"):
        assert key in h
    assert all(r["identity_p1_n_star"] == pytest.approx(r["inv_n_star_p1_identity"], rel=1e-9) for r in res["heads"])
    fro = np.array(res["norms"]["prefix:softmax"]["fro"])  # (L, H, T, K)
    assert fro.shape == (6, 12, 2, 3) and np.all(fro <= np.sqrt([8, 16, 32]) * (1 + 1e-6))
    assert set(res["meta"]["protocols"]) == set(real.PROTOCOL_NAMES)
    assert res["meta"]["protocols"]["prefix-content"]["n"] == [6, 14, 30]
    fits = real.head_fits(res)
    assert len(fits) == 72 * (4 * 3 + 3)  # ‖φ‖ under 4 protocols, the Jacobian under "prefix" only (quick)
    assert {f.protocol for f in fits if f.kind == "jac"} == {"prefix"}
    by = {(f.protocol, f.activation, f.kind, f.layer, f.head): f for f in fits}
    assert by["prefix", "x/sqrt(N)", "fro", 2, 3].slope == res["heads"][2 * 12 + 3]["meas_p1_fro_slope"]
    assert all(f.lo <= f.hi and math.isfinite(f.slope) for f in fits)
    # at the longest N the fixed-context pass is the prefix pass: identical rows, identical norms
    for a in real.ACTIVATIONS:
        for pair in (("fixed", "prefix"), ("fixed-content", "prefix-content")):
            x, y = (np.array(res["norms"][f"{m}:{a}"]["fro"])[..., -1] for m in pair)
            np.testing.assert_allclose(x, y, rtol=1e-12)
        # shorter N: a different context, different numbers
        assert not np.allclose(np.array(res["norms"][f"fixed:{a}"]["fro"])[..., 0],
                               np.array(res["norms"][f"prefix:{a}"]["fro"])[..., 0])
    canon = real.canonical_records(res)
    assert len(canon) == 2 * 72 and {c.tokens for c in canon} == {"all", "content"}
    assert all(0 < c.random_top < 1 and 0 < c.real_top <= 1 + 1e-9 and 1 < c.participation_ratio < 384 for c in canon)
    assert {c.n_tokens for c in canon if c.tokens == "content"} == {res["meta"]["n_tokens_content"]}
    assert res["meta"]["n_tokens_content"] < res["meta"]["n_tokens_covariance"]
    again = real.analyse(cfg, cache_dir=cache)  # from the cache, identical numbers
    assert again["meta"]["from_cache"] and again["heads"] == res["heads"]
    tab = real.layer_table(res)
    assert list(tab.index) == list(range(6)) and (tab["n_star_p3_identity_max"] >= tab["n_star_p3_identity_median"]).all()


def test_analyse_norms_match_direct_computation(small_result, weights, tok):
    """One stored norm recomputed from scratch with the biases written out (no reduction)."""
    res, cfg, _ = small_result
    name = res["meta"]["passages"][1]
    ids = real.prefix_ids(real.encode(tok, real.load_corpus().passages[name]), 16)
    X = torch.from_numpy(real.forward(weights, ids)[4].double().numpy())  # layer 4 input
    qk = real.head_qk(weights, 4, 7)
    t = torch.from_numpy
    S = (X @ t(qk.W_Q) + t(qk.b_Q)) @ (X @ t(qk.W_K) + t(qk.b_K)).T / math.sqrt(32)  # (N, d) @ (d, N)
    stored = res["norms"]["prefix:x^3/sqrt(N)"]["fro"][4][7][1][1]  # layer 4, head 7, text 1, N = 16
    assert stored == pytest.approx(float((S**3 / 4.0).norm()), rel=1e-9)
    stored_sm = res["norms"]["prefix:softmax"]["fro"][4][7][1][1]
    assert stored_sm == pytest.approx(float(torch.softmax(S, -1).norm()), rel=1e-9)
    # the same head without [CLS]/[SEP]: the content rows of the same pass, scale 1/√(N − 2)
    Sc = S[1:-1, 1:-1]
    stored_c = res["norms"]["prefix-content:x/sqrt(N)"]["fro"][4][7][1][1]
    assert stored_c == pytest.approx(float((Sc / math.sqrt(14)).norm()), rel=1e-9)
