"""Tests for `empirics/timing/bench.py`: the quick benchmarks run and return the documented keys.

No timing assertions: speed is measured, not tested.
"""

from __future__ import annotations

import json

import pytest

from sapa.empirics.timing.bench import bench_vs_autograd, bench_vs_gemm
from sapa.theory.families import power, softmax
from sapa.common.validate import InputError

AUTOGRAD_KEYS = {"N", "D", "activation", "kernel_s", "autograd_s", "speedup_vs_autograd", "rel_err", "repeats", "device", "dtype"}
GEMM_KEYS = {"N", "D", "kernel", "seconds", "seconds_first", "seconds_all", "cost_vs_gemm", "peak_mem_bytes",
             "peak_mem_source", "input_bytes", "chunk_rows", "repeats", "device", "dtype"}


def test_quick_bench_vs_autograd():
    rows = bench_vs_autograd(quick=True)
    assert [(r["N"], r["activation"]) for r in rows] == [(8, "softmax(τ=1)"), (8, "x^3"), (16, "softmax(τ=1)"), (16, "x^3")]
    for r in rows:
        assert AUTOGRAD_KEYS <= set(r) and r["speedup_vs_autograd"] > 0 and r["rel_err"] < 1e-10
        assert r["speedup_vs_autograd"] == r["autograd_min_s"] / r["kernel_min_s"]  # interleaved minima
    json.dumps(rows)


@pytest.mark.slow  # a fresh interpreter timing GEMMs (~2 s)
def test_quick_bench_vs_gemm_in_subprocess():
    rows = bench_vs_gemm(quick=True)
    assert [(r["N"], r["kernel"]) for r in rows] == [(256, "gemm"), (256, "softmax(τ=1)"), (256, "x^3")]
    for r in rows:
        assert GEMM_KEYS <= set(r) and r["seconds"] > 0 and r["peak_mem_bytes"] >= 0
        # a ratio of interleaved minima (the same float division, so == is exact by construction)
        assert r["cost_vs_gemm"] == r["seconds_min"] / rows[0]["seconds_min"]
        assert r["seconds_min"] <= r["seconds"] and len(r["seconds_all"]) == r["repeats"]
    json.dumps(rows)


def test_bench_vs_gemm_in_process_with_options():
    rows = bench_vs_gemm(Ns=(32, 64), D=8, activations=(power(2),), repeats=1, chunk=16, isolate=False)
    assert [(r["N"], r["kernel"]) for r in rows] == [(32, "gemm"), (32, "x^2"), (64, "gemm"), (64, "x^2")]
    assert rows[3]["cost_vs_gemm"] == rows[3]["seconds_min"] / rows[2]["seconds_min"] and rows[1]["chunk_rows"] == 16


def test_bench_rejects_bad_sizes():
    with pytest.raises(InputError, match="N must be a positive integer"):
        bench_vs_gemm(Ns=(0,), isolate=False)
    with pytest.raises(InputError, match="repeats must be a positive integer"):
        bench_vs_autograd(Ns=(4,), repeats=0)
