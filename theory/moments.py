"""Exact E‖φ(S)‖²_F and E‖∂φ(S)/∂X‖²_F for φ(x) = c·x^p (arXiv 2410.18613, Thm 4.2, Cor 4.3, Thm 4.4, Cor 4.5).

Theorem 4.2 / 4.4 of arXiv 2410.18613 bound E‖φ(S)‖_F (and the Jacobian) for φ(x) = x and
x³ under Gaussian inputs and weights; Corollaries 4.3 / 4.5 claim that φ(x) = x^p/√N then
grows like √N. This module gives the exact finite-N expectations, for every integer
p ≥ 1 (p ≤ :data:`P_MAX`), with c = 1 (every result scales by c²), under:

``paper``  S = A Bᵀ, A, B ∈ R^{N×d} independent with i.i.d. N(0, σ²) entries (the
           paper's assumption). All N² entries are alike; the Jacobian is w.r.t. (A, B).
``shared`` S = X W Xᵀ, rows x_i ~ N(0, I_D) or N(0, Σ) i.i.d., W a fixed D×D matrix.
``iid`` / ``tied`` / ``corr``
           S = X W_Q W_Kᵀ Xᵀ, x_i ~ N(0, I_D), W_Q, W_K ∈ R^{D×d} with N(0, σ²) entries,
           independent (ρ = 0), tied (W_K = W_Q, ρ = 1) or entrywise correlated
           (W_K = ρ W_Q + √(1-ρ²) W_⊥); expectation over X and weights jointly.

In every shared model the off-diagonal entries S_ij (i ≠ j) are exchangeable, and so
are the diagonal ones, hence

    M_p = E‖S^{∘p}‖²_F = N(N-1)·m_off + N·m_diag,          m_off = E S_12^{2p}, m_diag = E S_11^{2p}
    G_p = E‖∂S^{∘p}/∂X‖²_F = p²[N(N-1)·j_off + N·j_diag],

with j_off = E[S_12^{2p-2}(‖W x_2‖² + ‖Wᵀx_1‖²)] and j_diag = E[S_11^{2p-2}‖(W+Wᵀ)x_1‖²]
(per-sample identity, from ∂S_ij/∂x_k = δ_ik W x_j + δ_jk Wᵀ x_i). The N² term comes from
the N(N-1) off-diagonal entries, the N term from the diagonal; they cross at
N* = 1 + m_diag/m_off, and the local growth exponent of the 1/√N-scaled norm √(M_p/N) is
½·N m_off / ((N-1) m_off + m_diag): it reaches Cor 4.3/4.5's ½ only for N ≫ N*.

Derivations (each is checked three ways in ``tests/theory/test_moments.py``):

* fixed W, Σ = I: S_12 | x_2 ~ N(0, ‖W x_2‖²) so m_off = (2p-1)!! E[(xᵀWᵀWx)^p] and
  E[S_12^{2p-2}‖W x_2‖²] = (2p-3)!! E‖Wx‖^{2p} = m_off/(2p-1); conditioning on x_1 gives the
  same for ‖Wᵀx_1‖² (WWᵀ and WᵀW are isospectral), so j_off = 2 m_off/(2p-1).
  m_diag = E(xᵀW_s x)^{2p}, W_s = (W+Wᵀ)/2, and j_diag = 4 E[(xᵀW_s x)^{2p-2} xᵀW_s²x]:
  moments of Gaussian quadratic forms (:mod:`sapa.theory.gaussian`).
* fixed W, Σ ≠ I: S_12 | x_2 ~ N(0, x_2ᵀWᵀΣWx_2) but the Jacobian weight is the
  *Euclidean* ‖Wx_2‖², so j_off = (2p-3)!!{E[(xᵀWᵀΣWx)^{p-1} xᵀWᵀWx] +
  E[(xᵀWΣWᵀx)^{p-1} xᵀWWᵀx]} (x ~ N(0, Σ)), a joint moment of two quadratic forms;
  j_off ≠ 2 m_off/(2p-1) in general.
* random weights: given X, the d columns of (X W_Q, X W_K) are i.i.d. and
  (a_im, b_jm) is bivariate normal with variances σ²g_ii, σ²g_jj and covariance ρσ²g_ij
  (g = XXᵀ), so S_ij | X has CGF d·K(t), K(t) = -½ log(1 - 2αt - βt²),
  α = ρσ²g_ij, β = σ⁴(g_ii g_jj - ρ²g_ij²): E[S^{2p} | X] is a polynomial in d, α, β with
  only even powers of g_ij. Averaging, g_ij = ‖x_j‖z, g_ii = z² + χ²_{D-1}:
  E[(g_ii g_jj)^a g_ij^{2b}] = μ_{a+b}(D) Σ_k C(a,k)(2k+2b-1)!! μ_{a-k}(D-1).
  j_off = 2 m_off/(2p-1) still holds (it holds given W). For j_diag, write
  W_Q = x̂ α_Qᵀ + P⊥W_Q (same for W_K): S_ii = ‖x‖² α_Qᵀα_K and
  ‖(W+Wᵀ)x‖² = ‖x‖²[4(α_Qᵀα_K)² + σ²(‖α_Q‖²+‖α_K‖²+2ρα_Qᵀα_K) χ²_{D-1}], so
  j_diag = μ_{2p-1}(D)[4 E P^{2p} + σ²(D-1) E(P^{2p-2} V)] with P = α_Qᵀα_K,
  V = ‖α_Q‖²+‖α_K‖²+2ρα_Qᵀα_K, both quadratic forms in d i.i.d. bivariate normals.

The matrix-power reading φ(S) = S^p = X W (G W)^{p-1} Xᵀ (G = XᵀX) is in
:mod:`sapa.theory.matrix_power`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
import sympy as sp

from sapa.theory.gaussian import (
    EXACT_MAX_DIM,
    _bell,
    qf_cumulants,
    chi2_moment,
    double_factorial,
    linear_traces,
    power_traces,
    qf_moment_times_linear,
    qf_moments,
    to_exact,
)
from sapa.common.validate import InputError, choice, finite_matrix, positive_float, positive_int, unit_interval

__all__ = [
    "MODELS",
    "P_MAX",
    "ExactMoments",
    "exact_moments",
    "symbolic_moments",
    "general_p_moments",
    "crossover_table",
    "local_growth_exponent",
    "bilinear_conditional_moment",
]

MODELS = ("paper", "shared", "iid", "tied", "corr")
# p ≤ 12: M_p needs Gaussian moments of order 2p ≤ 24 (complete Bell polynomials with up
# to p(24) = 1575 terms): numeric results take < 3 s, symbolic ones ~20 s at p = 12 and grow
# fast beyond; the Monte Carlo variances need order 4p; x^p attention with p > 12 is of no
# practical interest.
P_MAX = 12

N_, D_, d_ = sp.symbols("N D d", positive=True, integer=True)
sigma_ = sp.Symbol("sigma", positive=True)
rho_ = sp.Symbol("rho", real=True)
_a, _b = sp.symbols("alpha beta")


# --------------------------------------------------------------------------- helpers


SIZE_MAX = 2**53  # sizes enter float64 results (growth exponents, N*): keep them exactly representable


def _size(name: str, value) -> int:
    """A positive integer size ≤ :data:`SIZE_MAX`, else InputError."""
    v = positive_int(name, value)
    if v > SIZE_MAX:
        shown = str(v) if v < 10**20 else f"a {len(str(v))}-digit number"
        raise InputError(f"{name} must be at most 2**53 (exact in float64), got {shown}")
    return v


def _validate_p(p) -> int:
    p = positive_int("p", p)
    if p > P_MAX:
        raise InputError(f"p must be at most {P_MAX} for exact moments (moments of order 2p), got {p}")
    return p


def _exact_number(name: str, x):
    """A float/int/Fraction/sympy number as an exact sympy Rational (0.5 → 1/2, 0.3 → 3/10)."""
    if isinstance(x, sp.Basic):
        return x
    if isinstance(x, Fraction):
        return sp.Rational(x.numerator, x.denominator)
    if isinstance(x, int):
        return sp.Integer(x)
    return sp.Rational(repr(float(x)))


def _sym(x):
    """Fraction/int → sympy number (exact); sympy passes through."""
    if isinstance(x, Fraction):
        return sp.Rational(x.numerator, x.denominator)
    return sp.sympify(x)


def _to_float(x) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf


def _ratio(num, den) -> float:
    """float(num/den) computed exactly first (no overflow); inf / nan for a zero denominator."""
    num, den = sp.sympify(num), sp.sympify(den)
    if den == 0:
        return math.nan if num == 0 else math.inf
    return _to_float(num / den)


def local_growth_exponent(N, m_off, m_diag):
    """½·N m_off / ((N-1) m_off + m_diag) = d log √(M_p/N) / d log N, vectorised over N.

    Args:
      N: scalar or array of sequence lengths (> 1 meaningful; N = 1 gives ½·m_off/m_diag).
      m_off, m_diag: per-entry moments (exact or float; or j_off, j_diag for the Jacobian).

    Returns:
      float or float array of the same shape as ``N``: 0 ≤ value → ½ as N → ∞.
    """
    r = _ratio(m_diag, m_off)  # m_diag / m_off
    N = np.asarray(N, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if math.isnan(r):  # m_off = m_diag = 0
            out = np.full_like(N, math.nan)
        else:
            out = 0.5 * N / (N - 1.0 + r) if math.isfinite(r) else np.zeros_like(N)
    return float(out) if out.ndim == 0 else out


# ------------------------------------------------------------- bilinear Gaussian moments


@lru_cache(maxsize=None)
def _bilinear_moment_terms(K: int) -> tuple:
    """E[S^j], j = 0..K, as {(i_d, i_α, i_β): coeff} where S has CGF d·(-½ log(1 - 2αt - βt²)).

    The MGF is (1 - u)^(-d/2) with u = 2αt + βt², so by the binomial series and [t^j] u^n (n + b = j, b factors βt²):

        E[S^j] = j! Σ_{b ≤ j/2} (d/2)_n / n! · C(n, b) (2α)^(j-2b) β^b,   n = j - b,

    (d/2)_n = Π_{m<n} (d/2 + m) the rising factorial, a polynomial in d. Exact rationals, O(K³) in all.
    (The cumulant route, κ_r = d (r-1)!/2 (λ₁^r + λ₂^r) through complete Bell polynomials, gives the same
    coefficients; tests/theory/test_moments.py compares the two up to K = 16.)
    """
    rising = [[Fraction(1)]]  # rising[n][i]: coefficient of d^i in (d/2)_n
    for m in range(K):
        prev, nxt = rising[-1], [Fraction(0)] * (len(rising[-1]) + 1)
        for i, c in enumerate(prev):
            nxt[i] += m * c
            nxt[i + 1] += c / 2
        rising.append(nxt)
    out = []
    for j in range(K + 1):
        terms = {}
        for b in range(j // 2 + 1):
            n = j - b
            scale = Fraction(math.factorial(j) * math.comb(n, b) * 2 ** (j - 2 * b), math.factorial(n))
            for i, c in enumerate(rising[n]):
                if c:
                    terms[(i, j - 2 * b, b)] = scale * c
        out.append(tuple(sorted(terms.items())))
    return tuple(out)


def bilinear_conditional_moment(k: int, d, alpha, beta):
    """E[S^k] for S = Σ_{m=1}^d u_m v_m, (u_m, v_m) i.i.d. bivariate normal: CGF d·(-½ log(1 - 2αt - βt²)).

    Here α = Cov(u, v), β = Var u · Var v - Cov(u, v)²; arguments may be numbers or symbols.

    >>> bilinear_conditional_moment(2, 1, 0, 1)  # (z₁z₂)², independent: 1
    1
    """
    acc = 0
    for (i, j, l), c in _bilinear_moment_terms(k)[k]:
        acc = acc + c * d**i * alpha**j * beta**l
    return sp.expand(_sym(acc))


def _gram_moment(a: int, c: int, D):
    """E[(g_ii g_jj)^a g_ij^{2c}] = μ_{a+c}(D) Σ_k C(a,k)(2k+2c-1)!! μ_{a-k}(D-1), x_i, x_j ~ N(0, I_D) indep."""
    acc = 0
    for k in range(a + 1):
        acc = acc + math.comb(a, k) * double_factorial(2 * k + 2 * c - 1) * chi2_moment(D - 1, a - k)
    return chi2_moment(D, a + c) * acc


def _rw_m_off(p: int, D, d, rho):
    """E S_12^{2p} / σ^{4p} for random weights (see module docstring)."""
    K = 2 * p
    total = 0
    for (i, j, k), c in _bilinear_moment_terms(K)[K]:
        # α^j β^k → ρ^j g^j (h - ρ² g²)^k with j even (homogeneity j + 2k = 2p)
        inner = 0
        for l in range(k + 1):
            inner = inner + math.comb(k, l) * (-(rho**2)) ** l * _gram_moment(k - l, j // 2 + l, D)
        total = total + c * d**i * rho**j * inner
    return total


def _rw_p_moments(K: int, d, rho) -> list:
    """E[P^j], j = 0..K, P = α_Qᵀα_K, coordinates i.i.d. bivariate N(0, [[1,ρ],[ρ,1]]) (σ = 1).

    P = Σ_m v_mᵀ M_P v_m, M_P = ½[[0,1],[1,0]], v_m ~ N(0, C): whitened traces
    t_r = d tr((C M_P)^r) = d[((ρ+1)/2)^r + ((ρ-1)/2)^r].
    """
    h = Fraction(1, 2)
    t = [d * (((rho + 1) * h) ** r + ((rho - 1) * h) ** r) for r in range(1, K + 1)]
    return _bell(qf_cumulants(t), _one(d))


def _one(x):
    """Multiplicative identity of x's ring (1 or Poly(1))."""
    return x**0 if isinstance(x, sp.Poly) else 1


