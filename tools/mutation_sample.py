"""A seeded random sample of first-order mutants of the core mathematics, each run against its module's tests.

Mutation operators (on the AST, one change per mutant; docstrings and strings never touched):
arithmetic swaps (+ ↔ −, * ↔ /, ** → *, // → /), comparison swaps (< ↔ ≤, > ↔ ≥, == ↔ !=), integer and float
constants c → c + 1 (0.5 → 1.5; 0 → 1), unary minus removed, ``and`` ↔ ``or``, ``not x`` → ``x``.
Each mutant is written into a copy of the repository (``--work``), only the tests that mirror the module run
(``pytest -n 0 -x -q``, a time cap of ``--cap`` seconds counts as killed), and the result is one JSON line
per mutant. ``--sample K`` draws K mutants per module with ``random.Random(seed)``; 0 runs them all.

    python3 tools/mutation_sample.py --sample 4 --seed 23 --out mutants.jsonl MODULE=TESTS ...

``--only 'line 78: Or → And'`` (repeatable) reruns named mutants of the same sample, e.g. an earlier run's survivors.

Each module draws from its own ``random.Random(f"{seed}:{module}")`` so the sample of a module does not
depend on which other modules run or in which order.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.Pow: ast.Mult,
        ast.FloorDiv: ast.Div, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
        ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.And: ast.Or, ast.Or: ast.And}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def mutation_points(src: str) -> list[tuple[int, str, str]]:
    """(index of the node in ast.walk order, kind, description) of every mutation of ``src``."""
    tree = ast.parse(src)
    docs = _docstring_nodes(tree)
    pts = []
    for k, node in enumerate(ast.walk(tree)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.BinOp) and type(node.op) in SWAP:
            pts.append((k, "binop", f"line {line}: {type(node.op).__name__} → {SWAP[type(node.op)].__name__}"))
        elif isinstance(node, ast.Compare):
            for j, op in enumerate(node.ops):
                if type(op) in SWAP:
                    pts.append((k, f"cmp{j}", f"line {line}: {type(op).__name__} → {SWAP[type(op)].__name__}"))
        elif isinstance(node, ast.BoolOp):
            pts.append((k, "boolop", f"line {line}: {type(node.op).__name__} → {SWAP[type(node.op)].__name__}"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            pts.append((k, "unary", f"line {line}: drop {type(node.op).__name__}"))
        elif (isinstance(node, ast.Constant) and id(node) not in docs and type(node.value) in (int, float)
              and not isinstance(node.value, bool)):
            pts.append((k, "const", f"line {line}: {node.value!r} → {node.value + 1!r}"))
    return pts


def apply(src: str, index: int, kind: str) -> str:
    tree = ast.parse(src)
    nodes = list(ast.walk(tree))
    node = nodes[index]
    parents = {id(c): p for p in nodes for c in ast.iter_child_nodes(p)}
    if kind == "binop" or kind == "boolop":
        node.op = SWAP[type(node.op)]()
    elif kind.startswith("cmp"):
        j = int(kind[3:])
        node.ops[j] = SWAP[type(node.ops[j])]()
    elif kind == "const":
        node.value = node.value + 1
    elif kind == "unary":
        parent = parents[id(node)]
        for field, value in ast.iter_fields(parent):
            if value is node:
                setattr(parent, field, node.operand)
            elif isinstance(value, list):
                setattr(parent, field, [node.operand if v is node else v for v in value])
    return ast.unparse(ast.fix_missing_locations(tree))


def run(module: str, tests: list[str], sample: int, rng: random.Random, work: Path, cap: float, out,
        baseline: bool = False, only: frozenset[str] = frozenset()) -> None:
    src = (ROOT / module).read_text()
    pts = mutation_points(src)
    chosen = sorted(rng.sample(pts, min(sample, len(pts)))) if sample else pts
    if only:  # rerun named mutants of the sample (e.g. the survivors of an earlier run)
        chosen = [p for p in chosen if p[2] in only]
    base = ast.unparse(ast.parse(src))  # the unparsed original (formatting only) must pass first
    for index, kind, what in ([(-1, "none", "unmutated (formatting only)")] if baseline else []) + chosen:
        text = base if index < 0 else apply(src, index, kind)
        (work / module).write_text(text)
        t0 = time.time()
        env = {**os.environ, "PYTHONPATH": str(work), "MPLBACKEND": "Agg"}
        try:
            rc = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-x", "-q", "-p", "no:cacheprovider",
                                 *tests], cwd=work, env=env, capture_output=True, timeout=cap).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        rec = {"module": module, "mutant": what, "points": len(pts), "rc": rc, "seconds": round(time.time() - t0, 1)}
        print(json.dumps(rec), file=out, flush=True)
        if index < 0 and rc != 0:
            print(json.dumps({"module": module, "error": "tests fail on the unmutated module"}), file=out, flush=True)
            break
    (work / module).write_text(src)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs", nargs="+", help="MODULE=TEST[,TEST...] (paths from the repository root)")
    ap.add_argument("--sample", type=int, default=5)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--cap", type=float, default=600.0)
    ap.add_argument("--work", type=Path, default=Path("/tmp/sapa-mutation"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--baseline", action="store_true", help="first run each module's tests on the unmutated (unparsed) module")
    ap.add_argument("--only", action="append", default=[],
                    help="run only the sampled mutants with this description (e.g. 'line 78: Or → And'); repeatable")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    shutil.copytree(ROOT, a.work, ignore=shutil.ignore_patterns(".git", "__pycache__", "results*"))
    with open(a.out, "a") as out:
        for pair in a.pairs:
            module, tests = pair.split("=", 1)
            run(module, tests.split(","), a.sample, random.Random(f"{a.seed}:{module}"), a.work, a.cap, out, a.baseline,
                frozenset(a.only))


if __name__ == "__main__":
    main()
