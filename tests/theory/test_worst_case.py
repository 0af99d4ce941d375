"""Tests for `theory/worst_case.py`: closed forms against autograd, bounds against random inputs, exponents."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.func import jacrev

from sapa.common.validate import InputError
from sapa.theory.worst_case import (
    QUANTITIES,
    bracket,
    cluster_norms,
    top_pair,
    witness_input,
    witnesses,
    worst_case_exponent,
)


def _w(D, seed):
    g = np.random.default_rng(seed)
    return g.standard_normal((D, D)) / math.sqrt(D) @ (g.standard_normal((D, D)) / math.sqrt(D)).T


def _autograd(X, W, p, c=1.0):
    """(‖φ‖_F, ‖J‖_F, ‖J‖₂) of φ = c(XWXᵀ)^{∘p} with the Jacobian materialised by jacrev (float64)."""
    Xt, Wt = torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(W, dtype=torch.float64)
    f = lambda Y: c * (Y @ Wt @ Y.T) ** p  # noqa: E731
    J = jacrev(f)(Xt).reshape(X.shape[0] ** 2, X.size)
    return float(torch.linalg.vector_norm(f(Xt))), float(torch.linalg.matrix_norm(J)), float(torch.linalg.matrix_norm(J, 2))


@pytest.mark.parametrize("p", [1, 2, 3])
def test_cluster_norms_match_autograd(p):
    W = _w(4, 1)
    rng = np.random.default_rng(2)
    V = rng.standard_normal((3, 4))
    n = np.array([2, 1, 3])
    fro, jac = cluster_norms(W, V, n, p, c=0.7)
    ref = _autograd(witness_input(V, n), W, p, c=0.7)
    assert fro == pytest.approx(ref[0], rel=1e-12)
    assert jac == pytest.approx(ref[1], rel=1e-12)


@pytest.mark.parametrize("constraint", ["token", "fro"])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_witnesses_lie_on_the_set_and_attain_the_lower_end(constraint, p):
    W, N, r = _w(5, 3), 6, 1.3
    for name, (V, n) in witnesses(constraint, N, W, r).items():
        X = witness_input(V, n)
        assert X.shape == (N, 5)
        if constraint == "token":
            assert np.allclose(np.linalg.norm(X, axis=1), r, rtol=1e-12)
        else:
            assert np.linalg.norm(X) == pytest.approx(r * math.sqrt(N), rel=1e-12)
    ref = {name: _autograd(witness_input(V, n), W, p) for name, (V, n) in witnesses(constraint, N, W, r).items()}
    for k, q in enumerate(("fro", "jac_fro")):
        b = bracket(p, q, constraint, N, W, r)
        assert b.lower == pytest.approx(max(v[k] for v in ref.values()), rel=1e-12)
        assert b.lower == pytest.approx(ref[b.witness][k], rel=1e-12)
    b = bracket(p, "jac_spec", constraint, N, W, r)  # the spectral lower end: aligned / concentrated witness
    name = "aligned" if constraint == "token" else "concentrated"
    assert b.lower <= ref[name][2] * (1 + 1e-12)
    assert b.lower <= b.upper


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), p=st.integers(1, 4), N=st.integers(2, 7), D=st.integers(1, 5),
       constraint=st.sampled_from(["token", "fro"]), spread=st.sampled_from([0.0, 1.0, 3.0]))
def test_no_input_on_the_set_exceeds_the_upper_bounds(seed, p, N, D, constraint, spread):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((D, D))
    X = rng.standard_normal((N, D)) * np.exp(spread * rng.standard_normal((N, 1)))  # uneven token norms
    r = float(rng.uniform(0.5, 1.5))
    if constraint == "token":
        X = r * X / np.linalg.norm(X, axis=1, keepdims=True)
    else:
        X = r * math.sqrt(N) * X / np.linalg.norm(X)
    got = _autograd(X, W, p)
    for k, q in enumerate(QUANTITIES):
        assert got[k] <= bracket(p, q, constraint, N, W, r).upper * (1 + 1e-10)


@pytest.mark.parametrize("constraint", ["token", "fro"])
@pytest.mark.parametrize("quantity", QUANTITIES)
@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("gamma", [0.0, 0.5])
def test_both_bracket_ends_grow_with_the_stated_exponent(constraint, quantity, p, gamma):
    W = _w(4, 7)
    e = worst_case_exponent(p, quantity, constraint, gamma)
    for end in ("lower", "upper"):
        N1, N2 = 2**14, 2**15
        v1 = getattr(bracket(p, quantity, constraint, N1, W, 1.0, c=N1**-gamma), end)
        v2 = getattr(bracket(p, quantity, constraint, N2, W, 1.0, c=N2**-gamma), end)
        assert math.log(v2 / v1) / math.log(2) == pytest.approx(e, abs=1e-3)


def test_exponent_table_values():
    assert worst_case_exponent(3, "fro", "fro", 0.5) == 2.5
    assert worst_case_exponent(3, "jac_fro", "fro", 0.5) == 2.0
    assert worst_case_exponent(1, "jac_fro", "fro", 0.5) == 0.5
    assert worst_case_exponent(3, "fro", "token", 0.5) == 0.5
    assert worst_case_exponent(3, "jac_spec", "token", 0.5) == 0.0


def test_top_pair_and_validation():
    W = np.array([[1.0, 2.0], [0.0, -3.0]])
    lam, u, sig = top_pair(W)
    assert abs(lam) == pytest.approx(np.abs(np.linalg.eigvalsh((W + W.T) / 2)).max())
    assert u @ W @ u == pytest.approx(lam)
    assert sig == pytest.approx(np.linalg.norm(W, 2))
    with pytest.raises(InputError):
        top_pair(np.ones((2, 3)))
    with pytest.raises(InputError):
        bracket(0, "fro", "token", 4, W, 1.0)
    with pytest.raises(InputError):
        bracket(1, "fro", "ball", 4, W, 1.0)
    with pytest.raises(InputError):
        bracket(1, "fro", "token", 4, np.array([[np.nan]]), 1.0)
