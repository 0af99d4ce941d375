"""E‖φ(S)‖²_F = Σ_{i≠j visible} E φ(S_12; N, i, j)² + Σ_i E φ(S_11; N, i, i)² for φ with a column index j.

Relative-position logits (ALiBi's −m·|i − j|, relative biases; arXiv 2410.18613's question of how attention
norms scale with N, asked of position-dependent activations) make φ depend on the pair (i, j), not only on
the row. Every off-diagonal logit S_ij (i ≠ j) has the law of S_12 and every diagonal one the law of S_11
(the tokens are exchangeable), so the expectations are sums over the visible pairs of per-entry expectations
under those two laws, with the position entering φ only:

* **polynomial in x**, φ = Σ_k a_k(N, i, j) x^k (degree ≤ :data:`sapa.theory.activation_audit.POLY_MAX_DEGREE`, any
  coefficients): per pair aᵀ M a with the Hankel matrices M_kl = E S^{k+l} of the exact moments of
  :func:`sapa.theory.activation_audit.entry_moments` (off, diag, and the Jacobian-weighted joff, jdiag). Exact moments; the
  sum over pairs is evaluated in float64.
* **otherwise**: the quadrature nodes of :mod:`sapa.theory.activation_audit` (the laws of S_12 and S_11 and their
  Jacobian-weighted forms), Hermite order doubled until the totals at N move by ≤ Z_RTOL; ``error_bound`` is
  that change plus the relative difference to the rule of half the order (as ``sapa audit``).

Pairs: when φ depends on (i, j) only through i − j (checked symbolically), the N(N−1) pairs collapse to
the 2N − 1 offsets δ with multiplicity N − |δ| (causal: δ = 1…N−1); otherwise every pair is summed. Causal
masks keep j ≤ i. The local exponent is a centred difference over integer N; the sup of the exponent is
taken over N = 2…:data:`N_MAX` (a sum over pairs, not the closed forms in N of sapa.theory.activation_audit).
Row-normalised φ with j goes to Monte Carlo (:mod:`sapa.empirics.experiments.activation_sampling`), as without j.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import sympy as sp

from sapa.common.validate import InputError
from sapa.theory.activation import POLY_MAX_DEGREE, Activation, i_, j_, x_
from sapa.theory.entry_moments import ModelSpec, entry_moments
from sapa.theory.norm_profile import Z_LEVELS, Z_RTOL

__all__ = ["N_MAX", "N_GRID_J", "RelposProfile", "relpos_profile", "relpos_worst_case", "is_relative"]

N_MAX = 4096
N_GRID_J = tuple(2**k for k in range(1, 13))  # 2 … N_MAX, doubling
EVAL_BUDGET = 2 * 10**8  # pairs × nodes per total; beyond it a non-relative φ is refused at that N
CHUNK = 2**22            # pairs × nodes per block


@functools.lru_cache(maxsize=256)
def is_relative(expr: sp.Expr) -> bool:
    """True when φ(x, N, i, j) depends on (i, j) only through i − j (sympy's simplify: asked once per φ and process;
    the profile and the worst case of one audit both ask)."""
    d = sp.Symbol("delta", real=True)
    return j_ not in sp.simplify(expr.subs(i_, j_ + d)).free_symbols


@dataclass(frozen=True)
class _Pairs:
    """Visible entries as (i, j, multiplicity): off-diagonal ones and diagonal ones."""

    i: np.ndarray
    j: np.ndarray
    w: np.ndarray
    di: np.ndarray
    dw: np.ndarray


def _pairs(N: int, causal: bool, relative: bool) -> _Pairs:
    if relative:
        d = np.arange(1, N) if causal else np.concatenate([np.arange(-(N - 1), 0), np.arange(1, N)])
        i = np.where(d > 0, 1 + d, 1).astype(np.float64)
        return _Pairs(i, i - d, (N - np.abs(d)).astype(np.float64), np.ones(1), np.array([float(N)]))
    ii, jj = np.meshgrid(np.arange(1, N + 1), np.arange(1, N + 1), indexing="ij")
    keep = (jj < ii) if causal else (jj != ii)
    return _Pairs(ii[keep].astype(np.float64), jj[keep].astype(np.float64), np.ones(int(keep.sum())),
                  np.arange(1, N + 1, dtype=np.float64), np.ones(N))


def _quad_sum(g, x: np.ndarray, wx: np.ndarray, N: int, i: np.ndarray, j: np.ndarray, w: np.ndarray) -> float:
    """Σ_p w_p Σ_n wx_n g(x_n, N, i_p, j_p)², in blocks."""
    K = max(1, x.size)
    step = max(1, CHUNK // K)
    tot = 0.0
    for a in range(0, i.size, step):
        vals = g(x[None, :], float(N), i[a:a + step, None], j[a:a + step, None])  # (P, K)
        tot += float(w[a:a + step] @ ((vals * vals) @ wx))
    return tot


def _hankel(m, K: int) -> np.ndarray:
    return np.array([[float(Fraction(m[k + l])) if not isinstance(m[k + l], sp.Basic) else float(m[k + l])
                      for l in range(K + 1)] for k in range(K + 1)])


@dataclass(frozen=True)
class RelposProfile:
    """Totals of one j-dependent activation under one model as functions of integer N (see the module docstring)."""

    act: Activation
    spec: ModelSpec
    method: str            # "exact" | "quadrature"
    relative: bool         # φ depends on (i, j) through i − j only
    nz: int = 0            # Hermite order in z (quadrature)
    z_error: float = 0.0

    def _coeffs(self):
        poly = sp.Poly(sp.expand(self.act.expr), x_)
        a = list(reversed(poly.all_coeffs()))
        from sapa.theory.activation import _lam

        return [_lam(c) for c in a], len(a) - 1

    def totals(self, N: int, level: int = 1) -> dict:
        """{fro, jac_s, jac}: E‖φ‖²_F, E‖∂φ/∂S‖²_F, E‖∂φ/∂X‖²_F at integer N."""
        N = int(N)
        pr = _pairs(N, self.act.mask == "causal", self.relative)
        if self.method == "exact":
            fa, K = self._coeffs()
            em = entry_moments(self.spec, 2 * K)

            def coef(fs, i, j):  # (P, K+1) values of the coefficients
                return np.stack([np.broadcast_to(np.asarray(f(0.0, float(N), i, j), dtype=np.float64), i.shape)
                                 for f in fs], axis=1)

            A, Ad = coef(fa, pr.i, pr.j), coef(fa, pr.di, pr.di)
            B = A[:, 1:] * np.arange(1, K + 1)[None, :]   # φ' coefficients
            Bd = Ad[:, 1:] * np.arange(1, K + 1)[None, :]

            def qf(C, w, mom, k):
                if k < 0 or C.shape[1] == 0:
                    return 0.0
                M = _hankel(mom, k)
                return float(w @ np.einsum("pk,kl,pl->p", C, M, C))

            return {"fro": qf(A, pr.w, em.off, K) + qf(Ad, pr.dw, em.diag, K),
                    "jac_s": qf(B, pr.w, em.off, K - 1) + qf(Bd, pr.dw, em.diag, K - 1),
                    "jac": qf(B, pr.w, em.joff, K - 1) + qf(Bd, pr.dw, em.jdiag, K - 1)}
        from sapa.theory.activation import _lam
        from sapa.theory.gauss_rules import _rules

        rules = _rules(self.spec, level, self.nz)
        K = rules.off.x.size
        if (pr.i.size + pr.di.size) * K > EVAL_BUDGET:
            raise InputError(f"{self.act.text!r} depends on i and j separately: {pr.i.size} pairs × {K} quadrature nodes "
                             f"at N = {N} is beyond the budget ({EVAL_BUDGET:.0e}); audit a smaller N, or write the "
                             "position dependence through i − j")
        f, fp = _lam(self.act.expr), _lam(sp.diff(self.act.expr, x_))
        out = {}
        for q, g, off, diag in (("fro", f, rules.off, rules.diag), ("jac_s", fp, rules.off, rules.diag),
                                ("jac", fp, rules.joff, rules.jdiag)):
            out[q] = (_quad_sum(g, off.x, off.w, N, pr.i, pr.j, pr.w)
                      + _quad_sum(g, diag.x, diag.w, N, pr.di, pr.di, pr.dw))
        return out

    def errors(self, N: int) -> dict:
        """Relative a-posteriori error at N of each total: |fine − half order| + the last Hermite change (0 exact)."""
        if self.method == "exact":
            return {"fro": 0.0, "jac_s": 0.0, "jac": 0.0}
        fine, coarse = self.totals(N, 1), self.totals(N, 0)
        return {q: abs(fine[q] - coarse[q]) / max(abs(fine[q]), 1e-300) + self.z_error for q in fine}

    def exponents(self, N: int) -> dict:
        """Local exponents ½ d log E‖·‖²/d log N at integer N ≥ 2, centred difference over integers."""
        N = int(N)
        k = max(1, round(0.02 * N))
        lo, hi = max(N - k, 1), N + k
        tl, th = self.totals(lo), self.totals(hi)
        out = {}
        for q in tl:
            if tl[q] > 0 and th[q] > 0:
                out[q] = 0.5 * math.log(th[q] / tl[q]) / math.log(hi / lo)
            else:
                out[q] = math.nan
        return out


def relpos_profile(act: Activation, spec: ModelSpec, N: int) -> RelposProfile:
    """Exact (polynomial in x) or quadrature profile of a j-dependent element-wise φ; Hermite order fixed at N."""
    if not act.uses_j:
        raise InputError("sapa.theory.relpos is for activations with a column index j")
    if act.normalize == "row":
        raise InputError("row-normalised φ has no closed form: Monte Carlo (sapa.empirics.experiments.activation_sampling)")
    relative = is_relative(act.expr)
    expr = sp.expand(act.expr)
    if expr.is_polynomial(x_) and sp.Poly(expr, x_).degree() <= POLY_MAX_DEGREE:
        return RelposProfile(act, spec, "exact", relative)
    prev, z_err, nz = None, math.inf, Z_LEVELS[0]
    for nz in Z_LEVELS:
        cur = RelposProfile(act, spec, "quadrature", relative, nz).totals(N)
        if prev is not None:
            z_err = max(abs(cur[q] - prev[q]) / max(abs(cur[q]), 1e-300) for q in cur)
            if z_err <= Z_RTOL:
                break
        prev = cur
    return RelposProfile(act, spec, "quadrature", relative, nz, float(z_err))


def relpos_worst_case(act: Activation, B: float = 1.0, N: int = 196) -> dict:
    """Worst case over token-bounded inputs (|S_ij| ≤ B), as :func:`sapa.theory.activation_audit.worst_case`, summed over visible pairs.

    Element-wise: ‖φ(S)‖²_F ≤ Σ_{visible (i,j)} max_{|s|≤B} φ(s, N, i, j)², attained in rate by aligned tokens
    (every S_ij = s*) when the witness' exponent equals the bound's. Row-normalised: rows are probability
    vectors (‖P‖_F ≤ √N); equal logits give P_ij = φ(0, N, i, j)/Σ_l φ(0, N, i, l), whose exponent (N = 2¹⁰ → 2¹¹)
    is reported as the witness (a position bias that concentrates rows makes it ½; the bound is then attained
    when it is within 0.01 of ½). Element-wise exponents between N = 2¹¹ and 2¹², or, when φ depends on i and j
    separately (N² pairs), the largest doubling whose pairs × values fit :data:`EVAL_BUDGET` (2⁸ → 2⁹ at 402
    values; ``exponent_between_n``), evaluated in blocks of :data:`CHUNK`.
    """
    from sapa.theory.activation import _lam

    s = np.concatenate([np.linspace(-B, B, 401), [0.0]])
    f = _lam(act.expr)
    relative = is_relative(act.expr)
    causal = act.mask == "causal"

    def sums(n, s_vals):  # Σ over visible pairs of max over s_vals of φ², and of the row-normalised witness
        pr = _pairs(n, causal, relative)
        i = np.concatenate([pr.i, pr.di])
        j = np.concatenate([pr.j, pr.di])
        w = np.concatenate([pr.w, pr.dw])
        best = np.zeros(i.size)
        cols = min(64, s_vals.size)
        rows = max(1, CHUNK // cols)  # pairs × values per block: bounded memory (was (pairs, 64) at once: 8.6 GB)
        for a in range(0, s_vals.size, cols):
            for r in range(0, i.size, rows):
                v = np.asarray(f(s_vals[None, a:a + cols], float(n), i[r:r + rows, None], j[r:r + rows, None]),
                               dtype=np.float64)
                best[r:r + rows] = np.maximum(best[r:r + rows], np.max(v * v, axis=1))
        return float(w @ best)

    def n_pairs(n):  # visible (i, j) entries as _pairs lists them: differences (relative) or pairs, plus the diagonal
        off = (n - 1 if causal else 2 * (n - 1)) if relative else (n * (n - 1) // 2 if causal else n * (n - 1))
        return off + (1 if relative else n)

    n2 = 2**12  # the exponent between N = n2/2 and n2: the largest doubling within the evaluation budget
    while n2 > 4 and n_pairs(n2) * s.size > EVAL_BUDGET:
        n2 //= 2

    def exp_of(fun, n1=n2 // 2, n2=n2):
        a, b = fun(n1), fun(n2)
        return 0.5 * math.log(b / a) / math.log(n2 / n1) if a > 0 and b > 0 else math.nan

    if act.normalize == "row":
        def witness(n):  # equal logits s* = 0, every row normalised over its visible columns
            ii, jj = np.meshgrid(np.arange(1, n + 1.0), np.arange(1, n + 1.0), indexing="ij")
            F = np.asarray(f(0.0, float(n), ii, jj), dtype=np.float64) * np.ones_like(ii)
            if causal:
                F = np.tril(F)
            P = F / F.sum(axis=1, keepdims=True)
            return float(np.sum(P * P))

        e_w = exp_of(witness, 2**10, 2**11)
        exact = math.isfinite(e_w) and abs(e_w - 0.5) < 1e-2
        return {"exponent": 0.5, "exponent_is_exact": exact, "witness_exponent": e_w,
                "bracket": [e_w if math.isfinite(e_w) else 0.0, 0.5],
                "witness": "equal logits (every S_ij = 0): rows are the normalised position weights",
                "why": "rows are probability vectors: ‖P‖_F ≤ √N"}
    e_up = exp_of(lambda n: sums(n, s))
    gv = np.abs(np.asarray(f(s, 2.0**11, 1.0, 1.0), dtype=np.float64))
    s_star = float(s[int(np.argmax(gv))])
    e_w = exp_of(lambda n: sums(n, np.array([s_star])))
    return {"exponent": e_up, "exponent_is_exact": bool(math.isfinite(e_up) and abs(e_w - e_up) < 1e-3),
            "witness_exponent": e_w, "s_star": s_star, "exponent_between_n": [n2 // 2, n2],
            "witness": f"aligned tokens: every S_ij = s* = {s_star:.4g}",
            "why": "Σ over visible pairs of max_{|s|≤B} φ(s, N, i, j)²"}
