"""One seed derivation: no module derives a random stream except through `sapa.common.seeds`.

``rng_for(seed, *key)`` / ``torch_gen_for(seed, *key)`` (``SeedSequence(seed, spawn_key=sha256(key))``)
are the only way a stream is named. This test parses every source file (AST, so comments and strings
do not count) and fails on the ad hoc derivations that used to live here: ``crc32`` of a name, a
``SeedSequence([...])`` / ``default_rng([...])`` of a hand-built list, ``seed + 42`` / ``seed * 1_000_003``
arithmetic, and ``manual_seed(...)`` anywhere but in ``common/seeds.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "theory", "empirics", "figures", "sapa", "notebooks")
ALLOWED = {"common/seeds.py"}  # the one place that seeds generators


def _name(node: ast.AST) -> str:
    """The last dotted component of a Name/Attribute ('' for anything else)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _int_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def forbidden(source: str) -> list[tuple[int, str]]:
    """(line, what) of every ad hoc seed derivation in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Name, ast.Attribute)) and _name(node) == "crc32":
            out.append((node.lineno, "crc32"))
        elif isinstance(node, ast.Call):
            fn = _name(node.func)
            if fn == "manual_seed":
                out.append((node.lineno, "manual_seed("))
            elif fn in ("SeedSequence", "default_rng") and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
                out.append((node.lineno, f"{fn}([...])"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.BitXor)):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if "seed" in _name(a).lower() and _int_literal(b):
                    out.append((node.lineno, f"seed {type(node.op).__name__} <int literal>"))
                    break
    return sorted(set(out))


def test_the_detector_finds_each_pattern_and_passes_the_one_way():
    bad = """
import zlib, numpy as np, torch
a = zlib.crc32(b"k")
b = np.random.default_rng(np.random.SeedSequence([seed, p, 0x5CA1E]))
c = np.random.default_rng([int(seed), 0xC0DE])
d = torch.Generator().manual_seed(cfg.seed * 1_000_003 + N)
e = f(seed=cfg.seed + 42)
f2 = 7 + base_seed
"""
    found = [what for _, what in forbidden(bad)]
    assert found == ["crc32", "SeedSequence([...])", "default_rng([...])", "manual_seed(", "seed Mult <int literal>",
                     "seed Add <int literal>", "seed Add <int literal>"]
    good = """
from sapa.common.seeds import rng_for, torch_gen_for
rng = rng_for(cfg.seed, "worst_case", N)
gen = torch_gen_for(seed, "overhead", N)
n = seed_count + k  # names with 'seed' plus a non-literal are fine
"""
    assert forbidden(good) == []


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_ad_hoc_seed_derivation(path):
    rel = path.relative_to(ROOT).as_posix()
    hits = [] if rel in ALLOWED else forbidden(path.read_text(encoding="utf-8"))
    assert not hits, f"{rel}: " + "; ".join(f"line {n}: {what}" for n, what in hits) + (
        " — derive streams with sapa.common.seeds.rng_for(seed, *key) / torch_gen_for(seed, *key)")
