"""Tests for the top of the package (`sapa/__init__.py`) and the API's layering: five functions under one name,
`import sapa` stays light, sapa.api never imports sapa.commands."""

from __future__ import annotations

import ast
import json
import pydoc
import subprocess
import sys
from pathlib import Path

import sapa

API = Path(__file__).resolve().parents[3] / "sapa" / "api"
FIVE = ["audit", "compare", "exact", "load_ledger", "norms"]


def test_help_lists_the_five_functions():
    assert sorted(sapa.__all__) == FIVE
    text = pydoc.render_doc(sapa, renderer=pydoc.plaintext)
    functions = text[text.index("FUNCTIONS"):]
    for name in FIVE:
        assert f"sapa.{name}(" in sapa.__doc__ and f"\n    {name}(" in functions


def test_import_sapa_loads_no_heavy_library():
    probe = "import sys, json, sapa; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                       check=True).stdout)
    assert not {"torch", "sympy", "scipy", "pandas", "matplotlib"} & set(loaded)


def test_an_unknown_name_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        sapa.nonsense


def test_the_api_imports_no_command():
    """The commands print the API; the API never reaches up into them (compare*.py: a colleague's, checked apart)."""
    found = []
    for path in sorted(API.glob("*.py")):
        if path.name.startswith("compare"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {n}" for n in names if n == "sapa.commands" or n.startswith("sapa.commands.")]
    assert len(list(API.glob("*.py"))) >= 8 and found == []
