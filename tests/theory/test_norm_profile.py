"""Tests for `theory/norm_profile.py`: a ψ(x, N) = c(N)·h(x) is integrated once, not once per size.

The factored quadrature (c(N)²·E h², one sum over the nodes) is checked against the direct one (E(c(N)·h)²
at every N, the route for a ψ that does not factor) within the round-off bound of the two sums: every term of
either sum has one sign (w·c²h² ≥ 0; 2cc'·w·h² has the sign of cc'), so each carries a relative error of
at most K·ε over K nodes, and the two differ by at most 2K·ε.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from sapa.theory import norm_profile
from sapa.theory.activation import N_, parse_activation, x_
from sapa.theory.entry_moments import model_spec
from sapa.theory.norm_profile import _factor_in_n, profile

NS = np.array([2.0, 14.0, 196.0, 4096.0, 2.0**20])


@pytest.mark.parametrize("text", ["tanh(x)/sqrt(N)", "relu(x)/N", "gelu(x)*log(1 + N)/N", "log(Abs(x - 1/40))",
                                  "erf(x)*N**(-0.5)", "1/N"])
def test_what_factors_is_split_into_c_of_n_times_h_of_x(text):
    psi = parse_activation(text).shape
    h, c = _factor_in_n(psi)
    assert not h.has(N_) and not c.has(x_)
    assert sp.simplify(c * h - psi) == 0


@pytest.mark.parametrize("text", ["1/(1 + exp(-(x - log(N))))", "x/N + tanh(x)/sqrt(N)", "tanh(x*N)"])
def test_what_does_not_factor_keeps_the_direct_route(text):
    assert _factor_in_n(parse_activation(text).shape) is None


def _profiles(text, spec, monkeypatch):
    """(factored, direct, largest node count K of the factored sums)."""
    act = parse_activation(text)
    sizes = []
    factored = norm_profile._factored

    def spy(h_of, nodes, c_of, dc_of):
        sizes.append(nodes.x.size)
        return factored(h_of, nodes, c_of, dc_of)

    with monkeypatch.context() as mp:
        mp.setattr(norm_profile, "_factored", spy)
        fast = profile(act, spec, quadrature=True)
    with monkeypatch.context() as mp:
        mp.setattr(norm_profile, "_factor_in_n", lambda psi: None)
        direct = profile(act, spec, quadrature=True)
    assert sizes, "the factored route was not taken"
    return fast, direct, max(sizes)


@pytest.mark.parametrize("text", ["tanh(x)/sqrt(N)", "relu(x)/N", "gelu(x/8)*log(1 + N)/N", "log(Abs(x - 1/40))"])
@pytest.mark.parametrize("model", ["iid", "paper"])
def test_the_factored_quadrature_equals_the_direct_one_within_round_off(text, model, monkeypatch):
    spec = model_spec(model, None if model == "paper" else 16, 4)
    fast, direct, K = _profiles(text, spec, monkeypatch)
    bound = 2 * K * np.finfo(np.float64).eps
    for got, want in ((fast.entries(NS), direct.entries(NS)),
                      ({k: f(NS) for k, f in fast._df.items()}, {k: f(NS) for k, f in direct._df.items()})):
        for key in want:
            g, w = got[key], want[key]
            finite = np.isfinite(w)
            assert np.array_equal(finite, np.isfinite(g)), key  # an infinite E (log's Jacobian) stays infinite
            scale = np.maximum(np.abs(w[finite]), np.finfo(np.float64).tiny)
            assert np.all(np.abs(g[finite] - w[finite]) <= bound * scale), (key, g, w, bound)
    assert fast.errors(196.0) == pytest.approx(direct.errors(196.0), abs=1e-12)
    for q, v in fast.exponents(NS).items():
        assert np.allclose(v, direct.exponents(NS)[q], rtol=1e-9, atol=1e-12, equal_nan=True), q


def test_one_quadrature_serves_every_size_and_gives_each_the_same_bits(monkeypatch):
    act = parse_activation("tanh(x)/sqrt(N)")
    prof = profile(act, model_spec("iid", 16, 4), quadrature=True)
    alone = prof.totals([196.0])
    many = prof.totals(np.geomspace(1, 1e12, 241).tolist() + [196.0])
    assert all(many[q][-1] == alone[q][0] for q in alone)  # independent of which other sizes were asked
    calls = []
    lam = norm_profile._lam

    def counting(expr):
        f = lam(expr)

        def call(*args):
            calls.append(np.size(args[0]))
            return f(*args)

        return call

    monkeypatch.setattr(norm_profile, "_lam", counting)
    prof = profile(act, model_spec("iid", 16, 4), quadrature=True)
    calls.clear()
    prof.totals(np.geomspace(1, 1e12, 241))
    prof.totals(np.geomspace(2, 4096, 50))
    node_calls = [n for n in calls if n > 1000]  # sums over the nodes (the others evaluate c(N) on the sizes)
    assert node_calls == [], "the quadratures were computed when the profile was built and are not redone"
    assert math.isfinite(float(prof.totals([196.0])["jac"][0]))
