"""Tests for `sapa/cli.py`: ``sapa exact``, ``sapa sweep`` and ``sapa bench`` against the library."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from sapa.cli import main
from sapa.theory.moments import exact_moments

TINY = """
name = "tiny"
seed = 3
trials = 4
dtype = "float64"
device = "cpu"
N = [4, 8]
D = [4]
d = [4]
weight_model = ["iid"]
rho = [0.5]
mask = ["none"]
x_model = ["iso"]

[[activation]]
kind = "poly"
p = [1, 3]
scale = "inv_sqrt_n"
"""


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("model,extra", [
    ("paper", ["--d", "8"]), ("iid", ["--D", "16", "--d", "8"]), ("tied", ["--D", "16", "--d", "8"]),
    ("corr", ["--D", "16", "--d", "8", "--rho", "0.3"]),
])
@pytest.mark.parametrize("p", [1, 3])
def test_exact_json_matches_library(capsys, model, extra, p):
    code, out, err = _run(["exact", "--p", str(p), "--model", model, "--N", "50", *extra, "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    D = int(extra[1]) if model != "paper" else None
    sigma = 1.0 if model == "paper" else 1 / math.sqrt(D)
    m = exact_moments(p, model, 50, D, 8, rho=0.3 if model == "corr" else 0.5, sigma=sigma)
    assert got["expected_fro2"] == pytest.approx(float(m.expected_fro2), rel=1e-12)
    assert got["expected_jac_fro2"] == pytest.approx(float(m.expected_jac_fro2), rel=1e-12)
    assert got["crossover_n"] == pytest.approx(float(m.crossover_n), rel=1e-12)
    assert got["growth_exponent"] == pytest.approx(float(m.growth_exponent), rel=1e-12)
    assert isinstance(got["formula"], str) and got["formula"]


def test_exact_shared_with_w_file(tmp_path, capsys):
    W = np.random.default_rng(0).standard_normal((3, 3))
    np.save(tmp_path / "W.npy", W)
    code, out, err = _run(["exact", "--p", "2", "--model", "shared", "--N", "7", "--w", str(tmp_path / "W.npy"),
                           "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["expected_fro2"] == pytest.approx(float(exact_moments(2, "shared", 7, W=W).expected_fro2), rel=1e-12)


@pytest.mark.parametrize("argv", [
    ["exact", "--p", "1", "--model", "iid", "--N", "5", "--D", "3"],
    ["exact", "--p", "1", "--model", "shared", "--N", "5"],
    ["exact", "--p", "1", "--model", "corr", "--N", "5", "--D", "3", "--d", "2", "--rho", "1.5"],
    ["exact", "--p", "1", "--model", "iid", "--N", "0", "--D", "3", "--d", "2"],
    ["exact", "--p", "99", "--model", "iid", "--N", "5", "--D", "3", "--d", "2"],
    ["exact", "--p", "1", "--model", "iid", "--N", "5", "--D", "3", "--d", "2", "--sigma", "-1"],
    ["exact", "--p", "1", "--model", "iid", "--N", "5", "--D", "3", "--d", "2", "--w", "W.npy"],
    ["exact", "--p", "1", "--model", "magic", "--N", "5"],
    ["sweep", "no-such-config.toml", "--out", "o"],
    ["sweep", "quick", "--out", "o", "--workers", "0"],
])
def test_exact_and_sweep_bad_input(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("sapa: error: "), err


def test_sweep_runs_and_resumes(tmp_path, capsys):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    out_dir = tmp_path / "res"
    code, out, err = _run(["sweep", str(cfg), "--out", str(out_dir), "--no-progress"], capsys)
    assert code == 0, err
    first = pd.read_parquet(out_dir / "results.parquet")
    assert set(first["p"]) == {1, 3} and set(first["N"]) == {4, 8}
    assert len(list((out_dir / "cells").glob("*.parquet"))) == 4
    code, out, err = _run(["sweep", str(cfg), "--out", str(out_dir), "--no-progress"], capsys)
    assert code == 0, err
    pd.testing.assert_frame_equal(first, pd.read_parquet(out_dir / "results.parquet"))


def test_sweep_seed_override_changes_numbers(tmp_path, capsys):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    assert _run(["sweep", str(cfg), "--out", str(tmp_path / "a"), "--no-progress"], capsys)[0] == 0
    assert _run(["sweep", str(cfg), "--out", str(tmp_path / "b"), "--seed", "4", "--no-progress"], capsys)[0] == 0
    a = pd.read_parquet(tmp_path / "a" / "results.parquet")["value"].to_numpy()
    b = pd.read_parquet(tmp_path / "b" / "results.parquet")["value"].to_numpy()
    assert a.shape == b.shape and not np.allclose(a, b)


@pytest.mark.slow  # times real kernels (~2 s); test_bench_quick_overhead_json[tiny] runs `sapa bench` by default
def test_bench_quick_json(tmp_path, capsys):
    code, out, err = _run(["bench", "--quick", "--part", "kernels", "--json", "--out", str(tmp_path / "bench.json")],
                          capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["speedup_vs_autograd"] and all(v > 0 for v in got["speedup_vs_autograd"].values())
    assert got["cost_vs_gemm"] and got["peak_memory_mib"]
    assert json.loads((tmp_path / "bench.json").read_text())["cost_vs_gemm"] == got["cost_vs_gemm"]
    assert "overhead" not in got


@pytest.mark.parametrize("grid", ["tiny", pytest.param("quick", marks=pytest.mark.slow)])
def test_bench_quick_overhead_json(capsys, monkeypatch, grid):
    """``bench --quick --part overhead``: on the quick grid (``-m slow``, ~15 s) or, in the default run, on a tiny
    one (N = 32, 64, d = 8) through the same command."""
    from sapa.empirics.timing import overhead

    if grid == "tiny":
        monkeypatch.setattr(overhead, "QUICK", overhead.OverheadGrid(
            Ns=(32, 64), d=8, ps=(1, 3), repeats=1, methods=("naive", "linearised"), crossover_ds=(4,),
            crossover_masks=("none",), time_cap_s=0.5, block_s=0.002))  # short blocks: the output's form, not speed
    code, out, err = _run(["bench", "--quick", "--part", "overhead", "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    ratios = got["overhead_ratio_vs_softmax"]
    assert ratios and any(k.startswith("naive/p3/") for k in ratios)
    assert all(v is None or v > 0 for v in ratios.values())
    assert got["overhead"]["provenance"]["dtype"] == "float32" and not got["vs_autograd"]


@pytest.mark.slow  # waits 2 s of silence
def test_a_command_silent_for_longer_than_the_fallback_says_it_runs(monkeypatch, capsys):
    import time

    import sapa.common.progress as progress
    import sapa.cli as cli
    from sapa.commands import command_module

    monkeypatch.setattr(progress, "FALLBACK_S", 0.3)
    monkeypatch.setattr(command_module("exact"), "run", lambda args: time.sleep(1.0) or 0)
    assert cli.main(["exact", "--p", "1", "--model", "paper", "--N", "4", "--d", "2"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(ln.startswith("sapa exact: running ") and ln.endswith("no estimate") for ln in lines)

    def inner(args):  # a command with its own stage: only its lines, never the fallback's for the same silence
        with progress.stage("inner work", every_s=0.2):
            time.sleep(1.0)
        return 0

    monkeypatch.setattr(command_module("exact"), "run", inner)
    assert cli.main(["exact", "--p", "1", "--model", "paper", "--N", "4", "--d", "2"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 3 and all(ln.startswith("inner work: running ") for ln in lines)
