"""Softmax norms at logit gaps from 0 to 10⁴ (values down to 10^{−4000}) against the 60-digit mpmath reference.

Issue 52 (1): past a gap of ~200 the row Jacobians' squares underflowed (‖∂P/∂X‖_F read 0 from gap ~370 on, and
below 1e−308 everywhere beyond ~745). Both kernels (``attention_norms`` of :mod:`sapa.empirics.kernels.norms`, used by the
ledger, and :func:`sapa.empirics.kernels.expr_norms.expr_norms`, used by ``sapa norms``) now carry near-one-hot rows
divided by t_i = e^{−gap_i}: they must give the value to 1e−10 relative where it is a normal float64, and its log₁₀
to 1e−10 absolute always.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from sapa.empirics.kernels.expr_norms import expr_norms, layer_from_w
from sapa.empirics.kernels.norms import attention_norms
from sapa.theory.families import softmax
from tests.empirics.kernels.softmax_any_gap_reference import softmax_reference
from sapa.theory.activation_audit import parse_activation

TINY = 2.2250738585072014e-308  # float64's smallest normal number
GAPS = (0.0, 30.0, 200.0, 300.0, 400.0, 800.0, 2000.0, 1e4)
LOG_ATOL = 1e-10


def gap_case(seed: int, gap: float, mask: str = "none"):
    """(X, W): N, D ∈ [2, 4], X with unit rows, W scaled so that the smallest row logit gap of S = X W Xᵀ is ``gap``
    (gap 0: two tied logits in every row).

    Drawn again until max (|X||W||X|ᵀ) ≤ CONDITION·gap: float64 forms S with errors ≤ γ_{2D}·|X||W||X|ᵀ, and
    e^{−gap} moves by that much relative (at gap 5 000: ≤ 1e−11), which no kernel working from the float64 inputs
    can avoid; a draw with near-tied rows scaled up to the gap would make it 1e−9 (the reference is exact)."""
    rng = np.random.default_rng([52, seed, int(gap), mask == "causal"])
    while True:
        N, D = int(rng.integers(2, 5)), int(rng.integers(2, 5))
        X = rng.standard_normal((N, D))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        W = rng.standard_normal((D, D))
        if gap == 0.0:  # X = [e_1, e_1, ...]: every row of S = X W Xᵀ is constant (ties), J ≠ 0 through W
            X = np.zeros((N, D))
            X[:, 0] = 1.0
            return X, W
        S = X @ W @ X.T
        gaps = [np.subtract(*np.sort(S[i, : (i + 1 if mask == "causal" else N)])[::-1][:2]) for i in range(N)
                if mask == "none" or i >= 1]
        W = W * (gap / min(gaps))
        if np.max(np.abs(X) @ np.abs(W) @ np.abs(X).T) <= CONDITION * gap:
            return X, W


CONDITION = 8.0


def check(value, log10_value, ref_log10, what: str) -> None:
    """log₁₀ to LOG_ATOL always; where the true value is a normal float64, the value to 1e−10 relative (never 0)."""
    ref = float(ref_log10)
    if ref == -math.inf:
        assert value == 0.0 or value is None, (what, value)
        return
    assert log10_value is not None and abs(log10_value - ref) <= LOG_ATOL, (what, log10_value, ref)
    if ref >= math.log10(TINY):
        true = float(mpmath.power(10, ref_log10))
        assert value is not None and abs(value - true) <= 1e-10 * true, (what, value, true)


CASES = [(s, g, "none") for s, g in enumerate(GAPS)] + [(10 + s, g, "causal") for s, g in enumerate((30.0, 400.0, 2000.0))]


@pytest.mark.parametrize("seed,gap,mask", CASES)
def test_both_kernels_match_mpmath_at_any_gap(seed, gap, mask):
    X, W = gap_case(seed, gap, mask)
    ref = softmax_reference(X, W, 1.0, mask)
    r = attention_norms(X, W, softmax(), mask)
    for v, lg, key in ((r.fro, r.log10_fro, "fro"), (r.jac_fro, r.log10_jac_fro, "jac_fro"),
                       (r.jac_s_fro, r.log10_jac_s_fro, "jac_s_fro")):
        check(v, lg, ref[key], f"attention_norms {key}")
    e = expr_norms(X, layer_from_w(W), parse_activation("exp(x)", "row", mask))
    for v, lg, key in ((e.fro[0], e.log10_fro[0], "fro"), (e.jac_fro[0], e.log10_jac_fro[0], "jac_fro"),
                       (e.jac_s_fro[0], e.log10_jac_s_fro[0], "jac_s_fro")):
        check(v, lg, ref[key], f"expr_norms {key}")


def test_the_issue_examples():
    """X = I₂, W = [[0, −g], [−g, 0]]: g = 400 read 0 though ‖J_X‖_F = 3.753e−171; g = 1000 is below float64."""
    for g, want in ((300.0, 7.56628e-128), (400.0, 3.753e-171)):
        W = np.array([[0.0, -g], [-g, 0.0]])
        r = attention_norms(np.eye(2), W, softmax())
        assert r.jac_fro == pytest.approx(want, rel=1e-4)
    W = np.array([[0.0, -1000.0], [-1000.0, 0.0]])
    ref = softmax_reference(np.eye(2), W)
    for r in (attention_norms(np.eye(2), W, softmax()), attention_norms(np.eye(2), W * 0.5,
                                                                                        softmax(2.0))):
        assert abs(r.log10_jac_fro - float(ref["jac_fro"])) <= LOG_ATOL


def test_batched_and_paper_model_keep_the_log_at_large_gaps():
    """The batched kernel (the ledger's sweeps) and the paper model carry the same row scale."""
    from sapa.empirics.kernels.norms import attention_norms_batched, paper_model_norms

    X, W = gap_case(3, 2000.0)
    ref = softmax_reference(X, W)
    b = attention_norms_batched(np.stack([X, X]), W, softmax())
    assert float(b["jac_fro"][0]) == 0.0 or float(b["jac_fro"][0]) < 1e-300  # below float64 here
    assert abs(float(b["log10_jac_fro"][1]) - float(ref["jac_fro"])) <= LOG_ATOL
    one = attention_norms(X, W, softmax())
    assert abs(one.log10_jac_fro - float(ref["jac_fro"])) <= LOG_ATOL
    p = paper_model_norms(X, X @ W.T, softmax())  # S = A Bᵀ = X W Xᵀ, A and B independent
    assert math.isfinite(p.log10_jac_fro) and p.log10_jac_fro < -800


@pytest.mark.parametrize("g,scaled", [(300.0, False), (400.0, True), (2000.0, True), (1e4, True)])
def test_the_library_bracket_holds_sigma_1(g, scaled):
    """certified_spectral_norm on LayerOperator products (the library path of `sapa norms --spectral` and the real-model
    Lipschitz bracket): at g = 300 RRᵀ (of order ‖J‖⁴ ≈ 1e−510) underflowed and the "converged" bracket excluded σ₁;
    beyond the double range the operator is applied as 2^{−e}·J (``log2_scale``)."""
    from sapa.empirics.kernels.expr_norms import LayerOperator
    from sapa.empirics.kernels.spectral import certified_spectral_norm

    X, W = np.eye(2), np.array([[0.0, -g], [-g, 0.0]])
    ref = softmax_reference(X, W)
    act = parse_activation("exp(x)", "row")
    r = expr_norms(X, layer_from_w(W), act)
    e = round(r.log10_jac_fro[0] / math.log10(2)) if scaled else 0
    op = LayerOperator(X, layer_from_w(W), act, head=0, log2_scale=e)
    b = certified_spectral_norm(op.matvec, op.rmatvec, op.in_shape, 10 ** (2 * (r.log10_jac_fro[0] - e * math.log10(2))),
                                gram=op.gram)
    lo, up = math.log10(b.lower) + e * math.log10(2), math.log10(b.upper) + e * math.log10(2)
    s1 = float(ref["sigma1"])
    assert b.converged and lo - 8 * np.finfo(float).eps * abs(s1) <= s1 <= up + 8 * np.finfo(float).eps * abs(s1)
    assert abs(math.log10(b.estimate) + e * math.log10(2) - s1) <= LOG_ATOL


def test_an_underflowed_frobenius_norm_is_refused_not_called_converged():
    """‖J‖²_F ≈ 1e−342 reads 0 in float64: the bracket was [0, 0] "converged"; now an error names the remedy."""
    from sapa.common.validate import InputError
    from sapa.empirics.kernels.expr_norms import LayerOperator
    from sapa.empirics.kernels.spectral import certified_spectral_norm

    W = np.array([[0.0, -400.0], [-400.0, 0.0]])
    op = LayerOperator(np.eye(2), layer_from_w(W), parse_activation("exp(x)", "row"), head=0)
    with pytest.raises(InputError, match="underflowed"):
        certified_spectral_norm(op.matvec, op.rmatvec, op.in_shape, 0.0)
    zero = certified_spectral_norm(lambda v: 0 * v, lambda u: 0 * u, (2, 2), 0.0)  # a true 0 stays [0, 0]
    assert (zero.lower, zero.upper, zero.converged) == (0.0, 0.0, True)
