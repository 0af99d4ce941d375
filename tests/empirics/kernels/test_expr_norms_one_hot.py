"""Row-normalised norms on near-one-hot rows (logit gaps ≳ 30) against 60-digit mpmath: no cancellation.

The reference builds every entry of ∂P/∂S and ∂P/∂X of P = softmax(X W Xᵀ) from the chain rule in mpmath at
60 digits (R_i = diag(P_i) − P_i P_iᵀ, ∂S_il/∂X_ac = δ_ia (W x_l)_c + δ_la (Wᵀ x_i)_c), independent of the
kernel's rearranged sums. Before the fix the closed forms 1 − 2P + ‖P‖² cancelled and were clipped at 0.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from sapa.empirics.kernels.expr_norms import LayerOperator, expr_norms, layer_from_w
from sapa.theory.activation_audit import parse_activation

mpmath.mp.dps = 60
SOFTMAX = parse_activation("exp(x)", "row")


def _dyadic(A: np.ndarray):
    """(ints, e): A = ints · 2^e exactly, ints an object array of Python integers (a float64 is an integer mantissa
    of 53 bits times a power of two; one common power for the whole array)."""
    m, ex = np.frexp(A)
    man = (m * 2.0**53).astype(np.int64)  # exact: |m| < 1
    e = int(ex.min()) - 53
    shift = ex - 53 - e
    ints = np.empty(A.shape, dtype=object)
    for idx in np.ndindex(A.shape):
        ints[idx] = int(man[idx]) << int(shift[idx])
    return ints, e


def _mp_reference(X: np.ndarray, W: np.ndarray):
    """(‖P‖_F, ‖∂P/∂S‖_F, ‖∂P/∂X‖_F, the dense ∂P/∂X as a float matrix (N·N, N·D)) at 60 digits.

    W x_l, Wᵀ x_i and S_ij = x_iᵀ W x_j are sums of products of floats, so they are computed exactly in integers
    (``_dyadic``) and rounded once to 60 digits; every later sum is an ``mpmath.fdot`` or ``fsum``. Each entry of
    ∂P/∂X is the chain rule with its two Kronecker deltas taken out, ∂P_ik/∂X_ac = δ_ia Σ_l R_kl (W x_l)_c +
    R_ka (Wᵀ x_i)_c, rather than an N-long fdot over l of which all but one term are zero. Both together make the
    reference 5× faster than fdots over lists of mpf throughout (the 300-case test: ~80 → ~16 CPU-s), with the same
    floats on the 12 cases of the default tests and 100 of the 300 slow ones."""
    N, D = X.shape
    mpf, fdot = mpmath.mpf, mpmath.fdot
    Xi, ex = _dyadic(X)
    Wi, ew = _dyadic(W)
    WXi = Wi @ Xi.T  # (D, N) exact integers: column l is W x_l
    WX = [[mpf((int(v), ew + ex)) for v in row] for row in WXi]
    WtX = [[mpf((int(v), ew + ex)) for v in row] for row in Wi.T @ Xi.T]  # (D, N): column i is Wᵀ x_i
    S = [[mpf((int(v), ew + 2 * ex)) for v in row] for row in Xi @ WXi]  # x_iᵀ W x_j
    P = []
    for i in range(N):
        mx = max(S[i])
        e = [mpmath.exp(S[i][k] - mx) for k in range(N)]
        t = mpmath.fsum(e)
        P.append([v / t for v in e])
    fro2 = mpmath.fsum(P[i][k] ** 2 for i in range(N) for k in range(N))
    js2, squares = mpf(0), []
    J = np.zeros((N * N, N * D))
    for i in range(N):
        R = [[(P[i][k] if k == l else 0) - P[i][k] * P[i][l] for l in range(N)] for k in range(N)]
        js2 += mpmath.fsum(R[k][l] ** 2 for k in range(N) for l in range(N))
        for k in range(N):
            own = [fdot(R[k], WX[c]) for c in range(D)]  # Σ_l R_kl (W x_l)_c: the a = i term
            for a in range(N):
                row = [R[k][a] * WtX[c][i] for c in range(D)]
                if a == i:
                    row = [u + v for u, v in zip(own, row)]
                squares.append(fdot(row, row))
                J[i * N + k, a * D : (a + 1) * D] = [float(v) for v in row]
    jx2 = mpmath.fsum(squares)
    return float(mpmath.sqrt(fro2)), float(mpmath.sqrt(js2)), float(mpmath.sqrt(jx2)), J


def _case(seed: int):
    rng = np.random.default_rng(seed)
    N, D = int(rng.integers(2, 6)), int(rng.integers(20, 41))
    X = rng.standard_normal((N, D))
    W = rng.standard_normal((D, D)) * rng.uniform(4.0, 10.0) / np.sqrt(D)
    return X, W


def test_the_cases_are_near_one_hot():
    """The sample holds rows whose largest P rounds to 1 in float64 (the regime that cancelled)."""
    ones = 0
    for seed in range(12):
        X, W = _case(seed)
        S = X @ W @ X.T
        gap = np.sort(S, axis=1)[:, -1] - np.sort(S, axis=1)[:, -2]
        ones += int(np.sum(gap > 37))
    assert ones >= 6


@pytest.mark.parametrize("seed", range(12))
def test_row_normalised_norms_match_60_digit_mpmath(seed):
    X, W = _case(seed)
    fro, js, jx, _ = _mp_reference(X, W)
    r = expr_norms(X, layer_from_w(W), SOFTMAX)
    for got, want in ((r.fro[0], fro), (r.jac_s_fro[0], js), (r.jac_fro[0], jx)):
        assert got == pytest.approx(want, rel=1e-10, abs=0.0)


@pytest.mark.parametrize("seed", range(4))
def test_jacobian_products_match_the_mpmath_jacobian(seed):
    """J E and Jᵀ U of the (never formed) operator equal the dense 60-digit Jacobian's, entry for entry."""
    X, W = _case(seed)
    _, _, _, J = _mp_reference(X, W)
    N, D = X.shape
    op = LayerOperator(X, layer_from_w(W), SOFTMAX, head=0)
    rng = np.random.default_rng(100 + seed)
    E, U = rng.standard_normal((N, D)), rng.standard_normal((N, N))
    scale_v = np.abs(J) @ np.abs(E.ravel())          # Σ |J||E|: the size of the exact sums, row by row
    scale_u = np.abs(J).T @ np.abs(U.ravel())
    np.testing.assert_array_less(np.abs(op.matvec(E).ravel() - J @ E.ravel()), 1e-10 * scale_v + 1e-300)
    np.testing.assert_array_less(np.abs(op.rmatvec(U).ravel() - J.T @ U.ravel()), 1e-10 * scale_u + 1e-300)


