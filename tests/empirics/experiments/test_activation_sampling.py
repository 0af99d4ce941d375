"""Tests for `empirics/experiments/activation_sampling.py`: exact kernels against autograd, and Monte Carlo against sapa.theory.activation_audit.

The kernels take φ and φ' from the sympy expression; autograd (torch.autograd.functional.jacobian,
float64) differentiates the same φ written in torch. Monte Carlo means must agree with the exact /
quadrature expectations within 4 standard errors (two-sided p ≈ 6e-5 per comparison, so the file's
~50 comparisons fail by chance with probability < 0.4 %) plus the quadrature's stated error bound.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
import torch

from sapa.empirics.kernels.activation_fns import activation_functions
from sapa.empirics.experiments import activation_sampling as sampling
from sapa.empirics.experiments.activation_sampling import (draw_norms, geometry, geometry_paper, geometry_qk, sample_fro2,
                                                          sample_norms, z_scores)
from sapa.common.validate import InputError
from sapa.theory.activation_audit import N_, i_, model_spec, parse_activation, profile, x_


def _tmax(a, b):
    return torch.maximum(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64))


TORCH_FUNCS = [{"Max": _tmax, "max": _tmax, "Heaviside": lambda a: (a > 0).double()}, "torch"]


def _torch_phi(act):
    g = sp.lambdify((x_, N_, i_), act.expr, TORCH_FUNCS)

    def phi(S):
        N = S.shape[0]
        i = torch.arange(1, N + 1, dtype=torch.float64)[:, None]
        F = g(S, torch.tensor(float(N), dtype=torch.float64), i) * torch.ones_like(S)
        if act.mask == "causal":
            F = F * torch.tril(torch.ones(N, N, dtype=torch.float64))
        if act.normalize == "row":
            F = F / F.sum(1, keepdim=True)
        return F

    return phi


CASES = [("x**3/sqrt(N)", "none", "none"), ("(1 + x)**2/i", "none", "causal"),
         ("1/(1 + exp(-(x - log(N))))", "none", "none"), ("Max(x, 0)/N", "none", "causal"),
         ("exp(x/2)", "row", "none"), ("exp(x/2)", "row", "causal"), ("(x/2)**4", "row", "none"),
         ("(x/2)**4 + 1/(1 + exp(-x))", "row", "causal")]


@pytest.mark.parametrize("text,norm,mask", CASES)
def test_kernels_match_autograd_shared_x(text, norm, mask):
    rng = np.random.default_rng(3)
    N, D = 6, 4
    X, W = rng.standard_normal((N, D)), rng.standard_normal((D, D)) / 2
    act = parse_activation(text, norm, mask)
    phi = _torch_phi(act)
    Xt, Wt = torch.tensor(X), torch.tensor(W)
    P = phi(Xt @ Wt @ Xt.T)
    JX = torch.autograd.functional.jacobian(lambda Z: phi(Z @ Wt @ Z.T), Xt)
    JS = torch.autograd.functional.jacobian(phi, Xt @ Wt @ Xt.T)
    fro2, js2, jx2 = draw_norms(act, activation_functions(act), geometry(X[None], W), paper=False)
    assert fro2[0] == pytest.approx(float((P**2).sum()), rel=1e-12)
    assert js2[0] == pytest.approx(float((JS**2).sum()), rel=1e-12)
    assert jx2[0] == pytest.approx(float((JX**2).sum()), rel=1e-12)


@pytest.mark.parametrize("text,norm,mask", CASES[::2])
def test_kernels_match_autograd_paper_model(text, norm, mask):
    rng = np.random.default_rng(4)
    N, d = 5, 3
    A, B = rng.standard_normal((N, d)), rng.standard_normal((N, d))
    act = parse_activation(text, norm, mask)
    phi = _torch_phi(act)
    At, Bt = torch.tensor(A), torch.tensor(B)
    JA, JB = torch.autograd.functional.jacobian(lambda a, b: phi(a @ b.T), (At, Bt))
    fro2, _, jx2 = draw_norms(act, activation_functions(act), geometry_paper(A[None], B[None]), paper=True)
    assert fro2[0] == pytest.approx(float((phi(At @ Bt.T) ** 2).sum()), rel=1e-12)
    assert jx2[0] == pytest.approx(float((JA**2).sum() + (JB**2).sum()), rel=1e-12)


def test_qk_geometry_equals_the_full_one():
    rng = np.random.default_rng(5)
    X, Q, K = rng.standard_normal((2, 7, 6)), rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 6, 3))
    g1, g2 = geometry(X, Q @ K.transpose(0, 2, 1)), geometry_qk(X, Q, K)
    for f in ("S", "ny2", "nz2", "yz", "YY", "V"):
        assert np.allclose(getattr(g1, f), getattr(g2, f), rtol=1e-12, atol=1e-12), f


def test_softmax_is_evaluated_stably():
    act = parse_activation("exp(x)", "row")
    S = np.array([[[800.0, 0.0], [-900.0, 1000.0]]])
    fake = geometry(np.eye(2)[None], np.eye(2))
    fake = type(fake)(S, fake.ny2, fake.nz2, fake.yz, fake.YY, fake.V)
    fro2, _, _ = draw_norms(act, activation_functions(act), fake, paper=False)
    assert fro2[0] == pytest.approx(2.0)  # both rows one-hot


@pytest.mark.parametrize("text,mask", [("x**2/sqrt(N)", "none"), ("Max(x/4, 0)/N", "causal"),
                                       ("1/(1 + exp(-(x/4 - log(N))))", "none"), ("tanh(x/4)/sqrt(i)", "causal")])
@pytest.mark.parametrize("model", ["iid", "tied", "corr", "paper"])
def test_monte_carlo_agrees_with_exact_and_quadrature(text, mask, model):
    act = parse_activation(text, mask=mask)
    spec = model_spec(model, None if model == "paper" else 16, 8, rho=0.5)
    prof = profile(act, spec)
    tot, err = prof.totals([12]), prof.errors([12])
    mc = sample_norms(act, spec, 12, 3000, seed=11)
    z = z_scores(mc, {"fro2": tot["fro"][0], "jac_s2": tot["jac_s"][0], "jac2": tot["jac"][0]})
    # sampling error (4 se) plus the quadrature's own a-posteriori error bound (0 for exact polynomials)
    for q, k in (("fro2", "fro"), ("jac_s2", "jac_s"), ("jac2", "jac")):
        v = z[q]
        assert abs(v["mean"] - v["expected"]) < 4 * v["se"] + err[k] * abs(v["expected"]), (q, v, err[k])


def test_sampling_is_seeded_and_batch_independent():
    act = parse_activation("x/sqrt(N)")
    spec = model_spec("iid", 8, 4)
    a, b = sample_norms(act, spec, 10, 20, seed=1), sample_norms(act, spec, 10, 20, seed=1)
    assert np.array_equal(a.fro2, b.fro2)
    assert not np.array_equal(a.fro2, sample_norms(act, spec, 10, 20, seed=2).fro2)


@pytest.mark.parametrize("text, norm, mask", [("x**3/sqrt(N)", "none", "none"), ("Max(x, 0)**2/N", "none", "causal"),
                                              ("exp(x/8)", "row", "none"), ("exp(x/8 - Abs(i - j)/4)", "row", "causal"),
                                              ("x**2", "row", "none"), ("1 + tanh(x)", "row", "causal")])
@pytest.mark.parametrize("model", ["paper", "iid", "tied", "corr", "shared"])
def test_the_norm_alone_is_the_norm_of_the_full_draws_bit_for_bit(monkeypatch, text, norm, mask, model):
    """sample_fro2 (no φ', no Gram products) reads the same draws as sample_norms and sums them in the same order, through
    log φ (exp) or φ itself (x², 1 + tanh), over several batches (CHUNK_ELEMS lowered) and over one."""
    W = np.random.default_rng(0).standard_normal((6, 6)) / 6 if model == "shared" else None
    act, spec = parse_activation(text, norm, mask=mask), model_spec(model, 6, 3, rho=0.5, W=W)
    for chunk in (sampling.CHUNK_ELEMS, 6 * 3 * 5 * 3):  # one batch; batches of 3 draws at N = 5
        monkeypatch.setattr(sampling, "CHUNK_ELEMS", chunk)
        full = sample_norms(act, spec, 5, 11, seed=4, key=("k",))
        alone = sample_fro2(act, spec, 5, 11, seed=4, key=("k",))
        assert alone.shape == (11,) and np.array_equal(alone, full.fro2)  # equal by construction: the same operations
    assert not np.array_equal(alone, sample_fro2(act, spec, 5, 11, seed=5, key=("k",)))


def test_the_norm_alone_refuses_a_vanishing_row_sum_as_the_full_draws_do():
    act, spec = parse_activation("Max(x, 0)", "row"), model_spec("iid", 4, 2)  # a row of 2 negative logits: 0/0
    for sample in (sample_norms, sample_fro2):
        with pytest.raises(InputError, match="‖φ‖² is not finite in float64 for 'Max.*at N = 2"):
            sample(act, spec, 2, 40, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("text", ["Max(x/8, 0)/N", "1/(1 + exp(-(x/8 - log(N))))", "tanh(x/8)/sqrt(N)"])
@pytest.mark.parametrize("model", ["iid", "tied", "corr"])
def test_monte_carlo_agrees_at_vit_base_sizes(text, model):
    act = parse_activation(text)
    spec = model_spec(model, 768, 64, rho=0.5)
    prof = profile(act, spec)
    tot, err = prof.totals([64]), prof.errors([64])
    mc = sample_norms(act, spec, 64, 400, seed=21)
    z = z_scores(mc, {"fro2": tot["fro"][0], "jac_s2": tot["jac_s"][0], "jac2": tot["jac"][0]})
    for q, k in (("fro2", "fro"), ("jac_s2", "jac_s"), ("jac2", "jac")):
        v = z[q]
        assert abs(v["mean"] - v["expected"]) < 4 * v["se"] + err[k] * abs(v["expected"]), (q, v)


# --------------------------------------------------------------------------- the comparison experiment


def test_audit_compare_result_is_typed_and_round_trips(tmp_path):
    import dataclasses

    from sapa.common import figdata
    from sapa.empirics.experiments.activation_sampling import ACTIVATIONS, MODELS, AuditCompareResult, Curve, run_audit_compare

    r = run_audit_compare(Ns=(8, 64, 128), mc_Ns=(8, 16), trials=4)
    assert isinstance(r, AuditCompareResult) and set(r.curves) == {(a[0], m) for a in ACTIVATIONS for m in MODELS}
    assert all(isinstance(c, Curve) for c in r.curves.values())
    from sapa.theory.families import family

    mc = r.curves[(family("softmax").label, "iid")]
    assert mc.method == "monte_carlo" and np.allclose(mc.exponent_N, [np.sqrt(8 * 16)])
    exact = r.curves[(family("x_sqrtN").label, "tied")]
    assert exact.exponent_N is None and exact.N.shape == exact.exponent.shape == exact.constant.shape == (3,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.trials = 1
    figdata.write(tmp_path / "x.json", r.to_json(), "stem")
    back = AuditCompareResult.from_json(figdata.read(tmp_path / "x.json")[0])
    assert figdata.encode(back.to_json()) == figdata.encode(r.to_json())
    assert np.array_equal(back.curves[(family("x_sqrtN").label, "tied")].constant, exact.constant)
