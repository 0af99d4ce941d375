"""Tests for `pyproject.toml`, `requirements.lock` and `.ci/run`: the torch pin (exact, the torch in use, its comment
says what selects the build); the base install holds everything `sapa verify` imports; the lock pins every requirement
within its range; CI installs into a fresh virtual environment with the lock and runs the README's test command."""

from __future__ import annotations

import ast
import re
import sys
import tomllib

import pytest
from pathlib import Path

from tests.layout import source_path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
PROJECT = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
LOCK = ROOT / "requirements.lock"
CI = ROOT / ".ci" / "run"
INSTALL_DEV = 'python3 -m pip install -c requirements.lock -e ".[dev]"'  # the README's test command, before pytest
OURS = ("sapa",)  # the one top-level name the project installs (setup.py maps common/, theory/, … under it)
# What `sapa verify` may reach only behind an option: {module: extra}. Imported only inside functions, and each
# importing module imports it once inside ``try: … except ImportError`` (which turns a missing package into one line
# naming the extra) before any other use. --workers > 1 / --scheduler need Dask.
OPTIONAL = {"distributed": "dist", "dask": "dist"}


def test_torch_pin_is_exact_and_is_the_torch_in_use():
    import torch

    deps = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    pin = [d for d in deps if d.replace(" ", "").startswith("torch==")]
    assert len(pin) == 1
    assert torch.__version__.split("+")[0] == pin[0].split("==")[1]  # 2.13.0+cpu satisfies ==2.13.0


def test_torch_pin_comment_names_the_index_not_the_pin_as_what_selects_cpu():
    """The pin cannot choose the CPU build (the default PyPI build of the same version carries CUDA)."""
    lines = PYPROJECT.read_text(encoding="utf-8").splitlines()
    k = next(i for i, x in enumerate(lines) if x.strip().startswith('"torch=='))
    comment = []
    for x in reversed(lines[:k]):
        if not x.strip().startswith("#"):
            break
        comment.insert(0, x.strip("# ").strip())
    text = " ".join(comment)
    assert "machine's disk" not in text
    assert "does not choose CPU or CUDA" in text and "index" in text and "2.13.0+cpu" in text


def test_citation_file_names_this_version_and_the_paper():
    """CITATION.cff (read without a YAML parser: a fresh install need not have one) cites this version of sapa and
    the paper it checks."""
    text = (PYPROJECT.parent / "CITATION.cff").read_text(encoding="utf-8")
    version = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"]
    assert text.startswith("cff-version: 1.2.0\n")
    assert f'\nversion: "{version}"\n' in text
    assert "arXiv:2410.18613" in text and "Rethinking Softmax: Self-Attention with Polynomial Activations" in text