def _rw_moments(p: int, D, d, rho) -> dict:
    """m_off, m_diag, j_off, j_diag for random weights at σ = 1 (multiply all by σ^{4p}).

    D, d, rho: ints/Fractions (exact numbers) or sympy Polys in (D, d, rho) (symbolic).
    """
    h = Fraction(1, 2)
    m_off = _rw_m_off(p, D, d, rho)
    eP = _rw_p_moments(2 * p, d, rho)
    m_diag = chi2_moment(D, 2 * p) * eP[2 * p]
    j_off = m_off * Fraction(2, 2 * p - 1)
    # u_m = tr((C M_P)^m C M_V) = d[((ρ+1)/2)^m (1+ρ)² + ((ρ-1)/2)^m (1-ρ)²]
    k = 2 * p - 2
    u = [d * (((rho + 1) * h) ** m * (1 + rho) ** 2 + ((rho - 1) * h) ** m * (1 - rho) ** 2) for m in range(k + 1)]
    ePV = qf_moment_times_linear(eP, u, k)  # E[P^{2p-2} V]
    j_diag = chi2_moment(D, 2 * p - 1) * (4 * eP[2 * p] + (D - 1) * ePV)
    return {"m_off": m_off, "m_diag": m_diag, "j_off": j_off, "j_diag": j_diag}


