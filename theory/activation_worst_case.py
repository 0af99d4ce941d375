"""Worst case over token-bounded inputs: |S_ij| ≤ ‖W‖₂ r² = B gives ‖φ(S)‖_F ≤ N·max_{|s|≤B}|φ(s)|.

Attained in rate by aligned tokens (every S_ij = s*); the exponents of the bound and of that witness,
for the Frobenius norm and the Jacobian. Part of :mod:`sapa.theory.activation_audit`.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from sapa.common.validate import positive_float
from sapa.theory.activation import Activation, _lam, x_


WORST_N = (2.0**30, 2.0**31)  # where the asymptotic worst-case exponent is read (i-dependent: 2**16, 2**17)


def worst_case(act: Activation, B: float = 1.0, N=196) -> dict:
    """Worst case over token-bounded inputs (‖x_i‖ ≤ r, |S_ij| ≤ ‖W‖₂ r² = B): exponents of the bound and of a witness.

    Element-wise φ: ‖φ(S)‖_F ≤ (Σ_i n_i max_{|s|≤B} φ(s, N, i)²)^{½} (n_i visible entries of row i), and
    ‖∂φ/∂S‖_F, ‖∂φ/∂X‖_F likewise with max|φ'| (‖∂φ/∂X‖²_F ≤ max φ'² r²‖W‖₂²[2N(N−1) + 4N]). The aligned
    input (every x_i = r u, u a unit eigenvector of W_s: every S_ij = s*) attains N·|φ(s*)|; it attains
    the rate when |φ(s*, N)| / max|φ| stays bounded below as N grows, which is checked numerically.
    Row-normalised φ ≥ 0: each row is a probability vector, so ‖P‖_F ≤ √N (exponent ½) always; if
    min_{|s|≤B} φ > 0 then P_ij ≤ R/N (R = max φ / min φ) and ‖P‖_F ≤ √R: exponent 0, attained by equal
    logits (‖P‖_F = 1). Exponents are asymptotic (N = 2³⁰ → 2³¹; with a row index 2¹⁶ → 2¹⁷) and local at ``N``.
    """
    B = positive_float("B", B)
    s = np.concatenate([np.linspace(-B, B, 4001), [0.0]])
    f = _lam(act.expr)
    fp = _lam(sp.diff(act.expr, x_))
    big = (2.0**16, 2.0**17) if act.uses_i else WORST_N
    rf = _lam(act.row_factor) if act.uses_i and act.separable else None
    s_coarse = np.concatenate([np.linspace(-B, B, 201), [0.0]])

    def upper2(g, n):  # Σ_i n_i max_s g(s, n, i)²
        n = float(n)
        if act.uses_i:
            i = np.arange(1, int(n) + 1, dtype=np.float64)
            if rf is not None:  # φ = c(N, i)·ψ(x, N): max over s once, times (c_i/c_1)²
                m = float(np.max(np.asarray(g(s, n, 1.0)) ** 2)) * np.asarray(rf(0.0, n, i)) * np.ones_like(i)
            else:
                m = np.zeros_like(i)
                for blk in range(0, i.size, 2048):
                    ii = i[blk:blk + 2048]
                    m[blk:blk + 2048] = np.max(np.asarray(g(s_coarse[None, :], n, ii[:, None])) ** 2, axis=1)
            cnt = i if act.mask == "causal" else np.full_like(i, n)
            return float(np.sum(cnt * m))
        m = float(np.max(np.asarray(g(s, n, 1.0)) ** 2))
        cnt = n * (n + 1) / 2 if act.mask == "causal" else n * n
        return cnt * m

    def witness2(g, n, s_star):
        n = float(n)
        if act.uses_i:
            i = np.arange(1, int(n) + 1, dtype=np.float64)
            cnt = i if act.mask == "causal" else np.full_like(i, n)
            return float(np.sum(cnt * np.asarray(g(s_star, n, i)) ** 2))
        cnt = n * (n + 1) / 2 if act.mask == "causal" else n * n
        return cnt * float(np.asarray(g(s_star, n, 1.0))) ** 2

    def exp_of(fun, n1, n2):
        a, b = fun(n1), fun(n2)
        if a <= 0 or b <= 0:
            return -math.inf if b < a or b == 0 else math.nan
        return 0.5 * math.log(b / a) / math.log(n2 / n1)

    out = {"B": B, "normalize": act.normalize}
    if act.normalize == "row":
        vals = np.asarray(f(s[None, :], np.array([[2.0], [196.0], [4096.0], [2.0**20]]), 1.0))
        positive = bool(np.all(vals.min(axis=1) > 0))
        out.update({
            "fro": {"exponent": 0.0 if positive else None, "bracket": [0.0, 0.0] if positive else [0.0, 0.5],
                    "witness": "equal logits (every S_ij equal): ‖P‖_F = 1",
                    "why": ("min φ > 0 on [−B, B]: P_ij ≤ R/N, ‖P‖_F ≤ √R" if positive else
                            "φ vanishes in [−B, B]: rows can approach one-hot (‖P‖_F ≤ √N); not pinned")},
            "jac_s": None, "jac": None,
        })
        out["exponent"] = out["fro"]["exponent"] if positive else 0.5
        out["exponent_is_exact"] = positive
        return out
    for name, g in (("fro", f), ("jac_s", fp), ("jac", fp)):
        e_up = exp_of(lambda n, g=g: upper2(g, n), *big)
        e_loc = exp_of(lambda n, g=g: upper2(g, n), max(float(N) / 1.05, 1.0), float(N) * 1.05) if N > 1 else math.nan
        # witness: the s* that maximises |g| at the large N, held fixed as N grows
        gv = np.abs(np.asarray(g(s, big[0], 1.0)))
        s_star = float(s[int(np.argmax(gv))])
        e_wit = exp_of(lambda n, g=g, s_star=s_star: witness2(g, n, s_star), *big)
        attains = bool(math.isfinite(e_up) and math.isfinite(e_wit) and abs(e_wit - e_up) < 1e-3)
        out[name] = {"exponent": e_up, "local_exponent_at_N": e_loc, "witness_exponent": e_wit, "s_star": s_star,
                     "witness": f"aligned tokens x_i = r·u (uᵀW_s u·r² = s* = {s_star:.4g}): every S_ij = s*",
                     "witness_attains_rate": attains}
    out["exponent"] = out["fro"]["exponent"]
    out["exponent_is_exact"] = out["fro"]["witness_attains_rate"]
    return out
