"""Every notebook in `notebooks/` executes on a small budget, and its .ipynb is in sync with its .py.

The percent-format ``.py`` files are the diffable source (jupytext pairing); the ``.ipynb``
files are generated from them without outputs. Execution uses nbclient (the engine under
nbmake) with ``SAPA_SMALL=1``; a cell that raises fails the test, and every "agree:" line the
notebook prints must say True.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def test_there_is_one_notebook_per_theorem():
    names = [p.stem[:2] for p in NOTEBOOKS]
    assert names == ["01", "02", "03", "04", "05", "06"][: len(names)] and len(names) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_ipynb_is_in_sync_with_py(path):
    ipynb = path.with_suffix(".ipynb")
    assert ipynb.is_file(), f"run: jupytext --to ipynb {path.relative_to(ROOT)}"
    a = [c.source for c in jupytext.read(path).cells]
    b = [c.source for c in nbformat.read(ipynb, as_version=4).cells]
    assert a == b, f"{ipynb.name} is out of sync: jupytext --sync {path.relative_to(ROOT)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_and_agrees(path, monkeypatch, tmp_path):
    monkeypatch.setenv("SAPA_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = jupytext.read(path)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    agree = [line for line in text.splitlines() if "agree:" in line]
    assert agree, "the notebook must print expected / measured / agree lines"
    bad = [line for line in agree if not line.rstrip().endswith("True")]
    assert not bad, "\n".join(bad)
