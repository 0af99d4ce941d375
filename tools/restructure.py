"""Move empirics/ into subpackages by idea, and rewrite every reference to a moved module (issue 24).

The move map below (old dotted module → new dotted module) is the single source of truth:

* ``python3 tools/restructure.py``               ``git mv`` every module and its mirrored test, then rewrite.
* ``python3 tools/restructure.py --rewrite-only`` rewrite references only (idempotent): run it after merging a
  branch that still uses old paths.
* ``python3 tools/restructure.py --check``        list files that still name an old path (exit 1 if any).
* ``python3 tools/restructure.py --map``          print the map, old → new, one per line.

A reference is rewritten in every tracked ``.py .ipynb .toml .md .j2`` file and in
``sapa/rules/calibrations.json``:

* dotted names ``empirics.norms`` (imports, ``import … as``, ``mock.patch`` / ``monkeypatch`` strings, docs);
* ``from empirics import norms, real`` (split by new parent package when the names now live apart);
* file paths ``empirics/norms.py``, ``tests/empirics/test_norms.py`` and package folders ``empirics/sweep/``.

The rewrite changes the source of ``sapa/rules/*.py`` (their docstrings and lazy imports name empirics
modules), and a stored calibration is keyed on a fingerprint of its rule's source. A rewrite does not change
what a rule computes, so a stored fingerprint that matched the source before the rewrite is refreshed to the
rewritten source (and only then; a stale one stays stale).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# --- the map: old module → new module -------------------------------------------------------------------------
# Packages (a folder with __init__.py) move as a whole; their submodules follow.
PACKAGES = {"empirics.sweep": "empirics.montecarlo.sweep"}

_GROUPS = {
    # process and storage plumbing: no idea of the paper, used by every layer above
    "common": ["numerics", "pool", "progress", "interrupt", "integrity", "figdata", "outdir"],
    "empirics.kernels": ["norms", "linearised", "lipschitz", "scale"],
    "empirics.montecarlo": ["samplers", "stats", "growth_series", "workload", "distributed"],
    "empirics.training": ["tiny_models", "ensemble", "study_config", "study_chunk", "study_store", "study_analysis",
                          "train_study", "train_data", "train_bench", "norm_accuracy"],
    "empirics.realmodel": ["real", "real_model", "real_records", "real_analysis", "real_geometry"],
    "empirics.timing": ["bench", "overhead"],
    "empirics.experiments": ["scale_direction", "causal", "worst_case", "softmax_bounds", "audit"],
}
MODULES: dict[str, str] = {f"empirics.{m}": f"{pkg}.{m}" for pkg, ms in _GROUPS.items() for m in ms}

# Renames after the move (one name per idea). old → new, applied after MODULES (chains are resolved).
RENAMES: dict[str, str] = {}

# Names that moved from one module to another (old dotted name → new), rewritten after the module moves.
# Seeds: every random stream derives from (seed, key) in one module named for it.
SYMBOLS: dict[str, str] = {}

# Tests that move without their module moving (tests mirror the source tree).
TEST_MOVES: dict[str, str] = {}

# Tests whose file name is not test_<module>.py: the module whose folder they follow.
TEST_HOME = {"test_norms_range": "empirics.norms", "test_trial_design": "empirics.sweep",
             "test_train_study_kill": "empirics.train_study", "study_fixture": "empirics.train_study"}

EXTS = (".py", ".ipynb", ".toml", ".md", ".j2")
EXTRA_FILES = ("sapa/rules/calibrations.json",)
SELF = Path(__file__).resolve()


def _resolve(old: str) -> str:
    """Follow MODULES/PACKAGES then RENAMES to the module's final name."""
    new = MODULES.get(old, old)
    for pkg, dst in PACKAGES.items():
        if new == pkg or new.startswith(pkg + "."):
            new = dst + new[len(pkg):]
    seen = set()
    while new in RENAMES and new not in seen:
        seen.add(new)
        new = RENAMES[new]
    return new


def module_map() -> dict[str, str]:
    """Every old dotted module (source and tests) → its new dotted module."""
    out: dict[str, str] = {}
    for old in list(MODULES) + list(PACKAGES) + list(RENAMES):
        out[old] = _resolve(old)
    for old, new in list(out.items()):
        if old.startswith("empirics.") and old not in PACKAGES:
            leaf = old.rsplit(".", 1)[1]
            out[f"tests.empirics.test_{leaf}"] = _test_module(new)
    for test, home in TEST_HOME.items():
        out[f"tests.empirics.{test}"] = _test_module(_resolve(home), leaf=test)
    for pkg in PACKAGES:
        out["tests." + pkg] = "tests." + _resolve(pkg)
    for old in RENAMES:  # the test of a renamed module follows it (from its mirrored or its flat place)
        pkg, leaf = old.rsplit(".", 1)
        new_test = _test_module(_resolve(old))
        out[f"tests.{pkg}.test_{leaf}"] = new_test
        if pkg.startswith("sapa."):
            out[f"tests.sapa.test_{leaf}"] = new_test
    out.update(TEST_MOVES)
    return {k: v for k, v in out.items() if k != v}


