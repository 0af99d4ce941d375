"""`sapa norms --activation softmax --spectral --json` at logit gaps from 0 to 10⁴ against 60-digit mpmath (issue 52).

Before: at gaps 215–507 the bracket said converged and excluded σ₁ (12/12), ‖J_X‖_F read 0 from ~370 on, and beyond
~800 everything read 0 with a [0, 0] bracket "converged". Now, on every case: the plain value within 1e−10 relative
where it is a normal float64, else null and listed in ``below_double_range``; log₁₀ within 1e−10 absolute; no 0 for a
nonzero norm; and every bracket called converged contains σ₁ (compared in log₁₀, to the round-off of forming a
log₁₀ of size L, a few ε·|L|).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sapa.cli import main
from tests.empirics.kernels.softmax_any_gap_reference import softmax_reference
from tests.empirics.kernels.test_softmax_any_gap import GAPS, LOG_ATOL, TINY, check, gap_case

EPS = np.finfo(float).eps
NORMS = (("fro_norm", "fro"), ("jac_s_fro_norm", "jac_s_fro"), ("jac_fro_norm", "jac_fro"))


def _cli(tmp_path, capsys, X, W, mask="none", certificate="auto") -> dict:
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "w.npy", W)
    code = main(["norms", "--x", str(tmp_path / "x.npy"), "--w", str(tmp_path / "w.npy"), "--activation", "softmax",
                 "--mask", mask, "--spectral", "--certificate", certificate, "--json"])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def check_output(out: dict, ref: dict, what) -> None:
    """The done-when of issue 52 (1) on one `sapa norms --spectral --json` object."""
    below = set(out["below_double_range"])
    for key, rk in NORMS:
        check(out[key], out[f"log10_{key}"], ref[rk], (what, key))
        assert (out[key] is None) == (key in below), (what, key)
    s1 = float(ref["sigma1"])
    for key in ("sigma_lower", "sigma_upper", "sigma_estimate", "sigma_upper_frobenius"):
        assert out[key] != 0.0 or s1 == -math.inf, (what, key)  # never 0 for a nonzero σ₁
        assert (out[key] is None) == (key in below), (what, key)
    check(out["sigma_upper_frobenius"], out["log10_sigma_upper_frobenius"], ref["jac_fro"], (what, "‖J‖_F"))
    if s1 == -math.inf:
        assert out["sigma_upper"] == 0.0 and out["converged"]
        return
    lo, up = out["log10_sigma_lower"], out["log10_sigma_upper"]
    slack = 8 * EPS * abs(s1) + 1e-15  # the round-off of a log₁₀ of size |s1| (log₁₀ v + e·log₁₀ 2)
    assert lo - slack <= s1 <= up + slack, (what, lo, s1, up)  # certified: σ₁ lies inside, converged or not
    if out["converged"]:  # the estimate to 1e−10 (the ends are widened by the logits' rounding bound, ~1e−11–1e−10)
        check(out["sigma_estimate"], out["log10_sigma_estimate"], ref["sigma1"], (what, "σ₁"))
        assert out["rel_width"] <= out["tol"]


CASES = ([(s, g, "none") for s, g in enumerate(GAPS)] + [(20 + s, g, "causal") for s, g in enumerate(GAPS[1:])]
         + [(40, 1500.0, "none"), (41, 5000.0, "none"), (42, 700.0, "causal"), (43, 250.0, "none"), (44, 3000.0, "causal")])


def test_the_default_cases_cover_the_range():
    gaps = {g for _, g, _ in CASES}
    assert len(CASES) >= 20 and {0.0, 30.0, 200.0, 300.0, 400.0, 800.0, 2000.0, 1e4} <= gaps


@pytest.mark.parametrize("seed,gap,mask", CASES)
def test_spectral_norms_match_mpmath_at_any_gap(tmp_path, capsys, seed, gap, mask):
    X, W = gap_case(seed, gap, mask)
    check_output(_cli(tmp_path, capsys, X, W, mask), softmax_reference(X, W, 1.0, mask), (seed, gap, mask))


@pytest.mark.parametrize("g", [300.0, 400.0, 1000.0])
def test_the_issue_reproducer(tmp_path, capsys, g):
    """X = I₂, W = [[0, −g], [−g, 0]]: g = 300 gave σ₁ ∈ [5.97604e−128, 5.97604e−128] "converged" (σ₁ = 6.17784e−128),
    g = 400 gave 0 everywhere; g = 1000 (values ~1e−431) gave [0, 0] "converged"."""
    X, W = np.eye(2), np.array([[0.0, -g], [-g, 0.0]])
    out = _cli(tmp_path, capsys, X, W)
    check_output(out, softmax_reference(X, W), g)
    assert out["converged"]
    if g == 300.0:
        assert out["sigma_lower"] == pytest.approx(6.17784e-128, rel=1e-5)
    if g == 1000.0:
        assert out["jac_fro_norm"] is None and "jac_fro_norm" in out["below_double_range"]


def test_the_human_output_says_below_the_double_range(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.eye(2))
    np.save(tmp_path / "w.npy", np.array([[0.0, -1000.0], [-1000.0, 0.0]]))
    for extra in ([], ["--spectral"]):
        assert main(["norms", "--x", str(tmp_path / "x.npy"), "--w", str(tmp_path / "w.npy"), "--activation", "softmax",
                     *extra]) == 0
        text = capsys.readouterr().out
        line = next(ln for ln in text.splitlines() if ln.startswith("jac_fro_norm"))
        assert "below float64's range: 10^-430.6043763" in line and " 0\n" not in text


def test_the_dense_certificate_holds_too(tmp_path, capsys):
    X, W = gap_case(7, 2000.0)
    check_output(_cli(tmp_path, capsys, X, W, certificate="dense"), softmax_reference(X, W), "dense")


@pytest.mark.slow
def test_300_random_cases_with_gaps_from_30_to_5000(tmp_path, capsys):
    """The done-when of issue 52 (1): gaps log-uniform in [30, 5000], masks mixed."""
    rng = np.random.default_rng(5252)
    for n in range(300):
        gap = float(np.exp(rng.uniform(math.log(30.0), math.log(5000.0))))
        mask = "causal" if n % 3 == 2 else "none"
        X, W = gap_case(1000 + n, gap, mask)
        check_output(_cli(tmp_path, capsys, X, W, mask), softmax_reference(X, W, 1.0, mask), (n, gap, mask))
