"""Tests for `sapa/ledger.py` and `sapa/claims/`: every DESIGN.md claim present, verdicts computed."""

from __future__ import annotations

from pathlib import Path

import pytest

from sapa.budget import QUICK, budget_named
from sapa.claims import all_claims
from sapa.ledger import VERDICTS, Claim, Context, Outcome, ledger_dict, provenance, run_claim
from theory.validate import InputError

DESIGN_IDS = [
    "thm4.1-norm", "thm4.1-jacobian", "thm4.2-linear", "cor4.3-linear-scaled", "thm4.4-cubic",
    "cor4.5-cubic-scaled", "fig1-scale-direction", "causal-masking", "other-powers", "overhead", "norm-vs-accuracy",
]


def test_every_design_claim_is_in_the_ledger_in_order():
    ids = [c.id for c in all_claims()]
    assert ids[: len(DESIGN_IDS)] == DESIGN_IDS or set(DESIGN_IDS) <= set(ids)
    assert len(ids) == len(set(ids))


def test_every_claim_has_a_contract_or_an_owner():
    for c in all_claims():
        assert c.check is not None and c.contract is not None or c.owner, c.id


def test_pending_claim_is_undetermined_with_owner(tmp_path):
    e = run_claim(Claim(id="x", statement="s", owner="issue #99"), Context(QUICK, tmp_path))
    assert e.verdict == "UNDETERMINED"
    assert e.evidence == {"status": "not yet examined", "owner": "issue #99"}


def test_outcome_rejects_unknown_verdict():
    with pytest.raises(ValueError):
        Outcome(verdict="PROBABLY", evidence={}, tested_statement="")


def test_budget_lookup():
    assert budget_named("quick", 3).seed == 3
    with pytest.raises(InputError):
        budget_named("huge")


def test_softmax_claims_verdicts_are_computed(tmp_path):
    ctx = Context(QUICK, Path(tmp_path))
    claims = {c.id: c for c in all_claims()}
    norm = run_claim(claims["thm4.1-norm"], ctx)
    jac = run_claim(claims["thm4.1-jacobian"], ctx)
    assert norm.verdict in VERDICTS and jac.verdict in VERDICTS
    # The evidence that drives the rule: bound respected, supremum approached.
    assert norm.evidence["max_observed_ratio"] <= 1 + 1e-12
    assert norm.evidence["supremum_approached_ratio"] > 1 - 1e-9
    assert norm.verdict == "HOLDS"
    ev = jac.evidence
    assert ev["sharp_constant"] == 0.5 and ev["paper_constant"] == 2.0
    assert ev["max_observed_row_jacobian_fro"] <= 0.5 + 1e-12
    assert ev["max_observed_matrix_ratio_autograd"] <= 0.5 + 1e-12
    assert ev["ratio_at_two_point_rows_autograd"] == pytest.approx(0.5, abs=1e-12)
    assert jac.verdict == "HOLDS_LOOSE"
    assert "√N/2" in jac.corrected_claim
    d = ledger_dict([norm, jac], provenance(QUICK, 0.0))
    assert [c["id"] for c in d["claims"]] == ["thm4.1-norm", "thm4.1-jacobian"]
