"""Tests for `theory/families.py`: one row per family, each usable by the audit, the kernels and the figures.

Every row of the case table (`tests/cases.py`) is checked twice, independently: the exact kernels (where the
family has one) against φ(S) built by numpy from the family's own expression, and the audit's closed form or
quadrature of E‖φ(S)‖²_F against a seeded Monte Carlo of the same expectation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from sapa.common.seeds import rng_for
from tests.cases import CASES, Case, params
from tests.tolerances import RTOL
from sapa.common.validate import InputError
from sapa.theory.families import (COMPARED, FAMILIES, FAMILY_TABLE, INV_N, INV_SQRT_N, KERNEL_KINDS, PAPER, PER_ROW,
                                  SCALE_RULES, Family, canonical_rule, family, label_of, power, resolve, row_factors,
                                  scale_factor, softmax)


def test_ids_and_labels_are_unique_and_every_scale_rule_is_named():
    assert len({f.id for f in FAMILY_TABLE}) == len(FAMILY_TABLE) == len(FAMILIES)
    assert len({f.label for f in FAMILY_TABLE}) == len(FAMILY_TABLE)  # one display name per family
    assert {f.rule for f in FAMILY_TABLE} <= set(SCALE_RULES)
    assert [c.family for c in CASES] == [f.id for f in FAMILY_TABLE]  # the case table covers every row


def test_the_training_arms_are_rows():
    arms = ("softmax", "x_sqrtN", "x3_sqrtN", "x_alpha", "x3_alpha", "x", "x3", "x_N", "x3_N", "x3_sqrti", "relu_N")
    labels = ("softmax", "x/√N", "x³/√N", "x/α*", "x³/α*", "x", "x³", "x/N", "x³/N", "x³/√i", "ReLU(x)/N")
    assert tuple(family(a).label for a in arms) == labels
    assert family("x3_sqrti").masks == ("causal",) and family("x_alpha").params == ("alpha",)


def test_kernel_kinds_and_the_compared_families():
    assert KERNEL_KINDS == ("softmax", "poly")
    assert [f.label for f in COMPARED] == ["softmax", "x/√N", "x³/√N", "ReLU(x)/N", "sigmoid(x − log N)",
                                           "row-normalised x⁴"]


@pytest.mark.parametrize("fam,logit,text", [
    ("relu_N", "x/8", "Max(x/8, 0)/N"), ("sigmoid_logN", "x/8", "1/(1 + exp(-(x/8 - log(N))))"),
    ("poly4_row", "x/8", "(x/8)**4"), ("softmax", "x/8", "exp(x/8)"), ("x3_sqrtN", "x", "x**3/sqrt(N)"),
    ("x_N", "(x/8)", "(x/8)/N")])
def test_at_logit_writes_the_substituted_expression(fam, logit, text):
    assert family(fam).at_logit(logit) == text


@pytest.mark.parametrize("fam", [f.id for f in FAMILY_TABLE])
def test_at_logit_is_the_same_function_as_a_sympy_substitution(fam):
    x, N, i, a = sp.symbols("x N i alpha")
    loc = {"x": x, "N": N, "i": i, "alpha": a, "Max": sp.Max}
    e = sp.sympify(family(fam).expr, locals=loc)
    got = sp.sympify(family(fam).at_logit("x/8"), locals=loc)
    assert sp.simplify(got - e.subs(x, x / 8)) == 0


def test_bad_rows_and_unknown_ids_are_refused():
    with pytest.raises(ValueError, match="scale rule"):
        Family("f", "x", "f", "sqrt", "me")
    with pytest.raises(ValueError, match="masks"):
        Family("f", "x", "f", "none", "me", masks=())
    with pytest.raises(ValueError, match="degree"):
        Family("f", "x", "f", "none", "me", kernel="poly")
    with pytest.raises(KeyError, match="known: softmax"):
        family("x5")
    assert label_of("x^3/sqrt(N)") == "x³/√N" and label_of("x3_N") == "x³/N" and label_of("tanh(x)") == "tanh(x)"


# --------------------------------------------------------------------------- the scale rules: one arithmetic


def test_the_causal_alias_is_one_rule():
    assert canonical_rule("dynamic_causal") == canonical_rule("inv_sqrt_i") == "inv_sqrt_i" and "inv_sqrt_i" in PER_ROW
    with pytest.raises(InputError):
        canonical_rule("bogus")


@pytest.mark.parametrize("N", [1, 7, 64])
def test_row_factors_are_the_formulas(N):
    i = np.arange(1, N + 1)
    assert np.array_equal(row_factors("inv_sqrt_i", N), 1 / np.sqrt(i))
    assert np.array_equal(row_factors("dynamic_causal", N), 1 / np.sqrt(i))
    assert np.array_equal(row_factors("inv_i", N), 1 / i)
    assert np.array_equal(row_factors(INV_SQRT_N, N), np.full(N, 1 / math.sqrt(N)))
    assert np.array_equal(row_factors("fixed", N, N_train=16), np.full(N, 0.25))
    assert np.array_equal(row_factors("const", N, c=0.5), np.full(N, 0.5))
    assert np.array_equal(row_factors("inv_sqrt_d", N, d=64), np.full(N, 0.125))
    assert np.array_equal(family("x3_sqrti").row_scale(N), 1 / np.sqrt(i))


def test_global_factors_and_missing_parameters():
    assert scale_factor(INV_SQRT_N, 256) == 1 / 16 and scale_factor("fixed", 1024, N_train=64) == 0.125
    assert scale_factor("const", 5, c=2.0) == 2.0 and scale_factor("inv_sqrt_d", 5, d=4) == 0.5
    assert scale_factor("inv_n", 8) == 0.125 and scale_factor("alpha", 8, value=4.0) == 0.25
    assert scale_factor(INV_SQRT_N, np.array([4.0, 6.25])).tolist() == [0.5, 0.4]
    for rule in ("const", "inv_sqrt_d", "fixed", "alpha", "dose", "temperature"):
        with pytest.raises(InputError):
            scale_factor(rule, 16)


def test_a_family_reads_its_own_parameters():
    assert family("x_16").const == 0.0625 and family("x3").const == 1.0 and family("x3_sqrtN").const is None
    assert family("x_16").coefficient(7) == 0.0625 and family("x3_alpha").coefficient(9, alpha=4.0) == 0.25
    assert family("x_dose").coefficient(9, c=8.0) == 0.125 and family("softmax_tau").coefficient(9, tau=0.5) == 2.0
    assert family("x3_sqrti").coefficient(9, i=4) == 0.5 and softmax(0.125).coefficient(9) == 0.125
    assert power(3, 0.5).coefficient(9) == 0.5 and power(3).p == 3 and power(1).id == "x"
    with pytest.raises(InputError):
        power(3, -1.0)


LENGTHS = [*range(1, 513), 1024, 2048, 4096]


def _study_r(rule: str, N: int, alpha: float):
    """The study arms' float32 r_i as the old StudyArm.row_coefficients computed them (torch float64, then float32)."""
    import torch

    i = torch.arange(1, N + 1, dtype=torch.float64)
    c = {"inv_sqrt_n": 1 / math.sqrt(N), "alpha": 1 / alpha, "dose": 1 / alpha, "temperature": 1 / alpha,
         "none": 1.0, "inv_n": 1 / N, "softmax": 1.0}
    return (i.rsqrt() if rule == "inv_sqrt_i" else torch.full((N,), c[rule], dtype=torch.float64)).to(torch.float32)


