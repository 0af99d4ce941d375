"""`sapa norms --spectral` at extreme scales of X: φ homogeneous in x is bracketed on power-of-two-scaled inputs.

X ~ 1e−60 with φ = x³: the logits' cubes (1e−360) underflow, but σ₁(∂φ/∂X) ~ 1e−297 is a float64 number. The
reference is the dense Jacobian built entry by entry in 60-digit mpmath from the chain rule and its largest
singular value from LAPACK (which rescales tiny matrices itself).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from sapa.empirics.kernels.expr_norms import layer_from_w
from sapa.commands.norms_expr import run_norms
from sapa.theory.activation_audit import parse_activation

mpmath.mp.dps = 60


def _mp_sigma(X, W, p):
    N, D = X.shape
    Xm, Wm = mpmath.matrix(X.tolist()), mpmath.matrix(W.tolist())
    S = Xm * Wm * Xm.T
    WX, WtX = Wm * Xm.T, Wm.T * Xm.T
    J = np.zeros((N * N, N * D))
    for i in range(N):
        for k in range(N):
            g = p * S[i, k] ** (p - 1)
            for a in range(N):
                for c in range(D):
                    J[i * N + k, a * D + c] = float(g * ((WX[c, k] if i == a else 0) + (WtX[c, i] if k == a else 0)))
    return float(np.linalg.svd(J, compute_uv=False)[0])


@pytest.mark.parametrize("scale,p", [(1e-60, 3), (1e-100, 2), (1.0, 3), (1e20, 2)])
def test_spectral_bracket_of_a_homogeneous_phi_at_any_scale(scale, p):
    rng = np.random.default_rng(12)
    X = rng.standard_normal((4, 3)) * scale
    W = rng.standard_normal((3, 3))
    sigma = _mp_sigma(X, W, p)
    out = run_norms(X, layer_from_w(W), parse_activation(f"x**{p}"), spectral=True, tol=1e-9, progress=False)
    assert out["converged"] and sigma > 0
    assert out["sigma_lower"] * (1 - 1e-12) <= sigma <= out["sigma_upper"] * (1 + 1e-12)
    assert out["log10_sigma_upper"] == pytest.approx(math.log10(sigma), abs=1e-9)


def test_a_sigma_below_float64_keeps_its_log10():
    rng = np.random.default_rng(12)
    X = rng.standard_normal((4, 3)) * 1e-200  # σ₁ ~ 1e−997
    out = run_norms(X, layer_from_w(rng.standard_normal((3, 3))), parse_activation("x**3"), spectral=True,
                    progress=False)
    assert out["sigma_upper"] is None and -1010 < out["log10_sigma_lower"] <= out["log10_sigma_upper"] < -990
    assert {"sigma_lower", "sigma_upper", "jac_fro_norm"} <= set(out["below_double_range"])  # null, never 0
    assert out["log10_sigma_upper_frobenius"] == pytest.approx(out["log10_jac_fro_norm"], abs=1e-9)
