"""Every rule of sapa/rules that writes a verdict text: the text agrees with the rule's own label.

HOLDS_IN_REGIME names its regime; FAILS names what failed; UNDETERMINED names the gate or reading left open;
HOLDS prints no number past its limit. (The audit rule's texts: test_audit_rule.py and tests/sapa/test_audit_verdict_text.py.)
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import sapa.rules
from sapa.rules import timing

# the functions of sapa/rules that return a verdict's reason in words, and the tests that pin them
TEXT_FUNCTIONS = {"sapa.rules.timing": {"why", "power_line"}, "sapa.rules.like_softmax": {"verdict_why", "why_failed", "regime_text"},
                  "sapa.rules.learning": {"verdicts_line"}}  # verdicts_line: tests/sapa/rules/test_learning.py

T = timing.TimingEvidence
FIVE = timing.MIN_ROUNDS


def five(r):
    return (r,) * FIVE


@pytest.mark.parametrize("cells,label,must", [
    ((("p2-causal", five(0.2)), ("p3-full", five(0.5))), "HOLDS", ()),
    ((("p2-causal", five(0.2)), ("p3-full", five(5.0))), "HOLDS_IN_REGIME", ("holds in the cells within: p2-causal",)),
    ((("p2-causal", five(5.0)), ("p3-full", five(1.5))), "FAILS", ("fails in the cells outside: p2-causal",)),
    ((("p2-causal", five(1.5)), ("p3-full", ())), "UNDETERMINED", ("marginal 1", "unmeasured 1")),
])
def test_timing_why_agrees_with_its_label(cells, label, must):
    ev = T(cells)
    assert timing.decide(ev) == label
    why = timing.why(ev)
    for m in must:
        assert m in why
    if label != "HOLDS_IN_REGIME":
        assert "holds in" not in why
    if label != "FAILS":
        assert "fails in" not in why
    if label == "HOLDS":  # no ratio printed beyond the factor
        lo, hi = (float(x) for x in why.split("(geometric mean of rounds) ")[1].split(";")[0].split("–"))
        assert hi <= timing.FACTOR
    if label == "UNDETERMINED":  # the hardest marginal cell, its power and the runs that would decide it
        assert "hardest cell p2-causal" in why and "power" in why


def test_timing_why_names_the_gate_or_the_power_of_an_undetermined_reading():
    steady, jumpy = (0.5, 0.52, 0.49, 0.51, 0.5), (1.2, 1.9, 1.3, 1.6, 1.45)
    ev = T((("a", steady), ("b", jumpy)))
    assert timing.decide(ev) == "UNDETERMINED"
    line = timing.power_line(ev)
    assert line in timing.why(ev) and line.startswith("hardest cell b: ") and "run(s) would give 80%" in line
    assert "load gate" in timing.why(T((("a", steady),), load=9.0, cores=2))
    assert timing.power_line(T((("a", steady),))) == "no marginal cell"


def test_timing_why_caps_a_long_list_of_cells():
    cells = tuple((f"c{k}", five(0.2)) for k in range(9)) + (("far", five(5.0)),)
    assert timing.decide(T(cells)) == "HOLDS_IN_REGIME"
    assert "(+3 more)" in timing.why(T(cells))


def test_every_text_function_of_the_rules_is_listed_here():
    """A new rule function that writes a reason in words must join TEXT_FUNCTIONS (and get its agreement test)."""
    found = {}
    for m in pkgutil.iter_modules(sapa.rules.__path__):
        mod = importlib.import_module(f"sapa.rules.{m.name}")
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if fn.__module__ == mod.__name__ and inspect.signature(fn).return_annotation in ("str", str) \
                    and not name.startswith(("decide", "_", "case_", "cell_", "combine", "fingerprint")):
                found.setdefault(mod.__name__, set()).add(name)
    assert found == TEXT_FUNCTIONS


def test_timing_why_lists_exactly_six_cells_without_a_more():
    cells = tuple((f"c{k}", five(0.2)) for k in range(6)) + (("far", five(5.0)),)
    why = timing.why(T(cells))
    assert "holds in the cells within: c0, c1, c2, c3, c4, c5" in why and "more)" not in why
