"""Tests for `empirics/kernels/linearised.py`: c·φ_p(Q)(φ_p(K)ᵀV) equals c·(QKᵀ)^{∘p}V to float64 rounding.

Tolerance, derived rather than tuned (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1):
a computed sum of products, each value passing through at most m roundings, has error
≤ γ_m·Σ|terms| with γ_m = m·u/(1 − m·u), u = 2⁻⁵³. Both forms sum the same terms
W_f·m_f(q_i)·m_f(k_j)·v_j (the quadratic one through (q_i·k_j)^p), in different orders. Along the
longest chain a value passes through at most m = p·d + p·F + N + d_v + 4p + 8 roundings (a length-d
dot product raised to the p, degree-p monomials and their gradient sums over ≤ p·F entries, the
F- and N-term sums, the length-d_v sums of the backward pass, the weights and scales). So, element
by element, |linearised − quadratic| ≤ 2·γ_m·R where R is the same computation on |Q|, |K|, |V|
(and |c|, |row_scale|, |∂L/∂O|): it bounds Σ|terms| because |q·k| ≤ |q|·|k| and
Σ_f W_f m_f(|q|) m_f(|k|) = (|q|·|k|)^p. With N ≤ 64, d ≤ 8, p ≤ 4 this is ≤ 1e-12·R.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapa.empirics.kernels.linearised as lin
from sapa.empirics.kernels.linearised import (
    crossover_flops,
    feature_dim,
    flops,
    poly_attention_linearised,
    poly_attention_quadratic,
    symmetric_features,
    tensor_power_features,
)
from sapa.common.validate import InputError

U = 2.0**-53
F64 = torch.float64


def gamma(m: int) -> float:
    return m * U / (1 - m * U)


def chain(N: int, d: int, d_v: int, p: int, kind: str = "sym") -> int:
    return p * d + p * feature_dim(d, p, kind) + N + d_v + 4 * p + 8


def draw(shape_q, shape_k, d_v, seed=0):
    g = torch.Generator().manual_seed(seed)
    Q = torch.randn(*shape_q, generator=g, dtype=F64)
    K = torch.randn(*shape_k, generator=g, dtype=F64)
    V = torch.randn(*shape_k[:-1], d_v, generator=g, dtype=F64)
    return Q, K, V


def assert_within_bound(got, want, R, m):
    bound = 2 * gamma(m) * R
    excess = (got - want).abs() - bound
    assert float(excess.max()) <= 0, f"max excess {float(excess.max()):.3g} over 2γ_{m}·R"


CASES = [  # (leading dims, N, d, d_v, chunk)
    ((), 37, 3, 5, 8),
    ((2, 3), 29, 4, 2, 7),
    ((1,), 37, 8, 8, None),
    ((2,), 20, 1, 3, 64),  # chunk > N; d = 1
    ((), 64, 5, 4, 16),    # chunk divides N
]


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lead,N,d,d_v,chunk", CASES)
def test_linearised_equals_quadratic(p, causal, lead, N, d, d_v, chunk):
    Q, K, V = draw((*lead, N, d), (*lead, N, d), d_v, seed=p + 10 * N)
    row_scale = torch.arange(1, N + 1, dtype=F64).rsqrt() if causal else None
    c = 0.37
    got = poly_attention_linearised(Q, K, V, p, c, causal, row_scale, chunk=chunk)
    want = poly_attention_quadratic(Q, K, V, p, c, causal, row_scale)
    R = poly_attention_quadratic(Q.abs(), K.abs(), V.abs(), p, abs(c), causal, row_scale)
    assert got.shape == want.shape == (*lead, N, d_v)
    assert_within_bound(got, want, R, chain(N, d, d_v, p))
    rel = float((got - want).norm() / want.norm())
    assert rel <= 1e-12


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_equal_quadratic(p, causal):
    lead, N, d, d_v = (2,), 23, 4, 3
    Q, K, V = draw((*lead, N, d), (*lead, N, d), d_v, seed=p)
    G = torch.randn(*lead, N, d_v, generator=torch.Generator().manual_seed(7), dtype=F64)
    rs = torch.linspace(0.5, 2.0, N, dtype=F64)

    def grads(f, q, k, v, g):
        q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
        return torch.autograd.grad(f(q, k, v), (q, k, v), g)

    got = grads(lambda q, k, v: poly_attention_linearised(q, k, v, p, 0.5, causal, rs, chunk=5), Q, K, V, G)
    want = grads(lambda q, k, v: poly_attention_quadratic(q, k, v, p, 0.5, causal, rs), Q, K, V, G)
    ref = grads(lambda q, k, v: poly_attention_quadratic(q, k, v, p, 0.5, causal, rs), Q.abs(), K.abs(), V.abs(),
                G.abs())
    for a, b, R in zip(got, want, ref):
        assert_within_bound(a, b, R, chain(N, d, d_v, p))


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck(causal):
    """The hand-written backward against finite differences (torch.autograd.gradcheck, float64)."""
    Q, K, V = draw((1, 7, 2), (1, 7, 2), 2, seed=3)
    for x in (Q, K, V):
        x.requires_grad_()
    assert torch.autograd.gradcheck(lambda q, k, v: poly_attention_linearised(q, k, v, 3, causal=causal, chunk=3),
                                    (Q, K, V))


@pytest.mark.parametrize("gather_elems", [0, 2**40])
def test_both_monomial_builders(monkeypatch, gather_elems):
    """Slices (GATHER_ELEMS = 0) and row gathers (huge) build the same monomials and gradients."""
    monkeypatch.setattr(lin, "GATHER_ELEMS", gather_elems)
    Q, K, V = draw((2, 30, 4), (2, 30, 4), 3, seed=11)
    for causal in (False, True):
        got = poly_attention_linearised(Q, K, V, 3, causal=causal, chunk=7)
        want = poly_attention_quadratic(Q, K, V, 3, causal=causal)
        R = poly_attention_quadratic(Q.abs(), K.abs(), V.abs(), 3, causal=causal)
        assert_within_bound(got, want, R, chain(30, 4, 3, 3))
    x = Q.transpose(-1, -2).contiguous()
    plan = lin._plan(4, 3, "sym")
    m = lin._monomials(x, plan)[-1]  # (B, F, N)
    W = lin._weights(plan, x)
    phi = symmetric_features(Q, 3)  # (B, N, F)
    assert torch.allclose((W.sqrt() * m).transpose(1, 2), phi, rtol=8 * U, atol=0)


def test_full_features_and_cross_attention():
    """features="full" (F = d^p) and N ≠ M without a mask."""
    Q, _, _ = draw((2, 11, 3), (2, 11, 3), 2, seed=5)
    _, K, V = draw((2, 17, 3), (2, 17, 3), 4, seed=6)
    for kind in ("full", "sym"):
        got = poly_attention_linearised(Q, K, V, 3, 2.0, features=kind, chunk=6)
        want = poly_attention_quadratic(Q, K, V, 3, 2.0)
        R = poly_attention_quadratic(Q.abs(), K.abs(), V.abs(), 3, 2.0)
        assert got.shape == (2, 11, 4)
        assert_within_bound(got, want, R, chain(17, 3, 4, 3, kind))


def test_blocks_never_hold_n_by_f(monkeypatch):
    """Memory: every monomial block the kernel builds has at most ``chunk`` tokens (never N × F)."""
    seen = []
    real = lin._monomials

    def spy(xT, plan):
        seen.append(xT.shape[-1])
        return real(xT, plan)

    monkeypatch.setattr(lin, "_monomials", spy)
    Q, K, V = draw((1, 50, 3), (1, 50, 3), 2)
    for x in (Q, K, V):
        x.requires_grad_()
    for causal in (False, True):
        out = poly_attention_linearised(Q, K, V, 2, causal=causal, chunk=8)
        out.sum().backward()
    assert seen and max(seen) <= 8


def test_row_scale_as_a_list():
    Q, K, V = draw((5, 2), (5, 2), 2)
    r = [1.0, 0.5, 0.25, 2.0, 1.0]
    assert torch.equal(poly_attention_linearised(Q, K, V, 1, row_scale=r, chunk=2),
                       poly_attention_linearised(Q, K, V, 1, row_scale=torch.tensor(r, dtype=F64), chunk=2))


def test_c_and_row_scale_tensors_get_gradients():
    Q, K, V = draw((7, 2), (7, 2), 2)
    c = torch.tensor(0.5, dtype=F64, requires_grad=True)
    r = torch.rand(7, dtype=F64, requires_grad=True)
    poly_attention_linearised(Q, K, V, 2, c, row_scale=r).sum().backward()
    assert c.grad is not None and r.grad is not None and r.grad.shape == (7,)


# ----------------------------------------------------------------------------- features


@pytest.mark.parametrize("d,p", [(1, 1), (1, 4), (2, 2), (3, 3), (5, 2), (4, 4), (8, 3)])
def test_feature_dims(d, p):
    x = torch.randn(2, d, dtype=F64)
    assert symmetric_features(x, p).shape == (2, math.comb(d + p - 1, p)) == (2, feature_dim(d, p, "sym"))
    assert tensor_power_features(x, p).shape == (2, d**p) == (2, feature_dim(d, p, "full"))
    if p >= 2 and d >= 2:
        assert feature_dim(d, p, "sym") < feature_dim(d, p, "full")
    else:
        assert feature_dim(d, p, "sym") == feature_dim(d, p, "full")
    assert feature_dim(64, 3) == 45760  # the x³ features of a d = 64 head


@settings(max_examples=60, deadline=None)
@given(d=st.integers(1, 6), p=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_feature_inner_product_is_power(d, p, seed):
    """φ(q)·φ(k) = (q·k)^p for both feature maps, within 2γ_m·(|q|·|k|)^p, m = F + p·d + 3p + 8."""
    g = torch.Generator().manual_seed(seed)
    q, k = (3 * torch.randn(d, generator=g, dtype=F64) for _ in range(2))
    want = (q @ k) ** p
    scale = (q.abs() @ k.abs()) ** p
    for f, kind in ((symmetric_features, "sym"), (tensor_power_features, "full")):
        got = f(q, p) @ f(k, p)
        m = feature_dim(d, p, kind) + p * d + 3 * p + 8
        assert abs(float(got - want)) <= 2 * gamma(m) * float(scale)


@settings(max_examples=40, deadline=None)
@given(N=st.integers(1, 20), M=st.integers(1, 20), d=st.integers(1, 4), d_v=st.integers(1, 3), p=st.integers(1, 4),
       causal=st.booleans(), chunk=st.integers(1, 25), seed=st.integers(0, 2**31 - 1))
def test_property_linearised_equals_quadratic(N, M, d, d_v, p, causal, chunk, seed):
    M = N if causal else M
    Q, K, V = draw((N, d), (M, d), d_v, seed=seed)
    got = poly_attention_linearised(Q, K, V, p, causal=causal, chunk=chunk)
    want = poly_attention_quadratic(Q, K, V, p, causal=causal)
    R = poly_attention_quadratic(Q.abs(), K.abs(), V.abs(), p, causal=causal)
    assert_within_bound(got, want, R, chain(max(N, M), d, d_v, p))


# ----------------------------------------------------------------------------- flops


def test_flop_counts_small_case():
    # N = 4, d = 2, d_v = 3, p = 2: quadratic N²(d + d_v + p − 1) + N·d_v = 16·6 + 12
    assert flops("quadratic", 4, 2, 3, 2) == 108
    # F = 3, monomials Σ_{k≥2} F_k = 3, h = F·d_v + 3 = 12: 2·N·h + F·d_v + N·d_v = 96 + 9 + 12
    assert flops("linearised", 4, 2, 3, 2) == 117


@pytest.mark.parametrize("d,p", [(4, 1), (8, 2), (6, 3), (16, 2)])
def test_crossover_flops_matches_counts(d, p):
    n = crossover_flops(d, p)
    lo, hi = math.floor(n), math.floor(n) + 1
    assert flops("linearised", hi, d, d, p) < flops("quadratic", hi, d, d, p)
    if lo >= 1:
        assert flops("linearised", lo, d, d, p) >= flops("quadratic", lo, d, d, p)


@pytest.mark.parametrize("d,p,C", [(4, 2, 8), (8, 2, 4), (3, 3, 2), (2, 1, 16)])
def test_crossover_flops_causal(d, p, C):
    n = crossover_flops(d, p, causal=True, chunk=C)
    assert n >= C
    Ns = [C * k for k in range(1, 400)]
    cheaper = [N for N in Ns if flops("linearised", N, d, d, p, True, chunk=C) < flops("quadratic", N, d, d, p, True)]
    assert cheaper and min(cheaper) > n - 1e-9
    assert all(N in cheaper for N in Ns if N > n + 1e-9)


def test_crossover_grows_like_d_to_the_p():
    assert crossover_flops(64, 1) < 70 < crossover_flops(64, 2) < 2200 < crossover_flops(64, 3)
    assert 45_000 < crossover_flops(64, 3) < 47_000


# ----------------------------------------------------------------------------- validation


def _one_line(exc) -> bool:
    return "\n" not in str(exc.value) and str(exc.value)


@pytest.mark.parametrize("kwargs,needle", [
    ({"p": 0}, "p must be a positive integer"),
    ({"p": -2}, "p must be a positive integer"),
    ({"p": 1.5}, "p must be a positive integer"),
    ({"p": True}, "p must be a positive integer"),
    ({"c": float("nan")}, "c must be a finite number"),
    ({"c": "x"}, "c must be a finite number"),
    ({"row_scale": torch.ones(5, dtype=F64)}, "row_scale must have shape"),
    ({"row_scale": torch.full((6,), float("nan"), dtype=F64)}, "row_scale contains NaN"),
    ({"causal": "yes"}, "causal must be True or False"),
    ({"row_scale": ["a"] * 6}, "row_scale must be a numeric vector"),
])
def test_bad_arguments(kwargs, needle):
    Q, K, V = draw((6, 3), (6, 3), 2)
    args = {"p": 2, **kwargs}
    for f in (poly_attention_quadratic, poly_attention_linearised):
        with pytest.raises(InputError, match=needle) as exc:
            f(Q, K, V, **args)
        assert _one_line(exc)


def test_bad_tensors():
    Q, K, V = draw((2, 6, 3), (2, 6, 3), 2)
    bad = {
        "must be a torch.Tensor": (Q.numpy(), K, V),
        "floating-point": (Q.long(), K, V),
        "K .* must share M|must share M": (Q, K, V[:, :5]),
        "must share d": (Q, K[..., :2], V),
        "leading": (Q, K[:1], V[:1]),
        "Q contains NaN": (Q.clone().fill_(float("nan")), K, V),
        "V contains NaN or inf": (Q, K, V.clone().fill_(float("inf"))),
        "at least 2": (Q[0, 0], K, V),
        "empty": (Q[:, :0], K, V),
        "dtype and device": (Q.float(), K, V),
    }
    for needle, (q, k, v) in bad.items():
        with pytest.raises(InputError, match=needle) as exc:
            poly_attention_linearised(q, k, v, 2)
        assert _one_line(exc)
    with pytest.raises(InputError, match="causal mask needs as many queries"):
        poly_attention_quadratic(Q[:, :4], K, V, 2, causal=True)
    with pytest.raises(InputError, match="features must be one of"):
        poly_attention_linearised(Q, K, V, 2, features="poly")
    with pytest.raises(InputError, match="chunk must be a positive integer"):
        poly_attention_linearised(Q, K, V, 2, chunk=0)
    with pytest.raises(InputError, match="x contains NaN"):
        symmetric_features(torch.tensor([float("nan")]), 2)
    with pytest.raises(InputError, match="p must be a positive integer"):
        tensor_power_features(torch.ones(3), 0)
    with pytest.raises(InputError, match="form must be one of"):
        flops("cubic", 4, 2, 2, 2)
    with pytest.raises(InputError, match="N must be a positive integer"):
        flops("quadratic", 0, 2, 2, 2)
