"""The layers are a checked contract: theory → empirics → figures → sapa, and the verdict rules stay pure.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``); import-linter reads the import graph.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept(monkeypatch, capsys):
    from importlinter.cli import lint_imports

    monkeypatch.chdir(ROOT)
    code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    out = capsys.readouterr().out
    assert code == 0, out
    n = len(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"])
    assert "BROKEN" not in out and f"{n} kept, 0 broken" in out