# --------------------------------------------------------------------- fixed-W models


def trace_symbols(p: int) -> tuple[tuple, tuple]:
    """(t_1..t_p, s_1..s_{2p}): t_r = tr((WᵀW)^r), s_r = tr(W_s^r), W_s = (W+Wᵀ)/2."""
    t = sp.symbols(f"t1:{p + 1}", real=True)
    s = sp.symbols(f"s1:{2 * p + 1}", real=True)
    return t, s


def _shared_from_traces(p: int, t, s, u=None) -> dict:
    """Per-entry moments for fixed W, Σ = I, from t_r = tr((WᵀW)^r), s_r = tr(W_s^r).

    ``u`` = [tr(W_s^m W_s²)]_{m=0..2p-2} (defaults to s_{m+2}).
    """
    qm = qf_moments(list(t[:p]))
    m_off = double_factorial(2 * p - 1) * qm[p]
    j_off = 2 * double_factorial(2 * p - 3) * qm[p]
    dm = qf_moments(list(s[: 2 * p]))
    m_diag = dm[2 * p]
    if u is None:
        u = [s[m + 1] for m in range(2 * p - 1)]
    j_diag = 4 * qf_moment_times_linear(dm, u, 2 * p - 2)
    return {"m_off": m_off, "m_diag": m_diag, "j_off": j_off, "j_diag": j_diag}


