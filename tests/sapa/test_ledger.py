"""Tests for `sapa/ledger.py` and `sapa/claims/`: every claim of the ledger present, verdicts computed."""

from __future__ import annotations

from pathlib import Path

import pytest

from sapa.budget import QUICK, budget_named
from sapa.claims import all_claims
from sapa.ledger import VERDICTS, Claim, Context, Outcome, Reading, ledger_dict, provenance, run_claim
from sapa.rules import CLAIM_VERDICTS, QUESTION_VERDICTS, rule_named
from sapa.rules.bound import BoundEvidence
from sapa.rules.bound import decide as decide_bound
from common.validate import InputError

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


def test_softmax_claims_verdicts_are_computed(softmax_verify):
    from sapa.commands.ledger_merge import ledger_entries

    code, _, err, _, ledger = softmax_verify  # tests/conftest.py: the quick-budget checks, run once per session
    assert code == 0, err
    norm, jac = ledger_entries(ledger)
    assert (norm.id, jac.id) == ("thm4.1-norm", "thm4.1-jacobian")
    # the quick budget's expected answers: the √N bound is sharp (HOLDS); the paper's Jacobian constant 2 is four
    # times the sharp ½ that the two-point rows attain (HOLDS_LOOSE), as checked against autograd below
    assert (norm.verdict, jac.verdict) == ("HOLDS", "HOLDS_LOOSE")
    # The evidence that drives the rule: bound respected, supremum approached.
    assert norm.evidence["max_observed_ratio"] <= 1 + 1e-12
    assert norm.evidence["supremum_approached_ratio"] > 1 - 1e-9
    assert norm.verdict == decide_bound(BoundEvidence(1.0, norm.evidence["fro_sup_over_sqrtN"],
                                                     max(norm.evidence["max_observed_ratio"],
                                                         norm.evidence["supremum_approached_ratio"])))
    ev = jac.evidence
    assert ev["sharp_constant"] == 0.5 and ev["paper_constant"] == 2.0
    assert ev["max_observed_row_jacobian_fro"] <= 0.5 + 1e-12
    assert ev["max_observed_matrix_ratio_autograd"] <= 0.5 + 1e-12
    assert ev["ratio_at_two_point_rows_autograd"] == pytest.approx(0.5, abs=1e-12)
    worst = max(ev["max_observed_row_jacobian_fro"], ev["max_observed_matrix_ratio_autograd"])
    assert jac.verdict == decide_bound(BoundEvidence(2.0, ev["sharp_constant"], worst))
    assert "√N/2" in jac.corrected_claim
    wrt_x = [r for r in jac.readings if "w.r.t. X" in r["name"]][0]
    assert wrt_x["verdict"] == decide_bound(BoundEvidence(2.0, float("inf"), ev["reading_wrt_X"]["max_ratio"]))
    # the tied-pair witness keeps rows at the two-point maximiser: its ratio grows linearly in the weight scale
    w = ev["reading_wrt_X"]["tied_pair_witness"]
    assert w[-1]["jac_fro_over_sqrtN"] / w[-2]["jac_fro_over_sqrtN"] == pytest.approx(
        w[-1]["weight_scale"] / w[-2]["weight_scale"], rel=0.01)
    d = ledger_dict([norm, jac], provenance(QUICK, 0.0), {"first_pass_coverage": None, "series": 0})
    assert [c["id"] for c in d["claims"]] == ["thm4.1-norm", "thm4.1-jacobian"]
    assert "monte_carlo" in d
    for c in d["claims"]:
        assert c["kind"] == "claim" and c["rule"]["name"] == "bound" and c["readings"]
        for r in c["readings"]:
            assert {"name", "statement", "verdict", "rule", "calibration"} <= set(r)
            # bound reads exact evidence: no sampling error, so no rates are cited (only the logic check)
            assert r["calibration"]["exact"] and r["calibration"]["note"] == "exact: no sampling error"
            assert r["calibration"]["false_fails_rate"] is None
            assert r["calibration"]["decision_logic_check"]["false_fails_rate"] <= 0.01
        assert c["contract"]["logit_scale"] == "S" and c["falsifiability"]["kind"] == "by_construction" or \
            c["falsifiability"]["negative_control"]["verdict"] == "FAILS"
        assert isinstance(c["robustness"]["stable"], bool)


