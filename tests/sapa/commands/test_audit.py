"""Tests for ``sapa audit`` (sapa/cli.py → sapa/commands/audit.py): JSON contract, reproduction of ``sapa exact``, bad input."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from sapa.cli import main
from sapa.theory.gaussian import gaussian_expectation

KEYS = ("expected_fro2", "expected_jac_s_fro2", "expected_jac_fro2", "growth_exponent", "crossover_n",
        "worst_case_exponent", "verdict", "method", "error_bound")


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _json(argv, capsys):
    code, out, err = _run(argv + ["--json"], capsys)
    assert code == 0, err
    return json.loads(out)


def _brute_moments(model: str) -> tuple[sp.Rational, sp.Rational]:
    """(E S_12⁶, E S_11⁶) at D = 2, d = 1, σ² = 1/D, by expanding the degree-12 polynomial in the Gaussian entries
    (sapa.theory.gaussian.gaussian_expectation: E z^{2k} = (2k−1)!!), independent of the audit's cumulant recursions."""
    a, b, q, g = (sp.symbols(f"{c}0:2") for c in "abqg")
    dot = lambda u, v: sum(s * t for s, t in zip(u, v))  # noqa: E731
    if model == "paper":  # S = A Bᵀ, rows a_i, b_j ~ N(0, 1) (d = 1): S_12 = a_1 b_2, S_11 = a_1 b_1
        s12, s11, zs = a[0] * b[1], a[0] * b[0], [a[0], b[0], b[1]]
    else:  # S_ij = x_iᵀ Q Kᵀ x_j, x = a (token 1), b (token 2); Q = σq, K = σk
        k = {"iid": g, "tied": q, "corr": [q[0] / 2 + sp.sqrt(3) / 2 * g[0], q[1] / 2 + sp.sqrt(3) / 2 * g[1]]}[model]
        s12, s11 = dot(a, q) * dot(k, b) / 2, dot(a, q) * dot(k, a) / 2
        zs = [*a, *b, *q, *g]
    # S⁶ multiplied out as a polynomial over Q(√3) (3× faster than expanding the expression; the same coefficients)
    return tuple(gaussian_expectation(sp.Poly(s, *zs, extension=True) ** 6, zs) for s in (s12, s11))


@pytest.mark.parametrize("model,extra", [("iid", []), ("tied", []), ("corr", ["--rho", "0.5"]), ("paper", [])])
def test_x3_over_sqrt_n_against_brute_force_expectations(capsys, model, extra):
    N = 5
    size = ["--N", str(N), "--d", "1"] + ([] if model == "paper" else ["--D", "2"])
    a = _json(["audit", "x**3/sqrt(N)", "--model", model] + size + extra, capsys)
    m12, m11 = _brute_moments(model)
    fro2 = (N * N * m12 if model == "paper" else N * (N - 1) * m12 + N * m11) / N  # E‖S^{∘3}/√N‖²_F
    assert set(KEYS) <= set(a) and a["method"] == "exact" and a["error_bound"] == 0.0
    assert a["expected_fro2"] == pytest.approx(float(fro2), rel=1e-13)
    if model != "paper":  # ½ d log((N−1)m12 + m11)/d log N, and N* = 1 + m11/m12
        assert a["growth_exponent"] == pytest.approx(float(N * m12 / ((N - 1) * m12 + m11)) / 2, rel=1e-12)
        assert a["crossover_n"] == pytest.approx(float(1 + m11 / m12), rel=1e-12)
    else:  # N² m12 / N: exactly linear in N, exponent ½
        assert a["growth_exponent"] == pytest.approx(0.5, abs=1e-12)
    # The verdict from these numbers by the rule's documented thresholds: the local exponent of √E‖φ‖² rises
    # to ½ from below (sup ≤ ½ < ½ + TOL), so HOLDS exactly when √(E‖φ‖²/N) ≤ K, FAILS when above.
    from sapa.rules.like_softmax import K

    ratio = math.sqrt(float(fro2) / N)
    assert a["constant_vs_softmax"] == pytest.approx(ratio, rel=1e-13)
    assert a["verdict"] == ("HOLDS" if ratio <= K else "FAILS"), (a["verdict"], ratio)


def test_audit_and_exact_agree_on_vit_base(capsys):
    # the two commands on one model at ViT-Base size; their shared numbers are checked independently above
    size = ["--N", "196", "--d", "64", "--D", "768"]
    a = _json(["audit", "x**3/sqrt(N)", "--logit-scale", "S"] + size, capsys)
    e = _json(["exact", "--p", "3", "--model", "iid"] + size, capsys)
    assert a["expected_fro2"] == pytest.approx(e["expected_fro2"] / 196, rel=2e-16)
    assert a["crossover_n"] == e["crossover_n"]
    s = _json(["audit", "x**3/sqrt(N)"] + size, capsys)  # the default S/√d: the same moments × d^(−p), p = 3
    assert s["logit_scale"] == "S/sqrt(d)" and s["crossover_n"] == e["crossover_n"]
    assert s["expected_fro2"] == pytest.approx(e["at_logit_scale_s_over_sqrt_d"]["expected_fro2"] / 196, rel=2e-15)


