"""Gauss rules of the laws of one logit from its exact moments: Golub–Welsch on the Chebyshev recurrence.

Given x_2 (and the weights) an off-diagonal logit is Gaussian, S_12 ~ N(0, v), v = ‖W x‖², so its law
is a Gauss rule in v (built from v's exact moments, in high precision) times Gauss–Hermite in z; the
diagonal S_11 gets the Gauss rule of its own law (tensor Gauss–Hermite when W_s has rank ≤ 3). The
Jacobian weights enter as measures v dP(v) and ‖(W+Wᵀ)x‖² dP(S_11). Part of :mod:`sapa.theory.activation_audit`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
import sympy as sp

from sapa.common.validate import InputError, positive_int
from sapa.theory.entry_moments import ModelSpec, _dot, _mu, _shared_mats, v_moments
from sapa.theory.gaussian import linear_traces, power_traces, qf_moment_times_linear, qf_moments


V_LEVELS = (8, 16)            # fixed W: Gauss nodes for the law of v = ‖W x‖² (coarse, fine)
DIAG_LEVELS = (16, 32)        # fixed W: Gauss nodes for the law of S_11
RW_LEVELS = ((6, 16), (10, 32))  # random weights: (nodes per χ² factor, Gauss nodes of the product law) (coarse, fine)


def gauss_rule(moments, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes t_k, weights w_k of the n-point Gauss rule of a positive measure with moments m_0..m_{2n−1}.

    Σ_k w_k f(t_k) = ∫ f dμ exactly for polynomials of degree ≤ 2n − 1. The moments are exact; they
    are centred and scaled exactly, the Chebyshev algorithm runs in mpmath at 30 + 4n digits, and
    the Jacobi matrix is diagonalised in float64 (Golub–Welsch). A measure with fewer than n support
    points (e.g. a point mass) gets as many nodes as it has.

    >>> t, w = gauss_rule([1, 0, 1, 0, 3, 0], 3); [round(float(v), 6) for v in t]   # N(0, 1): ±√3, 0
    [-1.732051, 0.0, 1.732051]
    """
    import mpmath
    from scipy.linalg import eigh_tridiagonal

    n = positive_int("n", n)
    m = [Fraction(v) if not isinstance(v, sp.Basic) else Fraction(int(sp.Rational(v).p), int(sp.Rational(v).q))
         for v in moments[: 2 * n]]
    if len(m) < 2 * n:
        raise InputError(f"a {n}-point Gauss rule needs {2 * n} moments, got {len(m)}")
    m0 = m[0]
    if m0 <= 0:
        raise InputError("the measure has no mass (moment 0 ≤ 0)")
    c = m[1] / m0
    var = m[2] / m0 - c * c if n > 1 else Fraction(0)
    if var <= 0 or float(var) <= 1e-300 * max(1.0, float(c * c)):
        return np.array([float(c)]), np.array([float(m0)])
    s = math.sqrt(float(var))
    # centring loses about k·log10(|mean|/sd) digits at order k: carry them
    lost = (2 * n) * max(0.0, math.log10(max(1.0, abs(float(c)) / s)))
    with mpmath.workdps(int(40 + 4 * n + lost)):
        mp = [mpmath.mpf(v.numerator) / v.denominator for v in m]
        cm, sm = mp[1] / mp[0], mpmath.mpf(s)
        mu = []  # standardised moments ν_k = E[((X − c)/s)^k]
        for k in range(2 * n):
            acc = mpmath.fsum(math.comb(k, j) * mp[j] * (-cm) ** (k - j) for j in range(k + 1))
            mu.append(acc / (mp[0] * sm**k))
        a, b = [mu[1] / mu[0]], [mu[0]]
        sig_prev = [mpmath.mpf(0)] * (2 * n)
        sig = list(mu)
        tiny = mpmath.mpf(10) ** (-(10 + 2 * n))
        for k in range(1, n):
            new = [mpmath.mpf(0)] * (2 * n)
            for l in range(k, 2 * n - k):
                new[l] = sig[l + 1] - a[k - 1] * sig[l] - b[k - 1] * sig_prev[l]
            if new[k] <= tiny * abs(sig[k - 1]) or new[k] <= 0:
                break  # fewer support points than n (to this precision)
            a.append(new[k + 1] / new[k] - sig[k] / sig[k - 1])
            b.append(new[k] / sig[k - 1])
            sig_prev, sig = sig, new
        alpha = np.array([float(v) for v in a])
        beta = np.array([math.sqrt(float(v)) for v in b[1:]])
        c = float(cm)
    if alpha.size == 1:
        t, vec = alpha, np.ones((1, 1))
    else:
        t, vec = eigh_tridiagonal(alpha, beta)
    w = vec[0, :] ** 2  # weights of the standardised probability measure
    return c + s * t, float(m0) * w