def _validate_sigma_x(sigma_x, D: int) -> np.ndarray:
    S = finite_matrix("sigma_x", sigma_x, (D, D))
    scale = max(1.0, float(np.max(np.abs(S))))
    if not np.allclose(S, S.T, rtol=0.0, atol=1e-12 * scale):
        raise InputError("sigma_x must be symmetric")
    try:
        np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        raise InputError("sigma_x must be positive definite") from None
    return S


def _shared_moments(p: int, W, Sigma=None) -> dict:
    """Per-entry moments for S = X W Xᵀ, x_i ~ N(0, Σ) (Σ = I if None); exact when D ≤ EXACT_MAX_DIM."""
    D = W.shape[0]
    exact = D <= EXACT_MAX_DIM
    if exact:
        W = to_exact(W)
        Sigma = None if Sigma is None else to_exact(Sigma)
        half = Fraction(1, 2)
    else:
        W = np.asarray(W, dtype=np.float64)
        Sigma = None if Sigma is None else np.asarray(Sigma, dtype=np.float64)
        half = 0.5
    Wt = W.T
    Ws = (W + Wt) * half
    mm = (lambda X, Y: X.dot(Y)) if exact else (lambda X, Y: X @ Y)
    if Sigma is None:
        t = power_traces(mm(Wt, W), p)
        s = power_traces(Ws, 2 * p)
        out = _shared_from_traces(p, t, s)
    else:
        # traces of words in ΣA replace tr((Σ^{½}AΣ^{½})^r) (cyclicity)
        SA1 = mm(Sigma, mm(Wt, mm(Sigma, W)))  # Σ WᵀΣW: conditional variance of S_12 given x_2
        SB1 = mm(Sigma, mm(Wt, W))  # Σ WᵀW: Jacobian weight ‖W x_2‖²
        SA2 = mm(Sigma, mm(W, mm(Sigma, Wt)))  # Σ WΣWᵀ: given x_1
        SB2 = mm(Sigma, mm(W, Wt))  # Σ WWᵀ: ‖Wᵀ x_1‖²
        q1 = qf_moments(power_traces(SA1, p))
        q2 = qf_moments(power_traces(SA2, p))
        m_off = double_factorial(2 * p - 1) * q1[p]
        jq1 = qf_moment_times_linear(q1, linear_traces(SA1, SB1, p - 1), p - 1)
        jq2 = qf_moment_times_linear(q2, linear_traces(SA2, SB2, p - 1), p - 1)
        j_off = double_factorial(2 * p - 3) * (jq1 + jq2)
        SWs = mm(Sigma, Ws)
        dm = qf_moments(power_traces(SWs, 2 * p))
        m_diag = dm[2 * p]
        u = linear_traces(SWs, mm(Sigma, mm(Ws, Ws)), 2 * p - 2)
        j_diag = 4 * qf_moment_times_linear(dm, u, 2 * p - 2)
        out = {"m_off": m_off, "m_diag": m_diag, "j_off": j_off, "j_diag": j_diag}
    return {k: _sym(v) for k, v in out.items()}


