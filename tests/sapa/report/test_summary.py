"""Tests for `sapa/report/summary.py`: clause-safe key numbers and a bottom line assembled from the ledger."""

from __future__ import annotations

import pytest

from sapa.ledger import Entry
from sapa.report.summary import bottom_line, brief, clauses, lead_sentence, short_numbers

HEAD = ("O(N) as an upper bound holds for every weight model (exponent 1.000, never above it at any N); the tight "
        "rate only for N ≥ N_reg (up to 541, tied); exponent at ViT-Base N=196: paper 1.000, iid 1.000; constant "
        "vs softmax's √N at ViT-Base: 133× (tied), 112× (iid); worst case ‖φ‖/‖J‖ ‖x_i‖=r: N^1 / N^1 (HOLDS)")


def test_clauses_split_at_top_level_semicolons_only():
    assert clauses("a (b; c); d [e; f]; g") == ["a (b; c)", "d [e; f]", "g"]
    assert clauses("") == []


@pytest.mark.parametrize("limit", [10, 60, 120, 220, 1000])
def test_short_numbers_never_cut_inside_a_clause(limit):
    """The summary table once read 'worst case ‖φ‖/': a cell is now whole clauses of the headline, always."""
    text, more = short_numbers(HEAD, limit)
    parts = clauses(HEAD)
    k = text.count("; ") + 1
    assert text == "; ".join(parts[:k]) and more == (k < len(parts))
    assert len(text) <= max(limit, len(parts[0]))


def test_brief_marks_what_it_left_out():
    assert brief(HEAD, 120).endswith("; …") and brief("short", 120) == "short"


def test_lead_sentence_skips_the_paper_is_silent():
    assert lead_sentence("The paper is silent on masks. With a mask rows grow like √i. More.") == \
        "With a mask rows grow like √i."


def _e(id_, verdict, kind="claim", readings=(), **kw):
    return Entry(id=id_, statement=f"statement of {id_}.", verdict=verdict, evidence={}, kind=kind,
                 readings=[{"name": "headline reading", "verdict": verdict}] + list(readings), **kw)


def test_bottom_line_says_what_holds_fails_and_is_open_from_the_verdicts():
    entries = [
        _e("a", "HOLDS"), _e("b", "HOLDS_LOOSE", corrected_claim="The sharp bound is √N/2. It is attained."),
        _e("c", "FAILS", corrected_claim="It grows like N."),
        _e("d", "HOLDS", readings=[{"name": "w.r.t. X", "verdict": "FAILS"}, {"name": "tight", "verdict":
                                                                              "UNDETERMINED"}]),
        _e("e", "UNDETERMINED", headline="Δ = +0.19 (se 0.15); more seeds needed"),
        _e("q", "ANSWERED", kind="question", answer="The paper is silent. Rows grow like √i; the fix is 1/√i."),
    ]
    pts = {p.lead: p for p in bottom_line(entries)}
    assert dict(pts["What holds."].items) == {"a": "statement of a", "d": "statement of d"}
    assert pts["What holds."].text.startswith("2 of the 5 claims")
    assert dict(pts["What holds only with a correction."].items) == {"b": "true but not sharp: The sharp bound is √N/2."}
    fails = dict(pts["What fails."].items)
    assert fails == {"c": "headline: It grows like N.", "d": "w.r.t. X"}
    assert pts["What fails."].text.startswith("1 claim(s) fail in their headline reading")
    assert dict(pts["What is not settled."].items) == {"e": "Δ = +0.19 (se 0.15); more seeds needed"}
    assert any("1 reading(s) of decided entries stay UNDETERMINED (in d)" in p.text for p in pts.values())
    assert dict(pts["The reviewers' questions."].items) == {"q": "Rows grow like √i; the fix is 1/√i."}


def test_bottom_line_without_failures_says_so():
    pts = {p.lead: p for p in bottom_line([_e("a", "HOLDS"), _e("b", "HOLDS", readings=[{"name": "x", "verdict":
                                                                                         "FAILS"}])])}
    assert pts["What fails."].text.startswith("No claim fails in its headline reading")
    assert "What is not settled." not in pts
