"""Expression-path norms at extreme scales of X (1e±200): φ homogeneous in x keeps full precision, against mpmath.

`sapa norms --activation "x**3"` on X ~ 1e−200 gave fro_norm 0 (the logits S ~ 1e−400 underflow) while the built-in
poly path gave log10 −1199.27. The reference sums every entry of φ(S), ∂φ/∂S and ∂φ/∂X in 60-digit mpmath from the
chain rule (∂S_ik/∂x_ac = δ_ia (W x_k)_c + δ_ka (Wᵀ x_i)_c), independent of the kernel's rearranged sums.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from sapa.empirics.kernels.expr_norms import expr_norms, homogeneous_degree, layer_from_w
from sapa.theory.activation_audit import parse_activation

mpmath.mp.dps = 60

CASES = {  # text: (φ, φ') in mpmath, element-wise
    "x**3": (lambda s, n: s**3, lambda s, n: 3 * s**2),
    "x**3/sqrt(N)": (lambda s, n: s**3 / mpmath.sqrt(n), lambda s, n: 3 * s**2 / mpmath.sqrt(n)),
    "relu(x)": (lambda s, n: max(s, 0), lambda s, n: 1 if s > 0 else 0),
    "Abs(x)**3": (lambda s, n: abs(s) ** 3, lambda s, n: 3 * s * abs(s)),
}


def _mp_log10(X, W, f, fp):
    N, D = X.shape
    Xm, Wm = mpmath.matrix(X.tolist()), mpmath.matrix(W.tolist())
    S = Xm * Wm * Xm.T
    WX, WtX = Wm * Xm.T, Wm.T * Xm.T
    fro2 = mpmath.fsum(f(S[i, k], N) ** 2 for i in range(N) for k in range(N))
    js2 = mpmath.fsum(fp(S[i, k], N) ** 2 for i in range(N) for k in range(N))
    jx2 = mpmath.mpf(0)
    for i in range(N):
        for k in range(N):
            g = fp(S[i, k], N)
            for a in range(N):
                for c in range(D):
                    v = g * ((WX[c, k] if i == a else 0) + (WtX[c, i] if k == a else 0))
                    jx2 += v * v
    return [float(mpmath.log10(v) / 2) if v > 0 else -np.inf for v in (fro2, js2, jx2)]


@pytest.mark.parametrize("scale", [1e-200, 1e-100, 1.0, 1e30])
@pytest.mark.parametrize("text", sorted(CASES))
def test_homogeneous_phi_keeps_its_norms_at_any_scale(text, scale):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((5, 3)) * scale
    W = rng.standard_normal((3, 3))
    want = _mp_log10(X, W, *CASES[text])
    act = parse_activation(text)
    assert homogeneous_degree(act) is not None
    r = expr_norms(X, layer_from_w(W), act)
    got = [r.log10_fro[0], r.log10_jac_s_fro[0], r.log10_jac_fro[0]]
    for g, w in zip(got, want):
        assert g == pytest.approx(w, abs=1e-12 * max(1.0, abs(w)))


def test_the_cli_expression_path_agrees_with_the_poly_path_on_tiny_x(tmp_path, capsys):
    import json

    from sapa.cli import main

    rng = np.random.default_rng(8)
    np.save(tmp_path / "x.npy", rng.standard_normal((6, 4)) * 1e-200)
    np.save(tmp_path / "w.npy", rng.standard_normal((4, 4)))
    outs = []
    for act in (["--activation", "x**3"], ["--activation", "poly", "--p", "3"]):
        assert main(["norms", "--x", str(tmp_path / "x.npy"), "--w", str(tmp_path / "w.npy"), *act, "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    for key in ("log10_fro_norm", "log10_jac_s_fro_norm", "log10_jac_fro_norm"):
        assert outs[0][key] == pytest.approx(outs[1][key], abs=1e-9) and outs[0][key] < -700


@pytest.mark.parametrize("text,normalize,degree", [("sigmoid(x)", "none", None), ("x**2 + x", "none", None),
                                                   ("relu(x)**2/N", "row", 2), ("x*i/N", "none", 1)])
def test_homogeneous_degree(text, normalize, degree):
    assert homogeneous_degree(parse_activation(text, normalize)) == degree


def test_a_norm_beyond_float64_is_one_clear_error_not_inf():
    from sapa.empirics.kernels.norms import NormOverflowError

    X = np.random.default_rng(7).standard_normal((5, 3)) * 1e60  # S ~ 1e120, x³ ~ 1e360
    with pytest.raises(NormOverflowError, match="exceeds float64"):
        expr_norms(X, layer_from_w(np.eye(3)), parse_activation("x**3"))
