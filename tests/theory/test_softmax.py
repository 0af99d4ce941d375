"""Tests for `theory/softmax.py` (Theorem 4.1 of arXiv 2410.18613, settled)."""

from __future__ import annotations

import functools
import itertools

import mpmath
import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sapa.theory.softmax import (
    P2,
    P3,
    jacobian_fro2_in_power_sums,
    jacobian_fro2_power_sum_residual,
    kkt_maxima,
    reviewer_one_hot_example,
    row_jacobian_fro,
    row_jacobian_fro_max_points,
    sharp_row_jacobian_fro_bound,
    softmax_attention_jacobian_fro2_reference,
    softmax_jacobian_closed_form,
    softmax_jacobian_symbolic,
    softmax_matrix_bounds,
    softmax_symbolic,
)
from sapa.common.validate import InputError

HALF = sp.Rational(1, 2)
QUARTER = sp.Rational(1, 4)


@pytest.fixture(autouse=True, scope="module")
def _torch_single_thread():
    # tiny Jacobians: intra-op threads only contend (≈ 50x slower on a loaded 2-core box)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _direct_row_jac_fro(s: np.ndarray) -> float:
    return float(np.linalg.norm(np.diag(s) - np.outer(s, s)))


# ---------------------------------------------------------------- one row, exact


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_differentiated_jacobian_is_diag_minus_outer(n):
    _, s = softmax_symbolic(n)
    diff = softmax_jacobian_symbolic(n) - softmax_jacobian_closed_form(s)
    assert diff.applyfunc(sp.simplify).is_zero_matrix


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_jacobian_fro2_power_sum_identity_from_differentiated_jacobian(n):
    assert jacobian_fro2_power_sum_residual(n) == 0


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_power_sum_identity_needs_no_simplex_constraint(n):
    # ‖diag(s) − ssᵀ‖² = (p2 − 2p3 + p4) + (p2² − p4) for *any* s: Σ s = 1 is only needed
    # for diag(s) − ssᵀ to be the softmax Jacobian and for the bound (p1 = 1).
    s = sp.symbols(f"s1:{n + 1}", real=True)
    fro2 = sum(e**2 for e in softmax_jacobian_closed_form(s))
    target = jacobian_fro2_in_power_sums().subs(
        {P2: sum(x**2 for x in s), P3: sum(x**3 for x in s)}
    )
    assert sp.expand(fro2 - target) == 0


def test_sharp_row_bound_is_one_half():
    assert sharp_row_jacobian_fro_bound() == HALF


def test_cauchy_schwarz_step_p2_squared_le_p3_on_two_point_family():
    # p3 − p2² ≥ 0 on the edge (t, 1−t), zero only at t ∈ {0, 1/2, 1}: the CS equality cases.
    t = sp.Symbol("t")
    s = (t, 1 - t)
    gap = sp.factor(sum(x**3 for x in s) - sum(x**2 for x in s) ** 2)
    assert sp.simplify(gap - 2 * t * (1 - t) * (2 * t - 1) ** 2 / 2) == 0
    assert set(sp.solve(gap, t)) == {0, HALF, 1}


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_uniform_on_k_coordinates_gives_k_minus_1_over_k_squared(k):
    row = [sp.Rational(1, k)] * k + [0, 0]
    fro2 = sum(e**2 for e in softmax_jacobian_closed_form(row))
    assert fro2 == sp.Rational(k - 1, k**2)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_kkt_maxima_max_is_one_quarter_at_two_point_uniform(n):
    points = kkt_maxima(n)
    best = points[0][1]
    assert best == QUARTER
    assert sp.sqrt(best) == sharp_row_jacobian_fro_bound()
    maximisers = {pt for pt, v in points if v == best}
    expected = {tuple(sp.Rational(x) for x in row) for row in row_jacobian_fro_max_points(n)}
    assert maximisers == expected
    for pt, value in points:
        assert sum(pt) == 1 and all(x >= 0 for x in pt)
        assert value == sum(e**2 for e in softmax_jacobian_closed_form(pt))


