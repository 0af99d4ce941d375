"""Tests for `sapa/claims/scale_claims.py`: both checks run with the quick budget; verdicts are computed by rule."""

from __future__ import annotations

import json

import pytest

from sapa.budget import budget_named
from sapa.claims.scale_claims import CLAIMS, _direction, _uniformity
from sapa.ledger import Context, run_claim


@pytest.fixture(scope="module")
def entries(tmp_path_factory):
    out = tmp_path_factory.mktemp("ledger")
    ctx = Context(budget_named("quick", seed=0), out)
    return out, {c.id: run_claim(c, ctx) for c in CLAIMS}


def test_ids_and_contracts():
    assert [c.id for c in CLAIMS] == ["fig1-scale-direction", "causal-masking"]
    assert all(c.contract is not None and c.check is not None for c in CLAIMS)


def test_scale_direction_verdict(entries):
    out, es = entries
    e = es["fig1-scale-direction"]
    ev = e.evidence
    # The rule, recomputed from the evidence: every case increases as N decreases ⇒ FAILS.
    dirs = [d for v in ev["directions_as_N_decreases"].values() for d in v.values()]
    assert dirs and all(d == "increases" for d in dirs)
    assert all(a["agree"] for v in ev["monte_carlo_agreement"].values() for a in v.values())
    assert e.verdict == "FAILS"
    assert ev["exponents"]["iid/p1"]["bound"]["slope"] == pytest.approx(-0.5, abs=0.01)
    assert ev["exponents"]["iid/p1"]["typical"]["ci"][1] < -0.9
    assert ev["reviewer_numbers"]["inv_sqrt_n"] == [0.0625, 0.125, 0.25, 0.3536]
    assert ev["bound_exponent_exact_all_models"]["paper/p3"] == pytest.approx(-0.5, abs=1e-9)
    assert "INCREASE" in e.corrected_claim
    assert all((out / f).is_file() for f in e.figures) and len(e.figures) == 2
    json.dumps(ev)  # ledger.json-serialisable


def test_causal_verdict(entries):
    out, es = entries
    e = es["causal-masking"]
    ev = e.evidence
    cases = [v for c in ev["cases_global_inv_sqrt_n"].values() for v in c.values()]
    assert cases and all(v == "non-uniform" for v in cases)
    assert all(a["agree"] for a in ev["monte_carlo_agreement"].values())
    assert e.verdict == "FAILS"
    assert ev["corrected_claim_holds_in_iid_model"] is True
    prof = ev["profile_exponents"]["N1024/p1"]
    assert prof["inv_sqrt_n/bound"]["slope"] == pytest.approx(0.5, abs=0.05)
    assert abs(prof["inv_sqrt_i/bound"]["slope"]) < 0.05
    assert ev["exact_per_model"]["tied/p3"]["per_row_flat_from_row"] > 10_000
    assert "1/√i" in e.corrected_claim
    assert all((out / f).is_file() for f in e.figures) and len(e.figures) == 2
    json.dumps(ev)


def test_rule_helpers():
    assert _direction(-0.5, -0.6, -0.4) == "increases"
    assert _direction(0.5, 0.4, 0.6) == "decreases"
    assert _direction(-0.01, -0.1, 0.05) == "flat"
    assert _uniformity(-0.05, 0.05) == "uniform"
    assert _uniformity(0.4, 0.6) == "non-uniform"
    assert _uniformity(0.05, 0.2) == "inconclusive"
