"""Each kind of thing is registered in one place, and that place agrees with the ledger's order.

Entries: discovered from ``sapa/claims`` (a module's ``CLAIM``), ordered by ``sapa/claim_ids.py``'s ORDER. Rules:
discovered from ``sapa/rules`` (a module's ``RULES``). Figures: one row each in ``figures/catalogue.py``. Commands:
listed once in ``sapa.commands.COMMANDS``. Activation families: ``theory/families.py`` (tests/theory/test_families.py).
Also the layout the registries keep readable: ≤ 12 top-level ``sapa`` modules, no module name shared by two files
with different jobs, no entry check longer than 60 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HELPERS = {"growth_check", "like_softmax_check", "learning_check"}  # shared by several entries, not entries


def test_every_entry_module_is_discovered_once_in_ledger_order():
    from sapa.claims import ORDER, all_claims, entry_modules

    assert [c.id for c in all_claims()] == list(ORDER) and len(set(ORDER)) == len(ORDER)
    for name, mod in entry_modules().items():
        if name in HELPERS:
            assert not hasattr(mod, "CLAIM") and not hasattr(mod, "CLAIMS"), name
        else:  # one module per entry, named for it
            assert hasattr(mod, "CLAIM") and not hasattr(mod, "CLAIMS"), name
            assert mod.CLAIM.id.replace("-", "_").replace(".", "_") == name, name


def test_no_entry_check_is_longer_than_sixty_lines():
    long = []
    for path in sorted((ROOT / "sapa" / "claims").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 60:
                long.append(f"{path.stem}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert long == []


def test_rules_are_discovered_with_unique_names_and_stored_calibrations():
    import json

    from sapa.rules import all_rules

    names = [r.name for r in all_rules()]
    assert len(names) == len(set(names)) and "growth-upper" in names and "audit-like-softmax" in names
    stored = json.loads((ROOT / "sapa" / "rules" / "calibrations.json").read_text())
    assert set(names) <= set(stored)  # `sapa calibrate --rule NAME --store` registers a new rule's calibration


def test_every_figure_is_one_row_of_the_catalogue_in_ledger_order():
    from sapa.figures.captions import CAPTIONS
    from sapa.figures.catalogue import FIGURES
    from sapa.claim_ids import ORDER

    for kind in ("run", "stored"):
        rows = [f for f in FIGURES if f.drawn == kind]
        firsts = [ORDER.index(f.claims[0]) for f in rows]
        assert firsts == sorted(firsts), kind  # rows in the ledger's order of their first entry
    for f in FIGURES:
        assert all(c in ORDER for c in f.claims), f.name
        assert [ORDER.index(c) for c in f.claims] == sorted(ORDER.index(c) for c in f.claims), f.name
        assert (ROOT / "figures" / f"{f.module}.py").is_file(), f.name
    drawing = {p.stem for p in (ROOT / "figures").glob("*.py")
               if any(isinstance(n, ast.FunctionDef) and n.name == "draw" for n in ast.parse(p.read_text()).body)}
    assert drawing <= {f.module for f in FIGURES}  # every module that draws has a row
    stems = {s for f in FIGURES for s in f.stems}
    assert {c.prefix for c in CAPTIONS} <= stems  # every caption belongs to a catalogued figure


def test_every_command_is_listed_once_and_has_its_module():
    from sapa.cli import build_parser
    from sapa.commands import COMMANDS, command_module
    from sapa.commands.usage import subparsers

    assert list(subparsers(build_parser())) == list(COMMANDS)
    for name in COMMANDS:
        mod = command_module(name)
        assert callable(mod.add_parser) and callable(mod.run), name
    with_parsers = {p.stem for p in (ROOT / "sapa" / "commands").glob("*.py")
                    if any(isinstance(n, ast.FunctionDef) and n.name == "add_parser" for n in ast.parse(p.read_text()).body)}
    assert with_parsers == set(COMMANDS)


def test_the_sapa_top_level_holds_at_most_twelve_modules():
    assert len(list((ROOT / "sapa").glob("*.py"))) <= 12


# A subject computed, drawn and judged in different layers keeps one name in each (theory/X exact, empirics/.../X
# sampled or timed, figures/X drawn, sapa/.../X its entry or command): a name may appear once per layer. Two files of
# one layer with one name (four audit.py: theory, empirics, two in sapa) are two jobs under one name.
# sapa/api (the Python API: sapa.api.audit computes what sapa/commands/audit.py prints) is a layer of its own, below
# the commands (a contract in pyproject.toml).
LAYERS = ("common", "theory", "empirics", "figures", "sapa/api", "sapa", "tools")


def _layer(path: str) -> str:
    return next(layer for layer in LAYERS if path == layer or path.startswith(layer + "/"))


def test_no_module_name_is_shared_by_two_files_of_one_layer():
    seen: dict[str, list[str]] = {}
    for pkg in LAYERS:
        for p in (ROOT / pkg).rglob("*.py"):
            if p.name != "__init__.py" and str(p.relative_to(ROOT)) not in seen.get(p.stem, []):
                seen.setdefault(p.stem, []).append(str(p.relative_to(ROOT)))
    clashes = {k: v for k, v in seen.items() if len({_layer(x) for x in v}) < len(v)}
    assert clashes == {}
    assert len(seen["overhead"]) == 3  # the check sees the layers: empirics/timing, figures, sapa/claims
    assert seen["audit"] == ["sapa/api/audit.py", "sapa/commands/audit.py"]  # computed in one layer, printed in another
