"""The layers are a checked contract (theory → empirics → figures → sapa, empirics by floors), rules stay pure, no circle.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``); import-linter reads the import graph.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.layout import FOLDERS, installed_as, installed_tree

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept(tmp_path):
    """import-linter reads packages from the file system, where sapa.theory lives in theory/, not in sapa/: it reads
    a copy laid out as a wheel installs it (tests.layout.installed_tree), in a fresh interpreter that finds it first."""
    tree = installed_tree(tmp_path / "tree")
    run = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                          f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True, "
                          "no_logo=True))"], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                         capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    n = len(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"])
    assert "BROKEN" not in out and f"{n} kept, 0 broken" in out


def test_every_module_of_sapa_own_is_in_the_top_layer():
    """A new module of sapa's own (sapa/x.py or sapa/x/) must be named in the top layer, or no contract covers it."""
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    top = {m.strip() for m in contract["layers"][0].split(":")}
    own = {f"sapa.{p.stem if p.suffix else p.name}" for p in (ROOT / "sapa").iterdir()
           if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()}
    assert top == own
    assert contract["layers"][1:] == [f"sapa.{f}" for f in ("figures", "empirics", "theory", "common")]


# --- no import circle -------------------------------------------------------------------------------------------
PACKAGES = ("sapa",) + FOLDERS


def import_graph(root: Path, packages=PACKAGES) -> dict[str, set[str]]:
    """module → the project modules it imports, anywhere in its body (lazy imports inside functions too).

    ``from a.b import c`` points at ``a.b.c`` when that is a module, else at ``a.b``; ``import a.b`` at ``a.b``.
    """
    import ast

    mods: dict[str, Path] = {}
    for pkg in packages:
        for p in (root / pkg).rglob("*.py"):
            parts = p.relative_to(root).with_suffix("").parts
            parts = (installed_as(parts[0]),) + parts[1:]
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p

    def target(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, p in mods.items():
        anchor = name.split(".") if p.name == "__init__.py" else name.split(".")[:-1]
        out: set[str] = set()
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Import):
                names = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:  # relative: from .x import y
                    base = ".".join(anchor[: len(anchor) - (n.level - 1)] + ([base] if base else []))
                names = [f"{base}.{a.name}" for a in n.names]
            else:
                continue
            out |= {t for t in map(target, names) if t and t != name}
        graph[name] = out
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_circle_in_the_project():
    graph = import_graph(ROOT)
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the walk sees the project
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle_through_a_lazy_import(tmp_path):
    """a → b at import, b → c inside a function, c → a: one circle of three; d (imports a) is outside it."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.c import g\n    return g\n")
    (pkg / "c.py").write_text("import pkg.a\n\ndef g():\n    return 1\n")
    (pkg / "d.py").write_text("from . import a\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.d"] == {"pkg.a"} and graph["pkg.b"] == {"pkg.c"}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
