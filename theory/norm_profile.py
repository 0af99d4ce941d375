"""E‖φ(S)‖²_F(N) = A(N)·E ψ(S_12)² + B(N)·E ψ(S_11)² and its Jacobian twin, as functions of N (a profile).

Exact sums of the moments for a polynomial φ, quadrature over the Gauss rules otherwise (with an
a-posteriori error bound from the rule of half the order); rows sum exactly under a causal mask and
a row factor c(N, i). Part of :mod:`sapa.theory.activation_audit`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import sympy as sp

from sapa.common.validate import InputError
from sapa.theory.activation import LAMBDIFY_CACHE, N_, Activation, _lam, x_
from sapa.theory.entry_moments import EntryMoments, ModelSpec, entry_moments
from sapa.theory.gauss_rules import _Rules, _rules


Z_LEVELS = (64, 128, 256, 512, 1024, 2048)  # Gauss–Hermite nodes in z, doubled until the change is below Z_RTOL
Z_RTOL = 1e-10


@dataclass(frozen=True)
class _PerEntry:
    """Per-entry expectations as numpy functions of N (arrays): value and d/dN, for the six quantities."""

    fro_off: object
    fro_diag: object
    jac_s_off: object
    jac_s_diag: object
    jac_off: object
    jac_diag: object


def _poly_exprs(act: Activation, em: EntryMoments) -> dict:
    """Exact per-entry expectations of a polynomial ψ(x, N) = Σ a_k x^k as sympy expressions in N."""
    a = list(act.coeffs)
    b = [k * a[k] for k in range(1, len(a))]  # ψ' coefficients

    def quad(c, mom):
        acc = sp.Integer(0)
        for k, ck in enumerate(c):
            if ck == 0:
                continue
            for l, cl in enumerate(c):
                if cl == 0:
                    continue
                mkl = mom[k + l]
                if mkl != 0:
                    acc += ck * cl * _rat(mkl)
        return sp.expand(acc)

    out = {"fro_off": quad(a, em.off), "fro_diag": quad(a, em.diag)}
    out["jac_s_off"] = quad(b, em.off) if b else sp.Integer(0)
    out["jac_s_diag"] = quad(b, em.diag) if b else sp.Integer(0)
    out["jac_off"] = quad(b, em.joff) if b else sp.Integer(0)
    out["jac_diag"] = quad(b, em.jdiag) if b else sp.Integer(0)
    return out


def _rat(v) -> sp.Expr:
    if isinstance(v, Fraction):
        return sp.Rational(v.numerator, v.denominator)
    return sp.sympify(v)


def _row_sums(act: Activation, N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A(N), B(N)): E‖φ‖² = A·E ψ(S_12)² + B·E ψ(S_11)², A = Σ_i c_i²·#off(i), B = Σ_i c_i² (N an integer array)."""
    N = np.asarray(N, dtype=np.float64)
    causal = act.mask == "causal"
    if not act.uses_i:
        A = N * (N - 1) / 2 if causal else N * (N - 1)
        return A, N.copy()
    rf = _lam(act.row_factor)
    A, B = np.empty_like(N), np.empty_like(N)
    for k, n in enumerate(N):
        n_int = round(float(n))
        i = np.arange(1, n_int + 1, dtype=np.float64)
        c2 = np.asarray(rf(0.0, float(n_int), i), dtype=np.float64) * np.ones_like(i)
        A[k] = float(np.sum(c2 * ((i - 1) if causal else (n_int - 1))))
        B[k] = float(np.sum(c2))
    return A, B


# ----------------------------------------------------------------------------- the audit