# ---------------------------------------------------------------------- public: moments


@dataclass(frozen=True)
class ExactMoments:
    """Exact E‖φ(S)‖²_F and E‖∂φ(S)/∂X‖²_F for φ(x) = x^p (c = 1; multiply by c²).

    M_p = N(N-1) m_off + N m_diag and G_p = p²[N(N-1) j_off + N j_diag] (paper model:
    M_p = N² m_off, G_p = p² N² j_off, Jacobian w.r.t. (A, B)).
    """

    p: int
    model: str  # one of MODELS
    N: int
    D: int | None  # token dimension (None for "paper")
    d: int | None  # head dimension (None for "shared")
    m_off: object  # E S_12^{2p}, exact
    m_diag: object  # E S_11^{2p}, exact
    j_off: object  # E[S_12^{2p-2}(‖Wx_2‖² + ‖Wᵀx_1‖²)], exact (without p²)
    j_diag: object  # E[S_11^{2p-2}‖(W+Wᵀ)x_1‖²], exact (without p²)
    expected_fro2: float  # M_p at this N
    expected_jac_fro2: float  # G_p at this N
    crossover_n: float  # N* = 1 + m_diag/m_off
    crossover_n_jac: float  # 1 + j_diag/j_off
    growth_exponent: float  # d log √(M_p/N) / d log N at this N
    growth_exponent_jac: float  # d log √(G_p/N) / d log N at this N
    formula: str  # human-readable formula used


def _paper_moments(p: int, d, sigma) -> dict:
    m = double_factorial(2 * p - 1) * sigma ** (4 * p) * chi2_moment(d, p)
    j = 2 * double_factorial(2 * p - 3) * sigma ** (4 * p - 2) * chi2_moment(d, p)
    return {"m_off": sp.expand(m), "m_diag": sp.expand(m), "j_off": sp.expand(j), "j_diag": sp.expand(j)}


