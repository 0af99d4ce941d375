"""Tests for `sapa audit` with a column index j, relative-position logits (`sapa/api/relpos.py`)."""

from __future__ import annotations

import json

import pytest

from sapa.cli import main
from sapa.theory.activation_audit import model_spec, parse_activation
from sapa.theory.relpos import relpos_profile
from sapa.empirics.experiments.activation_sampling import sample_norms, z_scores

ALIBI = "sigmoid(x/8 - log(N) - 0.1*Abs(i - j))"


def _audit(capsys, args):
    code = main(["audit", *args, "--logit-scale", "S"])  # the expressions here write the 1/√d themselves (x/8)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.slow
def test_acceptance_command_runs_and_its_numbers_agree_with_monte_carlo(capsys):
    code, out, _ = _audit(capsys, [ALIBI, "--model", "iid", "--N", "64", "--D", "768", "--d", "64", "--json"])
    assert code == 0
    r = json.loads(out)
    assert r["method"] == "quadrature" and r["error_bound"] < 1e-8 and r["verdict"] in (
        "HOLDS", "HOLDS_IN_REGIME", "FAILS", "UNDETERMINED")
    act, spec = parse_activation(ALIBI), model_spec("iid", 768, 64)
    mc = sample_norms(act, spec, 64, 300, seed=3, key=("cli",))
    z = z_scores(mc, {"fro2": r["expected_fro2"], "jac_s2": r["expected_jac_s_fro2"], "jac2": r["expected_jac_fro2"]})
    assert max(abs(v["z"]) for v in z.values()) < 3.2905267314919255, z
    assert r["asymptotic_exponent"] == pytest.approx(-0.5, abs=0.02)  # each row's mass is O(1/N): ‖φ‖² ~ 1/N


def test_audit_with_j_is_exact_for_a_polynomial_and_matches_the_profile(capsys):
    text = "exp(-0.1*Abs(i - j))*x**3/sqrt(N)"
    code, out, _ = _audit(capsys, [text, "--model", "iid", "--N", "32", "--D", "32", "--d", "16", "--json"])
    assert code == 0
    r = json.loads(out)
    tot = relpos_profile(parse_activation(text), model_spec("iid", 32, 16), 32).totals(32)
    assert r["method"] == "exact" and r["expected_fro2"] == tot["fro"] and r["expected_jac_fro2"] == tot["jac"]
    assert r["verdict_statement"].count("4096") == 1


def test_row_normalised_alibi_goes_to_monte_carlo(capsys):
    code, out, _ = _audit(capsys, ["exp(x/8 - 0.1*Abs(i - j))", "--normalize", "row", "--model", "iid", "--N", "16",
                                   "--D", "16", "--d", "8", "--trials", "8", "--json"])
    assert code == 0
    r = json.loads(out)
    assert r["method"] == "monte_carlo" and r["worst_case_exponent"] == 0.5


def test_too_large_n_with_j_is_a_one_line_error(capsys):
    code, out, err = _audit(capsys, [ALIBI, "--N", "5000", "--json"])
    assert code == 2 and out == "" and "4096" in err and err.count("\n") == 1
