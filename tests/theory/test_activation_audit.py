"""Tests for `theory/activation_audit.py`: parsing, exact moments of every order, Gauss rules, quadrature, worst case.

The exact path must reproduce `sapa.theory.moments` (the numbers behind `sapa exact` and the growth
claims of arXiv 2410.18613) as exact rationals; the quadrature path must reproduce the exact path on
polynomials; closed forms that need no moments (ReLU under symmetric laws) check the rest.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from scipy.special import roots_hermite

from sapa.theory import activation_audit as A
from sapa.theory.gaussian import double_factorial
from sapa.theory.moments import _rw_m_off, exact_moments
from sapa.common.validate import InputError
from sapa.theory.worst_case import worst_case_exponent

VIT = (768, 64, 196)


# ----------------------------------------------------------------------------- parsing


def test_parse_polynomial_coefficients_and_aliases():
    a = A.parse_activation("x**3/sqrt(N)")
    assert a.polynomial and a.coeffs[3] == 1 / sp.sqrt(A.N_) and all(c == 0 for c in a.coeffs[:3])
    assert A.parse_activation("(1 + x)^4").coeffs == (1, 4, 6, 4, 1)
    r = A.parse_activation("relu(x)/N")
    assert not r.polynomial and r.expr == sp.Max(A.x_, 0) / A.N_
    s = A.parse_activation("sigmoid(x - log(N))")
    assert s.uses_N and not s.polynomial


def test_parse_row_index_separable_and_not():
    a = A.parse_activation("x/sqrt(i)", mask="causal")
    assert a.separable and a.uses_i and sp.simplify(a.row_factor - 1 / A.i_) == 0
    b = A.parse_activation("Max(x - i, 0)")
    assert not b.separable


@pytest.mark.parametrize("text,msg", [
    ("x*d", "unknown symbol 'd'"),
    ("foo(x)", "unknown function foo"),
    ("softmax(x)", "--normalize row"),
    ("exp(x)", "overflows"),
    ("Abs(x)**30", "overflows"),  # faster than |x|^(2·12): its squared moments leave the checked range
    ("cosh(x)/N", "overflows"),
    ("sqrt(x)", "undefined (not real) on part of the real line"),
    ("log(x)", "undefined (not real)"),
    ("sqrt(100 - x)", "undefined (not real) on part of the real line: x in Interval.open(100, oo)"),
    ("log(x - 100)", "undefined (not real) on part of the real line"),
    ("x*10**400", "beyond float64's range"),
    ("N**N*x", "beyond float64's range"),
    ("exp(exp(exp(x)))", "beyond float64's range"),
    ("9**9**9*x", "digits (at most 1000)"),
    ("2**2**40*x", "digits (at most 1000)"),
    ("(x + 1)**(10**6)", "too large (at most 100"),
    ("__import__('os')", "only names"),
    ("x.T", "only names"),
    ("x > 0", "not a scalar expression"),
    ("x; 1", "only names"),
    ("Eq(x, 1)", "unknown function Eq"),
    ("", "non-empty"),
    ("x +", "cannot parse"),
    ("x + I", "unknown symbol 'I'"),
    ("0", "identically 0"),
    ("x**2 - x**2", "identically 0"),
    ("Heaviside(x)", "jumps"),
    ("sign(x)/N", "jumps"),
    ("floor(x)", "jumps"),
    ("Piecewise((1, x > 0), (0, True))", "jumps at x = 0"),
    ("Piecewise((x, x > log(N)), (0, True))", "jumps"),
])
def test_bad_expressions_are_one_line_input_errors(text, msg):
    with pytest.raises(InputError) as e:
        A.parse_activation(text)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_continuous_piecewise_and_scipy_functions_are_accepted():
    a = A.parse_activation("Piecewise((x, x > 0), (0, True))")
    b = A.parse_activation("relu(x)")
    spec = A.model_spec("iid", 8, 4)
    assert A.profile(a, spec).totals([6.0])["fro"][0] == pytest.approx(A.profile(b, spec).totals([6.0])["fro"][0])
    g = A.profile(A.parse_activation("gelu(x/8)"), spec)  # erf through scipy.special
    assert np.isfinite(g.totals([6.0])["jac"][0])


def test_row_normalisation_needs_nonnegative_phi():
    with pytest.raises(InputError, match="φ ≥ 0"):
        A.parse_activation("x**3", normalize="row")
    A.parse_activation("exp(x)", normalize="row")  # softmax: allowed (bounded ratios)


# ----------------------------------------------------------------------------- exact moments


@pytest.mark.parametrize("rho", [Fraction(0), Fraction(1), Fraction(-1), Fraction(1, 2), Fraction(-1, 3)])
def test_v_moments_match_the_bilinear_cgf(rho):
    # (2k−1)!! E v^k = E S_12^{2k}, the latter from sapa.theory.moments' conditional CGF (independent derivation)
    vm = A._corr_v_moments(7, 3, rho, 4)
    for k in range(1, 5):
        assert double_factorial(2 * k - 1) * vm[k] == _rw_m_off(k, 7, 3, rho)


def _spec(model):
    if model == "shared":
        W = np.array([[1, 2, 0], [-1, 1, 3], [0, 1, -2]], dtype=float) / 2
        return A.model_spec("shared", W=W), {"W": W}
    if model == "shared_sigma":
        W = np.array([[1, 2], [0, -1]], dtype=float)
        Sx = np.array([[2.0, 0.5], [0.5, 1.0]])
        return A.model_spec("shared", W=W, sigma_x=Sx), {"W": W, "sigma_x": Sx}
    if model == "paper":
        return A.model_spec("paper", None, 3), {}
    return A.model_spec(model, 5, 3, rho=0.5), {}


@pytest.mark.parametrize("model", ["paper", "iid", "tied", "corr", "shared", "shared_sigma"])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_entry_moments_reproduce_theory_moments_exactly(model, p):
    spec, kw = _spec(model)
    em = A.entry_moments(spec, 2 * p)
    name = "shared" if model.startswith("shared") else model
    ex = exact_moments(p, name, 10, spec.D if name != "paper" else None, spec.d, rho=0.5,
                       sigma=float(spec.sigma) if name != "shared" else 1.0, **kw)
    assert A._rat(em.off[2 * p]) == ex.m_off
    assert A._rat(em.diag[2 * p]) == ex.m_diag
    assert A._rat(em.joff[2 * p - 2]) == ex.j_off
    assert A._rat(em.jdiag[2 * p - 2]) == ex.j_diag
    assert all(em.off[k] == 0 for k in range(1, 2 * p + 1, 2))  # S_12 is symmetric in law


@pytest.mark.parametrize("model", ["paper", "iid", "tied", "corr"])
def test_x3_over_sqrt_n_reproduces_sapa_exact(model):
    D, d, N = VIT
    spec = A.model_spec(model, None if model == "paper" else D, d, rho=0.5)
    a = A.audit(A.parse_activation("x**3/sqrt(N)"), spec, N)
    sig = 1.0 if model == "paper" else 1 / math.sqrt(D)
    ex = exact_moments(3, model, N, None if model == "paper" else D, d, rho=0.5, sigma=sig)
    exact_fro2 = (N * N * ex.m_off if model == "paper" else N * (N - 1) * ex.m_off + N * ex.m_diag) / N
    assert sp.nsimplify(a.exact_fro2) == sp.nsimplify(exact_fro2)  # exact rationals
    assert a.expected_fro2 == float(exact_fro2)
    assert a.growth_exponent == ex.growth_exponent  # identical floats: the same code path
    assert a.growth_exponent_jac == ex.growth_exponent_jac
    assert a.crossover_n == ex.crossover_n
    assert a.expected_jac_fro2 == pytest.approx(ex.expected_jac_fro2 / N, rel=1e-15)


def test_general_polynomial_matches_monomial_sums():
    spec = A.model_spec("tied", 6, 2)
    a = A.audit(A.parse_activation("(1 + x)**2"), spec, 9)
    em = A.entry_moments(spec, 4)
    # E(1 + S)^4 = Σ C(4,k) E S^k; the off-diagonal has no odd moments, the diagonal does
    m_off = sum(math.comb(4, k) * em.off[k] for k in range(5))
    m_diag = sum(math.comb(4, k) * em.diag[k] for k in range(5))
    assert em.diag[1] != 0 and em.diag[3] != 0
    assert a.exact_fro2 == A._rat(9 * 8 * m_off + 9 * m_diag)


# ----------------------------------------------------------------------------- Gauss rules and quadrature


def test_gauss_rule_from_gaussian_moments_is_gauss_hermite():
    mom = [double_factorial(k - 1) if k % 2 == 0 else 0 for k in range(40)]
    t, w = A.gauss_rule(mom, 20)
    th, wh = roots_hermite(20)
    assert np.allclose(np.sort(t), np.sqrt(2) * th, atol=1e-12)
    assert np.allclose(w[np.argsort(t)], wh / np.sqrt(np.pi), atol=1e-14)


def test_gauss_rule_point_mass_and_scaling():
    t, w = A.gauss_rule([2, 6, 18, 54], 2)  # twice a point mass at 3
    assert t.tolist() == [3.0] and w.tolist() == [2.0]


@pytest.mark.parametrize("model", ["paper", "iid", "tied", "corr", "shared"])
def test_quadrature_reproduces_exact_polynomials(model):
    spec, _ = _spec(model)
    act = A.parse_activation("(1 + x/2)**3/N")
    ex, qu = A.profile(act, spec), A.profile(act, spec, quadrature=True)
    assert ex.method == "exact" and qu.method == "quadrature"
    N = np.array([2.0, 17.0, 300.0])
    te, tq = ex.totals(N), qu.totals(N)
    for q in te:  # v-laws compressed by interpolation in v: exact for polynomial h(v) up to round-off
        assert np.allclose(tq[q], te[q], rtol=1e-9), q
    ee, eq = ex.exponents(N), qu.exponents(N)
    for q in ee:
        assert np.allclose(eq[q], ee[q], atol=1e-9), q
    assert max(qu.errors(N).values()) < 1e-9


@pytest.mark.parametrize("model", ["paper", "iid", "tied"])
def test_relu_is_half_the_linear_moment_where_the_law_is_symmetric(model):
    # off the diagonal S_12 is symmetric in every model: E relu(S)² = ½ E S²; the iid and paper diagonals too
    spec = A.model_spec(model, None if model == "paper" else 16, 4)
    q = A.profile(A.parse_activation("Max(x, 0)"), spec)
    lin = A.profile(A.parse_activation("x"), spec)
    eq, el = q.entries([5.0]), lin.entries([5.0])
    assert eq["fro_off"][0] == pytest.approx(0.5 * el["fro_off"][0], rel=1e-12)
    assert eq["jac_s_off"][0] == pytest.approx(0.5, rel=1e-12)
    if model != "tied":
        assert eq["fro_diag"][0] == pytest.approx(0.5 * el["fro_diag"][0], rel=1e-12)
    else:  # tied: S_11 = σ²‖x‖²‖α‖² > 0, so relu is the identity on the diagonal
        assert eq["fro_diag"][0] == pytest.approx(el["fro_diag"][0], rel=1e-12)


def test_crossover_definitions():
    spec = A.model_spec("tied", 32, 8)
    base = A.audit(A.parse_activation("x**2"), spec, 64)
    r = base.m_diag / base.m_off
    assert base.crossover_n == pytest.approx(1 + r, rel=1e-12)
    causal = A.profile(A.parse_activation("x**2", mask="causal"), spec)
    assert causal.crossover() == pytest.approx(1 + 2 * r, rel=1e-12)
    q = A.profile(A.parse_activation("tanh(x/4)"), spec)  # generic root finding
    n = q.crossover()
    e = q.entries([n])
    assert (n - 1) * e["fro_off"][0] == pytest.approx(e["fro_diag"][0], rel=1e-9)


def test_row_index_sums_match_a_direct_sum():
    spec = A.model_spec("iid", 8, 4)
    act = A.parse_activation("x/sqrt(i)", mask="causal")
    prof = A.profile(act, spec)
    lin = A.profile(A.parse_activation("x"), spec).entries([12.0])
    direct = sum((1 / i) * ((i - 1) * lin["fro_off"][0] + lin["fro_diag"][0]) for i in range(1, 13))
    assert prof.totals([12.0])["fro"][0] == pytest.approx(direct, rel=1e-13)


# ----------------------------------------------------------------------------- worst case


@pytest.mark.parametrize("p", [1, 3])
def test_worst_case_matches_theory_worst_case(p):
    wc = A.worst_case(A.parse_activation(f"x**{p}/sqrt(N)"))
    assert wc["exponent"] == pytest.approx(worst_case_exponent(p, "fro", "token", 0.5), abs=1e-9)
    assert wc["jac"]["exponent"] == pytest.approx(worst_case_exponent(p, "jac_fro", "token", 0.5), abs=1e-9)
    assert wc["fro"]["witness_attains_rate"]


@pytest.mark.parametrize("text,norm,expected,exact", [
    ("Max(x, 0)/N", "none", 0.0, True),
    ("1/(1 + exp(-(x - log(N))))", "none", 0.0, True),
    ("x", "none", 1.0, True),
    ("exp(x)", "row", 0.0, True),
    ("x**4", "row", 0.5, False),
])
def test_worst_case_exponents(text, norm, expected, exact):
    wc = A.worst_case(A.parse_activation(text, norm))
    assert wc["exponent"] == pytest.approx(expected, abs=1e-6)
    assert wc["exponent_is_exact"] is exact


def test_model_spec_validation():
    with pytest.raises(InputError, match="needs d"):
        A.model_spec("iid", 8)
    with pytest.raises(InputError, match="needs W"):
        A.model_spec("shared")
    with pytest.raises(InputError, match="only to model 'shared'"):
        A.model_spec("iid", 8, 4, W=np.eye(8))
    with pytest.raises(InputError):
        A.model_spec("corr", 8, 4, rho=2.0)


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_worst_case_counts_every_visible_entry(mask):
    # φ(x) = x: the bound is √(#visible entries)·max|s|, √(N²) or √(N(N+1)/2) at B = 1: rate N¹ either way, and
    # the aligned witness attains it; locally at N the causal count gives ½·d log(N(N+1))/d log N.
    wc = A.worst_case(A.parse_activation("x", mask=mask), N=196)
    assert wc["fro"]["exponent"] == pytest.approx(1.0, abs=1e-6) and wc["fro"]["witness_attains_rate"]
    n0, n1 = 196 / 1.05, 196 * 1.05
    local = 0.5 * math.log(n1 * (n1 + 1) / (n0 * (n0 + 1))) / math.log(n1 / n0) if mask == "causal" else 1.0
    assert wc["fro"]["local_exponent_at_N"] == pytest.approx(local, rel=1e-9)


# ---- mutation run of this session (tools/mutation_sample.py, seed 23): each test kills one survivor ----------------


def test_a_linear_monomial_takes_the_closed_form_path():
    # theory/activation_audit.py: `nz[0][0] < 1` → `<= 1` sent c·x down the general path unnoticed
    from sapa.theory.activation_audit import _monomial

    assert _monomial(A.parse_activation("x/sqrt(N)"))[0] == 1 and _monomial(A.parse_activation("x**3"))[0] == 3
    assert _monomial(A.parse_activation("x + x**2")) is None and _monomial(A.parse_activation("1/sqrt(N)")) is None


def test_entry_moments_have_one_value_per_order():
    # theory/entry_moments.py: `range(K + 1)` → `range(K + 2)` in joff left a stray moment
    from sapa.theory.entry_moments import entry_moments, model_spec

    for spec in (model_spec("iid", 8, 4), model_spec("tied", 8, 4), model_spec("corr", 8, 4, rho=0.5)):
        em = entry_moments(spec, 6)
        assert len(em.off) == len(em.diag) == len(em.joff) == len(em.jdiag) == 7


def test_a_constant_activation_has_no_jacobian():
    # theory/norm_profile.py: the derivative-free branch returned 1 instead of 0 for E(∂φ/∂S)² off the diagonal
    from sapa.theory.activation_audit import model_spec, profile

    t = profile(A.parse_activation("1/sqrt(N)"), model_spec("iid", 16, 8)).totals([4.0, 64.0])
    assert np.all(t["jac_s"] == 0) and np.all(t["jac"] == 0)
    assert t["fro"] == pytest.approx([4.0 * 4.0 / 4.0, 64.0 * 64.0 / 64.0])  # N² entries of (1/√N)²


def test_causal_witness_counts_the_diagonal():
    # theory/activation_worst_case.py: the aligned witness counts N(N+1)/2 visible entries under a causal mask
    from sapa.theory.activation_worst_case import WORST_N

    wc = A.worst_case(A.parse_activation("x", mask="causal"), N=196)
    n1, n2 = WORST_N
    want = 0.5 * (math.log(n2 / n1) * 2 + math.log1p(1 / n2) - math.log1p(1 / n1)) / math.log(n2 / n1)
    assert wc["fro"]["witness_exponent"] == pytest.approx(want, abs=1e-12)


def test_a_one_atom_measure_keeps_its_atom():
    # theory/gauss_rules.py: the one-node rule returned al·scale; `/ scale` moved the atom 3 → 1/3
    from sapa.theory.gauss_rules import _gauss_of_discrete

    x, w = _gauss_of_discrete(np.array([3.0, 3.0, -1.0]), np.array([1.0, 1.0, 0.0]), 4)
    assert x == pytest.approx([3.0], rel=1e-14) and w == pytest.approx([2.0], rel=1e-14)  # (3/3)·3 in float64


def test_shared_diagonal_law_by_fft_has_the_exact_moments():
    # theory/gauss_rules.py: the FFT path (more than TENSOR_RANK eigenvalues) with its grid step `(b − a)/n` broken
    # still passed; E S_11 = tr W_s and E S_11² = (tr W_s)² + 2 Σλ² for x ~ N(0, I) are exact
    from sapa.theory import gauss_rules as G
    from sapa.theory.entry_moments import model_spec

    rng = np.random.default_rng(0)
    W = rng.standard_normal((8, 8)) / np.sqrt(8)
    spec = model_spec("shared", W=W)
    nodes, _ = G._shared_diag_nodes(G._spec_key(spec), 16, spec)
    lam = np.linalg.eigvalsh(0.5 * (W + W.T))
    assert np.count_nonzero(np.abs(lam) > 1e-12) > G.TENSOR_RANK  # the FFT path, not tensor Gauss–Hermite
    assert nodes.w.sum() == pytest.approx(1.0, rel=1e-9)
    assert (nodes.w * nodes.x).sum() == pytest.approx(lam.sum(), rel=1e-8)
    assert (nodes.w * nodes.x**2).sum() == pytest.approx(lam.sum() ** 2 + 2 * (lam**2).sum(), rel=1e-8)
