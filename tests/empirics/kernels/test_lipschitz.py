"""Tests for `empirics/kernels/lipschitz.py`: power iteration vs materialised Jacobians, the 1/2 bound, ascent."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.func import jacrev

from sapa.empirics.kernels.lipschitz import (
    attention_map,
    jacobian_fro,
    jvp,
    lipschitz_growth,
    maximise_jacobian_norm,
    softmax_rows,
    spectral_norm,
    structured_inputs,
)
from sapa.empirics.kernels.norms import attention_norms
from sapa.theory.families import power, softmax
from sapa.common.validate import InputError

F64 = torch.float64


def _rand(*shape, seed=0, scale=1.0):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _dense_norms(f, x):
    J = jacrev(f)(x).reshape(f(x).numel(), x.numel())
    return float(torch.linalg.matrix_norm(J, 2)), float(torch.linalg.matrix_norm(J))


CASES = [
    (softmax(0.5), "none", False, False),
    (softmax(0.5), "causal", False, False),
    (softmax(1.0), "none", False, True),
    (power(1, 0.25), "none", False, False),
    (power(3, 0.1), "causal", True, False),
    (power(2, 1.0), "none", False, True),
]


@pytest.mark.parametrize("act,mask,rows,value", CASES)
def test_power_iteration_matches_materialised_jacobian(act, mask, rows, value):
    N, D = 5, 3
    W, X = _rand(D, D, seed=1, scale=0.7), _rand(N, D, seed=2)
    rs = torch.arange(1, N + 1, dtype=F64).rsqrt() if rows else None
    V = _rand(D, 2, seed=3) if value else None
    f = attention_map(W, act, mask, rs, V)
    spec, fro = _dense_norms(f, X)
    res = spectral_norm(f, X, tol=1e-12, max_iter=5000)
    assert res.converged
    assert res.sigma == pytest.approx(spec, rel=1e-6)
    assert res.lower <= res.sigma * (1 + 1e-12)
    assert jacobian_fro(f, X, chunk=4) == pytest.approx(fro, rel=1e-10)


@pytest.mark.parametrize("act,mask,rows,value", CASES)
def test_jvp_is_the_jacobian_times_v(act, mask, rows, value):
    """J v by two reverse passes equals the materialised Jacobian (torch.func.jacrev) times v, in float64."""
    N, D = 5, 3
    W, X, v = _rand(D, D, seed=1, scale=0.7), _rand(N, D, seed=2), _rand(N, D, seed=4)
    rs = torch.arange(1, N + 1, dtype=F64).rsqrt() if rows else None
    f = attention_map(W, act, mask, rs, _rand(D, 2, seed=3) if value else None)
    y, Jv = jvp(f, (X,), (v,))
    J = jacrev(f)(X).reshape(f(X).numel(), X.numel())
    assert torch.equal(y, f(X))
    torch.testing.assert_close(Jv.reshape(-1), J @ v.reshape(-1), rtol=1e-12, atol=1e-14)


@pytest.mark.slow  # a fresh interpreter (~3 s)
def test_no_forward_mode_ad_so_no_torch_jit_script_deprecation():
    """Forward-mode AD would import torch's JVP decompositions (scripted with the deprecated torch.jit.script)."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import torch; from sapa.empirics.kernels.lipschitz import attention_map, jacobian_fro, spectral_norm; "
            "from sapa.theory.families import softmax; import sys; "
            "g = torch.Generator().manual_seed(0); W = torch.randn(3, 3, generator=g, dtype=torch.float64); "
            "X = torch.randn(4, 3, generator=g, dtype=torch.float64); f = attention_map(W, softmax(), 'none'); "
            "jacobian_fro(f, X); spectral_norm(f, X, max_iter=5); "
            "assert 'torch._decomp.decompositions_for_jvp' not in sys.modules")
    root = Path(__file__).resolve().parents[3]
    res = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True, text=True,
                         cwd=root)
    assert res.returncode == 0, res.stderr[-2000:]


@pytest.mark.parametrize("act,mask,rows", [(a, m, r) for a, m, r, v in CASES if not v])
def test_jacobian_fro_agrees_with_the_exact_kernel(act, mask, rows):
    N, D = 6, 4
    W, X = _rand(D, D, seed=4, scale=0.5), _rand(N, D, seed=5)
    rs = torch.arange(1, N + 1, dtype=F64).rsqrt() if rows else None
    kernel = attention_norms(X, W, act, mask, rs, device="cpu")
    assert jacobian_fro(attention_map(W, act, mask, rs), X) == pytest.approx(kernel.jac_fro, rel=1e-10)


