"""Tests for ``sapa audit`` (sapa/cli.py → sapa/audit.py): JSON contract, reproduction of ``sapa exact``, bad input."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from sapa.cli import main

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


@pytest.mark.parametrize("model,extra", [("iid", []), ("tied", []), ("corr", ["--rho", "0.5"]), ("paper", [])])
def test_x3_over_sqrt_n_reproduces_sapa_exact(capsys, model, extra):
    size = ["--N", "196", "--d", "64"] + ([] if model == "paper" else ["--D", "768"])
    a = _json(["audit", "x**3/sqrt(N)", "--model", model] + size + extra, capsys)
    e = _json(["exact", "--p", "3", "--model", model] + size + extra, capsys)
    assert set(KEYS) <= set(a) and a["method"] == "exact" and a["error_bound"] == 0.0
    assert a["growth_exponent"] == e["growth_exponent"]           # bit for bit: the same code path
    assert a["growth_exponent_jac"] == e["growth_exponent_jac"]
    assert a["crossover_n"] == e["crossover_n"]
    assert a["expected_fro2"] == pytest.approx(e["expected_fro2"] / 196, rel=2e-16)
    assert a["expected_jac_fro2"] == pytest.approx(e["expected_jac_fro2"] / 196, rel=2e-16)
    assert a["verdict"] in ("HOLDS", "HOLDS_LOOSE", "HOLDS_IN_REGIME", "FAILS", "UNDETERMINED")


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
    q = _json(["audit", "1/(1 + exp(-(x/8 - log(N))))", "--D", "64", "--N", "64"], capsys)
    assert q["method"] == "quadrature" and 0 < q["error_bound"] < 1e-4 and q["worst_case_exponent"] < 1e-6
    m = _json(["audit", "exp(x/8)", "--normalize", "row", "--D", "32", "--d", "8", "--N", "16", "--trials", "40"],
              capsys)
    assert m["method"] == "monte_carlo" and m["crossover_n"] is None and m["constant_vs_softmax"] <= 1
    assert m["mc_grid"] == [8, 16, 32] and m["worst_case_exponent"] == 0.0


def test_text_output(capsys):
    code, out, _ = _run(["audit", "Max(x/8, 0)/N", "--D", "64"], capsys)
    assert code == 0 and "verdict" in out and "method            : quadrature" in out


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
    from common.deadline import deadline

    with deadline(120, "the test"):  # huge literal powers and mpmath once ran for hours
        code, out, err = _run(argv, capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sapa: error: ") and "the test took longer" not in err, err


_ = Fraction  # exact comparisons live in tests/theory/test_audit.py
