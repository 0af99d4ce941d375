"""Tests for `sapa/train_summary.py`: what ``sapa train`` prints (a table, the ledger's labels, what was reused)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sapa.train_summary import reuse_line, summary
from tests.empirics.training.study_fixture import make_study


@pytest.fixture(scope="module")
def study():
    s = make_study(tasks={"digits": (16, 64)}, seeds=2, history=True)
    prov = {**s.provenance, "members": len(s.runs), "chunks": 6, "members_trained_now": len(s.runs),
            "chunks_trained_now": 6}
    return dataclasses.replace(s, provenance=prov)


def test_summary_is_a_table_with_readable_columns_and_the_ledgers_labels(study):
    text = summary(study, Path("results/train"), 12.3)
    lines = text.splitlines()
    head, rule = lines[0], lines[1]
    assert head.split()[:3] == ["task", "N", "arm"] and "diverged at best lr" in head and "diverged over lr grid" in head
    assert set(rule.replace(" ", "")) == {"-"}
    assert "div@lr" not in text and "div/grid" not in text and "{" not in text  # no raw dict, no cryptic columns
    body = lines[2:lines.index("")]
    assert len(body) == study.runs.groupby(["task", "N", "arm"]).ngroups
    assert len({len(x) for x in [head] + body}) <= 2  # aligned (a trailing column may be shorter by right-alignment)
    arms = {x.split()[2] for x in body}
    assert {"x/α*", "x³/α*", "x/√N", "softmax"} <= arms and "x/α" not in arms
    assert "α* (tuned at the smallest N, then fixed): digits p=1: 4, p=3: 4" in text


def test_a_rerun_that_trains_nothing_says_what_it_reused_and_where():
    prov = {"members": 108, "chunks": 25, "members_trained_now": 0, "chunks_trained_now": 0}
    line = reuse_line(prov, Path("results/train"), 1.5)
    assert line.startswith("Nothing to train: all 108 members (25 ensemble chunks) were already finished in "
                           "results/train/chunks") and "sapa verify" in line and "0 trained now" not in line


def test_a_partial_rerun_counts_trained_and_reused_chunks():
    prov = {"members": 108, "chunks": 25, "members_trained_now": 8, "chunks_trained_now": 2}
    line = reuse_line(prov, Path("out"), 3.0)
    assert "Trained 8 of 108 members now and reused the other 100 (23 ensemble chunks)" in line and "out/chunks" in line
    full = reuse_line({**prov, "members_trained_now": 108, "chunks_trained_now": 25}, Path("out"), 3.0)
    assert full.startswith("Trained all 108 members (25 ensemble chunks)")
