"""Tests for `pyproject.toml`'s torch pin: exact, the torch in use, and its comment says what selects the build."""

from __future__ import annotations

import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


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
