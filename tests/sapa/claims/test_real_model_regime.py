"""Tests for `sapa/claims/real_model_regime.py`: the question ``real-model-regime`` — its protocol logic and plumbing.

The judgement is tested on synthetic analysis results (no extra needed): ANSWERED only when every
protocol agrees and the softmax baseline passes, UNDETERMINED (naming the protocols) when the
verdict flips. No verdict on today's data is locked in. One end-to-end run on a small
configuration needs the optional extra ``real`` (``pytest.importorskip``). Nothing may touch the network.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from sapa.empirics.realmodel import real
from sapa.budget import QUICK
from sapa.claims import real_model_regime
from sapa.prose import real_model_regime_words as words
from sapa.ledger import Context, run_claim
from sapa.rules import heads as rule

pytestmark = pytest.mark.usefixtures("no_network")  # tests/conftest.py: offline, sockets refused

SLOW = (0.10, 0.30)     # softmax-like: well inside O(√N), outside 0.5 ± 0.05
ON = (0.46, 0.52)       # in the band
FAST = (0.70, 0.80)     # demonstrably above the edge 0.55


def _fits(pattern):
    """pattern: {(protocol, activation): [interval per head]} → HeadFits (10 heads)."""
    out = []
    for (pr, act), cis in pattern.items():
        for i, (lo, hi) in enumerate(cis):
            out.append(real.HeadFit(pr, act, "fro", i // 5, i % 5, (lo + hi) / 2, lo, hi))
    return tuple(out)


def _res(p1, p3, softmax=None, protocols=real.PROTOCOL_NAMES, softmax_ok=True, residual=1e-15, level=rule.LEVEL):
    """A minimal analysis result: per protocol, the heads' intervals of each activation (callable: protocol → list)."""
    pat = {}
    for pr in protocols:
        pat[pr, "softmax"] = (softmax or (lambda _: [SLOW] * 10))(pr)
        pat[pr, "x/sqrt(N)"] = p1(pr)
        pat[pr, "x^3/sqrt(N)"] = p3(pr)
    meta = real.RealMeta(config=replace(real.QUICK, level=level), softmax_norm_le_sqrt_n=softmax_ok,
                         max_shift_residual=residual)
    return real.RealResult(meta=meta, fits=_fits(pat))


def _mix(n_on, n_fast):
    return lambda _: [ON] * n_on + [FAST] * n_fast