def test_default_is_vit_base_iid(capsys):
    a = _json(["audit", "x**3/sqrt(N)"], capsys)
    assert (a["model"], a["n"], a["d_model"], a["d_head"]) == ("iid", 196, 768, 64)
    assert a["named_sizes"]["ViT-B"]["growth_exponent"] == a["growth_exponent"]


def test_shared_model_with_w(capsys, tmp_path):
    W = np.array([[1.0, 0.5, 0.0], [0.0, -1.0, 0.25], [0.5, 0.0, 2.0]])
    np.save(tmp_path / "W.npy", W)
    a = _json(["audit", "x**3/sqrt(N)", "--model", "shared", "--w", str(tmp_path / "W.npy"), "--N", "50"], capsys)
    e = _json(["exact", "--p", "3", "--model", "shared", "--w", str(tmp_path / "W.npy"), "--N", "50"], capsys)
    assert a["crossover_n"] == e["crossover_n"] and a["growth_exponent"] == e["growth_exponent"]
    q = _json(["audit", "tanh(x/4)", "--model", "shared", "--w", str(tmp_path / "W.npy"), "--N", "50"], capsys)
    assert q["method"] == "quadrature" and q["error_bound"] < 1e-2  # rank-3 W_s: tensor Gauss–Hermite diagonal


def test_quadrature_and_monte_carlo_methods(capsys):
    q = _json(["audit", "1/(1 + exp(-(x/8 - log(N))))", "--D", "64", "--N", "64", "--logit-scale", "S"], capsys)
    assert q["method"] == "quadrature" and 0 < q["error_bound"] < 1e-4 and q["worst_case_exponent"] < 1e-6
    m = _json(["audit", "exp(x/8)", "--normalize", "row", "--D", "32", "--d", "8", "--N", "16", "--trials", "40",
               "--logit-scale", "S"], capsys)
    assert m["method"] == "monte_carlo" and m["crossover_n"] is None and m["constant_vs_softmax"] <= 1
    assert m["mc_grid"] == [8, 16, 32] and m["worst_case_exponent"] == 0.0


def test_text_output(capsys):
    code, out, _ = _run(["audit", "Max(x/8, 0)/N", "--D", "64"], capsys)
    assert code == 0 and "verdict" in out and re.search(r"^method\s+: quadrature", out, re.M)


def test_text_output_names_why_a_value_is_missing(capsys):
    """Monte Carlo has no closed form in N: the text says so where the JSON has null, never prints None."""
    code, out, _ = _run(["audit", "exp(x/8)", "--normalize", "row", "--D", "32", "--d", "8", "--N", "16",
                         "--trials", "20", "--logit-scale", "S"], capsys)
    assert code == 0 and "None" not in out
    assert re.search(r"^  crossover N\*.*: — \(Monte Carlo: no closed form in N\)$", out, re.M)
    assert re.search(r"^  worst case of ‖∂φ/∂X‖_F\s+: — \(no bound derived", out, re.M)
    keys = [line.split(" : ")[0] for line in out.splitlines() if line.startswith("  ") and " : " in line]
    assert len({len(k) for k in keys[:5]}) == 1  # the first block's keys padded to one width: values in one column