def _hermite(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Hermite nodes and weights for E f(z), z ~ N(0, 1) (scipy.special.roots_hermite, rescaled)."""
    from scipy.special import roots_hermite

    t, w = roots_hermite(n)
    return math.sqrt(2.0) * t, w / math.sqrt(math.pi)


# ----------------------------------------------------------------------------- per-entry expectations


@dataclass(frozen=True)
class _Nodes:
    """A discrete measure (x, w) standing in for the law of one logit (or a Jacobian-weighted law)."""

    x: np.ndarray  # (K,)
    w: np.ndarray  # (K,)


def _offdiag_nodes(vx: np.ndarray, vw: np.ndarray, nz: int) -> _Nodes:
    z, g = _hermite(nz)
    X = np.sqrt(np.maximum(vx, 0.0))[:, None] * z[None, :]  # (n_v, n_z)
    return _Nodes(X.ravel(), (vw[:, None] * g[None, :]).ravel())


@dataclass(frozen=True)
class _Rules:
    """Quadrature nodes for the six per-entry expectations (fro, Jacobian w.r.t. S, Jacobian w.r.t. X; off, diag)."""

    off: _Nodes
    diag: _Nodes
    joff: _Nodes  # already includes both halves (‖Wx_2‖² + ‖Wᵀx_1‖²)
    jdiag: _Nodes


@lru_cache(maxsize=32)
def _rules_cached(spec_key, level: int, nz: int, spec: ModelSpec) -> _Rules:
    if spec.name != "shared":
        nb, m = RW_LEVELS[level]
        return _random_rules(spec, nb, m, nz)
    return _shared_rules(spec, V_LEVELS[level], DIAG_LEVELS[level], nz)


def _shared_rules(spec: ModelSpec, nv: int, nd: int, nz: int) -> _Rules:
    """Fixed W: v = ‖Wx‖² and S_11 = xᵀW_s x are Gaussian quadratic forms (light tails): Gauss rules from exact moments."""
    vm = v_moments(spec, 2 * nv + 1)
    vx, vw = gauss_rule(vm[: 2 * nv], nv)
    if spec.sigma_x is not None:
        W, S, _ = _shared_mats(spec)
        pieces = []
        for SA, SB in ((_dot(S, _dot(W.T, _dot(S, W))), _dot(S, _dot(W.T, W))),
                       (_dot(S, _dot(W, _dot(S, W.T))), _dot(S, _dot(W, W.T)))):
            q = qf_moments(power_traces(SA, 2 * nv))
            lt = linear_traces(SA, SB, 2 * nv)
            jm = [qf_moment_times_linear(q, lt, k) for k in range(2 * nv)]
            pieces.append(_offdiag_nodes(*gauss_rule(jm, nv), nz))
        joff = _Nodes(np.concatenate([p.x for p in pieces]), np.concatenate([p.w for p in pieces]))
    else:
        jx, jw = gauss_rule([vm[k + 1] * 2 for k in range(2 * nv)], nv)
        joff = _offdiag_nodes(jx, jw, nz)
    off = _offdiag_nodes(vx, vw, nz)
    diag, jdiag = _shared_diag_nodes(_spec_key(spec), nd, spec)
    return _Rules(off, diag, joff, jdiag)


TENSOR_RANK = 3  # S_11 with at most this many non-zero eigenvalues: tensor Gauss–Hermite (exact structure)


@lru_cache(maxsize=32)
def _shared_diag_nodes(spec_key, nd: int, spec: ModelSpec) -> tuple[_Nodes, _Nodes]:
    """Nodes for E f(S_11) and E[f(S_11) R], S_11 = xᵀW_s x = Σ_k λ_k u_k², R = ‖(W+Wᵀ)x‖² ≡ Σ_k c_k u_k² in law.

    u ~ N(0, I) in the eigenbasis of Σ^{½}W_sΣ^{½} (cross terms c_jk u_j u_k, j ≠ k, vanish: S_11 is even in each
    u_j). A Gauss rule of this law built from its moments resolves a sharp φ badly (its nodes are O(sd) apart),
    so: with at most TENSOR_RANK non-zero λ_k, tensor Gauss–Hermite in those u_k (nd nodes each, exact
    structure; this also covers the singular densities of low rank); otherwise the density of S_11 and the
    R-weighted density from the characteristic function, ψ(t) = Π_k (1 − 2iλ_k t)^{−½} and
    E[R e^{itS}] = ψ(t) Σ_k c_k/(1 − 2iλ_k t), by FFT on 2^(10 + nd/8) points of [mean ± (14 sd + 60 max|λ|)]
    (rectangle rule: spectrally accurate for the smooth densities of rank ≥ 4).
    """
    W = np.asarray(spec.W, dtype=np.float64)
    Ws = 0.5 * (W + W.T)
    if spec.sigma_x is None:
        B, C = Ws, 4 * Ws @ Ws
    else:
        lam_s, U_s = np.linalg.eigh(spec.sigma_x)
        L = (U_s * np.sqrt(np.maximum(lam_s, 0.0))) @ U_s.T  # Σ^{½}
        B, C = L @ Ws @ L, 4 * L @ Ws @ Ws @ L
    lam, U = np.linalg.eigh(0.5 * (B + B.T))
    c = np.einsum("ik,ij,jk->k", U, C, U)  # diag(Uᵀ C U)
    top = float(np.max(np.abs(lam))) if lam.size else 0.0
    nz_mask = np.abs(lam) > 1e-12 * top if top > 0 else np.zeros(lam.size, dtype=bool)
    if top == 0.0:
        return _Nodes(np.zeros(1), np.ones(1)), _Nodes(np.zeros(1), np.array([float(np.sum(c))]))
    lam_nz, c_nz, c_zero = lam[nz_mask], c[nz_mask], float(np.sum(c[~nz_mask]))
    if lam_nz.size <= TENSOR_RANK:
        z, g = _hermite(nd)
        grids = np.meshgrid(*([z] * lam_nz.size), indexing="ij")
        wz = np.ones_like(grids[0])
        for gg in np.meshgrid(*([g] * lam_nz.size), indexing="ij"):
            wz = wz * gg
        sx = sum(l * G.ravel() ** 2 for l, G in zip(lam_nz, grids))
        R = c_zero + sum(cc * G.ravel() ** 2 for cc, G in zip(c_nz, grids))
        wz = wz.ravel()
        return _Nodes(sx, wz), _Nodes(sx, wz * R)
    mean, sd = float(np.sum(lam_nz)), math.sqrt(2.0 * float(np.sum(lam_nz**2)))
    half = 14.0 * sd + 60.0 * top
    a, b = mean - half, mean + half
    n = 2 ** (10 + nd // 8)
    ds = (b - a) / n
    dt = 2 * math.pi / (n * ds)
    k = np.fft.ifftshift(np.arange(-n // 2, n // 2))  # FFT order
    t = k * dt  # (n,)
    one = 1.0 - 2j * lam_nz[None, :] * t[:, None]  # (n, r)
    psi = np.exp(-0.5 * np.sum(np.log(one), axis=1))
    psi_r = psi * (c_zero + np.sum(c_nz[None, :] / one, axis=1))
    sj = a + ds * np.arange(n)
    phase = np.exp(-1j * t * a)
    dens = (dt / (2 * math.pi)) * np.fft.fft(psi * phase).real  # p(s_j)
    rdens = (dt / (2 * math.pi)) * np.fft.fft(psi_r * phase).real  # E[R | S = s_j] p(s_j)
    return _Nodes(sj, dens * ds), _Nodes(sj, rdens * ds)


@lru_cache(maxsize=64)
def _chi2_rule(k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n-point Gauss rule of χ²_k (from its exact moments μ_j(k); χ²_0 is the point mass at 0)."""
    return gauss_rule([_mu(k, j) for j in range(2 * n)], n)


def _tensor(*rules) -> tuple[list, np.ndarray]:
    """Tensor product of 1-D rules: (flattened node arrays, product weights)."""
    grids = np.meshgrid(*[r[0] for r in rules], indexing="ij")
    W = np.ones_like(grids[0])
    for g, r in zip(np.meshgrid(*[r[1] for r in rules], indexing="ij"), rules):
        W = W * g
    return [g.ravel() for g in grids], W.ravel()


def _gauss_of_discrete(v: np.ndarray, W: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The m-point Gauss rule of the discrete measure Σ_a W_a δ(v_a) (W ≥ 0): Lanczos on diag(v) from √W.

    Exact for polynomials of degree ≤ 2m − 1 in v (so polynomial φ stay exact); full reorthogonalisation keeps
    the Lanczos vectors orthogonal in float64 (the RKPW / Gragg–Harrod reading of Golub–Welsch). Stops early
    when the measure has fewer than m distinct atoms.
    """
    from scipy.linalg import eigh_tridiagonal

    W = np.asarray(W, dtype=np.float64)
    keep = W > 0
    v, W = np.asarray(v, dtype=np.float64)[keep], W[keep]
    mass = float(W.sum())
    scale = float(np.max(np.abs(v))) or 1.0
    x = v / scale
    q = np.sqrt(W / mass)
    Q = [q]
    alpha, beta = [], []
    prev, b_prev = np.zeros_like(q), 0.0
    for k in range(min(m, v.size)):
        r = x * q
        a = float(q @ r)
        alpha.append(a)
        r = r - a * q - b_prev * prev
        for qq in Q:  # full reorthogonalisation (twice is enough)
            r -= (qq @ r) * qq
        for qq in Q:
            r -= (qq @ r) * qq
        b = float(np.linalg.norm(r))
        if k == min(m, v.size) - 1 or b <= 1e-13 * max(1.0, abs(a)):
            break
        beta.append(b)
        prev, q, b_prev = q, r / b, b
        Q.append(q)
    al = np.array(alpha)
    if al.size == 1:
        return np.array([al[0] * scale]), np.array([mass])
    t, vec = eigh_tridiagonal(al, np.array(beta[: al.size - 1]))
    return t * scale, mass * vec[0, :] ** 2


@lru_cache(maxsize=32)
def _random_laws(spec_key, nb: int, m: int, spec: ModelSpec) -> dict:
    """Random weights: v and S_11 as products of independent χ² (and normal) variables, each with its own Gauss rule.

    Moments of products of χ² grow like (3k)!: their moment problem is ill-conditioned and the Gauss rule of v's
    law from its moments converges badly for small D; the factors' own rules do not have that problem. The tensor
    rule of the factors is then compressed to an m-point Gauss rule of the product law (:func:`_gauss_of_discrete`).
    With σ² the weight variance (paper: the entry variance of A, B), all at σ = 1 and then scaled:
    paper v = χ²_d; iid v = χ²_D χ²_d χ²_D'; tied v = χ²_D χ²_d(χ²_d + χ²_{D−1}); corr (see _corr_v_moments)
    v = χ²_D [s²w² + (w² + (1−ρ²)χ²_{d−1})χ²_{D−1}], w = ρs + √(1−ρ²)t. Diagonal: paper = off; iid S_11 | ·
    ~ N(0, u), u = (χ²_D)²χ²_d, E[R | ·] = χ²_D[(4χ²_d + D − 1)z² + (d − 1 + χ²_d)(D − 1)]; tied S_11 = χ²_Dχ²_d,
    E[R | ·] = 4χ²_Dχ²_d(χ²_d + D − 1); corr S_11 = χ²_D P, P = ((1+ρ)c_u − (1−ρ)c_w)/2,
    E[R | ·] = χ²_D[4P² + ((1+ρ)c_u + (1−ρ)c_w + 2ρP)(D − 1)] (R = ‖(W + Wᵀ)x‖²).
    """
    s2 = float(spec.sigma) ** 2
    d = spec.d
    name = spec.name
    out = {}
    if name == "paper":
        (c,), W = _tensor(_chi2_rule(d, 4 * nb))
        v = s2 * s2 * c
        jscale = 2.0 / s2
    else:
        D = spec.D
        cx = _chi2_rule(D, nb)
        if name == "iid":
            (a, b, c), W = _tensor(cx, _chi2_rule(d, nb), _chi2_rule(D, nb))
            v = a * b * c
        elif name == "tied":
            (a, b, c), W = _tensor(cx, _chi2_rule(d, nb), _chi2_rule(D - 1, nb))
            v = a * b * (b + c)
        else:
            rho = float(spec.rho)
            om = 1.0 - rho * rho
            nc = max(4, nb - 2)  # five factors: keep the tensor at ≤ 10⁵ atoms
            (a, sv, t, cr, cb), W = _tensor(_chi2_rule(D, nc), _chi2_rule(d, nc), _hermite(nc),
                                           _chi2_rule(d - 1, nc), _chi2_rule(D - 1, nc))
            w = rho * np.sqrt(sv) + math.sqrt(om) * t
            v = a * (sv * w * w + (w * w + om * cr) * cb)
        v = s2 * s2 * v
        jscale = 2.0
    out["off"] = _gauss_of_discrete(v, W, m)
    out["joff"] = _gauss_of_discrete(v, W * jscale * v, m)
    if name == "paper":
        return out
    D = spec.D
    if name == "iid":
        (a, b), W2 = _tensor(cx, _chi2_rule(d, nb))
        u = s2 * s2 * a * a * b
        out["diag_u"] = _gauss_of_discrete(u, W2, m)
        out["jdiag_u2"] = _gauss_of_discrete(u, W2 * s2 * s2 * a * (4 * b + D - 1), m)  # weight of z²
        out["jdiag_u0"] = _gauss_of_discrete(u, W2 * s2 * s2 * a * (d - 1 + b) * (D - 1), m)  # weight of 1
        return out
    if name == "tied":
        (a, b), W2 = _tensor(cx, _chi2_rule(d, 2 * nb))
        sd = s2 * a * b
        R = 4 * s2 * s2 * a * b * (b + D - 1)
    else:
        rho = float(spec.rho)
        (a, cu, cw), W2 = _tensor(cx, _chi2_rule(d, 2 * nb), _chi2_rule(d, 2 * nb))
        P = 0.5 * ((1 + rho) * cu - (1 - rho) * cw)
        sd = s2 * a * P
        R = s2 * s2 * a * (4 * P * P + ((1 + rho) * cu + (1 - rho) * cw + 2 * rho * P) * (D - 1))
    out["diag"] = (sd, W2)
    out["jdiag"] = (sd, W2 * R)
    return out


def _random_rules(spec: ModelSpec, nb: int, m: int, nz: int) -> _Rules:
    """Nodes of the six expectations for random weights (see :func:`_random_laws`), nz Hermite nodes in z."""
    laws = _random_laws(_spec_key(spec), nb, m, spec)
    off = _offdiag_nodes(*laws["off"], nz)
    joff = _offdiag_nodes(*laws["joff"], nz)
    if spec.name == "paper":
        return _Rules(off, off, joff, joff)
    if spec.name == "iid":
        z, _ = _hermite(nz)
        diag = _offdiag_nodes(*laws["diag_u"], nz)
        n2, n0 = _offdiag_nodes(*laws["jdiag_u2"], nz), _offdiag_nodes(*laws["jdiag_u0"], nz)
        zz = np.tile(z * z, laws["jdiag_u2"][0].size)  # z² at each node of n2 (v-major, z-minor)
        return _Rules(off, diag, joff, _Nodes(np.concatenate([n2.x, n0.x]), np.concatenate([n2.w * zz, n0.w])))
    return _Rules(off, _Nodes(*laws["diag"]), joff, _Nodes(*laws["jdiag"]))


def _spec_key(spec: ModelSpec) -> tuple:
    wk = None if spec.W is None else (spec.W.shape, spec.W.tobytes())
    sk = None if spec.sigma_x is None else spec.sigma_x.tobytes()
    return (spec.name, spec.D, spec.d, spec.rho, spec.sigma, wk, sk)


def _rules(spec: ModelSpec, level: int, nz: int) -> _Rules:
    """Quadrature nodes at ``level`` (0: coarse, 1: fine) with nz Hermite nodes in z."""
    return _rules_cached(_spec_key(spec), level, nz, spec)
