"""Tests for the reading path of `sapa/commands/notebooks.py` (the rest: tests/notebooks/): a shipped .ipynb that is not
JSON, not nbformat 4 or not a regular file is one line and exit 2, saying which (issue 52, case 12)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sapa.cli import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def folder(tmp_path):
    """A notebook folder with the first shipped notebook's .py (and a place for its .ipynb)."""
    py = sorted((ROOT / "notebooks").glob("01_*.py"))[0]
    shutil.copy(py, tmp_path / py.name)
    return tmp_path, tmp_path / py.with_suffix(".ipynb").name


def _check(folder_path, capsys):
    code = main(["notebooks", "--check", "--dir", str(folder_path)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("text, needle", [
    ('{"nbformat": 99, "nbformat_minor": 0, "cells": [], "metadata": {}}', "has nbformat 99; sapa reads nbformat 4"),
    ("[1,2", "is not valid JSON (Expecting ',' delimiter at line 1, column 5)"),
    ("[1, 2]", "has a JSON list, not a notebook"),
    ('{"nbformat": "4", "cells": []}', "has nbformat '4'"),
    ('{"nbformat": 4, "nbformat_minor": 5, "cells": 7, "metadata": {}}', "is not a valid nbformat 4 notebook")])
def test_a_notebook_that_is_not_nbformat_4_json_is_one_line(folder, capsys, text, needle):
    where, ipynb = folder
    ipynb.write_text(text, encoding="utf-8")
    code, out, err = _check(where, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"sapa: error: notebook {ipynb} ") and needle in err and "Traceback" not in err


@pytest.mark.parametrize("kind, word", [("fifo", "a named pipe"), ("zero", "a character device")])
def test_a_fifo_or_a_device_is_called_what_it_is_not_missing(folder, capsys, kind, word):
    where, ipynb = folder
    if kind == "fifo":
        os.mkfifo(ipynb)
    else:
        ipynb.symlink_to("/dev/zero")
    code, out, err = _check(where, capsys)
    assert code == 2 and err.count("\n") == 1 and f"{ipynb} is not a regular file ({word})" in err, err
    assert "missing" not in err


def test_a_missing_notebook_or_a_dangling_link_is_still_missing(folder, capsys):
    where, ipynb = folder
    code, _, err = _check(where, capsys)
    assert code == 1 and f"{ipynb.name} is missing: run" in err
    ipynb.symlink_to(where / "nowhere.ipynb")
    code, _, err = _check(where, capsys)
    assert code == 1 and f"{ipynb.name} is missing: run" in err