@dataclass(frozen=True)
class Profile:
    """Exact or quadrature per-entry expectations and totals of one activation under one model, as functions of N."""

    act: Activation
    spec: ModelSpec
    method: str                 # "exact" | "quadrature"
    error_bound: float          # relative, a posteriori (0 for exact)
    _f: dict = field(repr=False, compare=False)        # name -> callable(N array) -> per-entry expectation
    _df: dict = field(repr=False, compare=False)       # name -> callable(N array) -> d/dN of it
    exact_exprs: dict | None = field(default=None, repr=False, compare=False)  # polynomial: sympy in N
    _coarse: dict | None = field(default=None, repr=False, compare=False)     # quadrature of half the order
    z_error: float = 0.0        # relative change of the last Hermite doubling (max over probes)

    def errors(self, N) -> dict:
        """Relative a-posteriori error of E‖φ‖², E‖∂φ/∂S‖², E‖∂φ/∂X‖² at N: |fine − half-order| + Hermite change."""
        if self._coarse is None:
            return {"fro": 0.0, "jac_s": 0.0, "jac": 0.0}
        fine = self.totals(N)
        coarse = Profile(self.act, self.spec, self.method, 0.0, self._coarse, self._df).totals(N)
        return {q: _rel(fine[q], coarse[q]) + self.z_error for q in fine}

    def entries(self, N) -> dict:
        """Per-entry expectations at N (arrays): fro_off, fro_diag, jac_s_off, jac_s_diag, jac_off, jac_diag."""
        N = np.atleast_1d(np.asarray(N, dtype=np.float64))
        return {k: np.asarray(f(N), dtype=np.float64) * np.ones_like(N) for k, f in self._f.items()}

    def totals(self, N) -> dict:
        """{fro, jac_s, jac}: E‖φ‖²_F, E‖∂φ/∂S‖²_F, E‖∂φ/∂X‖²_F at N (arrays)."""
        N = np.atleast_1d(np.asarray(N, dtype=np.float64))
        e = self.entries(N)
        A, B = _row_sums(self.act, N)
        return {q: A * e[f"{q}_off"] + B * e[f"{q}_diag"] for q in ("fro", "jac_s", "jac")}

    def exponents(self, N) -> dict:
        """Local growth exponents ½ d log E‖·‖²/d log N at N, exact derivative (finite difference over rows if i or a mask)."""
        N = np.atleast_1d(np.asarray(N, dtype=np.float64))
        if self.act.uses_i or self.act.mask == "causal":  # sums over rows: integer N only, centred difference
            Ni = np.round(N)
            k = np.maximum(1.0, np.round(0.02 * Ni))
            lo, hi = np.maximum(Ni - k, 1.0), Ni + k
            tl, th = self.totals(lo), self.totals(hi)
            with np.errstate(all="ignore"):
                return {q: 0.5 * (np.log(th[q]) - np.log(tl[q])) / (np.log(hi) - np.log(lo)) for q in tl}
        e = self.entries(N)
        de = {k: np.asarray(f(N), dtype=np.float64) * np.ones_like(N) for k, f in self._df.items()}
        out = {}
        for q in ("fro", "jac_s", "jac"):
            F = N * (N - 1) * e[f"{q}_off"] + N * e[f"{q}_diag"]
            dF = (2 * N - 1) * e[f"{q}_off"] + N * (N - 1) * de[f"{q}_off"] + e[f"{q}_diag"] + N * de[f"{q}_diag"]
            with np.errstate(all="ignore"):
                out[q] = 0.5 * N * dF / F
        return out

    def crossover(self) -> float | None:
        """N* where the off-diagonal entries weigh as much as the diagonal: A(N)·E ψ(S_12)² = B(N)·E ψ(S_11)².

        Without a mask and with ψ independent of N this is N* = 1 + m_diag/m_off exactly. None if the
        off-diagonal share never reaches the diagonal's for N ≤ 10¹² (or if there is no diagonal term).
        """
        if self.method == "exact" and not self.act.uses_N and not self.act.uses_i and self.exact_exprs:
            mo, md = self.exact_exprs["fro_off"], self.exact_exprs["fro_diag"]
            if mo == 0:
                return None
            r = float(md / mo)
            return 1.0 + (2.0 * r if self.act.mask == "causal" else r)
        grid = np.unique(np.round(np.geomspace(1, 1e12, 241)))
        if self.act.uses_i:
            grid = grid[grid <= 2**20]
        e = self.entries(grid)
        A, B = _row_sums(self.act, grid)
        g = A * e["fro_off"] - B * e["fro_diag"]
        if not np.any(g > 0):
            return None
        k = int(np.argmax(g > 0))
        if k == 0:
            return float(grid[0])
        lo, hi, glo, ghi = grid[k - 1], grid[k], g[k - 1], g[k]
        if self.act.uses_i:  # integer N only: log-linear interpolation
            return float(math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * (-glo) / (ghi - glo)))
        from scipy.optimize import brentq

        def gf(n):
            ee = self.entries(np.array([n]))
            a, b = _row_sums(self.act, np.array([n]))
            return float(a[0] * ee["fro_off"][0] - b[0] * ee["fro_diag"][0])

        return float(brentq(gf, lo, hi, xtol=1e-12 * hi, rtol=1e-13))


@functools.lru_cache(maxsize=LAMBDIFY_CACHE)
def _numeric(expr: sp.Expr):
    """numpy function of N for a sympy expression in N (constants broadcast), made once per process for each."""
    f = sp.lambdify(N_, expr, "numpy")

    def call(N):
        ones = np.ones_like(np.asarray(N, dtype=np.float64))
        try:
            with np.errstate(over="ignore"):
                return np.asarray(f(N), dtype=np.float64) * ones
        except OverflowError:  # exact rationals beyond float64 (--sigma 1e300): infinite, refused by audit()
            return math.inf * ones

    return call


@functools.lru_cache(maxsize=LAMBDIFY_CACHE)
def _numeric_dn(expr: sp.Expr):
    """:func:`_numeric` of d expr/dN, differentiated once per process for each expression."""
    return _numeric(sp.diff(expr, N_))


def profile(act: Activation, spec: ModelSpec, *, quadrature: bool = False) -> Profile:
    """Exact (polynomial) or quadrature per-entry expectations of ``act`` under ``spec`` (``quadrature``: force it)."""
    if act.normalize == "row" or not act.separable:
        raise InputError("row-normalised or non-separable i-dependent activations have no closed form: "
                         "use sapa.empirics.experiments.activation_sampling (Monte Carlo)")
    if act.polynomial and not quadrature:
        K = 2 * (len(act.coeffs) - 1)
        em = entry_moments(spec, max(K, 0))
        ex = _poly_exprs(act, em)
        f = {k: _numeric(v) for k, v in ex.items()}
        df = {k: _numeric_dn(v) for k, v in ex.items()}
        return Profile(act, spec, "exact", 0.0, f, df, exact_exprs=ex)
    return _quadrature_profile(act, spec)


