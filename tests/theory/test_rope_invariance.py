"""Rotary embeddings (RoPE) and `sapa audit`: why an iid audit already covers them, and why a tied one does not.

RoPE rotates query i by R(iθ) and key j by R(jθ) (2×2 blocks, θ_k = base^(−2k/d)), so S_ij = a_iᵀR((j−i)θ)b_j.
With iid Gaussian W_K, W_K R has the law of W_K for any fixed rotation R, so every single logit S_ij — and with
it every per-entry expectation that E‖φ(S)‖²_F and E‖∂φ/∂S‖²_F of an element-wise φ are made of — has the law it
has without RoPE: the iid (and paper) audits hold unchanged. With tied weights (W_Q = W_K) S_ij = x_iᵀW R Wᵀx_j
is not tied any more and the off-diagonal law changes. Checked here by Monte Carlo against the exact closed form.
"""

from __future__ import annotations

import math

import numpy as np

from sapa.theory.activation_audit import model_spec, parse_activation, profile

Z99_9 = 3.2905267314919255


def _rope_logits(rng, spec, N: int, T: int, base: float = 10000.0) -> np.ndarray:
    D, d = spec.D, spec.d
    sig = float(spec.sigma)
    X = rng.standard_normal((T, N, D))
    Q = sig * rng.standard_normal((T, D, d))
    K = Q if spec.name == "tied" else sig * rng.standard_normal((T, D, d))
    A, B = X @ Q, X @ K  # (T, N, d)
    theta = base ** (-2.0 * np.arange(d // 2) / d) if base else np.zeros(d // 2)  # (d/2,); base None: no RoPE
    ang = np.arange(N)[:, None] * theta[None, :]  # (N, d/2): position n rotated by n·θ_k
    c, s = np.cos(ang), np.sin(ang)

    def rot(M):
        x, y = M[..., 0::2], M[..., 1::2]
        out = np.empty_like(M)
        out[..., 0::2], out[..., 1::2] = c * x - s * y, s * x + c * y
        return out

    return rot(A) @ np.swapaxes(rot(B), -1, -2)  # (T, N, N)


def _z(act_text, model, N=12, T=4000, seed=0, base=10000.0):
    spec = model_spec(model, 16, 8)
    act = parse_activation(act_text)
    S = _rope_logits(np.random.default_rng(seed), spec, N, T, base)
    vals = (S**3 / math.sqrt(N)) if act_text == "x**3/sqrt(N)" else (S / math.sqrt(N))
    fro2 = np.sum(vals**2, axis=(1, 2))  # (T,)
    exact = float(profile(act, spec).totals([N])["fro"][0])
    return (fro2.mean() - exact) / (fro2.std(ddof=1) / math.sqrt(T))


def test_rope_leaves_the_iid_audit_unchanged():
    for text in ("x/sqrt(N)", "x**3/sqrt(N)"):
        assert abs(_z(text, "iid")) < Z99_9


def test_rope_changes_the_tied_audit():
    # tied W_Q = W_K: the off-diagonal logits are no longer those of a tied bilinear form (x/√N: mean far off)
    assert abs(_z("x/sqrt(N)", "tied", N=24, base=None)) < Z99_9  # the sampler without RoPE matches (control)
    assert abs(_z("x/sqrt(N)", "tied", N=24)) > 10
