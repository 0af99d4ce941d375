"""Tests for `sapa/claims/lipschitz_vs_published_bound.py`: the measured-vs-published-bound question (bound not computed)."""

from __future__ import annotations

import pytest

from sapa.budget import budget_named
from sapa.claims import lipschitz_vs_published_bound as LC
from sapa.ledger import Context, run_claim


def test_question_is_registered_and_undetermined_without_the_published_bound(tmp_path, monkeypatch):
    from sapa.claims import ORDER

    assert "lipschitz-vs-published-bound" in ORDER and LC.CLAIMS[0].kind == "question"
    monkeypatch.setattr(LC, "QUICK", {"minilm_Ns": (8, 12), "vit_Ns": (4, 6), "max_steps": 6})
    e = run_claim(LC.CLAIMS[0], Context(budget_named("quick"), tmp_path))
    assert e.verdict == "UNDETERMINED" and "not computed" in e.answer
    assert e.figures and all((tmp_path / f).is_file() for f in e.figures)
    assert (tmp_path / "data" / "layer_lipschitz.json").is_file()
    for r in e.evidence["rows"]:
        assert 0 < r["sigma_lower"] <= r["sigma_upper"] <= r["jac_fro"] * (1 + 1e-9)
    for v in e.evidence["slopes"].values():
        lo, hi = v["sigma_exponent_interval"]
        assert lo <= v["lower_bound_slope"] <= hi or v["lower_bound_slope"] == pytest.approx(lo)
    # a verdict that cannot fail is marked as such (no negative control pretends otherwise)
    from dataclasses import asdict

    from sapa.labels import violations

    assert e.falsifiability["kind"] == "by_construction" and "not computed" in e.falsifiability["why"]
    assert e.robustness["stable"] and e.robustness["headline"] == "UNDETERMINED"
    assert any(r["condition"].startswith("budget full") and r["verdict"] is None for r in e.robustness["varied"])
    assert violations(asdict(e)) == []