def test_the_scale_is_the_training_arms_float32_bytes():
    """Family.row_scale cast to float32 (what the training ensembles multiply S^p by:
    sapa.empirics.training.ensemble.row_coefficients) is bit-equal to the old arms' arithmetic (StudyArm: torch
    float64 rsqrt or 1/√N, 1/N, 1/α, then float32; MechArm: float32 1/√N)."""
    import torch

    from sapa.empirics.training.ensemble import row_coefficients
    from sapa.empirics.training.mechanism import MECH_ARMS, member_scales
    from sapa.empirics.training.study_config import ARMS

    for name, arm in ARMS.items():
        f = family(name)
        assert arm is f
        if f.kernel is None:  # an expression arm: its scale sits inside φ
            continue
        for N in LENGTHS:
            for v in ((2.0, 0.125, 3.0) if f.params else (None,)):
                kw = {f.params[0]: v} if f.params else {}
                got = torch.from_numpy(f.row_scale(N, **kw)).to(torch.float32)
                want = _study_r(f.rule, N, v if v else math.nan)
                assert torch.equal(got, want) and torch.equal(row_coefficients(f, N, v if v else math.nan), want), \
                    (name, N, v)
    for name, arm in MECH_ARMS.items():
        for N in LENGTHS:
            got = member_scales(arm, N)
            if arm.kernel == "poly":
                want = torch.full((N,), 1 / math.sqrt(N), dtype=torch.float32)
                assert torch.equal(torch.from_numpy(family(name).row_scale(N)).to(torch.float32), want), (name, N)
                assert torch.equal(got, want), (name, N)
            else:
                assert got is None


