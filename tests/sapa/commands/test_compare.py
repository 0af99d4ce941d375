"""Tests for `sapa/commands/compare.py`: bad input is one line and exit 2 before any work; --json and --out."""

from __future__ import annotations

import json

import pytest

from sapa.cli import main


@pytest.mark.parametrize("argv", [["compare", "nope("], ["compare", "x_alpha"], ["compare", "x", "--budget", "huge"],
                                  ["compare", "x", "--json", "--markdown"]])
def test_bad_input_is_one_line_and_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and err[-1].startswith("sapa") and "Traceback" not in "".join(err)


def test_json_and_out(tmp_path, capsys, monkeypatch):
    import sapa.api.compare as C

    monkeypatch.setitem(C.BUDGETS, "quick", C.BUDGETS["tiny"])
    assert main(["compare", "x3_sqrtN", "--json", "--out", str(tmp_path)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in d["rows"]] == ["softmax", "x3_sqrtN"]
    assert json.loads((tmp_path / "scorecard.json").read_text())["rows"] == d["rows"]
    assert sorted(p.suffix for p in tmp_path.glob("compare_scorecard*")) == [".pdf", ".png"]
