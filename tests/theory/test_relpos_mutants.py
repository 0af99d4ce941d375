"""Mutation-testing additions for `theory/relpos.py`: the local exponents, the a-posteriori errors, the evaluation
budget (of the totals and of the worst case), the worst case's grid, witness and exactness flags.

Each test names the mutants of ``tools/mutation_sample.py`` (line, change) it kills. References are independent of
the module: closed forms summed in mpmath (50 digits), brute-force counts of the visible entries of an N×N mask,
and quadrature sums over every visible (i, j) entry written out in plain loops from the nodes of
:mod:`sapa.theory.gauss_rules` (no offset collapsing, no blocks)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import sympy as sp

from sapa.common.validate import InputError
from sapa.theory import relpos
from sapa.theory.activation import i_, j_, x_
from sapa.theory.activation_audit import model_spec, parse_activation
from sapa.theory.gauss_rules import _rules
from sapa.theory.relpos import RelposProfile, relpos_worst_case

mp.mp.dps = 50
VALUES = 402  # the worst case's s grid: linspace(−B, B, 401) and s = 0 (the docstring's "402 values")
N_ = sp.Symbol("N", positive=True)


def _lam(expr):
    return sp.lambdify((x_, N_, i_, j_), expr, "mpmath")


def test_local_exponents_are_the_centred_difference_of_the_closed_form():
    """Kills relpos.py line 160 ``round(0.02 * N)`` → ``0.02 / N``, line 161 ``max(N - k, 1)`` → ``N + k``, line 165
    ``tl[q] > 0`` → ``> 1`` and line 166 ``th / tl`` → ``th * tl``.

    φ = x·(i − j)/N³ under the causal mask: every total is (a moment) × Σ_{δ=1}^{N−1} (N − δ) δ² / N⁶
    = (a moment) × N²(N² − 1)/(12 N⁶) (the diagonal is 0), so each exponent is ½ log(T(N+k)/T(N−k))/log((N+k)/(N−k))
    with T(N) = (N² − 1)/N⁴ and the step k = max(1, round(N/50)) over integers: computed here in mpmath. The totals
    are below 1, where the exponent still exists."""
    act = parse_activation("x*(i - j)/N**3", "none", "causal")
    prof = relpos.relpos_profile(act, model_spec("iid", 16, 8), 10)
    assert prof.method == "exact"
    assert all(0 < v < 1 for v in prof.totals(10).values())
    T = lambda n: (mp.mpf(n) ** 2 - 1) / mp.mpf(n) ** 4  # noqa: E731
    for N, k in ((10, 1), (100, 2), (400, 8)):
        ref = float(mp.log(T(N + k) / T(N - k)) / (2 * mp.log(mp.mpf(N + k) / (N - k))))
        got = prof.exponents(N)
        assert set(got) == {"fro", "jac_s", "jac"}
        for q in got:
            assert got[q] == pytest.approx(ref, rel=1e-11, abs=1e-13), (N, q)
    # the derivative of ½ log T is −2 + 1/(1 − N⁻²); the centred difference is within O((k/N)²) of it
    assert prof.exponents(400)["fro"] == pytest.approx(-2 + 1 / (1 - 400.0**-2), abs=1e-3)


def test_an_exact_profile_has_zero_errors():
    """Kills relpos.py line 153 ``{"fro": 0.0, …}`` → ``1.0`` (each of the three): exact moments have no error."""
    act = parse_activation("x*(i - j)/N**3", "none", "causal")
    prof = relpos.relpos_profile(act, model_spec("iid", 16, 8), 10)
    assert prof.errors(10) == {"fro": 0.0, "jac_s": 0.0, "jac": 0.0}


def test_quadrature_totals_and_errors_match_loops_over_every_entry():
    """Kills relpos.py line 154 ``self.totals(N, 1)`` → ``totals(N, 2)`` (the fine level), and any change of the pair
    lists or of the block sums: the totals at both levels are recomputed over every visible (i, j) entry of a causal
    5×5 mask from the nodes of sapa.theory.gauss_rules, and errors = |fine − coarse|/|fine| + z_error (the docstring)."""
    act = parse_activation("sigmoid(x/8 - log(N) - 0.1*Abs(i - j))", "none", "causal")
    spec = model_spec("iid", 16, 8)
    N, nz, z_err = 5, 64, 3e-7
    prof = RelposProfile(act, spec, "quadrature", True, nz, z_err)
    f = sp.lambdify((x_, N_, i_, j_), act.expr, "numpy")
    fp = sp.lambdify((x_, N_, i_, j_), sp.diff(act.expr, x_), "numpy")
    ref = {}
    for level in (0, 1):
        r = _rules(spec, level, nz)
        tot = {"fro": 0.0, "jac_s": 0.0, "jac": 0.0}
        for i in range(1, N + 1):
            for j in range(1, i + 1):
                for q, g, nodes in (("fro", f, r.diag if i == j else r.off), ("jac_s", fp, r.diag if i == j else r.off),
                                    ("jac", fp, r.jdiag if i == j else r.joff)):
                    vals = np.asarray(g(nodes.x, float(N), float(i), float(j)), dtype=np.float64)
                    tot[q] += float(np.sum(nodes.w * vals * vals))
        ref[level] = tot
        got = prof.totals(N, level)
        for q in tot:
            assert got[q] == pytest.approx(tot[q], rel=1e-12), (level, q)
    err = prof.errors(N)
    for q in err:
        assert err[q] == pytest.approx(abs(ref[1][q] - ref[0][q]) / abs(ref[1][q]) + z_err, rel=1e-6), q
        assert err[q] > z_err


def test_quadrature_totals_refuse_beyond_the_evaluation_budget(monkeypatch):
    """Kills relpos.py line 138 ``(pairs + diagonal) × nodes`` → ``(pairs − diagonal) × nodes`` and a ``>`` → ``≥``.

    φ depends on i and j separately: at N = 6 every one of the 6² visible entries is evaluated at each node; the
    budget is set to exactly that product (accepted) and to one less (refused)."""
    act = parse_activation("sigmoid(x)*j", "none", "none")
    spec = model_spec("iid", 16, 8)
    prof = RelposProfile(act, spec, "quadrature", False, 64)
    K = _rules(spec, 1, 64).off.x.size
    monkeypatch.setattr(relpos, "EVAL_BUDGET", 36 * K)
    assert prof.totals(6)["fro"] > 0
    monkeypatch.setattr(relpos, "EVAL_BUDGET", 36 * K - 1)
    with pytest.raises(InputError, match="beyond the budget"):
        prof.totals(6)


def _visible_entries(n: int, causal: bool, relative: bool) -> int:
    """Entries the worst case evaluates per s value, counted on the N×N mask: distinct offsets i − j of the visible
    off-diagonal entries plus one diagonal (relative), or every visible off-diagonal entry plus the n diagonal ones."""
    ii, jj = np.meshgrid(np.arange(1, n + 1), np.arange(1, n + 1), indexing="ij")
    vis = (jj < ii) if causal else (jj != ii)
    if relative:
        return len(set((ii - jj)[vis].tolist())) + 1
    return int(vis.sum()) + n


@pytest.mark.parametrize("text,relative", [("x*exp(-Abs(i - j))", True), ("j*x", False)])
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_the_worst_case_takes_the_largest_doubling_within_the_budget(monkeypatch, text, relative, mask):
    """Kills relpos.py line 227 (every constant and operator of the count of visible entries: ``n − 1``, ``2(n − 1)``,
    ``n(n − 1)//2``, ``n(n − 1)``), line 228 ``off + diagonal`` → ``off − diagonal`` and line 231 ``>`` → ``≥`` (both: the
    budget test and the floor ``n2 > 4``).

    With the budget at exactly 402 values × the entries at n = 32 (counted on the mask), the exponent is taken
    between 16 and 32; one evaluation less and it is taken between 8 and 16; with no budget at all, between 2 and 4."""
    act = parse_activation(text, "none", mask)
    causal = mask == "causal"
    need = VALUES * _visible_entries(32, causal, relative)
    monkeypatch.setattr(relpos, "EVAL_BUDGET", need)
    wc = relpos_worst_case(act)
    assert wc["exponent_between_n"] == [16, 32]
    if text == "j*x" and not causal:  # max_{|s|≤1} (j s)² = j²: Σ over i ≠ j of j² plus the diagonal Σ i² = n·Σ j²
        S = lambda n: n * n * (n + 1) * (2 * n + 1) / 6  # noqa: E731
        assert wc["exponent"] == pytest.approx(0.5 * math.log(S(32) / S(16)) / math.log(2), rel=1e-12)
    monkeypatch.setattr(relpos, "EVAL_BUDGET", need - 1)
    assert relpos_worst_case(act)["exponent_between_n"] == [8, 16]
    monkeypatch.setattr(relpos, "EVAL_BUDGET", 1)  # nothing fits: the smallest doubling is 2 → 4, never 1 → 2
    assert relpos_worst_case(act)["exponent_between_n"] == [2, 4]


def test_a_relative_worst_case_is_taken_between_2048_and_4096():
    """Kills relpos.py line 230 ``n2 = 2**12`` → ``2**13``: the docstring's "between N = 2¹¹ and 2¹²" (2N − 1 offsets
    fit the budget there)."""
    wc = relpos_worst_case(parse_activation("sigmoid(x/8 - log(N) - 0.1*Abs(i - j))"))
    assert wc["exponent_between_n"] == [2048, 4096]


def test_the_witness_logit_maximises_the_first_diagonal_entry_on_the_documented_grid():
    """Kills relpos.py line 206 ``linspace(−B, B, 401)`` → ``402`` points and line 254 ``f(s, 2¹¹, 1, 1)`` → ``(2, 1)``
    and → ``(1, 2)``.

    φ = exp(−(x − 3/10 − 3(i − j)/10)²) peaks at x = 3/10 on the diagonal (at 6/10 for i − j = 1, at 0 for i − j = −1);
    3/10 = −1 + 260·(1/200) lies on the 401-point grid of step 1/200, not on a 402-point one (step 2/401)."""
    wc = relpos_worst_case(parse_activation("exp(-(x - 3/10 - 3*(i - j)/10)**2)"))
    assert wc["s_star"] == pytest.approx(0.3, abs=1e-12)


def test_a_witness_that_misses_the_bound_is_not_called_exact():
    """Kills relpos.py line 257 ``abs(e_w − e_up) < 1e-3`` → ``< 1.001``.

    φ = exp(−N(x − (i − j)/N)²): every offset δ reaches φ ≈ 1 at s = δ/N, so the bound grows like Σ (N − |δ|) ~ N²
    (exponent ≈ 1), while aligned tokens at s* = 0 keep only |δ| ≲ √N: W(N) = N + Σ_{δ≠0} (N − |δ|) e^{−2δ²/N}
    (exponent ≈ ¾), summed here in mpmath."""
    wc = relpos_worst_case(parse_activation("exp(-N*(x - (i - j)/N)**2)"))
    assert wc["s_star"] == 0.0 and wc["exponent_between_n"] == [2048, 4096]

    def W(n):
        return n + 2 * mp.fsum((n - d) * mp.exp(-2 * mp.mpf(d) ** 2 / n) for d in range(1, n))

    ref = float(mp.log(W(4096) / W(2048)) / (2 * mp.log(2)))
    assert wc["witness_exponent"] == pytest.approx(ref, rel=1e-9)
    assert wc["exponent"] == pytest.approx(1.0, abs=0.01)
    assert wc["exponent_is_exact"] is False


def test_row_normalised_witness_of_position_weights_is_summed_over_columns_one_to_n():
    """Kills relpos.py line 240 ``arange(1, n + 1.0)`` → ``arange(2, …)``, line 241 ``f(0.0, …)`` → ``f(1.0, …)`` (the
    witness is at equal logits 0) and line 248 ``abs(e_w − 0.5) < 1e-2`` → ``< 1.01``.

    φ = x² + j, row-normalised: at x = 0 row i is P_ij = j/Σ_l l, so ‖P‖²_F = n·Σj²/(Σj)² = (2/3)(2n + 1)/(n + 1)
    (exact, in mpmath); its exponent between 2¹⁰ and 2¹¹ is ≈ 2·10⁻⁴, far from ½: not exact."""
    row = relpos_worst_case(parse_activation("x**2 + j", "row"))

    def W(n):
        n = mp.mpf(n)
        return mp.mpf(2) / 3 * (2 * n + 1) / (n + 1)

    ref = float(mp.log(W(2048) / W(1024)) / (2 * mp.log(2)))
    assert row["witness_exponent"] == pytest.approx(ref, rel=1e-9)
    assert row["exponent"] == 0.5 and row["exponent_is_exact"] is False
    assert row["bracket"] == [row["witness_exponent"], 0.5]
