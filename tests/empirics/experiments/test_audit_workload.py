"""Tests for `empirics/experiments/audit_workload.py`: an audit's flops and memory, refused beyond sweep's limits unless forced."""

from __future__ import annotations

import pytest

from sapa.common.validate import InputError
from sapa.empirics.experiments.audit_workload import NN_ARRAYS, audit_work, check_audit_work
from sapa.empirics.montecarlo.workload import MAX_FLOPS


def test_monte_carlo_flops_are_the_sweep_formula_summed_over_the_grid():
    w = audit_work(True, "iid", 768, 64, (98, 196, 392), 200, False)
    assert w.flops == sum(200 * (6 * n * n * 768 + 4 * n * 768 * 768 + 2 * 768 * 768 * 64) for n in (98, 196, 392))
    p = audit_work(True, "paper", 768, 64, (8,), 10, False)  # the paper model draws (N, d) factors: k = d
    assert p.flops == 10 * (6 * 64 * 64 + 4 * 8 * 64 * 64 + 2 * 64 * 64 * 64)


def test_memory_of_one_chunk_grows_as_n_squared():
    a, b = (audit_work(True, "iid", 64, 8, (n,), 1, False).bytes for n in (10_000, 20_000))
    assert a >= 8 * NN_ARRAYS * 10_000**2 and b / a == pytest.approx(4, rel=0.01)
    assert audit_work(False, "iid", 768, 64, (10**9,), 200, False).bytes == 0  # exact: nothing grows with N
    assert audit_work(False, "iid", 768, 64, (10**9,), 200, True).bytes >= 8 * 10**9  # a row index: arrays of N


def test_limits_and_force():
    big = audit_work(True, "iid", 768, 64, (50_000, 100_000, 200_000), 200, False)
    assert big.flops > MAX_FLOPS
    with pytest.raises(InputError, match=r"flops .*--force"):
        check_audit_work(big, memory=10**15)
    mem = audit_work(True, "iid", 64, 8, (15_000, 30_000, 60_000), 1, False)
    assert mem.flops < MAX_FLOPS
    with pytest.raises(InputError, match=r"GiB of memory .* 1 GiB available"):
        check_audit_work(mem, memory=2**30)
    assert check_audit_work(mem, force=True, memory=2**30) is mem
    assert check_audit_work(audit_work(True, "iid", 768, 64, (98, 196, 392), 200, False), memory=2**31)