def test_kkt_points_n3_include_uniform_and_interior_saddle():
    values = {pt: v for pt, v in kkt_maxima(3)}
    third = sp.Rational(1, 3)
    assert values[(third, third, third)] == sp.Rational(2, 9)
    # (5/12, 5/12, 1/6): an interior critical point below the max (solves 2 + 4p2 = 6(a + b))
    assert values[(sp.Rational(5, 12), sp.Rational(5, 12), sp.Rational(1, 6))] == sp.Rational(
        125, 576
    )
    assert values[(1, 0, 0)] == 0
    assert len(values) == 3 + 3 + 3 + 1  # vertices, edge midpoints, saddles, centroid


def test_kkt_n1_is_the_single_point():
    assert kkt_maxima(1) == [((1,), 0)]


def test_reviewer_one_hot_example():
    for n in (1, 2, 5):
        ex = reviewer_one_hot_example(n)
        assert ex["jacobian_is_zero"]
        assert ex["lhs_jac_fro2"] == 0 and ex["rhs_power_sums"] == 0
        assert ex["identity_holds"]
        assert ex["reviewer_reading_lhs"] == 1 and ex["reviewer_reading_rhs"] == 2
        assert not ex["reviewer_reading_consistent"]
    assert row_jacobian_fro(np.eye(4)[0]) == 0.0


# ---------------------------------------------------------------- one row, numbers

_edge = st.floats(0.0, 1.0).map(lambda t: np.array([t, 1.0 - t, 0.0]))
_vertex = st.integers(2, 8).flatmap(
    lambda n: st.integers(0, n - 1).map(lambda i: np.eye(n)[i])
)
_two_point = st.integers(2, 8).flatmap(
    lambda n: st.integers(0, len(row_jacobian_fro_max_points(n)) - 1).map(
        lambda k: row_jacobian_fro_max_points(n)[k]
    )
)
_near_one_hot = st.tuples(st.integers(2, 8), st.floats(1e-300, 1e-3), st.integers(0, 2**32)).map(
    lambda a: _spread(*a)
)
_centroid = st.integers(1, 64).map(lambda n: np.full(n, 1.0 / n))
_dirichlet = st.tuples(
    st.integers(2, 16), st.sampled_from([1e-3, 1e-2, 1.0, 1e2, 1e4]), st.integers(0, 2**32)
).map(lambda a: _dirichlet_row(*a))


def _spread(n: int, eps: float, seed: int) -> np.ndarray:
    rest = np.random.default_rng(seed).dirichlet(np.ones(n - 1)) * eps
    return np.concatenate([[1.0 - rest.sum()], rest])


def _dirichlet_row(n: int, alpha: float, seed: int) -> np.ndarray:
    s = np.random.default_rng(seed).dirichlet(np.full(n, alpha))
    return s / s.sum()


simplex_points = st.one_of(_edge, _vertex, _two_point, _near_one_hot, _centroid, _dirichlet)


