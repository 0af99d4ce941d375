"""Figures only draw: no `figures/*` module runs an experiment ("one straight path per claim").

Evidence is computed once, by an `empirics` experiment function returning a typed result; the ledger
stores it (JSON) and the figure modules draw it. Checked on the source (AST), so a figure that starts
computing again fails here whether or not it is ever called.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

FIGURES = Path(__file__).resolve().parents[2] / "figures"
# The experiment runners of `empirics`: a figure may import their result types, never the runners.
RUNNERS = {"run_scale_direction", "run_causal_masking", "run_worst_case", "run_audit_compare", "sample_norms",
           "bin_samples", "train_length_transfer", "worst_case_growth", "fit_scale_exponents", "matching_scales",
           "profile_exponents", "binned_agreement", "run_sweep"}
# Not yet converted, owned elsewhere: the smoke-test `main(small=True)` of the sweep and benchmark
# figures still runs a tiny sweep. Listed by name so any other runner they start to import, and any other
# figure, still fails.
ALLOWED = {"norm_scaling.py": {"run_sweep"}, "bench_scaling.py": {"run_sweep"}}


def _modules() -> list[Path]:
    return sorted(FIGURES.glob("*.py"))


def _imported_names(tree: ast.Module) -> set[str]:
    """Names imported from `empirics` anywhere in the module (top level or inside functions)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sapa.empirics"):
            names |= {a.name for a in node.names}
    return names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_figure_defines_compute(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defs = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert "compute" not in defs, f"{path.name} defines compute(): move the experiment to empirics"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_figure_imports_an_experiment_runner(path):
    used = _imported_names(ast.parse(path.read_text(encoding="utf-8"))) & RUNNERS - ALLOWED.get(path.name, set())
    assert not used, f"{path.name} imports the experiment runner(s) {sorted(used)} from empirics"


def test_the_runners_exist():
    """The list above names real functions (a renamed runner must not silently pass this test)."""
    import sapa.empirics.experiments.activation_sampling
    import sapa.empirics.experiments.causal
    import sapa.empirics.experiments.scale_direction
    import sapa.empirics.montecarlo.sweep
    import sapa.empirics.experiments.worst_case

    mods = (sapa.empirics.experiments.activation_sampling, sapa.empirics.experiments.causal, sapa.empirics.experiments.scale_direction, sapa.empirics.montecarlo.sweep, sapa.empirics.experiments.worst_case)
    assert all(any(callable(getattr(m, r, None)) for m in mods) for r in RUNNERS)


def test_the_check_itself_catches_a_computing_figure():
    src = "from sapa.empirics.experiments.worst_case import run_worst_case\n\ndef compute():\n    return run_worst_case()\n"
    tree = ast.parse(src)
    assert _imported_names(tree) & RUNNERS == {"run_worst_case"}
    assert "compute" in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