@pytest.mark.parametrize("seed", range(12))
def test_spectral_bracket_contains_the_dense_sigma_1(seed):
    """`sapa norms --spectral`'s bracket holds σ₁ of the dense 60-digit Jacobian; converged only when it is narrow."""
    from sapa.commands.norms_expr import run_norms

    X, W = _case(seed)
    _, _, jx, J = _mp_reference(X, W)
    s1 = float(np.linalg.svd(J, compute_uv=False)[0])
    out = run_norms(X, layer_from_w(W), SOFTMAX, spectral=True, tol=1e-8, max_steps=200)
    assert out["jac_fro_norm"] == pytest.approx(jx, rel=1e-10, abs=0.0)  # the bracket's t_⊥ uses it
    lo, up = out["sigma_lower"], out["sigma_upper"]
    slack = 1e-12 * s1  # the dense SVD's own round-off on a (N², N·D) float64 matrix
    assert lo - slack <= s1 <= up + slack
    if out["converged"]:
        assert up - lo <= 1e-8 * up


@pytest.mark.slow
def test_300_random_row_normalised_cases_match_mpmath_and_their_brackets_hold_the_dense_sigma_1():
    """N 2–5, D 20–160, W·(1–3)/√D (near-one-hot rows among them): `sapa norms --spectral` end to end."""
    from sapa.commands.norms_expr import run_norms

    one_hot = 0
    for seed in range(300):
        rng = np.random.default_rng([37, seed])
        N, D = int(rng.integers(2, 6)), int(rng.integers(20, 161))
        X = rng.standard_normal((N, D))
        W = rng.standard_normal((D, D)) * rng.uniform(1.0, 3.0) / np.sqrt(D)
        S = X @ W @ X.T
        top2 = np.sort(S, axis=1)[:, -2:]
        one_hot += int(np.any(top2[:, 1] - top2[:, 0] > 37))
        fro, js, jx, J = _mp_reference(X, W)
        s1 = float(np.linalg.svd(J, compute_uv=False)[0])
        out = run_norms(X, layer_from_w(W), SOFTMAX, spectral=True, tol=1e-8, max_steps=200, progress=False)
        for key, want in (("fro_norm", fro), ("jac_s_fro_norm", js), ("jac_fro_norm", jx)):
            assert out[key] == pytest.approx(want, rel=1e-10, abs=0.0), (seed, key)
        slack = 1e-12 * s1  # the dense SVD's own round-off
        assert out["sigma_lower"] - slack <= s1 <= out["sigma_upper"] + slack, seed
        if out["converged"]:
            assert out["sigma_upper"] - out["sigma_lower"] <= 1e-8 * out["sigma_upper"]
    assert one_hot >= 30  # the regime that cancelled is well represented
