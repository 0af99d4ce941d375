"""Tests for `sapa/ledger.py`: contracts, readings and their keys, outcomes, claims against questions (the
entries themselves: tests/sapa/claims/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sapa.budget import QUICK, budget_named
from sapa.claims import all_claims
from sapa.ledger import VERDICTS, Claim, Context, Outcome, Reading, run_claim
from sapa.rules import CLAIM_VERDICTS, QUESTION_VERDICTS, rule_named
from sapa.common.validate import InputError

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
    e = run_claim(Claim(id="x", statement="s", owner="docs/training.md"), Context(QUICK, tmp_path))
    assert e.verdict == "UNDETERMINED"
    assert e.evidence == {"status": "not yet examined", "owner": "docs/training.md"}


def test_outcome_rejects_unknown_verdict():
    with pytest.raises(ValueError):
        Outcome(verdict="PROBABLY", evidence={}, tested_statement="")


def test_budget_lookup():
    assert budget_named("quick", 3).seed == 3
    with pytest.raises(InputError):
        budget_named("huge")


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


def test_an_entry_seconds_include_its_rule_calibration_and_its_cpu_seconds_are_kept(tmp_path, monkeypatch):
    import time

    import sapa.ledger as L

    def slow_rule(name):  # a rule whose calibration is not stored runs it when the entry is written
        time.sleep(0.3)
        return {"name": name}

    monkeypatch.setattr(L, "_rule_dict", slow_rule)
    spin = lambda c: (sum(i * i for i in range(200_000)), Outcome(verdict="HOLDS", evidence={}, tested_statement="t", rule="bound"))[1]  # noqa: E731
    e = run_claim(Claim(id="c", statement="s", check=spin), Context(QUICK, tmp_path))
    assert e.seconds >= 0.3 and e.cpu_seconds is not None and e.cpu_seconds >= 0