def _test_module(new: str, leaf: str | None = None) -> str:
    """tests.<mirror of new's package>.<test_leaf>: the test follows its module into the mirrored folder."""
    pkg, name = new.rsplit(".", 1)
    if pkg.endswith(".sweep") or new.endswith(".sweep"):  # tests of a package live in its mirrored folder
        pkg = new if new.endswith(".sweep") else pkg
    return f"tests.{pkg}.{leaf or 'test_' + name}"


def _path(dotted: str, package: bool = False) -> str:
    return dotted.replace(".", "/") + ("" if package else ".py")


# --- moving -----------------------------------------------------------------------------------------------------
def _git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def _ensure_package(folder: Path) -> None:
    """Create folder/__init__.py (and its parents' up to the repo) when missing."""
    for f in [folder, *folder.parents]:
        if f == ROOT or ROOT not in f.parents:
            break
        init = f / "__init__.py"
        if not init.exists():
            f.mkdir(parents=True, exist_ok=True)
            init.write_text("")
            _git("add", str(init.relative_to(ROOT)))


def move() -> None:
    """git mv every source module, package and mirrored test to its new place."""
    moves: list[tuple[str, str]] = []
    for old, new in module_map().items():
        is_pkg = old in PACKAGES or old.removeprefix("tests.") in PACKAGES
        src, dst = ROOT / _path(old, is_pkg), ROOT / _path(new, is_pkg)
        if src.exists() and not dst.exists():
            moves.append((src, dst))
    for src, dst in sorted(moves, key=lambda m: (not m[0].is_dir(), str(m[0]))):  # folders first
        if not src.exists():
            continue
        _ensure_package(dst.parent)
        _git("mv", str(src.relative_to(ROOT)), str(dst.relative_to(ROOT)))


# --- rewriting --------------------------------------------------------------------------------------------------
def _rules(mapping: dict[str, str]) -> list[tuple[re.Pattern, str]]:
    rules: list[tuple[re.Pattern, str]] = []
    for old in sorted(mapping, key=len, reverse=True):
        new = mapping[old]
        rules.append((re.compile(r"(?<![\w.])" + re.escape(old) + r"(?!\w)"), new))
        is_pkg = old in PACKAGES or old.removeprefix("tests.") in PACKAGES
        if is_pkg:
            rules.append((re.compile(r"(?<![\w])" + re.escape(_path(old, True)) + r"(?=/)"), _path(new, True)))
        else:
            rules.append((re.compile(r"(?<![\w])" + re.escape(_path(old)) + r"(?!\w)"), _path(new)))
    return rules


_FROM = re.compile(r"^(?P<ind>[ \t]*)from (?P<pkg>[\w.]+) import (?P<names>\([^)]*\)|[^\n#]+?)(?P<tail>[ \t]*#[^\n]*)?$",
                   re.M)


def _rewrite_from(text: str, mapping: dict[str, str]) -> str:
    """``from P import a, b as c`` where P.a moved: import each name from its new package (one line per package)."""

    def fix(m: re.Match) -> str:
        pkg, raw = m["pkg"], m["names"]
        body = raw[1:-1] if raw.startswith("(") else raw
        items = [s.strip() for s in body.replace("\n", " ").split(",") if s.strip()]
        if not any(f"{pkg}.{i.split(' as ')[0].strip()}" in mapping for i in items):
            return m.group(0)
        groups: dict[str, list[str]] = {}
        for item in items:
            name, _, alias = (p.strip() for p in item.partition(" as "))
            new = mapping.get(f"{pkg}.{name}")
            if new is None:
                groups.setdefault(pkg, []).append(item)
                continue
            parent, leaf = new.rsplit(".", 1)
            alias = alias or (name if leaf != name else "")
            groups.setdefault(parent, []).append(f"{leaf} as {alias}" if alias and alias != leaf else leaf)
        lines = [f"{m['ind']}from {parent} import {', '.join(names)}" for parent, names in groups.items()]
        lines[0] += m["tail"] or ""
        return "\n".join(lines)

    return _FROM.sub(fix, text)


def rewrite_text(text: str, mapping: dict[str, str], rules) -> str:
    text = _rewrite_from(text, mapping)
    for pat, new in rules:
        text = pat.sub(new, text)
    # second pass: names that moved between modules (the module paths above are already the new ones)
    text = _rewrite_from(text, SYMBOLS)
    for old, new in SYMBOLS.items():
        text = re.sub(r"(?<![\w.])" + re.escape(old) + r"(?!\w)", new, text)
    return text


