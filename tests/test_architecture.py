"""The layers are a checked contract (theory → empirics → figures → sapa, empirics by floors), rules stay pure, no circle.

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


# --- no import circle -------------------------------------------------------------------------------------------
PACKAGES = ("common", "theory", "empirics", "figures", "sapa")


def import_graph(root: Path, packages=PACKAGES) -> dict[str, set[str]]:
    """module → the project modules it imports, anywhere in its body (lazy imports inside functions too).

    ``from a.b import c`` points at ``a.b.c`` when that is a module, else at ``a.b``; ``import a.b`` at ``a.b``.
    """
    import ast

    mods: dict[str, Path] = {}
    for pkg in packages:
        for p in (root / pkg).rglob("*.py"):
            parts = p.relative_to(root).with_suffix("").parts
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