def _quadrature_profile(act: Activation, spec: ModelSpec) -> Profile:
    psi = act.shape
    parts = _factor_in_n(psi)
    if parts is None:
        fns = {"fro": (_lam(psi), _lam(sp.diff(psi, N_))),
               "jac": (_lam(sp.diff(psi, x_)), _lam(sp.diff(psi, x_, N_)))}
    else:  # ψ = c(N)·h(x): E ψ² = c(N)²·E h², one quadrature for all N
        h, c = parts
        fns = {"fro": _lam(h), "jac": _lam(sp.diff(h, x_))}
        c_of, dc_of = _lam(c), _lam(sp.diff(c, N_))

    def evaluate(rules: _Rules) -> tuple[dict, dict]:
        f, df = {}, {}
        for q, nodes, which in (("fro_off", rules.off, "fro"), ("fro_diag", rules.diag, "fro"),
                                ("jac_s_off", rules.off, "jac"), ("jac_s_diag", rules.diag, "jac"),
                                ("jac_off", rules.joff, "jac"), ("jac_diag", rules.jdiag, "jac")):
            if parts is not None:
                f[q], df[q] = _factored(fns[which], nodes, c_of, dc_of)
                continue
            g, gN = fns[which]

            def val(N, g=g, nodes=nodes):
                N = np.atleast_1d(np.asarray(N, dtype=np.float64))
                vals = g(nodes.x[None, :], N[:, None])  # (G, K)
                return (vals * vals) @ nodes.w

            def dval(N, g=g, gN=gN, nodes=nodes):
                N = np.atleast_1d(np.asarray(N, dtype=np.float64))
                return (2 * g(nodes.x[None, :], N[:, None]) * gN(nodes.x[None, :], N[:, None])) @ nodes.w

            f[q], df[q] = val, dval
        return f, df

    probe = np.array([2.0, 14.0, 196.0, 4096.0, 2.0**20])
    prev, z_err = None, math.inf
    for nz in Z_LEVELS:  # double the Hermite order until the expectations stop moving
        best = evaluate(_rules(spec, 1, nz))
        vals = {k: v(probe) for k, v in best[0].items()}
        if prev is not None:
            z_err = max(_rel(vals[k], prev[k]) for k in vals)
            if z_err <= Z_RTOL:
                break
        prev = vals
    coarse = evaluate(_rules(spec, 0, nz))  # fewer nodes in the laws of v and S_11
    cvals = {k: v(probe) for k, v in coarse[0].items()}
    err = float(z_err + max(_rel(vals[k], cvals[k]) for k in vals))
    return Profile(act, spec, "quadrature", err, best[0], best[1], _coarse=coarse[0], z_error=float(z_err))


def _factor_in_n(psi: sp.Expr) -> tuple[sp.Expr, sp.Expr] | None:
    """(h(x), c(N)) with ψ = c(N)·h(x) (tanh(x)/√N, log|x − a|, gelu(x)·log(1 + N)/N), or None if ψ does not factor.

    Then every per-entry expectation is c(N)² (or 2c(N)c'(N)) times one quadrature over the nodes, instead of
    one quadrature per size asked for: the audit asks for hundreds of sizes (crossover grid, growth windows),
    and a rule has up to millions of nodes."""
    if not psi.has(N_):
        return psi, sp.Integer(1)
    if not psi.free_symbols <= {x_, N_}:
        return None
    parts = sp.separatevars(psi, symbols=[x_, N_], dict=True)
    if parts is None:
        return None
    return parts[x_], parts["coeff"] * parts[N_]


def _factored(h_of, nodes, c_of, dc_of):
    """(value, d/dN) of E(c(N)·h(S))² over ``nodes``: c(N)²·E h² and 2c(N)c'(N)·E h², E h² computed once."""
    memo: list = []

    def mean_h2() -> float:
        if not memo:
            vals = h_of(nodes.x, 1.0)  # (K,): h has no N
            memo.append(float(vals * vals @ nodes.w))
        return memo[0]

    def val(N):
        N = np.atleast_1d(np.asarray(N, dtype=np.float64))
        with np.errstate(invalid="ignore"):  # c = 0 at an infinite E h² reads NaN, as the direct product does
            return c_of(1.0, N) ** 2 * mean_h2()

    def dval(N):
        N = np.atleast_1d(np.asarray(N, dtype=np.float64))
        with np.errstate(invalid="ignore"):
            return 2 * c_of(1.0, N) * dc_of(1.0, N) * mean_h2()

    return val, dval


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(all="ignore"):
        r = np.where(scale > 0, np.abs(a - b) / scale, 0.0)
    return float(np.max(r)) if r.size else 0.0
