"""Tests for `sapa/commands/audit_conventions.py`: both logit conventions in one audit, the reason when they differ."""

from __future__ import annotations

import json
import math

import pytest

from sapa.cli import main
from sapa.commands.audit_conventions import CONVENTIONS, DEFAULT, difference_words, other


def _json(argv, capsys) -> dict:
    assert main(["audit", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_other_is_the_convention_not_named():
    assert {other(c) for c in CONVENTIONS} == set(CONVENTIONS) and other(DEFAULT) != DEFAULT


@pytest.mark.parametrize("scale", CONVENTIONS)
def test_the_headline_is_the_named_convention_and_the_other_its_own_audit(capsys, scale):
    """--logit-scale picks the headline; the other convention is the audit of x → x/√d substituted (or undone), so
    its size is the headline's × d^(∓p/2) for a monomial (p = 3, d = 16: 64×)."""
    a = _json(["x**3/sqrt(N)", "--D", "64", "--d", "16", "--logit-scale", scale], capsys)
    b = _json(["x**3/sqrt(N)", "--D", "64", "--d", "16", "--logit-scale", other(scale)], capsys)
    assert a["logit_scale"] == scale and a["conventions"][scale]["verdict"] == a["verdict"]
    assert a["conventions"] == b["conventions"]  # the same two audits, whichever is the headline
    c = a["conventions"]
    assert c["S"]["constant_vs_softmax"] == pytest.approx(c["S/sqrt(d)"]["constant_vs_softmax"] * 16**1.5, rel=1e-12)
    assert b["constant_vs_softmax"] == c[other(scale)]["constant_vs_softmax"]


def test_difference_words_name_what_differs():
    conv = {"S/sqrt(d)": {"verdict": "HOLDS", "rate_verdict": "HOLDS", "size_verdict": "HOLDS",
                          "constant_vs_softmax": 2.0},
            "S": {"verdict": "FAILS", "rate_verdict": "HOLDS", "size_verdict": "FAILS", "constant_vs_softmax": 16.0}}
    w = difference_words(conv, 4)
    assert w == ("the logits S are √d = 2× the logits S/√d; ‖φ‖/√N is 2 under S/√d and 16 under S (8×); the size "
                 "reading HOLDS under S/√d, FAILS under S")
    conv["S"].update(verdict="HOLDS", size_verdict="HOLDS")
    assert difference_words(conv, 4) is None
    conv["S"].update(verdict="FAILS", constant_vs_softmax=math.inf)  # no ratio of an infinite size
    assert "‖φ‖/√N" not in difference_words(conv, 4)