_FORMULAS = {
    "paper": "S=ABᵀ, A,B~N(0,σ²)^{N×d} indep.: M_p = N²·(2p-1)!! σ^{4p} μ_p(d); "
    "G_p (w.r.t. A,B) = p² N²·2(2p-3)!! σ^{4p-2} μ_p(d); μ_k(d) = d(d+2)…(d+2k-2)",
    "shared": "S=XWXᵀ, x~N(0,Σ): M_p = N(N-1)·m_off + N·m_diag, m_off = (2p-1)!! E[(xᵀWᵀΣWx)^p], "
    "m_diag = E(xᵀW_s x)^{2p}; G_p = p²[N(N-1)·j_off + N·j_diag], j_off = 2m_off/(2p-1) if Σ=I, "
    "j_diag = 4E[(xᵀW_s x)^{2p-2} xᵀW_s²x]; quadratic-form moments from κ_r = 2^{r-1}(r-1)! tr((ΣA)^r)",
    "rw": "S=XW_QW_KᵀXᵀ, x~N(0,I_D), W~N(0,σ²), ρ={rho}: M_p = N(N-1)·m_off + N·m_diag, "
    "m_off = E_X E[S_12^{{2p}}|X] (CGF -d/2·log(1-2ρσ²g_12 t-σ⁴(g_11g_22-ρ²g_12²)t²)), "
    "m_diag = μ_{{2p}}(D) E(α_Qᵀα_K)^{{2p}} σ^{{4p}}; G_p = p²[N(N-1)·2m_off/(2p-1) + N·j_diag], "
    "j_diag = μ_{{2p-1}}(D)[4E P^{{2p}} + σ²(D-1)E(P^{{2p-2}}V)]",
}


def _finish(p, model, N, D, d, mom, formula) -> ExactMoments:
    m_off, m_diag, j_off, j_diag = mom["m_off"], mom["m_diag"], mom["j_off"], mom["j_diag"]
    if model == "paper":
        fro2 = N * N * m_off
        jac2 = p * p * N * N * j_off
    else:
        fro2 = N * (N - 1) * m_off + N * m_diag
        jac2 = p * p * (N * (N - 1) * j_off + N * j_diag)
    fro2_f, jac2_f = _to_float(fro2), _to_float(jac2)
    if not (math.isfinite(fro2_f) and math.isfinite(jac2_f)):  # a hazard to report, not a silent inf
        raise InputError(
            f"E‖φ(S)‖²_F or E‖∂φ(S)‖²_F overflows float64 for x^{p} ({model}, N={N}, D={D}, d={d}); "
            "rescale sigma or W"
        )
    return ExactMoments(
        p=p,
        model=model,
        N=N,
        D=D,
        d=d,
        m_off=m_off,
        m_diag=m_diag,
        j_off=j_off,
        j_diag=j_diag,
        expected_fro2=fro2_f,
        expected_jac_fro2=jac2_f,
        crossover_n=1.0 + _ratio(m_diag, m_off),
        crossover_n_jac=1.0 + _ratio(j_diag, j_off),
        growth_exponent=local_growth_exponent(N, m_off, m_diag),
        growth_exponent_jac=local_growth_exponent(N, j_off, j_diag),
        formula=formula,
    )


