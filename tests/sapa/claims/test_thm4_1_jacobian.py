"""Tests for `sapa/claims/thm4_1_jacobian.py`: Eq. 4.2's 2√N is HOLDS_LOOSE (sharp √N/2), and no bound w.r.t. X.

The sharp constant is checked against a finite-difference Jacobian of numpy's softmax, independent of sapa's sympy
derivation and searches. The entry runs once per session (the ``softmax_verify`` fixture of tests/conftest.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.ledger import ledger_dict, provenance, reading_keyed
from sapa.rules.bound import BoundEvidence
from sapa.rules.bound import decide as decide_bound


@pytest.fixture(scope="module")
def entries(softmax_verify):
    from sapa.commands.ledger_merge import ledger_entries

    code, _, err, _, ledger = softmax_verify
    assert code == 0, err
    return ledger_entries(ledger)


def _fd_row_jacobian_fro(s: np.ndarray, h: float = 1e-6) -> float:
    """‖∂softmax(s)/∂s‖_F by central differences of numpy's softmax (float64)."""
    def soft(v):
        e = np.exp(v - v.max())
        return e / e.sum()

    J = np.stack([(soft(s + h * e) - soft(s - h * e)) / (2 * h) for e in np.eye(s.size)], axis=1)  # (n, n)
    return float(np.linalg.norm(J))


def test_the_paper_constant_is_four_times_the_sharp_one_numpy_finds(entries):
    jac = next(e for e in entries if e.id == "thm4.1-jacobian")
    assert jac.verdict == "HOLDS_LOOSE"  # the headline on the quick budget: 2√N is true, the sharp constant is ½
    ev = jac.evidence
    # independent: a row with mass ½ on two entries (equal logits, N = 2) has ‖J‖_F = ½; random rows stay below
    assert _fd_row_jacobian_fro(np.zeros(2)) == pytest.approx(0.5, abs=1e-8)
    rng = np.random.default_rng(3)
    assert max(_fd_row_jacobian_fro(rng.standard_normal(n) * t) for n in (3, 8) for t in (0.1, 1, 10)) < 0.5
    assert ev["sharp_constant"] == pytest.approx(_fd_row_jacobian_fro(np.zeros(2)), abs=1e-8)
    assert ev["paper_constant"] == 2.0 and ev["looseness_factor"] == 4.0
    assert max(ev["max_observed_row_jacobian_fro"], ev["max_observed_matrix_ratio_autograd"]) <= 0.5 + 1e-12
    assert ev["ratio_at_two_point_rows_autograd"] == pytest.approx(0.5, abs=1e-12)
    worst = max(ev["max_observed_row_jacobian_fro"], ev["max_observed_matrix_ratio_autograd"])
    assert reading_keyed(jac.readings, "wrt", "S")["verdict"] == decide_bound(BoundEvidence(2.0, 0.5, worst))
    assert "√N/2" in jac.corrected_claim and "4× loose" in jac.corrected_claim


def test_with_respect_to_x_no_bound_exists(entries):
    jac = next(e for e in entries if e.id == "thm4.1-jacobian")
    ev = jac.evidence
    assert reading_keyed(jac.readings, "wrt", "X")["verdict"] == "FAILS" == decide_bound(
        BoundEvidence(2.0, math.inf, ev["reading_wrt_X"]["max_ratio"]))
    # the tied-pair witness keeps rows at the two-point maximiser: its ratio grows linearly in the weight scale
    w = ev["reading_wrt_X"]["tied_pair_witness"]
    assert w[-1]["jac_fro_over_sqrtN"] / w[-2]["jac_fro_over_sqrtN"] == pytest.approx(
        w[-1]["weight_scale"] / w[-2]["weight_scale"], rel=0.01)
    ctrl = jac.falsifiability["negative_control"]
    assert ctrl["verdict"] == "FAILS" and ctrl["control_ok"]


def test_both_entries_serialise_with_their_keys(entries):
    from sapa.budget import QUICK

    d = ledger_dict(entries, provenance(QUICK, 0.0), {"first_pass_coverage": None, "series": 0})
    assert [c["id"] for c in d["claims"]] == ["thm4.1-norm", "thm4.1-jacobian"]
    for c in d["claims"]:
        assert c["kind"] == "claim" and c["rule"]["name"] == "bound" and c["readings"]
        for r in c["readings"]:
            assert {"name", "statement", "verdict", "rule", "calibration", "key"} <= set(r) and r["key"]
