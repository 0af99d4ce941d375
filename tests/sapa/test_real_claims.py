"""Tests for `sapa/claims/real_claims.py`: the verdict rule of ``real-model-regime`` and its plumbing.

The rule is tested on synthetic analysis results (no extra needed); one end-to-end run on a
small configuration needs the optional extra ``real`` (``pytest.importorskip``). Nothing may
touch the network.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from empirics import real
from sapa.budget import QUICK
from sapa.claims import real_claims
from sapa.ledger import Context, run_claim


pytestmark = pytest.mark.usefixtures("no_network")  # tests/conftest.py: offline, sockets refused


def _head(layer, head, slope_ci=(0.48, 0.52), n_reg=10, n_star=3.0, jac_ci=None):
    h = {"layer": layer, "head": head}
    for t in ("softmax", "p1", "p3"):
        for k in ("fro", "jac"):
            ci = list(jac_ci if (k == "jac" and jac_ci) else slope_ci)
            h[f"meas_{t}_{k}_slope"] = sum(ci) / 2
            h[f"meas_{t}_{k}_ci"] = ci
    for p in (1, 3):
        h[f"matched_p{p}_n_reg"] = n_reg
        for proxy in ("identity", "measured", "matched"):
            h[f"{proxy}_p{p}_n_star"] = n_star
    return h


def _res(heads, softmax_ok=True, residual=1e-15):
    return {"heads": heads, "meta": {"config": {"N_real": 128}, "softmax_norm_le_sqrt_n": softmax_ok,
                                     "max_shift_residual": residual}}


def test_rule_holds_when_every_head_grows_like_sqrt_n():
    verdict, ev = real_claims.judge(_res([_head(0, h) for h in range(10)]))
    assert verdict == "HOLDS"
    assert ev["fraction_consistent_with_half"]["p3_jac"] == 1.0
    assert ev["fraction_n_star_below_N_real"]["p1_measured"] == 1.0


def test_rule_fails_when_most_heads_do_not():
    heads = [_head(0, h, slope_ci=(0.7, 0.8)) for h in range(6)] + [_head(1, h) for h in range(4)]
    verdict, ev = real_claims.judge(_res(heads))
    assert verdict == "FAILS" and ev["fraction_consistent_with_half"]["p1_fro"] == 0.4
    assert ev["heads_consistent_with_half"]["p1_fro"] == [[1, h] for h in range(4)]


def test_rule_in_regime_between_the_thresholds():
    heads = [_head(0, h, slope_ci=(0.1, 0.2)) for h in range(3)] + [_head(1, h) for h in range(7)]
    assert real_claims.judge(_res(heads))[0] == "HOLDS_IN_REGIME"
    # measured √N everywhere, but the Gaussian proxy puts the regime beyond N_real for half the heads
    heads = [_head(0, h, n_reg=1000) for h in range(5)] + [_head(1, h) for h in range(5)]
    assert real_claims.judge(_res(heads))[0] == "HOLDS_IN_REGIME"
    # the Jacobian counts too
    heads = [_head(0, h, jac_ci=(0.9, 1.0)) for h in range(6)] + [_head(1, h) for h in range(4)]
    assert real_claims.judge(_res(heads))[0] == "FAILS"


def test_rule_undetermined_on_failed_sanity():
    assert real_claims.judge(_res([_head(0, 0)], softmax_ok=False))[0] == "UNDETERMINED"
    assert real_claims.judge(_res([_head(0, 0)], residual=1e-3))[0] == "UNDETERMINED"


def test_not_installed_is_undetermined(monkeypatch, tmp_path):
    monkeypatch.setattr(real, "available", lambda: False)
    entry = run_claim(real_claims.CLAIMS[0], Context(budget=QUICK, out_dir=tmp_path))
    assert entry.verdict == "UNDETERMINED"
    assert entry.evidence == {"status": "optional extra 'real' not installed"}
    assert entry.contract["predicted_exponent"].startswith("0.5")


def test_claim_is_registered_with_a_contract():
    (claim,) = real_claims.CLAIMS
    assert claim.id == "real-model-regime" and claim.check is real_claims.check_real_model_regime
    assert "0.45, 0.55" in claim.contract.refuted_by


def test_end_to_end_small(monkeypatch, tmp_path):
    """The check on a small configuration (2 texts, N = 8, 16, 32): a verdict, evidence, a figure, JSON-ready."""
    for m in real.REQUIRED_MODULES:
        pytest.importorskip(m)
    monkeypatch.setattr(real, "QUICK", replace(real.QUICK, name="test", Ns=(8, 16, 32), n_texts=2, n_boot=100))
    entry = run_claim(real_claims.CLAIMS[0], Context(budget=QUICK, out_dir=tmp_path))
    assert entry.verdict in ("HOLDS", "HOLDS_IN_REGIME", "FAILS")
    ev = entry.evidence
    assert ev["sanity"] == {"softmax_norm_le_sqrt_n": True, "bias_is_token_shift": True, "fits_finite": True}
    assert set(ev["per_layer"]) == {str(l) for l in range(6)}
    assert {"n_star_p3_measured_median", "n_star_p1_identity_max", "canonical_top_median"} <= set(ev["per_layer"]["0"])
    assert len(ev["vit_references"]) == 12 and "figure_assertion_failed" not in ev
    assert entry.figures and all((tmp_path / f).is_file() for f in entry.figures)
    json.dumps(ev)  # the ledger writes it as JSON
    assert (entry.corrected_claim is None) == (entry.verdict == "HOLDS")
    assert list((tmp_path / "real").glob("real_heads_*.json"))  # cached under OUT/real for the next run