def _reference_apply(f, S, causal: bool):
    """φ(S) as the old reference models' arm (tiny_models.Arm.apply) computed it, in its op order."""
    import torch

    N = S.shape[-1]
    vis = torch.ones(N, N, dtype=torch.bool, device=S.device).tril() if causal else None
    if f.kernel == "softmax":
        if vis is not None:
            S = S.masked_fill(~vis, -math.inf)
        return torch.softmax(S, dim=-1)
    coef = 1.0 / math.sqrt(N) if f.rule == INV_SQRT_N else f.const if f.rule in ("const", "none") else 1.0  # Arm.coef
    P = S.pow(f.p) if f.p > 1 else S
    P = P * coef
    if f.rule == "inv_sqrt_i":
        P = P * torch.arange(1, N + 1, dtype=S.dtype).rsqrt().to(S.device)[:, None]
    if vis is not None:
        P = P.masked_fill(~vis, 0.0)
    return P


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_apply_is_the_reference_models_activation(dtype):
    """Family.apply on torch logits (what the reference models of sapa.empirics.training.tiny_models apply) is
    bit-equal to the old arm's op order (tiny_models.Arm.apply), and its numpy branch computes the same φ(S)."""
    import torch

    from sapa.empirics.training.tiny_models import ARMS, REFERENCE_ARMS

    g = torch.Generator().manual_seed(0)
    for name in REFERENCE_ARMS:
        assert ARMS[name] is family(name)
        for N in (1, 5, 33):
            S = torch.randn(2, N, N, generator=g, dtype=getattr(torch, dtype))  # (B, N, N) logits
            for mask in family(name).masks:
                got = family(name).apply(S, mask=mask)
                assert torch.equal(got, _reference_apply(family(name), S, mask == "causal")), (name, N, mask)
                np.testing.assert_allclose(family(name).apply(S.double().numpy(), mask=mask), got.double().numpy(),
                                           rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-30)
    with pytest.raises(InputError, match="no exact kernel"):
        family("relu_N").apply(np.ones((2, 2)))


def _phi_by_numpy(case: Case, S: np.ndarray) -> np.ndarray:
    """φ(S) (N, N) from the family's expression text alone: lambdify, then the row sum where it normalises."""
    x, N_, i_ = sp.symbols("x N i")
    f = sp.lambdify((x, N_, i_), sp.sympify(case.expr, locals={"x": x, "N": N_, "i": i_, "Max": sp.Max}), "numpy")
    n = S.shape[0]
    rows = np.arange(1, n + 1, dtype=float)[:, None] * np.ones((1, n))  # (N, N): i of each entry
    P = np.broadcast_to(np.asarray(f(S, float(n), rows), dtype=float), S.shape).copy()
    if case.mask == "causal":
        P = np.tril(P)
    if FAMILIES[case.family].normalize == "row":
        P = P / P.sum(axis=1, keepdims=True)
    return P


