"""Tests for `figures/captions.py`: every figure a module can save has a caption, and every caption is sentences."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sapa.figures.captions import CAPTIONS, caption_for

FIGURES = Path(__file__).resolve().parents[2] / "figures"


def _saved_stems() -> set[str]:
    """Every stem a figure module can save, read from its source: the names passed to ``style.stem`` (literals,
    module constants, values of a constant dict), each with every literal suffix the module appends (``_acc``)."""
    stems = set()
    for path in sorted(FIGURES.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        consts = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                v = node.value
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    consts[node.targets[0].id] = [v.value]
                elif isinstance(v, ast.Dict) and all(isinstance(x, ast.Constant) for x in v.values):
                    consts[node.targets[0].id] = [x.value for x in v.values]
        names, suffixes = [], set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "stem" and node.args:
                a = node.args[0]
                if isinstance(a, ast.Constant):
                    names.append(a.value)
                elif isinstance(a, ast.Name):
                    names += consts.get(a.id, [])
                elif isinstance(a, ast.Subscript) and isinstance(a.value, ast.Name):
                    names += consts.get(a.value.id, [])
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "save" and len(node.args) == 3:
                a = node.args[2]  # style.save(fig, out_dir, stem): f"{stem}_acc" saves a suffix, anything else bare
                tail = a.values[-1] if isinstance(a, ast.JoinedStr) else None
                suffixes.add(tail.value if isinstance(tail, ast.Constant) else "")
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.Constant) \
                    and re.fullmatch(r"_[a-z]+", str(node.right.value)):
                suffixes.add(node.right.value)  # a stem handed on with a suffix (file_stem + "_protocols")
        stems |= {f"{n}_cfg1{s}" for n in names for s in suffixes}
    return stems


def test_the_scan_finds_the_figure_modules_stems():
    """Negative control of the scan: it sees the stems and suffixes the ledger's figures are saved under."""
    stems = _saved_stems()
    for want in ("norm_vs_n_cfg1", "jac_norm_vs_n_cfg1", "overhead_cfg1", "overhead_cfg1_crossover",
                 "training_vs_n_cfg1_acc", "training_vs_n_cfg1_lr", "real_heads_minilm_cfg1_protocols",
                 "audit_compare_cfg1", "softmax_jacobian_landscape_cfg1"):
        assert want in stems
    assert "training_vs_n_cfg1" not in stems  # the study saves only its three suffixed figures


def test_every_stem_a_module_can_save_has_a_caption():
    missing = sorted(s for s in _saved_stems() if caption_for(s) is None)
    assert not missing, missing


def _module_suffixes(module: str) -> set[str]:
    """The suffixes a figure module appends to the stem it is handed (``f"{stem}_slowdown"``); {""} when it saves the
    stem as it is."""
    tree = ast.parse((FIGURES / f"{module}.py").read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "save" and len(node.args) == 3:
            a = node.args[2]
            tail = a.values[-1] if isinstance(a, ast.JoinedStr) else None
            out.add(tail.value if isinstance(tail, ast.Constant) else "")
    return out or {""}


def test_every_kind_a_ledger_can_show_has_a_caption_for_every_suffix_its_module_saves():
    """The catalogue's stem prefixes (which include stems a claim hands to a module, ``study_learning``, that no
    ``style.stem`` call names) × every suffix the module saves: each has a caption. The report of a quick ledger once
    showed ``study_learning_slowdown`` with a placeholder caption."""
    from sapa.figures.catalogue import FIGURES as KINDS

    pairs = {(prefix, suffix) for f in KINDS for prefix in f.stems for suffix in _module_suffixes(f.module)}
    assert ("study_learning", "_slowdown") in pairs and ("overhead", "_model") in pairs  # the scan sees them
    missing = sorted(p + "_cfg1" + s for p, s in pairs if caption_for(p + "_cfg1" + s) is None)
    assert not missing, missing
    assert "study" in caption_for("study_learning_cfg1_slowdown").text  # its own kind's caption, not the mechanisms'


@pytest.mark.parametrize("cap", CAPTIONS, ids=lambda c: c.prefix + c.suffix)
def test_each_caption_is_sentences_that_say_what_to_look_at(cap):
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", cap.text)
    assert cap.text[0].isupper() and cap.text.endswith(".") and len(sentences) >= 2
    assert re.search(r"\b(look|see|read|compare|count)\b", cap.text, re.I)  # tells the reader where to look
    assert "_" not in cap.prefix or cap.prefix not in cap.text + cap.title  # words, not file names


def test_the_most_specific_caption_wins():
    assert caption_for("overhead_d64_x_crossover").suffix == "_crossover"
    assert caption_for("overhead_d64_x").suffix == ""
    assert caption_for("jac_norm_vs_n_D16").prefix == "jac_norm_vs_n"
    assert caption_for("real_heads_protocols_N8").prefix == "real_heads_protocols"
    assert caption_for("no_such_figure") is None


@pytest.mark.parametrize("cap", CAPTIONS, ids=lambda c: c.prefix + c.suffix)
def test_every_caption_says_what_to_look_at_in_its_own_figure(cap):
    """No caption defers to another figure; each tells the reader what to look at (or compare, or read) in it."""
    assert "same kind of figure" not in cap.text.lower() and "as figure " not in cap.text.lower()
    assert re.search(r"\b(look|compare|read)\b", cap.text, re.I)


def test_a_later_figure_of_a_kind_names_its_own_setup_and_the_first_ones():
    from types import SimpleNamespace

    from sapa.report.figure_plan import plan

    stems = ["norm_vs_n_D16_d16_rho0p5_trials768_N8-512", "regime_map_p1-3_d64_rho0p5_N8-65536_D16-1024_grid241x49",
             "norm_vs_n_D64_d16_rho0p5_trials768_N8-512"]
    figs = plan([SimpleNamespace(id="e", figures=[f"figures/{s}.png" for s in stems])])
    first, _, later = (f.caption for f in figs)
    assert first.startswith(caption_for(stems[0]).text) and later.startswith(caption_for(stems[2]).text)
    assert "token width D = 16" in first and "token width D = 64" not in first
    assert "This figure's setup: token width D = 64, head width d = 16, ρ = 0.5, 768 trials, N = 8–512." in later
    assert "Figure 1 draws the same quantities for token width D = 16" in later
    assert "p = 1, 3" in figs[1].caption  # a list of powers, not a range