@pytest.mark.parametrize("argv", [
    ["audit", "foo(x)"],
    ["audit", "x*d"],
    ["audit", "exp(x)"],
    ["audit", "sqrt(x)"],
    ["audit", "log(x)/N"],
    ["audit", "x*10**400"],
    ["audit", "N**N*x"],
    ["audit", "x**3", "--sigma", "1e300"],
    ["audit", "x**3", "--sigma", "1e-300"],
    ["audit", "9**9**9*x"],
    ["audit", "2**2**40*x"],
    ["audit", "exp(exp(exp(x)))"],
    ["audit", "sqrt(100 - x)"],
    ["audit", "x**(10**10)"],
    ["audit", "exp(x/8)", "--normalize", "row", "--N", "100000"],
    ["audit", "exp(x/8)", "--normalize", "row", "--N", "1000000000"],
    ["audit", "exp(x/8)", "--normalize", "row", "--trials", "1000000000"],
    ["audit", "x/sqrt(i)", "--N", "100000000000"],
    ["audit", "softmax(x)"],
    ["audit", "x**3", "--normalize", "row"],
    ["audit", "__import__('os').system('true')"],
    ["audit", "x", "--model", "shared"],
    ["audit", "x", "--model", "corr", "--rho", "3"],
    ["audit", "x", "--N", "0"],
    ["audit", "x", "--mask", "diagonal"],
    ["audit", "x", "--w", "W.npy"],
    ["audit"],
])
def test_bad_input_one_line_exit_2(capsys, argv):
    from sapa.common.deadline import deadline

    with deadline(120, "the test"):  # huge literal powers and mpmath once ran for hours
        code, out, err = _run(argv, capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sapa: error: ") and "the test took longer" not in err, err


_ = Fraction  # exact comparisons live in tests/theory/test_activation_audit.py


@pytest.mark.parametrize("scale,model,rate,size,ratio", [
    ("S", "iid", "HOLDS", "FAILS", 2092.058), ("S", "tied", "HOLDS", "FAILS", 23955.398),
    ("S/sqrt(d)", "iid", "HOLDS", "HOLDS", 4.0860), ("S/sqrt(d)", "tied", "HOLDS", "FAILS", 46.788)])
def test_rate_and_size_are_separate_readings_with_the_convention(capsys, scale, model, rate, size, ratio):
    """x³/√N: the rate holds under both conventions; its size is 8³ = 512× smaller with S/√d (the same moments)."""
    a = _json(["audit", "x**3/sqrt(N)", "--model", model, "--logit-scale", scale], capsys)
    assert a["logit_scale"] == scale and a["activation"] == "x**3/sqrt(N)"
    assert (a["readings"]["rate"]["verdict"], a["readings"]["size"]["verdict"]) == (rate, size)
    assert a["rate_verdict"] == rate and a["size_verdict"] == size and a["size_factor"] == 10.0
    assert a["constant_vs_softmax"] == pytest.approx(ratio, rel=1e-4)
    assert a["verdict"] == ("HOLDS" if size == "HOLDS" else "FAILS")
    assert a["verdict_why"] == ("holds on rate and size" if size == "HOLDS" else "fails on size")


def test_size_factor_and_the_text_output_name_the_convention(capsys):
    a = _json(["audit", "x**3/sqrt(N)", "--model", "tied", "--logit-scale", "S/sqrt(d)", "--size-factor", "50"], capsys)
    assert a["size_factor"] == 50.0 and a["size_verdict"] == "HOLDS" and a["verdict"] == "HOLDS"
    code, out, _ = _run(["audit", "x/sqrt(N)", "--logit-scale", "S/sqrt(d)"], capsys)
    assert code == 0 and "logit convention : S/sqrt(d)" in out and "size reading" in out and "rate reading" in out
    code, _, err = _run(["audit", "x", "--size-factor", "0"], capsys)
    assert code == 2 and err.startswith("sapa: error:") and "positive factor" in err


def test_exact_and_norms_say_their_convention(capsys, tmp_path):
    e = _json(["exact", "--p", "3", "--model", "iid", "--N", "196", "--D", "768", "--d", "64"], capsys)
    assert e["logit_scale"] == "S"
    s = e["at_logit_scale_s_over_sqrt_d"]
    assert s["expected_fro2"] == pytest.approx(e["expected_fro2"] / 64**3, rel=1e-15)
    assert s["crossover_n"] == e["crossover_n"]
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((5, 3)))
    np.save(tmp_path / "w.npy", rng.standard_normal((3, 3)))
    n = _json(["norms", "--x", str(tmp_path / "x.npy"), "--w", str(tmp_path / "w.npy"), "--activation", "poly"], capsys)
    assert n["logit_scale"] == "S"


@pytest.mark.parametrize("expr, how", [("x**3/sqrt(N)", "moments over N = 2…2²⁰ (closed form or quadrature)"),
                                       ("x/(N*(1 + abs(i - j)))", "sums over the pairs (i, j)")])
