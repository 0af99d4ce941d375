"""Tests for `empirics/montecarlo/samplers.py`: shapes and moments (fixed seeds, z/t-tests); seeding is in common/seeds.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from sapa.common.validate import InputError
from sapa.common.seeds import trial_generators
from sapa.empirics.montecarlo import samplers
from sapa.empirics.montecarlo.samplers import (Population, RandomnessModel, cov_factor, make_population, power_law_cov,
                                          random_orthonormal, sample_paper_ab, sample_qk, sample_trials, sample_x)

# Each statistical check below runs on a fixed seed, so it is deterministic; thresholds are
# set so that a correct sampler fails with probability ≲ 1e-3 over seeds (|z| < 4 or p > 1e-3).
Z_MAX = 4.0


def _g(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_old_model_config_name_is_gone():  # renamed RandomnessModel (tiny_models has TinyModelConfig)
    assert not hasattr(samplers, "ModelConfig") and RandomnessModel.__module__ == "sapa.empirics.montecarlo.samplers"


@pytest.mark.parametrize("weights", ["iid", "tied", "corr"])
def test_per_trial_generators_make_batching_irrelevant(weights):
    cfg = RandomnessModel(weights=weights, rho=0.3)
    X, W = sample_trials(cfg, 6, 4, 3, 5, trial_generators(1, "k", range(5)))
    X2, W2 = sample_trials(cfg, 6, 4, 3, 2, trial_generators(1, "k", range(3, 5)))
    assert X.shape == (5, 6, 4) and W.shape == (5, 4, 4)
    assert torch.equal(X[3:], X2) and torch.equal(W[3:], W2)


def test_single_generator_is_reproducible():
    cfg = RandomnessModel()
    X1, W1 = sample_trials(cfg, 4, 3, 2, 2, _g(5))
    X2, W2 = sample_trials(cfg, 4, 3, 2, 2, _g(5))
    assert torch.equal(X1, X2) and torch.equal(W1, W2)


def test_iso_inputs_mean_zero_identity_covariance():
    D = 5
    X, _ = sample_trials(RandomnessModel(), 100, D, 2, 100, _g(0))  # 10 000 tokens
    x = X.reshape(-1, D).numpy()
    n = x.shape[0]
    # t-test on each coordinate's mean, Bonferroni over D
    assert stats.ttest_1samp(x, 0.0).pvalue.min() > 1e-3 / D
    C = np.cov(x, rowvar=False)
    # sd of a sample covariance entry: √((1 + δ_ab)/n) for standard normals
    se = np.sqrt((1 + np.eye(D)) / n)
    assert np.abs((C - np.eye(D)) / se).max() < Z_MAX


def test_aniso_given_cov_reproduced():
    D = 4
    A = torch.tensor([[2.0, 0.5, 0, 0], [0.5, 1.0, 0.3, 0], [0, 0.3, 0.5, 0], [0, 0, 0, 0.1]], dtype=torch.float64)
    L = cov_factor(A)
    assert torch.allclose(L @ L.T, A, atol=1e-12)
    cfg = RandomnessModel(inputs="aniso")
    pop = make_population(cfg, D, _g(1), cov=A)
    X = sample_x(pop, 200, 50, D, _g(2)).reshape(-1, D).numpy()  # 10 000 tokens
    n = X.shape[0]
    C = np.cov(X, rowvar=False)
    a = A.numpy()
    se = np.sqrt((a**2 + np.outer(np.diag(a), np.diag(a))) / n)  # Var(s_ab) = (σ_ab² + σ_aa σ_bb)/n
    assert np.abs((C - a) / se).max() < Z_MAX


def test_power_law_cov_spectrum():
    S = power_law_cov(8, 1.5, _g(3))
    lam = torch.linalg.eigvalsh(S).flip(0)
    assert math.isclose(float(torch.trace(S)), 8.0, rel_tol=1e-12)
    ratios = lam / lam[0]
    assert torch.allclose(ratios, torch.arange(1, 9, dtype=torch.float64) ** -1.5, rtol=1e-9)


def test_cov_must_be_psd_symmetric():
    with pytest.raises(InputError, match="semi-definite"):
        cov_factor(np.diag([1.0, -1.0]))
    with pytest.raises(InputError, match="symmetric"):
        cov_factor(np.array([[1.0, 0.5], [0.0, 1.0]]))


def test_spiked_covariance_is_identity_plus_spikes():
    D, k, s = 6, 2, 5.0
    cfg = RandomnessModel(inputs="spiked", spikes=k, spike_strength=s)
    pop = make_population(cfg, D, _g(4))
    U = pop.spikes
    assert torch.allclose(U.T @ U, torch.eye(k, dtype=torch.float64), atol=1e-12)
    X = sample_x(pop, 400, 50, D, _g(5)).reshape(-1, D).numpy()  # 20 000 tokens
    n = X.shape[0]
    Sigma = np.eye(D) + s * (U @ U.T).numpy()
    C = np.cov(X, rowvar=False)
    se = np.sqrt((Sigma**2 + np.outer(np.diag(Sigma), np.diag(Sigma))) / n)
    assert np.abs((C - Sigma) / se).max() < Z_MAX


def test_shared_mean_token():
    D = 5
    cfg = RandomnessModel(mean_norm=3.0)
    pop = make_population(cfg, D, _g(6))
    assert math.isclose(float(torch.linalg.vector_norm(pop.mean)), 3.0, rel_tol=1e-12)
    X, _ = sample_trials(cfg, 100, D, 2, 50, _g(7), population=pop)
    x = X.reshape(-1, D).numpy()
    assert stats.ttest_1samp(x, pop.mean.numpy()).pvalue.min() > 1e-3 / D
    with pytest.raises(InputError, match="population"):
        sample_trials(cfg, 4, D, 2, 1, _g(0))


def test_weights_variance_is_one_over_D():
    D, d, T = 16, 8, 400
    wq, wk = sample_qk(RandomnessModel(), T, D, d, _g(8))
    for w in (wq, wk):
        v = w.reshape(-1).numpy()  # 51 200 entries, variance σ² = 1/16
        z = (v.var(ddof=1) - 1 / D) / ((1 / D) * math.sqrt(2 / (v.size - 1)))
        assert abs(z) < Z_MAX
        assert abs(stats.ttest_1samp(v, 0.0).statistic) < Z_MAX
    assert RandomnessModel().weight_std(D) == 0.25 and RandomnessModel(sigma_w=0.5).weight_std(D) == 0.5


@pytest.mark.parametrize("rho", [0.0, 0.5, -0.7])
def test_corr_weights_have_correlation_rho(rho):
    wq, wk = sample_qk(RandomnessModel(weights="corr", rho=rho), 200, 8, 8, _g(9))
    a, b = wq.reshape(-1).numpy(), wk.reshape(-1).numpy()  # 12 800 pairs
    r = np.corrcoef(a, b)[0, 1]
    # Fisher z: atanh(r) ~ N(atanh(ρ), 1/(n − 3))
    assert abs((math.atanh(r) - math.atanh(rho)) * math.sqrt(a.size - 3)) < Z_MAX
    assert abs((b.var(ddof=1) - 1 / 8) / ((1 / 8) * math.sqrt(2 / (b.size - 1)))) < Z_MAX


def test_tied_weights_are_equal_and_w_symmetric_psd():
    wq, wk = sample_qk(RandomnessModel(weights="tied"), 3, 6, 4, _g(10))
    assert torch.equal(wq, wk)
    _, W = sample_trials(RandomnessModel(weights="tied"), 5, 6, 4, 3, _g(10))
    assert torch.allclose(W, W.transpose(-1, -2))
    assert float(torch.linalg.eigvalsh(W).min()) > -1e-12


def test_iid_w_mean_is_zero_and_corr_w_mean_is_rho_d_sigma2():
    # E[W_Q W_Kᵀ] = ρ d σ² I, so E[tr W]/D = ρ d/D with σ² = 1/D
    D, d, T = 8, 4, 4000
    for weights, rho in (("iid", 0.0), ("corr", 0.5), ("tied", 1.0)):
        _, W = sample_trials(RandomnessModel(weights=weights, rho=rho), 2, D, d, T, _g(11))
        tr = torch.diagonal(W, dim1=-2, dim2=-1).sum(-1).numpy() / D  # (T,)
        assert abs(stats.ttest_1samp(tr, rho * d / D).statistic) < Z_MAX, weights


def test_paper_model_ab():
    A, B = sample_paper_ab(RandomnessModel(weights="paper", sigma_ab=2.0), 50, 20, 10, _g(12))
    assert A.shape == B.shape == (50, 20, 10)
    for M in (A, B):
        v = M.reshape(-1).numpy()
        assert abs((v.var(ddof=1) - 4.0) / (4.0 * math.sqrt(2 / (v.size - 1)))) < Z_MAX
    assert abs(np.corrcoef(A.reshape(-1).numpy(), B.reshape(-1).numpy())[0, 1]) * math.sqrt(A.numel()) < Z_MAX
    with pytest.raises(InputError, match="paper"):
        sample_trials(RandomnessModel(weights="paper"), 4, 4, 2, 1, _g(0))


def test_given_w_is_used_for_every_trial():
    W0 = np.arange(9.0).reshape(3, 3)
    X, W = sample_trials(RandomnessModel(), 4, 3, 3, 2, _g(0), W=W0)
    assert torch.equal(W[0], torch.as_tensor(W0)) and torch.equal(W[1], W[0])
    with pytest.raises(InputError, match="W"):
        sample_trials(RandomnessModel(), 4, 3, 3, 2, _g(0), W=np.eye(2))


def test_random_orthonormal_and_bad_configs():
    U = random_orthonormal(5, 3, _g(0))
    assert torch.allclose(U.T @ U, torch.eye(3, dtype=torch.float64), atol=1e-12)
    with pytest.raises(InputError):
        random_orthonormal(2, 3, _g(0))
    for bad in ({"weights": "shared"}, {"rho": 1.5}, {"inputs": "real"}, {"mean_norm": -1.0}, {"spikes": 0}):
        with pytest.raises(InputError):
            RandomnessModel(**bad)
    with pytest.raises(InputError, match="generators"):
        sample_trials(RandomnessModel(), 4, 3, 2, 3, trial_generators(0, "k", range(2)))
    assert isinstance(Population(), Population)
