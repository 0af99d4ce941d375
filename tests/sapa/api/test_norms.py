"""Tests for `sapa/api/norms.py`: ``sapa.norms`` against brute force (numpy norms, torch autograd Jacobians), the
command's JSON, torch input and one-line refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import sapa
from sapa.common.validate import InputError

RNG = np.random.default_rng(7)
N, D, d = 6, 5, 3
X = RNG.standard_normal((N, D))
WQ, WK = RNG.standard_normal((D, d)) / 2, RNG.standard_normal((D, d)) / 2
W = WQ @ WK.T


def phi_softmax(S):
    return torch.softmax(S, dim=-1)


def phi_cubic(S):
    return S ** 3 / np.sqrt(S.shape[0])


def brute(phi, X, W):
    """(‖φ(S)‖_F, ‖∂φ(S)/∂S‖_F, ‖∂φ(S)/∂X‖_F) by torch autograd in float64, S = X W Xᵀ."""
    Xt, Wt = torch.tensor(X), torch.tensor(W)
    S = Xt @ Wt @ Xt.T
    js = torch.autograd.functional.jacobian(phi, S)
    jx = torch.autograd.functional.jacobian(lambda x: phi(x @ Wt @ x.T), Xt)
    return float(torch.linalg.norm(phi(S))), float(torch.linalg.norm(js)), float(torch.linalg.norm(jx))


@pytest.mark.parametrize("kw, phi", [({"activation": "softmax"}, phi_softmax),
                                     ({"activation": "x**3/sqrt(N)"}, phi_cubic)])
def test_norms_match_autograd(kw, phi):
    r = sapa.norms(X, W, **kw)
    want = brute(phi, X, W)
    np.testing.assert_allclose([r.fro_norm, r.jac_s_fro_norm, r.jac_fro_norm], want, rtol=1e-10)


def test_heads_from_wq_wk_equal_one_w():
    """One head given as W_Q, W_K has the norms of W = W_Q W_Kᵀ."""
    a = sapa.norms(X, wq=WQ, wk=WK, activation="x**3/sqrt(N)")
    b = sapa.norms(X, W, activation="x**3/sqrt(N)")
    np.testing.assert_allclose([a.fro_norm, a.jac_fro_norm], [b.fro_norm, b.jac_fro_norm], rtol=1e-12)


def test_a_torch_tensor_gives_the_numpy_result():
    a = sapa.norms(torch.tensor(X, dtype=torch.float64, requires_grad=True), wq=torch.tensor(WQ), wk=WK,
                   activation="x**3/sqrt(N)")
    b = sapa.norms(X, wq=WQ, wk=WK, activation="x**3/sqrt(N)")
    assert a.to_dict() == b.to_dict()


def test_spectral_bracket_holds_the_largest_singular_value():
    r = sapa.norms(X, W, activation="softmax", spectral=True)
    Xt, Wt = torch.tensor(X), torch.tensor(W)
    J = torch.autograd.functional.jacobian(lambda x: torch.softmax(x @ Wt @ x.T, -1), Xt).reshape(N * N, N * D)
    s1 = float(torch.linalg.matrix_norm(J, ord=2))
    assert r.sigma_lower <= s1 * (1 + 1e-12) and s1 <= r.sigma_upper * (1 + 1e-12)


@pytest.mark.parametrize("kw", [{"activation": "softmax"}, {"activation": "poly", "p": 3, "scale": 0.5},
                                {"activation": "x**3/sqrt(N)"}])
def test_to_dict_is_the_command_json(tmp_path, capsys, kw):
    from sapa.cli import main

    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "w.npy", W)
    argv = ["norms", "--x", str(tmp_path / "x.npy"), "--w", str(tmp_path / "w.npy"), "--activation", kw["activation"]]
    argv += [a for k in ("p", "scale") if k in kw for a in (f"--{k}", str(kw[k]))]
    assert main(argv + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out) == sapa.norms(X, W, **kw).to_dict()


@pytest.mark.parametrize("args, kw, words", [
    ((X[:, :3], W), {}, "X and W do not match"),
    ((X, None), {"activation": "softmax"}, "give exactly one of W or wq/wk"),
    ((X, W), {"activation": "softmax", "scale": -1.0}, "scale must be a positive finite number"),
    ((X[0], W), {}, "X must have 2 dimensions"),
    ((np.full((N, D), np.nan), W), {}, "X contains NaN"),
    ((X, W), {"activation": "x**2", "p": 2}, "p and scale apply to softmax/poly"),
    ((X, W), {"activation": "softmax", "mask": "upper"}, "mask must be one of none, causal"),
    ((X,), {"wq": WQ, "wk": WK[:, :2]}, "W_Q"),
])
def test_bad_input_is_one_line(args, kw, words):
    with pytest.raises(InputError) as e:
        sapa.norms(*args, **kw)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_result_is_frozen_and_json_ready():
    import dataclasses

    r = sapa.norms(X, W, activation="softmax")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.fro_norm = 0.0
    with pytest.raises(TypeError):
        r.data["fro_norm"] = 0.0
    json.dumps(r.to_dict(), allow_nan=False)
    assert repr(r).startswith("NormsResult(activation='softmax', n=6, d_model=5, fro_norm=")
