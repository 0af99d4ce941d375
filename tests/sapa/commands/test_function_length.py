"""The commands are thin (issue 53): no function in `sapa/commands/*.py` is longer than 60 lines; the computation
lives in `sapa/api/`."""

from __future__ import annotations

import ast
from pathlib import Path

COMMANDS = Path(__file__).resolve().parents[3] / "sapa" / "commands"
LIMIT = 60


def long_functions(folder: Path, limit: int = LIMIT) -> list[str]:
    """'file:function (n lines)' for every function (nested ones too) of ``folder/*.py`` longer than ``limit``."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    found.append(f"{path.name}:{node.name} ({n} lines)")
    return found


def test_no_command_function_is_longer_than_60_lines():
    assert len(list(COMMANDS.glob("*.py"))) > 10  # the walk sees the commands
    assert long_functions(COMMANDS) == []


def test_the_walk_finds_a_long_function(tmp_path):
    """Negative control: a 61-line function is found, a 60-line one is not."""
    body = "".join(f"    x{i} = {i}\n" for i in range(59))
    (tmp_path / "a.py").write_text(f"def ok():\n{body}\n\ndef long():\n{body}    return 0\n")
    assert long_functions(tmp_path) == ["a.py:long (61 lines)"]