def test_answered_when_every_protocol_agrees():
    j = real_model_regime.judge(_res(_mix(3, 7), _mix(2, 8)))
    assert j.verdict == "ANSWERED" and j.agreed == {"x/sqrt(N)": "FAILS", "x^3/sqrt(N)": "FAILS"}
    assert j.baseline_holds and len(j.cells) == 12
    c = j.cell("fixed", "x/sqrt(N)")
    assert (c.consistent_upper, c.within_upper, c.verdict_upper) == (0.3, 0.3, "FAILS")
    assert c.heads_above == tuple((i // 5, i % 5) for i in range(3, 10))
    s = j.cell("prefix", "softmax")
    assert s.verdict_upper == "HOLDS" and s.verdict_band == "FAILS"  # the two-sided band rejects softmax itself
    text = words.answer_text(j, {})
    assert "under every protocol" in text and "30%" in text and "softmax itself" in text.lower()


def test_answered_yes_when_every_protocol_holds():
    j = real_model_regime.judge(_res(_mix(10, 0), _mix(10, 0)))
    assert j.verdict == "ANSWERED" and set(j.agreed.values()) == {"HOLDS"}
    assert "yes" in words.answer_text(j, {})


def test_undetermined_when_the_protocol_flips_the_conclusion():
    def p1(pr):
        return [ON] * 10 if pr.startswith("fixed") else [ON] * 3 + [FAST] * 7

    j = real_model_regime.judge(_res(p1, _mix(2, 8)))
    assert j.verdict == "UNDETERMINED" and j.agreed["x/sqrt(N)"] is None and j.agreed["x^3/sqrt(N)"] == "FAILS"
    text = words.answer_text(j, {})
    assert "protocol" in text and "HOLDS under fixed" in text and "FAILS under prefix" in text


def test_undetermined_when_a_protocol_is_undetermined_or_the_baseline_fails():
    mid = _mix(7, 3)  # 70 % consistent: neither ≥ 90 % within nor < 60 % consistent
    assert real_model_regime.judge(_res(mid, mid)).verdict == "UNDETERMINED"
    j = real_model_regime.judge(_res(_mix(2, 8), _mix(2, 8), softmax=lambda pr: [FAST] * 10 if pr == "fixed" else [SLOW] * 10))
    assert j.verdict == "UNDETERMINED" and not j.baseline_holds
    assert "not a fair test" in words.answer_text(j, {})


def test_undetermined_on_failed_sanity():
    ok = (_mix(2, 8), _mix(2, 8))
    assert real_model_regime.judge(_res(*ok)).verdict == "ANSWERED"
    assert real_model_regime.judge(_res(*ok, softmax_ok=False)).verdict == "UNDETERMINED"
    assert real_model_regime.judge(_res(*ok, residual=1e-3)).verdict == "UNDETERMINED"
    assert real_model_regime.judge(_res(*ok, level=0.5)).verdict == "UNDETERMINED"  # intervals at another level than the rule's


def test_readings_cite_the_rule():
    j = real_model_regime.judge(_res(_mix(3, 7), _mix(2, 8)))
    rs = [words.reading_of(c) for c in j.cells]
    assert len(rs) == 12 and {r.rule for r in rs} == {"head-fraction"}
    assert {r.verdict for r in rs if r.key[3] == "softmax"} == {"HOLDS"}
    assert all("two-sided" in r.why for r in rs)


def test_not_installed_is_undetermined(monkeypatch, tmp_path):
    monkeypatch.setattr(real, "available", lambda: False)
    entry = run_claim(real_model_regime.CLAIM, Context(budget=QUICK, out_dir=tmp_path))
    assert entry.verdict == "UNDETERMINED" and entry.kind == "question"
    assert entry.evidence == {"status": "optional extra 'real' not installed"}
    assert entry.falsifiability["negative_control"]["verdict"] == "UNDETERMINED"  # nothing to control: said so
    assert entry.robustness["stable"] is False


def test_registered_as_a_question():
    claim = real_model_regime.CLAIM
    assert claim.id == "real-model-regime" and claim.kind == "question"
    assert claim.check is real_model_regime.check and "all-MiniLM-L6-v2" in claim.statement


SMALL_VERDICT = "UNDETERMINED"  # 2 texts, N ≤ 32: the protocols do not agree on x/√N (the quick budget: ANSWERED)


def test_end_to_end_small(monkeypatch, tmp_path, real_small_cached_in, real_small):
    """The check on a small configuration (2 texts, N = 8, 16, 32): a question verdict, 12 readings, a figure, JSON.
    Its analysis is the session's (tests/conftest.py), found in the claim's cache folder as ``sapa verify`` would."""
    monkeypatch.setattr(real, "QUICK", real.SMALL)
    real_small_cached_in(tmp_path / "real")
    entry = run_claim(real_model_regime.CLAIM, Context(budget=QUICK, out_dir=tmp_path))
    assert entry.verdict == SMALL_VERDICT and entry.kind == "question" and entry.answer
    # independent: the share of softmax heads whose 90 % interval lies at or below ½ + TOL, counted from the session's
    # own analysis (real_small), equals the cell's "within" fraction, at least the rule's 90 %: HOLDS
    from sapa.ledger import reading_keyed
    from sapa.rules.growth import TOL

    res, _ = real_small
    pr = real.PROTOCOL_NAMES[0]
    fits = [f for f in res.head_fits("real") if f.kind == "fro" and f.activation == "softmax" and f.protocol == pr]
    within = sum(f.hi <= 0.5 + TOL for f in fits) / len(fits)
    cell = next(c for c in entry.evidence["cells"] if c["protocol"] == pr and c["activation"] == "softmax")
    assert cell["within_upper"] == pytest.approx(within) and within >= rule.HIGH
    assert reading_keyed(entry.readings, "protocol", pr, "activation", "softmax")["verdict"] == "HOLDS"
    assert entry.rule["name"] == "head-fraction" and len(entry.readings) == 12
    assert {r["key"][1] for r in entry.readings} == set(real.PROTOCOL_NAMES)
    ev = entry.evidence
    assert ev["sanity"] == {"softmax_norm_le_sqrt_n": True, "bias_is_token_shift": True, "fits_finite": True,
                            "interval_level_is_the_rule's": True, "every_cell_present": True}
    assert set(ev["canonical_correlation"]) == {"all", "content"}
    assert any("random independent" in f for f in entry.findings)
    assert any("N* per head" in f for f in entry.findings)
    assert len(ev["vit_references"]) == 12 and "figure_assertion_failed" not in ev
    assert entry.figures and all((tmp_path / f).is_file() for f in entry.figures)
    assert any("protocols" in f for f in entry.figures)
    json.dumps(ev)  # the ledger writes it as JSON
    from dataclasses import asdict

    from sapa.labels import violations

    assert violations(asdict(entry)) == []
    assert entry.falsifiability["negative_control"]["verdict"] == "FAILS"  # softmax·N^0.5: every exponent + ½
    assert "head(s) from" in entry.answer and ev["distance_to_flip"]
    assert isinstance(entry.robustness["stable"], bool) and len(entry.robustness["varied"]) == 7
    assert list((tmp_path / "real").glob("real_heads_*.json"))  # cached under OUT/real for the next run