@settings(max_examples=300, deadline=None)
@given(simplex_points)
def test_row_jacobian_fro_le_one_half_and_matches_matrix_norm(s):
    value = row_jacobian_fro(s)
    assert 0.0 <= value <= 0.5 + 1e-12
    assert value == pytest.approx(_direct_row_jac_fro(s), abs=1e-12, rel=1e-12)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_row_jacobian_fro_equals_one_half_exactly_at_two_point_uniform(n):
    pts = row_jacobian_fro_max_points(n)
    assert pts.shape == (n * (n - 1) // 2, n)
    assert np.all(row_jacobian_fro(pts) == 0.5)


def test_row_jacobian_fro_is_accurate_near_a_vertex():
    # ‖J‖² ≈ 2ε² for s = (1 − ε, ε): the power-sum form would cancel to rounding noise.
    eps = 1e-12
    s = np.array([1.0 - eps, eps])
    assert row_jacobian_fro(s) == pytest.approx(np.sqrt(2.0) * eps, rel=1e-9)


def test_row_jacobian_fro_vectorised_over_leading_axes():
    rng = np.random.default_rng(0)
    s = rng.dirichlet(np.ones(5), size=(2, 3))  # (2, 3, 5)
    out = row_jacobian_fro(s)
    assert out.shape == (2, 3)
    for idx in itertools.product(range(2), range(3)):
        assert out[idx] == pytest.approx(_direct_row_jac_fro(s[idx]), rel=1e-13)


@pytest.mark.parametrize(
    "bad", [np.array([0.5, 0.6]), np.array([1.5, -0.5]), np.array([np.nan, 1.0]), 1.0]
)
def test_row_jacobian_fro_rejects_points_off_the_simplex(bad):
    with pytest.raises(InputError):
        row_jacobian_fro(bad)


# ---------------------------------------------------------------- N x N matrix


@functools.lru_cache(maxsize=None)
def _bounds(N: int, tau: float) -> dict:
    return softmax_matrix_bounds(N, tau)


def _torch_softmax_jac_wrt_S(S: np.ndarray, tau: float) -> float:
    S_t = torch.tensor(S, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(
        lambda A: torch.softmax(tau * A, dim=1), S_t, vectorize=True
    )
    return float(torch.linalg.norm(jac.reshape(-1)))


def test_matrix_bounds_values():
    b = softmax_matrix_bounds(4)
    assert b["fro_sup"] == 2 and b["jac_wrt_S_sharp"] == 1 and b["paper_jac_bound"] == 4
    assert b["looseness_factor"] == 4 and b["looseness_factor_float"] == 4.0
    assert not b["fro_sup_attained"] and not b["jac_wrt_S_attained_at_finite_S"]
    b = softmax_matrix_bounds(9, temperature=0.125)
    assert b["jac_wrt_S_sharp"] == sp.Rational(3, 16) and b["looseness_factor"] == 4
    b = softmax_matrix_bounds(3, temperature=1 / sp.sqrt(8))
    assert sp.simplify(b["jac_wrt_S_sharp"] - sp.sqrt(6) / 8) == 0
    b = softmax_matrix_bounds(5, causal=True)
    assert b["jac_wrt_S_sharp"] == 1 and b["fro_sup"] == sp.sqrt(5)
    b = softmax_matrix_bounds(1)
    assert b["jac_wrt_S_sharp"] == 0 and b["fro_sup_attained"]
    with pytest.raises(InputError):
        softmax_matrix_bounds(0)
    with pytest.raises(InputError):
        softmax_matrix_bounds(3, temperature=-1.0)


_S_entries = st.one_of(st.floats(-3, 3), st.floats(-60, 60), st.sampled_from([0.0, 40.0, -40.0]))


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda N: st.lists(_S_entries, min_size=N * N, max_size=N * N).map(
            lambda v: np.array(v).reshape(N, N)
        )
    ),
    st.sampled_from([1.0, 0.5, 2.0]),
)
def test_jacobian_wrt_S_le_tau_sqrt_N_over_2(S, tau):
    N = S.shape[0]
    jac_fro = _torch_softmax_jac_wrt_S(S, tau)
    bound = _bounds(N, tau)
    assert jac_fro <= bound["jac_wrt_S_sharp_float"] + 1e-12
    assert jac_fro <= bound["paper_jac_bound_float"]
    # block diagonal: ‖∂P/∂S‖² = τ² Σ_i ‖J(P_i)‖²
    P = torch.softmax(torch.tensor(tau * S), dim=1).numpy()
    assert jac_fro == pytest.approx(tau * np.linalg.norm(row_jacobian_fro(P)), abs=1e-13, rel=1e-10)
    assert np.linalg.norm(P) <= np.sqrt(N) + 1e-12


def test_jacobian_wrt_S_bound_attained_for_N2_and_approached_for_N3():
    S = np.array([[0.3, 0.3], [-2.0, -2.0]])  # rows (1/2, 1/2) exactly
    assert _torch_softmax_jac_wrt_S(S, 1.0) == pytest.approx(np.sqrt(2) / 2, rel=1e-15)
    gaps = []
    for t in (2.0, 5.0, 10.0):
        S = np.tile([t, t, -t], (3, 1))
        gaps.append(np.sqrt(3) / 2 - _torch_softmax_jac_wrt_S(S, 1.0))
    assert all(g > 0 for g in gaps) and gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-8


