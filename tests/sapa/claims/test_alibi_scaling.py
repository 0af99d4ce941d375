"""Tests for `sapa/claims/alibi_scaling.py`: the `alibi-scaling` question is ANSWERED; each reading is recomputed by its
rule, and the exponents are checked against independent facts (the bias-only sum's degree, × N adding 1)."""

from __future__ import annotations

import pytest

from sapa.budget import budget_named
from sapa.claims.alibi_scaling import CLAIM, check
from sapa.ledger import Context, reading_keyed, run_claim
from sapa.rules.growth import UpperEvidence, decide_upper


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    return run_claim(CLAIM, Context(budget_named("quick", seed=0), tmp_path_factory.mktemp("ledger")))


def test_registered_as_a_question_in_the_ledger():
    from sapa.claims import ORDER, all_claims

    assert "alibi-scaling" in ORDER and CLAIM.kind == "question" and CLAIM.check is check
    assert any(c.id == "alibi-scaling" for c in all_claims())


def test_every_reading_follows_its_rule_and_the_answer_is_decided(entry):
    ev = entry.evidence
    assert entry.verdict == "ANSWERED"  # the quick budget decides every reading
    assert all(r["verdict"] != "UNDETERMINED" for r in entry.readings)
    for key in ("none", "alibi"):
        lo, hi = ev["softmax"][key]["exponent_interval"]
        assert reading_keyed(entry.readings, "softmax", key)["verdict"] == decide_upper(UpperEvidence(0.5, lo, hi, False))
    for p in (1, 3):
        for form in ("none", "factor", "additive"):
            e = ev["polynomial"][str(p)][form]["asymptotic"]
            assert reading_keyed(entry.readings, "p", p, form)["verdict"] == decide_upper(UpperEvidence(0.5, e, e, True))
    # the headline facts: x^p/√N is O(√N) without a bias and as a factor, and not with the bias added
    assert [reading_keyed(entry.readings, "p", 3, f)["verdict"] for f in ("none", "factor", "additive")] == \
        ["HOLDS", "HOLDS", "FAILS"]


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


def test_negative_control_is_the_factor_form_times_n_and_fails(entry):
    # × N multiplies E‖φ‖² by N² exactly, so the control's exponent is the factor form's plus 1 (independent fact)
    ctrl = entry.falsifiability["negative_control"]
    assert entry.falsifiability["kind"] == "could_fail"
    factor3 = entry.evidence["polynomial"]["3"]["factor"]["asymptotic"]
    assert ctrl["exponent"] == pytest.approx(factor3 + 1.0, abs=1e-6)
    assert ctrl["verdict"] == decide_upper(UpperEvidence(0.5, ctrl["exponent"], ctrl["exponent"], True)) == "FAILS"
    assert ctrl["control_ok"] is True


def test_robustness_rows_recompute_every_reading(entry):
    from dataclasses import asdict

    from sapa.labels import violations

    rob = entry.robustness
    rows = {r["condition"]: r for r in rob["varied"]}
    base = [r["verdict"] for r in entry.readings]
    tol = [r for c, r in rows.items() if c.startswith("exponent tolerance")]
    assert len(tol) == 2 and all(r["verdict"] == "ANSWERED" for r in tol)  # every reading decided at either tolerance
    seed = [r for c, r in rows.items() if c.startswith("another seed")]
    assert len(seed) == 1 and seed[0]["verdict"] is not None
    conv = [r for c, r in rows.items() if c.startswith("logit convention")]
    assert len(conv) == 1 and "x^3 3.4" in conv[0]["note"]  # (x/8 − m|δ|)³ still dominated by the bias: ~N^3.5
    # stable is exactly "no counted row differs from the headline"
    assert rob["stable"] == all(r["verdict"] in (None, rob["headline"]) for r in rob["varied"])
    assert rob["headline"] == entry.verdict and len(base) == 9
    assert violations(asdict(entry)) == []


def test_the_additive_form_has_a_rising_local_exponent_whose_limit_is_p_plus_half(entry):
    # independent facts: at small N the bias is negligible (|i − j| ≪ std(S)/m = 8·16 = 128), so the exponent is ½;
    # E(S − b)^{2p} ≥ b^{2p} (Jensen, E S = 0), so the bias-only sum is a share ≤ 1 of E‖φ‖²; the bias-only sum has
    # degree 2p + 1 in N, so the local exponent tends to p + ½ from below
    prof = entry.evidence["additive_profile"]
    for p in (1, 3):
        a = prof[str(p)]
        loc = a["local_exponents"]
        assert a["limit"] == p + 0.5
        assert loc[0] == pytest.approx(0.5, abs=0.01)
        assert all(y > x for x, y in zip(loc[3:], loc[4:]))       # rising once the bias shows (N ≥ 16)
        assert p + 0.5 - 0.01 < loc[-1] < p + 0.5
        assert 0.9 < a["bias_only_share"] <= 1.0
        assert a["leading_over_bias_only"] == pytest.approx(1.0, abs=1e-5)
        assert a["onset_offset"] == pytest.approx(128.0, rel=1e-12)
    # the additive reading's exponent at 2048 → 4096 is one point of that profile
    assert prof["3"]["local_exponents"][prof["3"]["N"].index(2048)] == pytest.approx(
        entry.evidence["polynomial"]["3"]["additive"]["asymptotic"], abs=1e-3)