def test_a_long_audit_says_it_is_running_and_how(capsys, monkeypatch, expr, how):
    import functools
    import threading

    import sapa.common.progress as progress
    import sapa.commands.audit_conventions as C

    said, say = threading.Event(), progress.say
    monkeypatch.setattr(progress, "say", lambda *a, **k: (say(*a, **k), said.set()))
    monkeypatch.setattr(progress, "stage", functools.partial(progress.stage, every_s=0.2))
    # the audit lasts until the stage has spoken (not a fixed 0.7 s, which a loaded machine could outlast silently)
    monkeypatch.setattr(C, "audit_both", lambda *a, **k: (said.wait(120), {"activation": expr})[1])
    assert main(["audit", expr, "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out) == {"activation": expr}
    lines = cap.err.splitlines()
    assert lines and all(re.fullmatch(rf"sapa audit {re.escape(expr)}: running \d+ s, no estimate \({re.escape(how)}\)",
                                      ln) for ln in lines)


def test_a_pole_in_n_is_reported_as_an_infinite_expectation_there(capsys):
    """`audit "x/(N-1000)"` said HOLDS_IN_REGIME with two contradictory maxima, never that E‖φ‖² = ∞ at N = 1000."""
    r = _json(["audit", "x/(N-1000)"], capsys)
    assert r["verdict"] == "FAILS" and r["poles"] == [["N", 1000]]
    assert r["infinite_because"] == ["φ has a pole at N = 1000"]
    assert r["readings"]["rate"]["verdict"] == "FAILS" and "N = 1000" in r["readings"]["rate"]["why"]
    r = _json(["audit", "x/(i-5)"], capsys)
    assert r["verdict"] == "FAILS" and "every N ≥ 5 (at i = 5)" in r["infinite_because"][0]
    code, out, err = _run(["audit", "x/(N-1000.5)", "--json"], capsys)  # finite at every integer N: audited as usual
    assert code == 0 and "poles" not in json.loads(out)
    assert "RuntimeWarning" not in err and "lambdifygenerated" not in err  # the generated code's warnings: silent


@pytest.mark.parametrize("expr", ["x/(N-1000)", "x/(i-5)", "1/x"])
def test_an_infinite_expectation_has_no_matching_scale(capsys, expr):
    """`audit "x/(N-1000)"` printed "scale c that brings it to √N : 0" where every other number was undefined: no
    c > 0 brings an infinite E‖φ‖² to N (c = √(N / ∞) = 0 would bring it to 0·∞)."""
    assert _json(["audit", expr], capsys)["matching_scale"] is None
    code, out, _ = _run(["audit", expr], capsys)
    line = next(x for x in out.splitlines() if "scale c that brings it to √N" in x)
    assert code == 0 and line.split(":", 1)[1].strip().startswith("— (")


@pytest.mark.parametrize("fam,expr,extra", [("x3_sqrtN", "x**3/sqrt(N)", []),
                                            ("poly4_row", "x**4", ["--normalize", "row"]),
                                            ("x3_sqrti", "x**3/sqrt(i)", ["--mask", "causal"])])
def test_a_family_id_audits_its_row_of_the_families_table(capsys, fam, expr, extra):
    """``sapa audit FAMILY`` is ``sapa audit EXPR`` with the row's expression, normalisation and mask."""
    small = ["--N", "16", "--D", "16", "--d", "8", "--trials", "8"]
    by_id, by_expr = _json(["audit", fam] + small, capsys), _json(["audit", expr] + small + extra, capsys)
    assert {k: v for k, v in by_id.items() if k != "seconds"} == {k: v for k, v in by_expr.items() if k != "seconds"}


def test_a_family_with_a_free_parameter_asks_for_a_number(capsys):
    code, _, err = _run(["audit", "x_alpha"], capsys)
    assert code == 2 and "free parameter alpha" in err and "'x/alpha'" in err


def test_help_lists_every_symbol_the_parser_accepts(capsys):
    """`sapa audit --help` omitted j: the list is sapa.theory.symbols.SYMBOLS, the names the parser accepts."""
    from sapa.theory.activation import parse_activation
    from sapa.theory.symbols import SYMBOLS

    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    for sym, meaning in SYMBOLS:
        assert f"{sym} ({meaning})" in helptext
        parse_activation(f"x + {sym}/1000" if str(sym) != "x" else "x")  # each one is accepted
    with pytest.raises(Exception, match="unknown symbol 'k'"):
        parse_activation("x*k")


def test_a_monte_carlo_verdict_names_the_n_it_estimated_the_rate_at(capsys):
    """`exp(x)` row-normalised said "for N = 16…2^20" where it estimated the rate at N/2, N, 2N only."""
    from sapa.commands.audit_activation import mc_grid

    a = _json(["audit", "exp(x)", "--normalize", "row", "--D", "16", "--d", "4", "--N", "12", "--trials", "8"], capsys)
    grid = a["mc_grid"]
    assert a["method"] == "monte_carlo" and grid == list(mc_grid(12)) == [6, 12, 24]
    assert a["readings"]["rate"]["estimated_at"] == grid
    assert "at N = 6, 12, 24 (Monte Carlo)" in a["verdict_statement"] and "2^20" not in a["verdict_statement"]
    assert a["readings"]["rate"]["why"].endswith("estimated from Monte Carlo at N = 6, 12, 24 only")
    e = _json(["audit", "x**3/sqrt(N)"], capsys)  # exact: the profile from N_min to 2^20, as computed
    assert e["readings"]["rate"]["judged_range"] == [16, 2**20] and "for N = 16…2^20" in e["verdict_statement"]