@pytest.mark.parametrize("case", params([c for c in CASES if FAMILIES[c.family].kernel]))
def test_the_exact_kernel_computes_the_familys_expression(case):
    """sapa.empirics.kernels.norms against numpy's φ(S) of the expression: ‖φ(S)‖_F, once given the row itself (its
    scale rule resolved by the kernel at N; a free parameter's value bound first), once given (p, c) read off the
    expression's values."""
    import torch

    from sapa.empirics.kernels.norms import at_length, attention_norms

    fam, N = FAMILIES[case.family], case.Ns[-1]
    rng = rng_for(0, "test-families", case.family)
    X, W = rng.standard_normal((N, case.D)), rng.standard_normal((case.D, case.D)) / case.D
    S = X @ W @ X.T  # (N, D) @ (D, D) @ (D, N) -> (N, N)
    want = float(np.linalg.norm(_phi_by_numpy(case, S)))
    if fam.kernel == "softmax":  # softmax(S/τ): the kernel's logit scale is 1/τ (τ = 1 for plain softmax)
        act = softmax(1.0 / case.params.get("tau", 1.0))
        row_scale = None
    else:  # c(N, i)·x^p: the coefficient at i = 1, the rows' own factors as the kernel's row scale
        c = _phi_by_numpy(case, np.ones((N, N)))  # (N, N): c(N, i) on each row
        act = power(fam.p, float(c[-1, 0]))
        row_scale = torch.tensor(c[:, 0] / c[-1, 0], dtype=torch.float64)
    got = attention_norms(X, W, act, mask=case.mask, row_scale=row_scale).fro
    assert abs(got - want) <= RTOL["float64"] * want
    row, rs = at_length(fam, N, **case.params) if fam.params else (fam, None)
    got = attention_norms(X, W, row, mask=case.mask, row_scale=rs).fro
    assert abs(got - want) <= RTOL["float64"] * want


@pytest.mark.parametrize("case", params())
def test_the_audit_of_each_family_agrees_with_a_monte_carlo(case):
    """E‖φ(S)‖²_F: closed form or quadrature (sapa.theory.activation_audit) against Monte Carlo (sapa.empirics.experiments.activation_sampling) at
    |z| < 4; a row-normalised family (no closed form) keeps every draw within softmax's bound ‖P‖²_F ≤ N."""
    from sapa.empirics.experiments.activation_sampling import sample_norms
    from sapa.theory.activation_audit import model_spec, parse_activation, profile

    fam = FAMILIES[case.family]
    act = parse_activation(case.expr, fam.normalize, case.mask)
    spec = model_spec("iid", case.D, case.d)
    for N in case.Ns:
        mc = sample_norms(act, spec, N, case.trials, seed=0, key=("test-families",))
        if fam.normalize == "row":
            assert float(mc.fro2.max()) <= N * (1 + 1e-12)
            continue
        exact = float(profile(act, spec).totals([N])["fro"][0])
        z = (float(mc.fro2.mean()) - exact) / (float(mc.fro2.std(ddof=1)) / math.sqrt(mc.fro2.size))
        assert abs(z) < 4, (N, exact, float(mc.fro2.mean()))  # heavy tails for x³: a 4σ bound, fixed seed


NEW_ROWS = (Family("x2_N", "x**2/N", "x²/N", INV_N, PAPER, p=2, kernel="poly"),  # c·x^p: an exact kernel
            Family("tanh_N", "tanh(x)/N", "tanh(x)/N", INV_N, "a test row"))  # any other φ: its expression only


@pytest.mark.parametrize("row", NEW_ROWS, ids=lambda f: f.id)
def test_a_new_row_flows_through(row, monkeypatch):
    """Adding a family is one row (docs/extending.md): a row put into the table reaches the lookups, the audit (its
    closed form or quadrature against a Monte Carlo) and the exact norm kernels (given the row itself), with no other
    type to register it in."""
    import sapa.theory.families as F
    from sapa.empirics.kernels.norms import attention_norms

    monkeypatch.setitem(F.FAMILIES, row.id, row)
    monkeypatch.setattr(F, "FAMILY_TABLE", F.FAMILY_TABLE + (row,))
    case = Case(row.id, trials=2000)
    assert family(row.id) is row and label_of(row.id) == row.label and resolve(row.id) == (row.expr, "none", "none")
    assert row.coefficient(8) == 0.125
    test_the_audit_of_each_family_agrees_with_a_monte_carlo(case)
    if row.kernel:
        test_the_exact_kernel_computes_the_familys_expression(case)
    else:
        with pytest.raises(InputError, match="no exact kernel"):
            attention_norms(np.ones((2, 2)), np.eye(2), row)
