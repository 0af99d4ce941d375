"""Tests for `sapa train --export-evidence` (sapa/commands/train.py): it ships the budget's own study only."""

from __future__ import annotations

import pytest

from sapa.cli import main


@pytest.mark.parametrize("other", [["--seeds", "4"], ["--activation", "x/N"]])
def test_export_of_a_study_that_is_not_the_budget_is_refused_with_one_line(tmp_path, capsys, other):
    assert main(["train", "--out", str(tmp_path / "t"), "--export-evidence", str(tmp_path / "pack"), *other]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "running" not in ln]  # a loaded machine: a beat line
    assert err == ["sapa: error: --export-evidence ships the budget's own study: not with --seeds or --activation"]
    assert not (tmp_path / "pack").exists() and not (tmp_path / "t" / "chunks").exists()
