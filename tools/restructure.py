"""Move empirics/ into subpackages by idea, and rewrite every reference to a moved module (issue 24).

The move map below (old dotted module → new dotted module) is the single source of truth:

* ``python3 tools/restructure.py``               ``git mv`` every module and its mirrored test, then rewrite.
* ``python3 tools/restructure.py --rewrite-only`` rewrite references only (idempotent): run it after merging a
  branch that still uses old paths.
* ``python3 tools/restructure.py --check``        list files that still name an old path (exit 1 if any).
* ``python3 tools/restructure.py --map``          print the map, old → new, one per line.

A reference is rewritten in every tracked ``.py .ipynb .toml .md .j2`` file and in
``sapa/rules/calibrations.json``:

* dotted names ``sapa.empirics.norms`` (imports, ``import … as``, ``mock.patch`` / ``monkeypatch`` strings, docs);
* ``from empirics import norms, real`` (split by new parent package when the names now live apart);
* file paths ``empirics/norms.py``, ``tests/empirics/test_norms.py`` and package folders ``empirics/sweep/``.

Stored calibrations are keyed on a fingerprint of what a rule computes (sapa/rules/store.py), not of its
source, so a rewrite of names leaves them current; where a rule's design text names a moved module, the store's
test reports the fingerprint stale and ``sapa calibrate --store`` recomputes it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# --- the map: old module → new module -------------------------------------------------------------------------
# Packages (a folder with __init__.py) move as a whole; their submodules follow.
PACKAGES = {"sapa.empirics.sweep": "sapa.empirics.montecarlo.sweep"}

_GROUPS = {
    # process and storage plumbing: no idea of the paper, used by every layer above
    "common": ["numerics", "pool", "progress", "interrupt", "integrity", "figdata", "outdir"],
    "sapa.empirics.kernels": ["norms", "linearised", "lipschitz", "scale"],
    "sapa.empirics.montecarlo": ["samplers", "stats", "growth_series", "workload", "distributed"],
    "sapa.empirics.training": ["tiny_models", "ensemble", "study_config", "study_chunk", "study_store", "study_analysis",
                          "train_study", "train_data", "train_bench", "norm_accuracy"],
    "sapa.empirics.realmodel": ["real", "real_model", "real_records", "real_analysis", "real_geometry"],
    "sapa.empirics.timing": ["bench", "overhead"],
    "sapa.empirics.experiments": ["scale_direction", "causal", "worst_case", "softmax_bounds", "audit"],
}
MODULES: dict[str, str] = {f"empirics.{m}": f"{pkg}.{m}" for pkg, ms in _GROUPS.items() for m in ms}

# Renames after the move (one name per idea). old → new, applied after MODULES (chains are resolved).
RENAMES: dict[str, str] = {
    # the arm-level statistics the training study uses (ρ̄ across arms, the paired seed contrast)
    "sapa.empirics.training.norm_accuracy": "sapa.empirics.training.arm_statistics",
    # claim modules named after the ledger ids they hold
    "sapa.claims.softmax_claims": "sapa.claims.thm4_1",                      # thm4.1-norm, thm4.1-jacobian
    "sapa.claims.growth_claims": "sapa.claims.thm4_2_to_cor4_5",             # thm4.2 … cor4.5, other-powers
    "sapa.claims.scale_claims": "sapa.claims.scale_direction_and_causal",     # fig1-scale-direction, causal-masking
    "sapa.claims.overhead_claims": "sapa.claims.overhead",                    # overhead
    "sapa.claims.study_claims": "sapa.claims.scale_keeps_training_stable",    # scale-keeps-training-stable
    "sapa.claims.training_claims": "sapa.claims.norm_vs_accuracy",            # norm-vs-accuracy
    "sapa.claims.real_claims": "sapa.claims.real_model_regime",               # real-model-regime
    "sapa.claims.position_claims": "sapa.claims.alibi_scaling",               # alibi-scaling
    "sapa.claims.lipschitz_claims": "sapa.claims.lipschitz_vs_published_bound",  # lipschitz-vs-published-bound
    # measured on real MiniLM layers (and random ViT-B layers beside them): the real model's floor
    "sapa.empirics.experiments.layer_lipschitz": "sapa.empirics.realmodel.layer_lipschitz",
}

# Names that moved from one module to another (old dotted name → new), rewritten after the module moves.
# Seeds: every random stream derives from (seed, key) in one module named for it.
SEED_NAMES = ("canonical_json", "stable_hash", "spawn_key", "seed_sequence", "rng_for", "torch_gen_for",
              "torch_generator", "trial_generator", "trial_generators")
SYMBOLS: dict[str, str] = {f"sapa.empirics.montecarlo.samplers.{n}": f"sapa.common.seeds.{n}" for n in SEED_NAMES}
# φ and φ' of an audited activation: a kernel (used by the exact norms of any φ), not the audit experiment's own.
SYMBOLS.update({f"sapa.empirics.experiments.audit.{n}": f"sapa.empirics.kernels.activation_fns.{n}"
                for n in ("activation_functions", "_Fns")})

# Tests that move without their module moving (tests mirror the source tree).
TEST_MOVES = {
    "tests.sapa.test_mc": "tests.sapa.claims.test_mc",
    "tests.sapa.test_other_papers": "tests.sapa.claims.test_other_papers",
}

# Tests whose file name is not test_<module>.py: the module whose folder they follow.
TEST_HOME = {"test_norms_range": "sapa.empirics.norms", "test_trial_design": "sapa.empirics.sweep",
             "test_train_study_kill": "sapa.empirics.train_study", "study_fixture": "sapa.empirics.train_study"}

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


def _from_line(indent: str, parent: str, names: list[str], width: int = 120) -> str:
    """``from parent import a, b``, wrapped in parentheses under ``width`` columns."""
    line = f"{indent}from {parent} import {', '.join(names)}"
    if len(line) <= width:
        return line
    head = f"{indent}from {parent} import ("
    out, cur = [], head
    for k, n in enumerate(names):
        piece = n + (")" if k == len(names) - 1 else ",")
        if len(cur) + len(piece) + 1 > width and cur.strip() not in ("", head.strip()):
            out.append(cur.rstrip())
            cur = " " * len(head)
        cur += ("" if cur.endswith("(") or not cur.strip() else " ") + piece
    out.append(cur)
    return "\n".join(out)


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
        lines = [_from_line(m["ind"], parent, names) for parent, names in groups.items()]
        lines[0] += m["tail"] or ""
        return "\n".join(lines)

    return _FROM.sub(fix, text)


def _rewrite_alias_attrs(text: str) -> str:
    """``M.name`` where module M was imported under an alias and ``name`` moved (SYMBOLS): point it at the new module.

    ``from sapa.empirics.montecarlo import samplers`` … ``samplers.trial_generator(…)`` becomes
    ``from common import seeds`` … ``seeds.trial_generator(…)`` (the import is added after the alias's import).
    """
    for old_full, new_full in SYMBOLS.items():
        old_mod, name = old_full.rsplit(".", 1)
        new_mod = new_full.rsplit(".", 1)[0]
        opkg, oleaf = old_mod.rsplit(".", 1)
        npkg, nleaf = new_mod.rsplit(".", 1)
        binds = [(m.group(0), m.group("alias") or oleaf) for m in re.finditer(
            rf"^[ \t]*from {re.escape(opkg)} import [^\n]*?\b{oleaf}\b(?: as (?P<alias>\w+))?[^\n]*$", text, re.M)]
        binds += [(m.group(0), m.group("alias")) for m in re.finditer(
            rf"^[ \t]*import {re.escape(old_mod)} as (?P<alias>\w+)[^\n]*$", text, re.M)]
        for line, alias in binds:
            use = re.compile(rf"(?<![\w.]){re.escape(alias)}\.{name}\b")
            if not use.search(text):
                continue
            local = nleaf if not re.search(rf"(?<![\w.]){nleaf}\b", text.replace(new_mod, "")) else f"{npkg.replace('.', '_')}_{nleaf}"
            text = use.sub(f"{local}.{name}", text)
            imp = f"from {npkg} import {nleaf}" + ("" if local == nleaf else f" as {local}")
            if imp not in text:
                indent = re.match(r"[ \t]*", line).group(0)
                text = text.replace(line, f"{line}\n{indent}{imp}", 1)
    return text


def rewrite_text(text: str, mapping: dict[str, str], rules) -> str:
    text = _rewrite_from(text, mapping)
    for pat, new in rules:
        text = pat.sub(new, text)
    # second pass: names that moved between modules (the module paths above are already the new ones)
    text = _rewrite_from(text, SYMBOLS)
    for old, new in SYMBOLS.items():
        text = re.sub(r"(?<![\w.])" + re.escape(old) + r"(?!\w)", new, text)
    return _rewrite_alias_attrs(text)


def rewrite_notebook(raw: str, mapping: dict[str, str], rules) -> str:
    """An .ipynb rewritten cell by cell (its sources stay equal to the paired .py's); written as Jupyter does."""
    try:
        nb = json.loads(raw)
    except ValueError:
        return rewrite_text(raw, mapping, rules)
    for cell in nb.get("cells", []):
        src = cell.get("source")
        text = "".join(src) if isinstance(src, list) else src
        if not isinstance(text, str):
            continue
        new = rewrite_text(text, mapping, rules)
        if new != text:
            cell["source"] = new.splitlines(keepends=True) if isinstance(src, list) else new
    out = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    return out if out != json.dumps(json.loads(raw), sort_keys=True, indent=1, ensure_ascii=False) + "\n" else raw


def _tracked_files(exclude: tuple[str, ...] = ()) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    files = [ROOT / f for f in out if (f.endswith(EXTS) or f in EXTRA_FILES) and f not in exclude]
    return [f for f in files if f.is_file() and f.resolve() != SELF]


def rewrite(check_only: bool = False, exclude: tuple[str, ...] = ()) -> list[Path]:
    """Rewrite every reference to an old module path; the files changed (or, with check_only, that would be)."""
    mapping = module_map()
    rules = _rules(mapping)
    changed: list[Path] = []
    for f in _tracked_files(exclude):
        text = f.read_text(encoding="utf-8")
        new = (rewrite_notebook if f.suffix == ".ipynb" else rewrite_text)(text, mapping, rules)
        if new != text:
            changed.append(f)
            if not check_only:
                f.write_text(new, encoding="utf-8")
    return changed


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