def test_every_entry_is_a_claim_or_a_question():
    kinds = {c.id: c.kind for c in all_claims()}
    assert set(kinds.values()) <= {"claim", "question"}
    # what only the reviews ask is a question (claims and questions apart)
    for q in ("causal-masking", "other-powers", "overhead", "norm-vs-accuracy", "real-model-regime"):
        assert kinds[q] == "question", q
    for c in ("thm4.1-norm", "thm4.1-jacobian", "thm4.2-linear", "cor4.3-linear-scaled", "thm4.4-cubic",
              "cor4.5-cubic-scaled", "fig1-scale-direction"):
        assert kinds[c] == "claim", c


def test_question_and_reading_vocabularies():
    assert set(QUESTION_VERDICTS) <= set(VERDICTS) and set(CLAIM_VERDICTS) <= set(VERDICTS)
    with pytest.raises(ValueError):
        Reading(name="n", statement="s", verdict="ANSWERED", rule="bound")  # a reading is judged, not answered
    with pytest.raises(ValueError):
        Claim(id="x", statement="s", kind="opinion")
    assert rule_named("bound").name == "bound"
    with pytest.raises(KeyError):
        rule_named("no-such-rule")


def test_a_claim_is_judged_and_a_question_answered(tmp_path):
    ctx = Context(QUICK, Path(tmp_path))
    answered = Outcome(verdict="ANSWERED", evidence={}, tested_statement="")
    holds = Outcome(verdict="HOLDS", evidence={}, tested_statement="")
    with pytest.raises(ValueError):
        run_claim(Claim(id="c", statement="s", check=lambda c: answered), ctx)
    with pytest.raises(ValueError):
        run_claim(Claim(id="q", statement="s", check=lambda c: holds, kind="question"), ctx)
    # one meaning per label (sapa.labels): ANSWERED needs readings, every one decided
    assert run_claim(Claim(id="q", statement="s", check=lambda c: answered, kind="question"), ctx).verdict == "UNDETERMINED"
    decided = Reading(name="r1", statement="s", verdict="FAILS", rule="bound")
    open_ = Reading(name="r2", statement="s", verdict="UNDETERMINED", rule="bound")
    ok = Outcome(verdict="ANSWERED", evidence={}, tested_statement="", readings=(decided,))
    assert run_claim(Claim(id="q", statement="s", check=lambda c: ok, kind="question"), ctx).verdict == "ANSWERED"
    half = Outcome(verdict="ANSWERED", evidence={}, tested_statement="", readings=(decided, open_))
    e = run_claim(Claim(id="q", statement="s", check=lambda c: half, kind="question"), ctx)
    assert e.verdict == "UNDETERMINED" and "r2" in e.evidence["label_rule"]


def test_readings_are_selected_by_their_stable_key_never_by_their_text():
    from sapa.ledger import reading_keyed, readings_keyed

    rs = [Reading(name="w.r.t. S", statement="s", verdict="HOLDS", rule="bound", key=("wrt", "S")),
          Reading(name="w.r.t. X", statement="s", verdict="FAILS", rule="bound", key=["wrt", "X"])]
    assert rs[1].key == ("wrt", "X")  # a list is kept as a tuple
    assert reading_keyed(rs, "wrt", "X").verdict == "FAILS"
    as_json = [{"name": r.name, "verdict": r.verdict, "key": list(r.key)} for r in rs]  # ledger.json's form
    assert reading_keyed(as_json, "wrt", "S")["verdict"] == "HOLDS"
    assert [r.name for r in readings_keyed(rs, "wrt")] == ["w.r.t. S", "w.r.t. X"]
    with pytest.raises(KeyError, match="keys"):
        reading_keyed(rs, "w.r.t. S")
