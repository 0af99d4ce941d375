"""Tests for `figures/compare_scorecard.py`: draws from plain data, no sapa.api import."""

from __future__ import annotations

from pathlib import Path

from sapa.figures import compare_scorecard as F


def _data() -> dict:
    cell = {"value": 0.5, "interval": [0.4, 0.6], "verdict": "HOLDS"}
    missing = {"value": None, "interval": None, "verdict": None, "note": "not computed: x"}
    return {"axes": ["size", "time"], "budget": "tiny", "rows": [{"id": "softmax", "label": "softmax"},
                                                                 {"id": "x", "label": "x³/√N"}],
            "cells": [{"size": cell, "time": missing}, {"size": dict(cell, verdict="FAILS"), "time": cell}]}


def test_draws_png_and_pdf(tmp_path):
    paths = F.main(_data(), tmp_path)
    assert sorted(p.suffix for p in paths) == [".pdf", ".png"] and all(p.stat().st_size > 0 for p in paths)


def test_does_not_import_the_api_layer():
    import ast

    tree = ast.parse(Path(F.__file__).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not any(m.startswith("sapa.api") for m in names)