def test_softmax_logit_jacobian_spectral_norm_at_most_half():
    # J = diag(p) − p pᵀ has ‖J‖₂ ≤ 1/2 for every logit vector (row-block-diagonal for S).
    for seed in range(20):
        S = _rand(4, 7, seed=seed, scale=[0.1, 1.0, 5.0, 30.0][seed % 4])
        res = spectral_norm(softmax_rows, S, tol=1e-9, max_iter=5000)  # Ritz residual 1e-9: σ² within 1e-9·σ²
        assert res.sigma <= 0.5 + 1e-12
        assert res.sigma == pytest.approx(_dense_norms(softmax_rows, S)[0], rel=1e-6)


def test_softmax_logit_bound_is_attained_by_two_equal_logits():
    s = torch.tensor([[3.0, 3.0, -60.0, -60.0]], dtype=F64)  # p ≈ (1/2, 1/2, 0, 0)
    assert spectral_norm(softmax_rows, s).sigma == pytest.approx(0.5, abs=1e-12)


def test_ascent_on_softmax_logits_approaches_but_never_exceeds_half():
    start = _rand(1, 6, seed=9)
    start = start * (8.0 / torch.linalg.vector_norm(start))
    random_value = spectral_norm(softmax_rows, start).sigma
    res = maximise_jacobian_norm(softmax_rows, 1, 6, 8.0, steps=60, restarts=2, seed=0)
    assert res.value <= 0.5 + 1e-9
    assert res.value > max(random_value, 0.45)
    assert math.isclose(float(torch.linalg.vector_norm(res.X)), 8.0, rel_tol=1e-12)
    assert all(b >= a for a, b in zip(res.history, res.history[1:]))


@pytest.mark.parametrize("norm", ["spectral", "fro"])
def test_ascent_beats_its_initial_points(norm):
    N, D, r = 4, 3, 3.0
    W = _rand(D, D, seed=11, scale=0.6)
    f = attention_map(W, softmax(1.0))
    inits = [structured_inputs(W, N, r, k) for k in ("aligned", "two_cluster")]
    measure = (lambda x: spectral_norm(f, x).sigma) if norm == "spectral" else (lambda x: jacobian_fro(f, x))
    res = maximise_jacobian_norm(f, N, D, r, norm=norm, steps=10, restarts=1, seed=3, inits=inits)
    assert res.value >= max(measure(x) for x in inits) - 1e-9
    assert res.value == pytest.approx(measure(res.X), rel=1e-6)


def test_structured_inputs_geometry():
    W = _rand(5, 5, seed=12)
    lam, Q = torch.linalg.eigh((W + W.T) / 2)
    u1 = Q[:, -1]
    for kind in ("aligned", "two_cluster", "two_cluster_orth", "one_vs_rest"):
        X = structured_inputs(W, 7, 2.0, kind)
        assert X.shape == (7, 5)
        assert math.isclose(float(torch.linalg.vector_norm(X)), 2.0, rel_tol=1e-12)
    X = structured_inputs(W, 7, 2.0, "aligned")
    assert torch.allclose(X, X[0].expand(7, -1)) and abs(float(X[0] @ u1)) == pytest.approx(2 / math.sqrt(7))
    X = structured_inputs(W, 6, 2.0, "two_cluster")
    assert torch.allclose(X[:3], -X[3:])
    with pytest.raises(InputError):
        structured_inputs(W, 7, 2.0, "three_cluster")


def test_growth_report_shape():
    df = lipschitz_growth([3, 5], 3, softmax(1.0), steps=2, restarts=1)
    assert set(df["input"]) == {"random", "aligned", "two_cluster", "one_vs_rest", "ascent"}
    asc = df[df["input"] == "ascent"].set_index("N")["sigma"]
    best = df[df["input"] != "ascent"].groupby("N")["sigma"].max()
    assert np.all(asc.to_numpy() >= best.to_numpy() - 1e-9)


@pytest.mark.slow
def test_softmax_attention_lipschitz_growth_is_reported():
    # Castin, Ablin, Peyré (ICML 2024): adversarial Lipschitz constant grows like √N. Reported only.
    from sapa.empirics.montecarlo.stats import fit_exponent

    df = lipschitz_growth([4, 8, 16, 32], 4, softmax(1.0), steps=30, restarts=2)
    asc = df[df["input"] == "ascent"]
    fit = fit_exponent(asc["N"].to_numpy(), [[v] for v in asc["sigma"]], n_boot=10)
    print(f"adversarial softmax-attention Lipschitz slope vs N: {fit.slope:.3f} (Castin et al.: 0.5)")
    assert math.isfinite(fit.slope)


def test_growth_report_with_token_constraint():
    df = lipschitz_growth([3, 5], 3, softmax(1.0), steps=2, restarts=1, constraint="token",
                          token_radius=1.5)
    asc = df[df["input"] == "ascent"].set_index("N")["sigma"]
    best = df[df["input"] != "ascent"].groupby("N")["sigma"].max()
    assert np.all(asc.to_numpy() >= best.to_numpy() - 1e-9)
    with pytest.raises(InputError):
        lipschitz_growth([3, 5], 3, softmax(1.0), constraint="ball")
