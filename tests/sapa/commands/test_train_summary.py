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
    from sapa.empirics.training.study_config import ARMS
    from sapa.figures.training_vs_n import LABELS

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


@pytest.mark.parametrize("prov,start,absent", [
    # a fresh quick study: 80 members trained in 8 chunks, 10 more rows read under a second arm's name
    ({"members": 90, "members_aliased": 10, "chunks": 8, "members_trained_now": 80, "chunks_trained_now": 8},
     "Trained all 80 members (8 ensemble chunks) in 2.0 s; 10 more rows are members read under a second arm's name",
     "reused"),
    ({"members": 90, "members_aliased": 10, "chunks": 8, "members_trained_now": 20, "chunks_trained_now": 2},
     "Trained 20 of 80 members now and reused the other 60 (6 ensemble chunks), finished earlier in", None),
    ({"members": 90, "members_aliased": 10, "chunks": 8, "members_trained_now": 0, "chunks_trained_now": 0},
     "Nothing to train in the study: all 80 members (8 ensemble chunks) were already finished in", "reused"),
    ({"members": 40, "chunks": 4, "members_trained_now": 40}, "Trained all 40 members (4 ensemble chunks)", "reused"),
])
def test_the_reuse_line_says_what_this_run_trained(prov, start, absent):
    """A fresh `sapa train` said "reused the other 10 … finished earlier": the 10 were aliased rows, never trained."""
    from sapa.commands.train_summary import reuse_line

    line = reuse_line(prov, Path("out"), 2.0)
    assert line.startswith(start) and (absent is None or absent not in line)


def test_an_interrupted_train_counts_the_chunks_it_kept(tmp_path, monkeypatch, capsys):
    """`sapa train` interrupted after 4 s said "finished training chunks were kept" with none kept."""
    from sapa.cli import main
    from sapa.commands import train

    def interrupted_after(n):
        def study(args, workers):
            (args.out / "chunks").mkdir(parents=True, exist_ok=True)
            for k in range(n):
                (args.out / "chunks" / f"c{k}.json").write_text("{}")
            (args.out / "chunks" / ".c9.json.1a2b.tmp.json").write_text("")  # one in flight: not finished
            raise KeyboardInterrupt
        return study

    for n, want in ((0, "no training chunk had finished, so none was kept; a rerun starts from the beginning"),
                    (1, f"1 finished training chunk is kept in {tmp_path / 'a1'} (chunks); a rerun resumes from them"),
                    (3, f"3 finished training chunks are kept in {tmp_path / 'a3'} (chunks); a rerun resumes from them")):
        monkeypatch.setattr(train, "_train", interrupted_after(n))
        assert main(["train", "--out", str(tmp_path / f"a{n}")]) == 130
        assert capsys.readouterr().err.strip().splitlines()[-1] == f"sapa: interrupted; {want}"