def exact_moments(p, model, N, D=None, d=None, *, rho=0.0, sigma=1.0, W=None, sigma_x=None) -> ExactMoments:
    """M_p = N(N-1)·E S_12^{2p} + N·E S_11^{2p} and G_p = p²[N(N-1) j_off + N j_diag], exactly.

    Args:
      p: integer power, 1 ≤ p ≤ P_MAX.
      model: "paper" (needs d), "shared" (needs W (D, D); optional sigma_x (D, D) SPD),
        "iid", "tied" (need D, d; rho ignored), "corr" (needs D, d, rho ∈ [-1, 1]).
      N: sequence length ≥ 1.
      D: token dimension (inferred from W for "shared").
      d: head dimension.
      rho: weight correlation for "corr".
      sigma: weight entry standard deviation (paper and random-weight models).
      W: (D, D) fixed weight matrix for "shared" (float, int or sympy Matrix; exact
        rational arithmetic for D ≤ 32, rescaled float64 traces beyond).
      sigma_x: (D, D) token covariance for "shared" (default identity).

    Returns:
      :class:`ExactMoments` (c = 1).

    >>> exact_moments(1, "iid", N=4, D=2, d=1).m_off   # σ⁴ μ_1(D)² μ_1(d)
    4
    """
    p = _validate_p(p)
    model = choice("model", model, MODELS)
    N = _size("N", N)
    if model == "shared":
        if W is None:
            raise InputError("model 'shared' needs W, a (D, D) matrix")
        if isinstance(W, sp.MatrixBase):
            if W.rows != W.cols or not all(x.is_number for x in W):
                raise InputError(f"W must be a square numeric matrix, got shape {W.shape}")
            Wa = to_exact(W)
        else:
            Wa = finite_matrix("W", W, (None, None))
            if Wa.shape[0] != Wa.shape[1]:
                raise InputError(f"W must be square (D, D), got shape {Wa.shape}")
            if np.issubdtype(np.asarray(W).dtype, np.integer):
                Wa = to_exact(np.asarray(W))
        Dw = Wa.shape[0]
        if D is not None and _size("D", D) != Dw:
            raise InputError(f"D = {D} does not match W of shape {Wa.shape}")
        Sx = None
        if sigma_x is not None:
            Sx = _validate_sigma_x(sigma_x, Dw)
            Sx = to_exact(sigma_x) if isinstance(sigma_x, sp.MatrixBase) else 0.5 * (Sx + Sx.T)
        mom = _shared_moments(p, Wa, Sx)
        return _finish(p, model, N, Dw, None, mom, _FORMULAS["shared"])
    if W is not None or sigma_x is not None:
        raise InputError(f"W and sigma_x apply only to model 'shared', not {model!r}")
    sig = _exact_number("sigma", positive_float("sigma", sigma))
    if d is None:
        raise InputError(f"model {model!r} needs d (head dimension)")
    d = _size("d", d)
    if model == "paper":
        mom = _paper_moments(p, sp.Integer(d), sig)
        return _finish(p, model, N, None if D is None else _size("D", D), d, mom, _FORMULAS["paper"])
    if D is None:
        raise InputError(f"model {model!r} needs D (token dimension)")
    D = _size("D", D)
    r = {"iid": Fraction(0), "tied": Fraction(1)}.get(model)
    if r is None:
        r = _exact_number("rho", unit_interval("rho", rho))
        r = Fraction(int(r.p), int(r.q))
    mom = {k: _sym(v) * sig ** (4 * p) for k, v in _rw_moments(p, D, d, r).items()}
    return _finish(p, model, N, D, d, mom, _FORMULAS["rw"].format(rho=r))


@lru_cache(maxsize=None)
def _symbolic_cached(p: int, model: str) -> dict:
    if model == "paper":
        mom = _paper_moments(p, d_, sigma_)
        fro2, jac2 = N_**2 * mom["m_off"], p**2 * N_**2 * mom["j_off"]
    else:
        if model == "shared":
            t, s = trace_symbols(p)
            mom = _shared_from_traces(p, t, s)
        else:
            gens = (D_, d_, rho_)
            r = {"iid": Fraction(0), "tied": Fraction(1)}.get(model)
            r = sp.Poly(rho_, *gens) if r is None else r
            polys = _rw_moments(p, sp.Poly(D_, *gens), sp.Poly(d_, *gens), r)
            mom = {k: sigma_ ** (4 * p) * v.as_expr() for k, v in polys.items()}
        fro2 = N_ * (N_ - 1) * mom["m_off"] + N_ * mom["m_diag"]
        jac2 = p**2 * (N_ * (N_ - 1) * mom["j_off"] + N_ * mom["j_diag"])
    if p <= 2 and model != "shared":  # factored forms are readable (and cheap) only for small p
        mom = {k: sp.factor(v) for k, v in mom.items()}
    mom["expected_fro2"] = fro2
    mom["expected_jac_fro2"] = jac2
    mom["crossover_n"] = 1 + mom["m_diag"] / mom["m_off"]
    mom["crossover_n_jac"] = 1 + mom["j_diag"] / mom["j_off"]
    return mom