def _tracked_files(exclude: tuple[str, ...] = ()) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    files = [ROOT / f for f in out if (f.endswith(EXTS) or f in EXTRA_FILES) and f not in exclude]
    return [f for f in files if f.is_file() and f.resolve() != SELF]


def _rule_fingerprints() -> dict[str, tuple[str, str]]:
    """rule name → (its module's source file, sha256 of the fingerprint's metadata part), as sapa/rules/store.py."""
    code = (
        "import inspect, json, hashlib\n"
        "from sapa.rules import all_rules\n"
        "out = {}\n"
        "for r in all_rules():\n"
        "    meta = json.dumps({'thresholds': r.thresholds, 'design': r.design, 'trials': r.trials, 'name': r.name},\n"
        "                      sort_keys=True, default=repr)\n"
        "    out[r.name] = [inspect.getsourcefile(r.decide), meta]\n"
        "print(json.dumps(out))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    if res.returncode:
        print("restructure: cannot list the rules to refresh fingerprints:\n" + res.stderr, file=sys.stderr)
        return {}
    return {k: tuple(v) for k, v in json.loads(res.stdout).items()}


def _fp(src: bytes, meta: str) -> str:
    return hashlib.sha256(src + b"\0" + meta.encode("utf-8")).hexdigest()


def rewrite(check_only: bool = False, exclude: tuple[str, ...] = ()) -> list[Path]:
    """Rewrite every reference to an old module path; the files changed (or, with check_only, that would be)."""
    mapping = module_map()
    rules = _rules(mapping)
    before: dict[Path, bytes] = {}
    changed: list[Path] = []
    for f in _tracked_files(exclude):
        text = f.read_text(encoding="utf-8")
        new = rewrite_text(text, mapping, rules)
        if new != text:
            changed.append(f)
            if not check_only:
                before[f.resolve()] = text.encode("utf-8")
                f.write_text(new, encoding="utf-8")
    if not check_only and any("sapa/rules/" in str(p) for p in before):
        refresh_fingerprints(before)
    return changed


def _old_names(meta: str) -> list[str]:
    """Candidate pre-rewrite forms of a rule's metadata: as is, and with every new module path put back.

    A rule's design can name the estimator it calibrates (``empirics.training.study_analysis.gap_trend``):
    the rewrite changes that text, so the stored fingerprint was taken over the old name.
    """
    step = {**MODULES, **PACKAGES, **RENAMES, **SYMBOLS}  # one step of the history: name → its next name
    back = {new: old for old, new in step.items()}
    out, text = [meta], meta
    for _ in range(3):  # undo up to three steps (move, rename, moved name)
        for new in sorted(back, key=len, reverse=True):
            text = re.sub(r"(?<![\w.])" + re.escape(new) + r"(?!\w)", back[new], text)
        out.append(text)
    return out


def refresh_fingerprints(before: dict[Path, bytes]) -> list[str]:
    """Refresh each stored fingerprint that matched its rule's source (and metadata) before the rewrite."""
    store = ROOT / "sapa/rules/calibrations.json"
    if not store.is_file():
        return []
    data = json.loads(store.read_text(encoding="utf-8"))
    fixed = []
    for name, (src, meta) in _rule_fingerprints().items():
        src = Path(src).resolve()
        e = data.get(name)
        if src not in before or not isinstance(e, dict):
            continue
        new_fp = _fp(src.read_bytes(), meta)
        if e.get("fingerprint") != new_fp and any(e.get("fingerprint") == _fp(before[src], m) for m in _old_names(meta)):
            e["fingerprint"] = new_fp
            fixed.append(name)
    if fixed:
        sys.path.insert(0, str(ROOT))
        from common.atomic import atomic_write_json

        atomic_write_json(store, dict(sorted(data.items())))
        print(f"restructure: refreshed the fingerprints of {len(fixed)} stored calibrations ({', '.join(fixed)})")
    return fixed


def map_lines() -> list[str]:
    return ([f"{old} → {new}" for old, new in sorted(module_map().items())]
            + [f"{old} → {new}  (name)" for old, new in sorted(SYMBOLS.items())])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--rewrite-only", action="store_true", help="rewrite references only (idempotent)")
    g.add_argument("--check", action="store_true", help="list files that name an old path; exit 1 if any")
    g.add_argument("--map", action="store_true", help="print the map, old → new")
    p.add_argument("--exclude", action="append", default=[], metavar="PATH",
                   help="leave this file as it is (repeatable; e.g. README.md while another branch rewrites it)")
    args = p.parse_args(argv)
    if args.map:
        print("\n".join(map_lines()))
        return 0
    if args.check:
        stale = rewrite(check_only=True, exclude=tuple(args.exclude))
        for f in stale:
            print(f.relative_to(ROOT))
        return 1 if stale else 0
    if not args.rewrite_only:
        move()
    changed = rewrite(exclude=tuple(args.exclude))
    print(f"restructure: rewrote {len(changed)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
