"""Tests for `sapa/claims/growth_check.py` and the four growth entries (thm4.2, cor4.3, thm4.4, cor4.5).

Each entry runs on a small context (tests/conftest.py ``growth_context``: a tiny seeded sweep, the worst case at
N = 3, 6) and must give its headline verdict there; the headline reading's exponent is checked against a finite
difference of ``sapa.theory.moments.exact_moments`` at N = 2³⁰, 2³¹ (far beyond every N*), independent of the profile formula the check uses.
"""

from __future__ import annotations

import math
import re

import pytest

from sapa.claims import cor4_3_linear_scaled, cor4_5_cubic_scaled, thm4_2_linear, thm4_4_cubic
from sapa.evidence.growth_profiles import TOL
from sapa.ledger import reading_keyed, readings_keyed
from sapa.theory.moments import exact_moments

ENTRIES = {m.CLAIM.id: m for m in (thm4_2_linear, cor4_3_linear_scaled, thm4_4_cubic, cor4_5_cubic_scaled)}
HEADLINE = {"thm4.2-linear": "HOLDS", "cor4.3-linear-scaled": "HOLDS", "thm4.4-cubic": "HOLDS",
            "cor4.5-cubic-scaled": "HOLDS"}  # on the small context, as on the quick budget


@pytest.fixture(scope="module")
def outcomes(growth_context):
    return {cid: m.check(growth_context) for cid, m in ENTRIES.items()}


def _exponent_far_out(p: int, scaled: bool, model: str = "tied", rho: float = 1.0) -> float:
    """½ d log E‖φ‖²_F / d log N between N = 2³⁰ and 2³¹ at ViT-Base, by exact_moments alone."""
    e = [exact_moments(p, model, n, 768, 64, rho=rho, sigma=1 / math.sqrt(768)).expected_fro2 / (n if scaled else 1)
         for n in (2**30, 2**31)]
    return 0.5 * math.log(e[1] / e[0]) / math.log(2)


@pytest.mark.parametrize("cid", list(ENTRIES))
def test_the_headline_verdict_and_its_exponent_far_out(outcomes, cid):
    o, m = outcomes[cid], ENTRIES[cid]
    assert o.verdict == HEADLINE[cid]
    head = reading_keyed(o.readings, "upper")
    assert head is o.readings[0] and head.verdict == "HOLDS" and head.rule == "growth-upper-exact"
    pred = 0.5 if m.SCALED else 1.0
    far = _exponent_far_out(m.P, m.SCALED)  # tied weights: the slowest model to reach its rate
    assert far == pytest.approx(pred, abs=1e-3) and far <= pred + TOL
    assert o.evidence["asymptotic_exponent_all_models"] == pytest.approx(far, abs=1e-3)
    # the three kinds of evidence agree: exact, Monte Carlo (first pass), worst-case theory and numerics
    mc = o.evidence["monte_carlo"]
    assert mc["gate"]["verdict"] == "HOLDS" and mc["negative_control_detected"] and mc["series"] > 0
    assert o.evidence["worst_case"]["theory_and_numerics_agree"]


@pytest.mark.parametrize("cid", list(ENTRIES))
def test_the_tight_rate_is_a_regime_with_shared_x_and_exact_under_the_papers_model(outcomes, cid):
    o = outcomes[cid]
    assert reading_keyed(o.readings, "tight", "shared-X").verdict == "HOLDS_IN_REGIME"
    assert reading_keyed(o.readings, "tight", "paper").verdict == "HOLDS"
    assert reading_keyed(o.readings, "worst-case", "token").verdict == "HOLDS"
    # only ‖X‖_F bounded: x³'s energy on one token grows faster than the claimed rate (exact N^(p−½) for x³/√N)
    assert reading_keyed(o.readings, "worst-case", "fro").verdict == ("FAILS" if ENTRIES[cid].P == 3 else "HOLDS")
    assert o.corrected_claim and "N_reg" in o.corrected_claim
    assert o.falsifiability["negative_control"]["verdict"] == "FAILS"


def test_x3_over_sqrt_n_fails_on_size_with_tied_weights_not_on_rate(outcomes):
    """46.8× softmax's √N at ViT-Base with logits S/√d and tied weights (E-RMS from exact_moments directly)."""
    o = outcomes["cor4.5-cubic-scaled"]
    size = {r.key[2]: r.verdict for r in readings_keyed(o.readings, "size", "S/sqrt(d)")}
    assert size == {"iid": "HOLDS", "tied": "FAILS"}
    e = exact_moments(3, "tied", 196, 768, 64, rho=1.0, sigma=1 / math.sqrt(768)).expected_fro2
    assert math.sqrt(e / 196) * 64 ** -1.5 / 14 == pytest.approx(46.8, rel=1e-3)
    assert any("fails on size, not on rate" in f for f in o.findings)
    assert not readings_keyed(outcomes["thm4.4-cubic"].readings, "size")  # unscaled x³: no size reading


def test_the_audit_and_the_ledger_agree_on_the_papers_cubic(outcomes, capsys):
    """`sapa audit "x**3/sqrt(N)"` prints the verdict under both logit conventions, each the ledger's for it:
    cor4.5-cubic-scaled's headline (the rate) with its iid size reading under that convention, by the same rule."""
    import json

    from sapa.cli import main
    from sapa.commands.audit_conventions import CONVENTIONS, DEFAULT
    from sapa.rules.like_softmax import combine

    o = outcomes["cor4.5-cubic-scaled"]
    assert main(["audit", "x**3/sqrt(N)", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert a["logit_scale"] == DEFAULT and a["verdict"] == a["conventions"][DEFAULT]["verdict"] == o.verdict
    ratios = o.evidence["constants_vs_softmax"]["ViT-Base"]["models"]["iid"]
    for conv, key in zip(CONVENTIONS, ("ratio_exact_s_over_sqrt_d", "ratio_exact")):
        ledger_size = reading_keyed(o.readings, "size", conv, "iid")
        c = a["conventions"][conv]
        assert (c["rate_verdict"], c["size_verdict"]) == (reading_keyed(o.readings, "upper").verdict, ledger_size.verdict)
        assert c["verdict"] == combine(reading_keyed(o.readings, "upper").verdict, ledger_size.verdict)
        assert c["constant_vs_softmax"] == pytest.approx(ratios[key], rel=1e-12)
    assert {c["verdict"] for c in a["conventions"].values()} == {"HOLDS", "FAILS"}  # they differ, and the output says why
    assert "the size reading HOLDS under S/√d, FAILS under S" in a["conventions_differ_because"]
    assert main(["audit", "x**3/sqrt(N)"]) == 0
    text = capsys.readouterr().out
    assert text.count("HOLDS — holds on rate and size") == 1 and text.count("FAILS — fails on size") == 1
    assert re.search(r"^  why they differ\s+: " + re.escape(a["conventions_differ_because"]) + "$", text, re.M)
