"""`sapa train`'s summary: no empty α* line, and one display name per arm in every table and figure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sapa.display import arm_name
from sapa.commands.train_summary import alpha_line


@pytest.mark.parametrize("prov,want", [
    ({"alpha_star": {"digits": {}}}, "α*: none tuned (digits: no fixed-α arm x^p/α* on this task)"),
    ({"alpha_star": {"digits": {}, "text": {3: 12.5, 1: 3.0}}},
     "α* (tuned at the smallest N, then fixed): text p=1: 3.00, p=3: 12.5; none tuned for digits (no fixed-α arm "
     "x^p/α* on it)"),
    ({}, "α*: none tuned in this run (the study reported no fixed-α arm, x^p/α*)"),
])
def test_alpha_line_is_never_empty(prov, want):
    line = alpha_line(prov)
    assert line == want
    assert not re.search(r":\s*(digits|text)?\s*$", line)  # never a label with nothing after it


def test_one_display_name_per_arm_in_the_summary_and_the_figures():
    from empirics.training.study_config import ARMS
    from figures.training_vs_n import LABELS

    assert LABELS == {k: arm_name(k) for k in ARMS}
    assert arm_name("x_sqrtN") == "x/√N" and arm_name("expr") == "φ"


def test_summary_table_prints_display_names_not_keys():
    from sapa.commands.train_summary import summary
    from tests.empirics.training.study_fixture import make_study

    st = make_study(tasks={"digits": (16, 64)}, seeds=2, lrs=(1e-3,), seed=4)
    st.provenance.update({"members": 40, "chunks": 4})
    text = summary(st, Path("results/train"), 1.0)
    arms = set(st.runs["arm"])
    assert arms - {"softmax"}
    for a in arms:
        assert arm_name(a) in text
        if a not in ("softmax", "x", "x3"):
            assert not re.search(rf"(?<![\w/]){re.escape(a)}(?![\w/])", text), a
    assert "α*" in text and not re.search(r"α\*[^\n]*:\s*\w*\s*$", text, re.M)


@pytest.mark.parametrize("prov, want", [
    ({"config": {"look2_refine": 0}}, "dose-response: one look"),
    ({"config": {"look2_refine": 5, "alphas": [1, 2, 4, 8]}, "second_look": []}, "second look: none needed"),
    ({"config": {"look2_refine": 5, "alphas": [1, 2, 4, 8, 16, 32, 64, 128]},
      "second_look": [{"task": "text", "p": 3, "lr": 0.01}]},
     "text x³/c at lr 0.01, each with 28 more doses of c"),
])
def test_look2_line_says_what_the_second_look_trained(prov, want):
    from sapa.commands.train_summary import look2_line

    assert want in look2_line(prov)
