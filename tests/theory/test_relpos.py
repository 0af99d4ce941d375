"""Tests for `theory/relpos.py`: position-dependent φ(x, N, i, j) against Monte Carlo and the j-free closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.common.validate import InputError
from sapa.empirics.experiments.activation_sampling import sample_norms, z_scores
from sapa.theory.activation_audit import model_spec, parse_activation, profile
from sapa.theory.relpos import RelposProfile, is_relative, relpos_profile, relpos_worst_case

Z99_9 = 3.2905267314919255  # two-sided 99.9 %: three quantities per case, a fixed seed

ALIBI = "sigmoid(x/8 - log(N) - 0.1*Abs(i - j))"


def _agree(act, spec, N, trials, seed=0):
    prof = relpos_profile(act, spec, N)
    tot = prof.totals(N)
    mc = sample_norms(act, spec, N, trials, seed=seed, key=("test_relpos",))
    z = z_scores(mc, {"fro2": tot["fro"], "jac_s2": tot["jac_s"], "jac2": tot["jac"]})
    return prof, {q: v["z"] for q, v in z.items()}


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_alibi_sigmoid_agrees_with_monte_carlo_on_a_small_head(mask):
    """Quadrature vs 300 Monte Carlo draws at N = 64 on a D = 128, d = 32 head. The acceptance sizes (D = 768) run
    under ``-m slow``: their draws allocate ~0.4 GB and take ~5 CPU-s a mask, for the same comparison."""
    prof, z = _agree(parse_activation(ALIBI, "none", mask), model_spec("iid", 128, 32), 64, 300)
    assert prof.method == "quadrature" and prof.relative
    assert max(abs(v) for v in z.values()) < Z99_9, z


@pytest.mark.slow
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_alibi_sigmoid_at_the_acceptance_sizes_agrees_with_monte_carlo(mask):
    # sapa audit ALIBI --model iid --N 64 --D 768 --d 64: the numbers of that command are these totals
    prof, z = _agree(parse_activation(ALIBI, "none", mask), model_spec("iid", 768, 64), 64, 300)
    assert prof.method == "quadrature" and prof.relative
    assert max(abs(v) for v in z.values()) < Z99_9, z


@pytest.mark.parametrize("text,model", [
    ("exp(-0.1*Abs(i - j))*x**3/sqrt(N)", "iid"),        # polynomial in x, position-dependent coefficient
    ("(x - 0.1*Abs(i - j))**2/sqrt(N)", "tied"),         # additive ALiBi bias inside x^p
    ("x*(1 + j/N)/sqrt(i)", "iid"),                      # i and j separately (not relative)
])
def test_polynomials_with_position_coefficients_are_exact_and_agree_with_monte_carlo(text, model):
    act = parse_activation(text, "none", "causal" if "sqrt(i)" in text else "none")
    prof, z = _agree(act, model_spec(model, 32, 16), 24, 800)
    assert prof.method == "exact"
    assert max(abs(v) for v in z.values()) < Z99_9, z
    quad = RelposProfile(act, prof.spec, "quadrature", prof.relative, nz=256).totals(24)
    ex = prof.totals(24)
    for q in ex:  # exact moments vs the quadrature nodes: two independent routes
        assert quad[q] == pytest.approx(ex[q], rel=1e-8)


@pytest.mark.parametrize("text", ["sigmoid(x/8 - log(N))", "x**3/sqrt(N)"])
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_sums_over_pairs_reproduce_the_closed_forms_without_j(text, mask):
    act = parse_activation(text, "none", mask)
    spec = model_spec("iid", 64, 16)
    ref = profile(act, spec).totals([37])
    for relative in (True, False):
        got = RelposProfile(act, spec, "quadrature", relative, nz=256).totals(37)
        for q in got:
            assert got[q] == pytest.approx(float(ref[q][0]), rel=1e-9)


def test_relative_detection_and_worst_case():
    assert is_relative(parse_activation(ALIBI).expr)
    assert not is_relative(parse_activation("x*(1 + j/N)").expr)
    wc = relpos_worst_case(parse_activation(ALIBI))
    assert wc["exponent_is_exact"] and wc["exponent"] == pytest.approx(-0.5, abs=0.01)
    row = relpos_worst_case(parse_activation("exp(x/8 - 0.1*Abs(i - j))", "row"))
    assert row["exponent"] == 0.5 and row["witness_exponent"] == pytest.approx(0.5, abs=0.01)
    assert row["exponent_is_exact"]  # the bias concentrates rows: equal logits attain √N


def test_row_normalised_alibi_parses_and_is_refused_by_the_closed_form():
    act = parse_activation("exp(x/8 - 0.5*Abs(i - j))", "row")  # φ underflows far from the diagonal: still valid
    with pytest.raises(InputError, match="Monte Carlo"):
        relpos_profile(act, model_spec("iid", 16, 8), 8)
    with pytest.raises(InputError, match="column index"):
        relpos_profile(parse_activation("x"), model_spec("iid", 16, 8), 8)
    mc = sample_norms(act, model_spec("iid", 16, 8), 8, 4)
    assert np.all(mc.fro2 <= 8 * (1 + 1e-12)) and math.isfinite(float(mc.jac2.mean()))


def test_worst_case_of_a_non_relative_position_term_is_bounded_and_exact():
    """`audit "j*x"` took 8.6 GB ((pairs, 64) at N = 4 096) then failed; now blocked, at the largest doubling in budget.

    For |s| ≤ 1, max_s (j·s)² = j², so Σ over i ≠ j of j² plus the diagonal Σ i² is n·n(n+1)(2n+1)/6 (brute force).
    Memory: at most four blocks of CHUNK float64 values (128 MiB), not the (pairs, 64) array of before.
    """
    import tracemalloc

    from sapa.theory.activation import parse_activation
    from sapa.theory.relpos import relpos_worst_case

    tracemalloc.start()
    try:
        wc = relpos_worst_case(parse_activation("j*x"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    n1, n2 = wc["exponent_between_n"]
    assert (n1, n2) == (256, 512)
    S = lambda n: n * n * (n + 1) * (2 * n + 1) / 6  # noqa: E731
    assert wc["exponent"] == pytest.approx(0.5 * math.log(S(n2) / S(n1)) / math.log(2), rel=1e-12)
    # blocks of CHUNK = 2²² pairs × values: the block's φ values, their squares and one temporary of φ are the
    # block-sized float64 arrays alive at once (measured 99 MiB); four such blocks bound it (also kills relpos.py
    # line 43 CHUNK 2**22 → 2**23, whose blocks need 150 MiB)
    assert peak < 4 * 8 * 2**22, peak
