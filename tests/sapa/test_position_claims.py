"""Tests for `sapa/claims/position_claims.py`: the `alibi-scaling` question, its readings recomputed by their rules."""

from __future__ import annotations

import pytest

from sapa.budget import budget_named
from sapa.claims.position_claims import CLAIMS, check_alibi
from sapa.ledger import Context, run_claim
from sapa.rules.growth import UpperEvidence, decide_upper


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    return run_claim(CLAIMS[0], Context(budget_named("quick", seed=0), tmp_path_factory.mktemp("ledger")))


def test_registered_as_a_question_in_the_ledger():
    from sapa.claims import ORDER, all_claims

    assert "alibi-scaling" in ORDER and CLAIMS[0].kind == "question" and CLAIMS[0].check is check_alibi
    assert any(c.id == "alibi-scaling" for c in all_claims())


def test_every_reading_follows_its_rule_and_the_answer_is_decided(entry):
    ev = entry.evidence
    assert entry.verdict == ("ANSWERED" if all(r["verdict"] != "UNDETERMINED" for r in entry.readings) else "UNDETERMINED")
    by_name = {r["name"]: r for r in entry.readings}
    for key, name in (("none", "softmax without a bias: O(√N) (reference)"),):
        lo, hi = ev["softmax"][key]["exponent_interval"]
        assert by_name[name]["verdict"] == decide_upper(UpperEvidence(0.5, lo, hi, False))
    for p in ("1", "3"):
        for form in ("none", "factor", "additive"):
            e = ev["polynomial"][p][form]["asymptotic"]
            match = [r for r in entry.readings if r["name"].startswith(f"x^{p}/√N") and
                     {"none": "no bias", "factor": "factor", "additive": "added"}[form] in r["name"]]
            assert len(match) == 1 and match[0]["verdict"] == decide_upper(UpperEvidence(0.5, e, e, True))


def test_known_rates_of_each_form(entry):
    # independent facts: x^p/√N without a bias → exponent ½; the additive bias m|δ| dominates: Σ_δ δ^{2p} per row
    # gives E‖φ‖² ~ N^{2p+1} → exponent p + ½; the factor e^{−m|δ|} keeps O(1) pairs per row → exponent 0
    poly = entry.evidence["polynomial"]
    for p in (1, 3):
        assert poly[str(p)]["none"]["asymptotic"] == pytest.approx(0.5, abs=0.01)
        assert poly[str(p)]["factor"]["asymptotic"] == pytest.approx(0.0, abs=0.01)
        assert poly[str(p)]["additive"]["asymptotic"] == pytest.approx(p + 0.5, abs=0.1)
    s0, s1 = entry.evidence["softmax"]["none"], entry.evidence["softmax"]["alibi"]
    assert s1["exponent_interval"][0] > s0["exponent_interval"][1]  # the bias raises softmax's exponent
    assert all(f <= n * (1 + 1e-12) for f, n in zip(s1["mean_fro2"], (64, 128, 256)))  # rows are probability vectors