def symbolic_moments(p, model) -> dict[str, sp.Expr]:
    """{m_off, m_diag, j_off, j_diag, expected_fro2, expected_jac_fro2, crossover_n, crossover_n_jac} as sympy.

    Symbols: ``N, D, d, sigma, rho`` (module-level ``N_, D_, d_, sigma_, rho_``); for
    "shared" (Σ = I) the trace invariants t_r = tr((WᵀW)^r), r ≤ p and s_r = tr(W_s^r),
    r ≤ 2p (see :func:`trace_symbols`). Per-entry moments exclude p² (G_p includes it).

    >>> symbolic_moments(1, "iid")["m_off"]
    D**2*d*sigma**4
    """
    p = _validate_p(p)
    model = choice("model", model, MODELS)
    return dict(_symbolic_cached(p, model))


def general_p_moments(model: str) -> dict[str, sp.Expr]:
    """Closed forms valid for every integer p ≥ 1 (symbol ``p``), where the method gives one.

    "paper": m = (2p-1)!! σ^{4p} μ_p(d), j = 2(2p-3)!! σ^{4p-2} μ_p(d);
    "iid": m_off = (2p-1)!! σ^{4p} μ_p(D)² μ_p(d), m_diag = (2p-1)!! σ^{4p} μ_{2p}(D) μ_p(d),
    j_off = 2 m_off/(2p-1), j_diag = σ^{4p} μ_{2p-1}(D) μ_p(d)[4(2p-1)!! + 2(D-1)(2p-3)!!],
    with μ_k(n) = 2^k Γ(n/2 + k)/Γ(n/2) (rising factorial) and (2p-1)!! = (2p)!/(2^p p!).
    Other models have no closed form in p here: use :func:`symbolic_moments` per p.
    """
    p = sp.Symbol("p", positive=True, integer=True)

    def mu(n, k):
        return 2**k * sp.rf(n / 2, k)

    def df(k):  # (2k-1)!!
        return sp.factorial(2 * k) / (2**k * sp.factorial(k))

    if model == "paper":
        m = df(p) * sigma_ ** (4 * p) * mu(d_, p)
        j = 2 * df(p - 1) * sigma_ ** (4 * p - 2) * mu(d_, p)
        return {"p": p, "m_off": m, "m_diag": m, "j_off": j, "j_diag": j}
    if model == "iid":
        m_off = df(p) * sigma_ ** (4 * p) * mu(D_, p) ** 2 * mu(d_, p)
        m_diag = df(p) * sigma_ ** (4 * p) * mu(D_, 2 * p) * mu(d_, p)
        j_diag = sigma_ ** (4 * p) * mu(D_, 2 * p - 1) * mu(d_, p) * (4 * df(p) + 2 * (D_ - 1) * df(p - 1))
        return {"p": p, "m_off": m_off, "m_diag": m_diag, "j_off": 2 * m_off / (2 * p - 1), "j_diag": j_diag}
    raise InputError(f"no general-p closed form for model {model!r}; use symbolic_moments(p, model)")


def crossover_table(
    ps=(1, 3), models=("iid", "tied", "corr"), Ds=(64, 384, 768), ds=(32, 64, "D"), rho=0.5, *, N_ref=196
) -> list[dict]:
    """Rows {p, model, D, d, rho, crossover_n, crossover_n_jac, growth_exponent, growth_exponent_jac} (N* = 1 + m_diag/m_off).

    ``ds`` entries may be ``"D"`` (d = D; duplicate (D, d) pairs are listed once). Growth
    exponents are at ``N = N_ref`` (default 196 = ViT's 14² patches).
    """
    rows, seen = [], set()
    for p in ps:
        for model in models:
            for D in Ds:
                for d in ds:
                    dd = D if d == "D" else d
                    if (p, model, D, dd) in seen:  # e.g. d = 64 and d = "D" at D = 64
                        continue
                    seen.add((p, model, D, dd))
                    em = exact_moments(p, model, N_ref, D, dd, rho=rho if model == "corr" else 0.0)
                    rows.append(
                        {
                            "p": p,
                            "model": model,
                            "D": D,
                            "d": dd,
                            "rho": {"iid": 0.0, "tied": 1.0}.get(model, float(rho)),
                            "N_ref": N_ref,
                            "crossover_n": em.crossover_n,
                            "crossover_n_jac": em.crossover_n_jac,
                            "growth_exponent": em.growth_exponent,
                            "growth_exponent_jac": em.growth_exponent_jac,
                        }
                    )
    return rows

