"""E S_12^k, E S_11^k and their Jacobian-weighted moments, exactly, for every k, under each randomness model.

The models of ``sapa exact``: paper (S = ABᵀ), shared (S = XWXᵀ with W fixed), iid / tied / corr
random weights. The moments come from the quadratic-form cumulants of :mod:`sapa.theory.gaussian` (odd
off-diagonal moments vanish, the diagonal's do not) and of v = ‖W x‖². Part of :mod:`sapa.theory.activation_audit`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache, lru_cache

import numpy as np
import sympy as sp

from sapa.common.validate import InputError, choice, finite_matrix, positive_float, unit_interval
from sapa.theory.gaussian import (
    chi2_moment,
    double_factorial,
    linear_traces,
    power_traces,
    qf_moment_times_linear,
    qf_moments,
    to_exact,
)
from sapa.theory.moments import _rw_p_moments


MODELS = ("paper", "shared", "iid", "tied", "corr")


@dataclass(frozen=True)
class ModelSpec:
    """The randomness of S, as in ``sapa exact``: paper (S = ABᵀ), shared (S = XWXᵀ, W fixed), iid / tied / corr."""

    name: str
    D: int | None
    d: int | None
    rho: Fraction = Fraction(0)
    sigma: Fraction = Fraction(1)         # weight (or A, B entry) std, as the exact rational sapa exact uses
    W: np.ndarray | None = field(default=None, compare=False)        # (D, D), shared only
    sigma_x: np.ndarray | None = field(default=None, compare=False)  # (D, D) token covariance, shared only


def _frac(x) -> Fraction:
    r = sp.Rational(repr(float(x))) if not isinstance(x, (Fraction, int)) else sp.Rational(x)
    return Fraction(int(r.p), int(r.q))


def model_spec(model: str, D=None, d=None, *, rho=0.0, sigma=None, W=None, sigma_x=None) -> ModelSpec:
    """Validate a model like :func:`sapa.theory.moments.exact_moments` (sigma default: 1/√D, paper 1)."""
    from sapa.theory.moments import _size, _validate_sigma_x

    model = choice("model", model, MODELS)
    if model == "shared":
        if W is None:
            raise InputError("model 'shared' needs W, a (D, D) matrix")
        Wa = finite_matrix("W", W, (None, None))
        if Wa.shape[0] != Wa.shape[1]:
            raise InputError(f"W must be square (D, D), got shape {Wa.shape}")
        if D is not None and _size("D", D) != Wa.shape[0]:
            raise InputError(f"D = {D} does not match W of shape {Wa.shape}")
        Sx = None
        if sigma_x is not None:
            Sx = _validate_sigma_x(sigma_x, Wa.shape[0])
            Sx = 0.5 * (Sx + Sx.T)
        return ModelSpec("shared", int(Wa.shape[0]), None, W=Wa, sigma_x=Sx)
    if W is not None or sigma_x is not None:
        raise InputError(f"W and sigma_x apply only to model 'shared', not {model!r}")
    if d is None:
        raise InputError(f"model {model!r} needs d (head dimension)")
    d = _size("d", d)
    if model != "paper" and D is None:
        raise InputError(f"model {model!r} needs D (token dimension)")
    D = None if D is None else _size("D", D)
    if sigma is None:
        sigma = 1.0 if model == "paper" else 1.0 / math.sqrt(D)
    sig = _frac(positive_float("sigma", sigma))
    r = {"iid": Fraction(0), "tied": Fraction(1)}.get(model, Fraction(0))
    if model == "corr":
        r = _frac(unit_interval("rho", rho))
    return ModelSpec(model, D, d, rho=r, sigma=sig)


# ----------------------------------------------------------------------------- exact moments


def _mu(n, k: int):
    """μ_k(n) = E(χ²_n)^k = n(n+2)…(n+2k−2)."""
    return chi2_moment(n, k)


@lru_cache(maxsize=64)
def _corr_v_moments(D: int, d: int, rho: Fraction, K: int) -> tuple:
    """E v^k / σ^{4k}, k = 0..K, v = ‖W_Q W_Kᵀ x‖², W_K = ρW_Q + √(1−ρ²)W_⊥, x ~ N(0, I_D).

    Rotating x to ‖x‖e₁: v = σ⁴ c_x [s²w² + (w² + (1−ρ²)c_r) c_b], with c_x ~ χ²_D, s² ~ χ²_d,
    w = ρs + √(1−ρ²)t, t ~ N(0,1), c_r ~ χ²_{d−1}, c_b ~ χ²_{D−1}, all independent (q = first row of
    W_Q = σ s q̂; first row of W_⊥ = σ(t q̂ + r_⊥)). Expanding binomially,
    E[s^{2a} w^{2m}] = Σ_e C(2m, 2e) ρ^{2e} (1−ρ²)^{m−e} (2m−2e−1)!! μ_{a+e}(d); ρ = 0 gives
    μ_k(D)² μ_k(d) (iid), ρ = 1 gives μ_k(D) Σ_j C(k,j) μ_{k+j}(d) μ_{k−j}(D−1) (tied). With ρ = p/q
    every term of order k has denominator q^{2k}, so the sums run in integers.
    """
    if rho == 0:
        return tuple(Fraction(_mu(D, k) ** 2 * _mu(d, k)) for k in range(K + 1))
    if abs(rho) == 1:
        return tuple(Fraction(_mu(D, k) * sum(math.comb(k, j) * _mu(d, 2 * k - j) * _mu(D - 1, j) for j in range(k + 1)))
                     for k in range(K + 1))
    p, q = rho.numerator, rho.denominator
    p2, om = p * p, q * q - p * p  # ρ² = p2/q², 1 − ρ² = om/q²
    mu_d = [_mu(d, k) for k in range(2 * K + 1)]
    mu_d1 = [_mu(d - 1, k) for k in range(K + 1)]
    mu_D1 = [_mu(D - 1, k) for k in range(K + 1)]

    @cache
    def F(a: int, m: int) -> int:  # q^{2m} E[s^{2a} w^{2m}]
        return sum(math.comb(2 * m, 2 * e) * p2**e * om ** (m - e) * double_factorial(2 * m - 2 * e - 1) * mu_d[a + e]
                   for e in range(m + 1))

    out = []
    for k in range(K + 1):
        acc = 0
        for j in range(k + 1):
            a = k - j
            inner = sum(math.comb(j, l) * om ** (j - l) * mu_d1[j - l] * F(a, a + l) for l in range(j + 1))
            acc += math.comb(k, j) * mu_D1[j] * inner
        out.append(Fraction(_mu(D, k) * acc, q ** (2 * k)))
    return tuple(out)


def _dot(A, B):
    return A.dot(B) if A.dtype == object else A @ B


def _shared_mats(spec: ModelSpec):
    """Exact (D ≤ 32) or float W, Σ and the products the moments use."""
    from sapa.theory.gaussian import EXACT_MAX_DIM

    exact = spec.D <= EXACT_MAX_DIM
    W = to_exact(spec.W) if exact else np.asarray(spec.W, dtype=np.float64)
    S = None if spec.sigma_x is None else (to_exact(spec.sigma_x) if exact else spec.sigma_x)
    half = Fraction(1, 2) if exact else 0.5
    return W, S, (W + W.T) * half


def v_moments(spec: ModelSpec, K: int) -> list:
    """E v^k, k = 0..K, v = Var(S_12 | x_2, W) = ‖W x_2‖² (paper: σ²‖b_j‖²; shared Σ: x_2ᵀWᵀΣW x_2), exact."""
    if spec.name == "paper":
        return [spec.sigma ** (4 * k) * _mu(spec.d, k) for k in range(K + 1)]
    if spec.name == "shared":
        W, S, _ = _shared_mats(spec)
        A = _dot(W.T, W) if S is None else _dot(S, _dot(W.T, _dot(S, W)))
        return list(qf_moments(power_traces(A, K))) if K > 0 else [1]
    base = _corr_v_moments(spec.D, spec.d, spec.rho, K)
    return [spec.sigma ** (4 * k) * base[k] for k in range(K + 1)]


@dataclass(frozen=True)
class EntryMoments:
    """Exact per-entry moments, k = 0..K (lists of exact numbers).

    off[k] = E S_12^k; diag[k] = E S_11^k; joff[k] = E[S_12^k (‖Wx_2‖² + ‖Wᵀx_1‖²)] (paper: ‖a_i‖² + ‖b_j‖²);
    jdiag[k] = E[S_11^k ‖(W + Wᵀ)x_1‖²] (paper: = joff).
    """

    off: tuple
    diag: tuple
    joff: tuple
    jdiag: tuple


def entry_moments(spec: ModelSpec, K: int) -> EntryMoments:
    """The four moment sequences up to order K (Jacobian ones up to K as well), exact."""
    K = int(K)
    half = K // 2
    if spec.name == "paper":
        v = v_moments(spec, half + 1)
        off = [double_factorial(k - 1) * v[k // 2] if k % 2 == 0 else 0 for k in range(K + 1)]
        s2 = spec.sigma**2
        joff = [2 * double_factorial(k - 1) * v[k // 2 + 1] / s2 if k % 2 == 0 else 0 for k in range(K + 1)]
        return EntryMoments(tuple(off), tuple(off), tuple(joff), tuple(joff))
    v = v_moments(spec, half + 1)
    off = [double_factorial(k - 1) * v[k // 2] if k % 2 == 0 else 0 for k in range(K + 1)]
    if spec.name == "shared" and spec.sigma_x is not None:
        W, S, Ws = _shared_mats(spec)
        SA1, SB1 = _dot(S, _dot(W.T, _dot(S, W))), _dot(S, _dot(W.T, W))
        SA2, SB2 = _dot(S, _dot(W, _dot(S, W.T))), _dot(S, _dot(W, W.T))
        q1 = qf_moments(power_traces(SA1, half)) if half else [1]
        q2 = qf_moments(power_traces(SA2, half)) if half else [1]
        l1, l2 = linear_traces(SA1, SB1, half), linear_traces(SA2, SB2, half)
        joff = [double_factorial(k - 1) * (qf_moment_times_linear(q1, l1, k // 2) + qf_moment_times_linear(q2, l2, k // 2))
                if k % 2 == 0 else 0 for k in range(K + 1)]
    else:
        joff = [2 * double_factorial(k - 1) * v[k // 2 + 1] if k % 2 == 0 else 0 for k in range(K + 1)]
    if spec.name == "shared":
        W, S, Ws = _shared_mats(spec)
        SWs = Ws if S is None else _dot(S, Ws)
        SWs2 = _dot(Ws, Ws) if S is None else _dot(S, _dot(Ws, Ws))
        dm = qf_moments(power_traces(SWs, K)) if K else [1]
        lt = linear_traces(SWs, SWs2, K)
        jdiag = [4 * qf_moment_times_linear(dm, lt, k) for k in range(K + 1)]
        diag = list(dm)
    else:
        D, d, rho, sig = spec.D, spec.d, spec.rho, spec.sigma
        eP = _rw_p_moments(K + 2, d, rho)  # E P^k, P = α_Qᵀα_K (sapa.theory.moments)
        diag = [sig ** (2 * k) * _mu(D, k) * eP[k] for k in range(K + 1)]
        h = Fraction(1, 2)
        u = [d * (((rho + 1) * h) ** m * (1 + rho) ** 2 + ((rho - 1) * h) ** m * (1 - rho) ** 2) for m in range(K + 1)]
        jdiag = [sig ** (2 * k + 4) * _mu(D, k + 1) * (4 * eP[k + 2] + (D - 1) * qf_moment_times_linear(eP, u, k))
                 for k in range(K + 1)]
    return EntryMoments(tuple(off), tuple(diag), tuple(joff), tuple(jdiag))
