"""60-digit mpmath reference for softmax(τ X W Xᵀ) at any logit gap: ‖P‖_F, ‖∂P/∂S‖_F, ‖∂P/∂X‖_F and σ₁(∂P/∂X).

Independent of sapa's kernels: S is formed exactly in integers from the floats' mantissas (``_dyadic``), rounded once
to 60 digits; P_ik = e^{τ(S_ik − S_im)}/Σ_l e^{τ(S_il − S_im)} with mpmath's unbounded exponent (e^{−10⁴} is an
ordinary mpf); the row Jacobian R_kl = τ(δ_kl P_k − P_k P_l) with every 1 − P_k written as Σ_{l≠k} P_l (the only
entry that could cancel, at 60 digits as in float64, when P_k rounds to 1); ∂P_ik/∂X_ac = δ_ia Σ_l R_kl (W x_l)_c +
R_ka (Wᵀx_i)_c by the chain rule; σ₁ from mpmath's SVD of the dense (N², N·D) Jacobian divided by its largest entry.
For tiny sizes (N, D ≤ 4). Values are returned as log₁₀ (mpf), exact 0 as −inf.
"""

from __future__ import annotations

import mpmath
import numpy as np

from tests.empirics.kernels.test_expr_norms_one_hot import _dyadic

DPS = 60


def _log10(v) -> mpmath.mpf:
    return mpmath.log10(v) if v > 0 else mpmath.mpf("-inf")


def softmax_reference(X: np.ndarray, W: np.ndarray, tau: float = 1.0, mask: str = "none") -> dict:
    """{"fro", "jac_s_fro", "jac_fro", "sigma1"}: log₁₀ of each (mpf, 60 digits); "gap": the smallest row logit gap."""
    N, D = X.shape
    with mpmath.workdps(DPS):
        mpf = mpmath.mpf
        Xi, ex = _dyadic(X)
        Wi, ew = _dyadic(W)
        WXi = Wi @ Xi.T  # (D, N) exact: column l is W x_l
        y = [[mpf((int(v), ew + ex)) for v in row] for row in WXi]            # y[c][l] = (W x_l)_c
        z = [[mpf((int(v), ew + ex)) for v in row] for row in Wi.T @ Xi.T]   # z[c][i] = (Wᵀ x_i)_c
        t = mpf(tau)
        S = [[t * mpf((int(v), ew + 2 * ex)) for v in row] for row in Xi @ WXi]  # τ x_iᵀ W x_j
        J = mpmath.zeros(N * N, N * D)
        fro2, js2, gaps = mpf(0), mpf(0), []
        for i in range(N):
            vis = [k for k in range(N) if mask == "none" or k <= i]
            top = max(S[i][k] for k in vis)
            e = {k: mpmath.exp(S[i][k] - top) for k in vis}
            tot = mpmath.fsum(e.values())
            P = {k: e[k] / tot for k in vis}
            if len(vis) > 1:
                srt = sorted((S[i][k] for k in vis), reverse=True)
                gaps.append(srt[0] - srt[1])
            fro2 += mpmath.fsum(v * v for v in P.values())
            R = {}
            for k in vis:
                for l in vis:
                    R[k, l] = t * P[k] * mpmath.fsum(P[j] for j in vis if j != k) if k == l else -t * P[k] * P[l]
            js2 += mpmath.fsum(v * v for v in R.values())
            for k in vis:
                own = [mpmath.fsum(R[k, l] * y[c][l] for l in vis) for c in range(D)]
                for a in vis:
                    for c in range(D):
                        J[i * N + k, a * D + c] = R[k, a] * z[c][i] + (own[c] if a == i else 0)
        jac2 = mpmath.fsum(J[r, c] ** 2 for r in range(N * N) for c in range(N * D))
        big = max(abs(J[r, c]) for r in range(N * N) for c in range(N * D))
        sigma = big * max(mpmath.svd_r(J / big, compute_uv=False)) if big > 0 else mpf(0)
        return {"fro": _log10(mpmath.sqrt(fro2)), "jac_s_fro": _log10(mpmath.sqrt(js2)),
                "jac_fro": _log10(mpmath.sqrt(jac2)), "sigma1": _log10(sigma),
                "gap": float(min(gaps)) if gaps else float("nan")}