def _name(req: str) -> str:
    """The normalised project name of a requirement string (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req).group(1)).lower()


def _module_file(mod: str) -> Path | None:
    p = source_path(mod)
    return p / "__init__.py" if (p / "__init__.py").is_file() else (p.with_suffix(".py") if p.with_suffix(".py").is_file()
                                                                   else None)


def _imports(path: Path, mod: str) -> list[tuple[str, bool, bool]]:
    """(imported module, guarded, deferred) for every import in the file, function-level ones included; guarded:
    inside a ``try`` with an ``except ImportError`` (or ModuleNotFoundError) handler; deferred: inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out = []

    def visit(node, guarded, deferred):
        if isinstance(node, ast.Try):
            catches = {getattr(h.type, "id", None) for h in node.handlers}
            for child in node.body:
                visit(child, guarded or bool(catches & {"ImportError", "ModuleNotFoundError"}), deferred)
            for child in node.handlers + node.orelse + node.finalbody:
                visit(child, guarded, deferred)
            return
        deferred = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if isinstance(node, ast.Import):
            out.extend((a.name, guarded, deferred) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            out.append((base, guarded, deferred))
            out.extend((f"{base}.{a.name}", guarded, deferred) for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, guarded, deferred)

    visit(tree, False, False)
    return out


def _reachable_third_party() -> dict[str, dict[str, list[tuple[bool, bool]]]]:
    """{third-party top-level module: {our module importing it: [(guarded, deferred) per import]}} over every
    module `sapa verify` can
    reach: from sapa.cli and sapa.commands.verify through every import (function-level ones too), plus the modules
    found by name at run time (the ledger's entries, the rules, the figure modules)."""
    import pkgutil

    todo = ["sapa.cli", "sapa.commands.verify"]
    for pkg in ("sapa.claims", "sapa.rules", "sapa.figures"):
        todo += [f"{pkg}.{m.name}" for m in pkgutil.iter_modules([str(source_path(pkg))])]
    seen, third = set(), {}
    while todo:
        mod = todo.pop()
        path = _module_file(mod)
        if mod in seen or path is None:
            continue
        seen.add(mod)
        todo += [".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 1)]  # its packages' __init__
        for name, guarded, deferred in _imports(path, mod):
            top = name.split(".")[0]
            if top in OURS:
                todo.append(name)
            elif top and top not in sys.stdlib_module_names and top != "__future__":
                third.setdefault(top, {}).setdefault(mod, []).append((guarded, deferred))
    assert "sapa.claims.real_model_regime" in seen and "sapa.empirics.training.censored_trend" in seen  # the walk works
    return third


def test_the_base_install_holds_everything_verify_imports():
    """`pip install -e .` (the README's first command) brings every third-party package that `sapa verify` can
    import, each as a direct dependency (not only through another's), and none of the test-only packages; what
    only an option needs is imported behind a one-line error and lives in its extra."""
    from importlib.metadata import packages_distributions

    base = {_name(r) for r in PROJECT["dependencies"]}
    extras = {k: {_name(r) for r in v} for k, v in PROJECT["optional-dependencies"].items()}
    dists = packages_distributions()
    missing = []
    for top, where in sorted(_reachable_third_party().items()):
        if top in OPTIONAL:  # only inside functions, and each importing module imports it once under its guard
            for mod, how in where.items():
                assert all(d for _, d in how) and any(g for g, _ in how), f"{top}: unguarded import in {mod}"
            assert any(_name(d) in extras[OPTIONAL[top]] for d in dists.get(top, [top])), top
            continue
        names = {_name(d) for d in dists.get(top, [])}
        if not names & base:
            missing.append(f"{top} (imported by {sorted(where)[0]}; installed as {sorted(names) or 'nothing'})")
    assert not missing, f"sapa verify imports packages that are not base dependencies: {missing}"
    for test_only in ("pytest", "hypothesis", "nbmake", "ipykernel", "import-linter", "dask", "distributed",
                      "transformers"):
        assert test_only not in base, test_only


def test_the_lock_pins_every_requirement_inside_its_range():
    """requirements.lock (tools/lock.sh, pip-compile) pins each requirement of the base and of every extra exactly,
    at a version pyproject.toml's range admits; torch as pyproject pins it (no +cpu: the index chooses the build);
    nothing machine-bound (no file URLs, indexes or find-links)."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    text = LOCK.read_text(encoding="utf-8")
    assert text.startswith("#\n# This file is autogenerated by pip-compile") and "tools/lock.sh" in text[:600]
    pins = {}
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if line:
            assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][^ ;@+]*", line), line  # name==version, no +local
            name, version = line.split("==")
            pins[_name(name)] = Version(version)
    reqs = [Requirement(r) for r in PROJECT["dependencies"]]
    reqs += [Requirement(r) for v in PROJECT["optional-dependencies"].values() for r in v]
    for r in reqs:
        if _name(r.name) == "sapa":  # dev = sapa[test,dist,real]
            continue
        assert _name(r.name) in pins, f"{r.name} is not in requirements.lock: run tools/lock.sh"
        assert r.specifier.contains(pins[_name(r.name)], prereleases=True), (str(r), pins[_name(r.name)])
    torch = next(r for r in PROJECT["dependencies"] if r.replace(" ", "").startswith("torch=="))
    assert str(pins["torch"]) == torch.split("==")[1]


def test_ci_installs_like_a_newcomer_then_runs_both_suites():
    """.ci/run: a fresh virtual environment (not the machine's Python), the README's install with the lock, the
    README's test command, then the slow cases."""
    text = CI.read_text(encoding="utf-8")
    code = [ln.split("#")[0] for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    body = "\n".join(code)
    assert re.search(r"python3 -m venv \S+", body) and re.search(r"\. \S+/bin/activate", body)
    assert INSTALL_DEV in body
    assert body.index("python3 -m venv") < body.index(INSTALL_DEV) < body.index('step "python3 -m pytest" python3 -m pytest\n')
    assert 'step "python3 -m pytest -m slow" python3 -m pytest -m slow' in body


@pytest.mark.slow
def test_a_wheel_installs_only_sapa_at_the_top(tmp_path):
    """The wheel built from the repository holds one top-level package, sapa, with theory/, empirics/, figures/ and
    common/ under it (setup.py's package-dir mapping) and the data the ledger reads (the training pack, the passages)."""
    import subprocess
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, timeout=600)
    (wheel,) = tmp_path.glob("sapa-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"sapa"}
    for module in ("sapa/theory/families.py", "sapa/empirics/kernels/norms.py", "sapa/figures/style.py",
                   "sapa/common/validate.py", "sapa/empirics/data/sentences.txt",
                   "sapa/empirics/data/training/full/design.json", "sapa/rules/calibrations.json"):
        assert module in names, module