# ---------------------------------------------------------------- attention w.r.t. X


@functools.lru_cache(maxsize=None)
def _sympy_attention_jacobian(N: int, D: int, causal: bool):
    """∂vec P/∂vec X by sympy differentiation of softmax(τ X W Xᵀ), lambdified for mpmath."""
    X = sp.Matrix(N, D, lambda i, a: sp.Symbol(f"x{i}{a}", real=True))
    W = sp.Matrix(D, D, lambda a, b: sp.Symbol(f"w{a}{b}", real=True))
    tau = sp.Symbol("tau", positive=True)
    S = tau * X * W * X.T  # (N, D) @ (D, D) @ (D, N) -> (N, N)
    rows = []
    for i in range(N):
        seen = range(i + 1) if causal else range(N)
        denom = sum(sp.exp(S[i, j]) for j in seen)
        rows.append([sp.exp(S[i, j]) / denom if j in seen else 0 for j in range(N)])
    jac = sp.Matrix(rows).reshape(N * N, 1).jacobian(X.reshape(N * D, 1))  # (N², N·D)
    return sp.lambdify([list(X), list(W), tau], list(jac), modules="mpmath")


def _sympy_attention_jac_fro2(X_val, W_val, tau, causal) -> float:
    """Σ (∂vec P/∂vec X)², the sympy Jacobian evaluated at 30 digits with mpmath."""
    jac = _sympy_attention_jacobian(*X_val.shape, causal)
    with mpmath.workdps(30):
        mp = lambda a: [mpmath.mpf(float(v)) for v in np.ravel(a)]  # noqa: E731
        return float(sum(e**2 for e in jac(mp(X_val), mp(W_val), mpmath.mpf(tau))))


@pytest.mark.parametrize("N", [2, 3])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_jacobian_reference_matches_sympy(N, causal):
    rng = np.random.default_rng(100 + N)
    for _ in range(2):
        X, W = rng.normal(size=(N, 2)), rng.normal(size=(2, 2))
        tau = 0.7
        got = softmax_attention_jacobian_fro2_reference(X, W, tau, causal)
        want = _sympy_attention_jac_fro2(X, W, tau, causal)
        assert got == pytest.approx(want, rel=1e-12)


def _torch_attention_jac_fro2(X, W, tau, causal) -> float:
    N = X.shape[0]
    W_t = torch.tensor(W, dtype=torch.float64)
    ones = torch.ones(N, N, dtype=torch.bool)
    mask = ones.tril() if causal else ones

    def attention(X_t):
        S = tau * X_t @ W_t @ X_t.T  # (N, D) @ (D, D) @ (D, N)
        return torch.softmax(S.masked_fill(~mask, float("-inf")), dim=1)

    X_t = torch.tensor(X, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(attention, X_t, vectorize=True)
    return float(torch.sum(jac**2))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_attention_jacobian_reference_matches_torch(causal, seed):
    rng = np.random.default_rng(seed)
    N, D = int(rng.integers(1, 9)), int(rng.integers(1, 6))
    X, W = rng.normal(size=(N, D)), rng.normal(size=(D, D)) / np.sqrt(D)
    tau = float(rng.choice([1.0, 0.3, 1 / np.sqrt(D)]))
    got = softmax_attention_jacobian_fro2_reference(X, W, tau, causal)
    want = _torch_attention_jac_fro2(X, W, tau, causal)
    assert abs(got - want) <= 1e-10 * max(want, 1e-300) or got == want == 0.0


def test_attention_jacobian_reference_input_errors():
    X = np.ones((3, 2))
    with pytest.raises(InputError):
        softmax_attention_jacobian_fro2_reference(X, np.ones((3, 3)))
    with pytest.raises(InputError):
        softmax_attention_jacobian_fro2_reference(X, np.ones((2, 2)), tau=0.0)
    with pytest.raises(InputError):
        softmax_attention_jacobian_fro2_reference(np.full((3, 2), np.inf), np.ones((2, 2)))
