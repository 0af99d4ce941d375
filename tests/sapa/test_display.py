"""Tests for `sapa/display.py` and the text outputs built on it (sapa norms, exact, bench)."""

from __future__ import annotations

import numpy as np
import pytest

from sapa.cli import main
from sapa.display import MISSING, key_values, ratio, sig, text_table, value_or_reason


@pytest.mark.parametrize("x, digits, want", [
    (0.16, 2, "0.16"), (0.1649, 2, "0.16"), (1.7, 2, "1.7"), (12.4, 2, "12"), (340.2, 2, "340"), (1234.7, 2, "1235"),
    (768, 4, "768"), (0.0004780, 4, "0.0004780"), (2.5e-7, 2, "2.5e-07"), (3.2e7, 3, "3.20e+07"), (0, 3, "0"),
    (-0.5, 2, "-0.50"), (None, 3, MISSING), (float("nan"), 3, MISSING), (float("inf"), 3, MISSING),
])
def test_sig_keeps_significant_digits_without_exponent_in_range(x, digits, want):
    assert sig(x, digits) == want


def test_ratio_never_prints_zero_for_a_small_ratio():
    """The bench's '0×' for 0.16×: a ratio keeps its significant digits."""
    assert ratio(0.16) == "0.16×" and ratio(0.0049) == "0.0049×" and ratio(28.6) == "29×" and ratio(None) == MISSING


def test_value_or_reason_names_the_gap():
    assert value_or_reason(None, "Monte Carlo") == "— (Monte Carlo)"
    assert value_or_reason(float("inf"), "") == MISSING
    assert value_or_reason(2.0236, "x") == "2.024" and value_or_reason("poly", "x") == "poly"


def test_key_values_and_text_table_align():
    lines = key_values([("a", 1), ("longer key", 2)])
    assert lines == ["a          : 1", "longer key : 2"]
    t = text_table(["arm", "acc"], [["softmax", "0.91"], ["x³/√N", None]], right=[False, True])
    assert t == ["arm       acc", "-------  ----", "softmax  0.91", "x³/√N       —"]


@pytest.fixture
def xw(tmp_path):
    rng = np.random.default_rng(3)
    np.save(tmp_path / "X.npy", rng.standard_normal((5, 8)))
    np.save(tmp_path / "W16.npy", rng.standard_normal((16, 16)))
    np.save(tmp_path / "W8.npy", rng.standard_normal((8, 8)))
    return tmp_path


def test_norms_shape_mismatch_blames_the_pair(xw, capsys):
    """X with D = 8 and a 16 × 16 W: neither file is wrong alone, the message names both and the needed shape."""
    code = main(["norms", "--x", str(xw / "X.npy"), "--w", str(xw / "W16.npy"), "--activation", "poly"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("sapa: error: --x and --w do not match") and "D = 8" in err[0] and "(8, 8)" in err[0]


def test_norms_text_keys_aligned_and_no_none(xw, capsys):
    code = main(["norms", "--x", str(xw / "X.npy"), "--w", str(xw / "W8.npy"), "--activation", "softmax"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and len({line.index(" : ") for line in out}) == 1
    assert "None" not in "\n".join(out)
    assert [line for line in out if line.startswith("p ")][0].endswith("— (softmax has no degree)")


def test_exact_text_keys_aligned_and_no_none(capsys):
    code = main(["exact", "--p", "1", "--model", "iid", "--N", "8", "--D", "4", "--d", "2"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and len({line.index(" : ") for line in out}) == 1
    assert "None" not in "\n".join(out) and any(line.startswith("rho ") and "--model corr only" in line for line in out)


def test_bench_prints_small_speedups_with_their_digits(capsys, monkeypatch):
    """A speed-up of 0.16 prints as 0.16×, never 0×."""
    import sapa.empirics.timing.bench

    row = {"N": 8, "D": 4, "activation": "softmax", "kernel_s": 1.0, "autograd_s": 0.16, "speedup_vs_autograd": 0.16}
    monkeypatch.setattr(sapa.empirics.timing.bench, "bench_all", lambda quick: {"vs_autograd": [row], "vs_gemm": []})
    assert main(["bench", "--quick", "--part", "kernels"]) == 0
    out = capsys.readouterr().out
    assert "speedup 0.16×" in out and "0×" not in out.replace("0.16×", "")
