"""Tests for `empirics/experiments/worst_case.py` and the constrained ascent of `empirics/kernels/lipschitz.py`."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from sapa.empirics.kernels.lipschitz import attention_map, maximise_jacobian_norm
from sapa.theory.families import power
from sapa.empirics.experiments.worst_case import (
    WorstCaseConfig,
    bracket_slope_range,
    sample_w,
    summarise,
    worst_case_growth,
)
from sapa.common.validate import InputError
from sapa.empirics.montecarlo.stats import loglog_slope as ols_slope

SMALL = WorstCaseConfig(Ns=(3, 6), D=3, steps=3, restarts=1, seed=1)


@pytest.fixture(scope="module")
def cubic():
    return worst_case_growth(3, SMALL)


def test_search_respects_the_exact_bracket(cubic):
    assert len(cubic) == 2 * 3 * 2
    assert np.allclose(cubic["witness_value"], cubic["lower"], rtol=1e-8)
    assert np.all(cubic["best"] <= cubic["upper"] * (1 + 1e-9))
    assert np.all(cubic["ascent_value"] >= cubic["witness_value"] * (1 - 1e-9))  # the witness is a start
    assert np.all(cubic["random_value"] <= cubic["upper"] * (1 + 1e-9))


def test_summary_uses_the_exact_exponents(cubic):
    s = {(r["constraint"], r["quantity"]): r for r in summarise(cubic, 0.5)}
    assert s[("fro", "fro")]["exact_exponent"] == 2.5 and s[("token", "fro")]["exact_exponent"] == 0.5
    for r in s.values():
        lo, hi = r["bracket_slope_range"]
        assert lo - 1e-9 <= r["measured_slope"] <= hi + 1e-9
        assert r["witness_attains_lower"] and r["never_above_upper"]


def test_same_seed_same_numbers(cubic):
    again = worst_case_growth(3, SMALL)
    assert again.equals(cubic)


def test_slope_helpers():
    N = [4, 8, 16, 32]
    assert ols_slope(N, [2 * n**1.5 for n in N]) == pytest.approx(1.5, abs=1e-12)
    lo, hi = bracket_slope_range(N, [n**0.5 for n in N], [n**0.5 for n in N])
    assert lo == pytest.approx(0.5) and hi == pytest.approx(0.5)
    rng = np.random.default_rng(0)
    lower = np.array([n**0.5 for n in N])
    lo, hi = bracket_slope_range(N, lower, 3 * lower)
    for _ in range(200):  # every y inside the bracket has its OLS slope inside the range
        assert lo - 1e-12 <= ols_slope(N, lower * rng.uniform(1, 3, size=4)) <= hi + 1e-12


def test_token_constrained_ascent_stays_on_the_product_of_spheres():
    W = torch.as_tensor(sample_w(3, 0))
    f = attention_map(W, power(3, 1.0))
    res = maximise_jacobian_norm(f, 5, 3, 0.8, norm="value", constraint="token", steps=5, restarts=1, seed=2)
    assert torch.allclose(torch.linalg.vector_norm(res.X, dim=1), torch.full((5,), 0.8, dtype=torch.float64))
    assert res.value == pytest.approx(float(torch.linalg.vector_norm(f(res.X))), rel=1e-12)
    assert all(b >= a for a, b in zip(res.history, res.history[1:]))


def test_bad_input():
    with pytest.raises(InputError):
        worst_case_growth(0, SMALL)
    with pytest.raises(InputError):
        worst_case_growth(1, WorstCaseConfig(Ns=(4, 4)))
    with pytest.raises(InputError):
        worst_case_growth(1, SMALL, constraints=("ball",))
    with pytest.raises(InputError):
        maximise_jacobian_norm(lambda x: x, 2, 2, 1.0, constraint="ball")


# --------------------------------------------------------------------------- the experiment and its stored form


def test_run_returns_a_frozen_typed_result_that_round_trips(tmp_path):
    import dataclasses

    from sapa.common import figdata
    from sapa.empirics.experiments.worst_case import WorstCaseResult, run_worst_case

    r = run_worst_case(ps=(1,), Ns=(3, 6), D=3, steps=2, restarts=1, seed=1)
    assert isinstance(r, WorstCaseResult) and set(r.frames) == {1}
    assert r.config == WorstCaseConfig(Ns=(3, 6), D=3, steps=2, restarts=1, seed=1)
    assert set(r.frames[1]["quantity"]) == {"fro", "jac_fro", "jac_spec"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.frames = {}
    figdata.write(tmp_path / "x.json", r.to_json(), "stem")
    back = WorstCaseResult.from_json(figdata.read(tmp_path / "x.json")[0])
    assert back.config == r.config and back.frames[1].equals(r.frames[1])
    assert back.config_dict() == {"Ns": [3, 6], "D": 3, "steps": 2, "restarts": 1, "seed": 1, "r": 1.0}


def test_workers_give_the_same_rows_in_the_same_order(monkeypatch):
    """Parts run by a pool's workers are seeded per row: the frames equal the serial ones. Two worker threads here;
    the slow run's twin below uses worker processes."""
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(2) as pool:
        _same_rows_serial_and_in(pool, monkeypatch)


@pytest.mark.slow  # the session's spawn pool: two fresh interpreters importing torch (~9 CPU-s)
def test_worker_processes_give_the_same_rows_in_the_same_order(spawn_pool, monkeypatch):
    """As above in worker processes (to rounding of the 1-thread workers' kernels)."""
    _same_rows_serial_and_in(spawn_pool, monkeypatch)


def _same_rows_serial_and_in(pool, monkeypatch):
    import contextlib

    import sapa.common.pool
    from sapa.empirics.experiments.worst_case import run_worst_case

    asked = []

    @contextlib.contextmanager
    def shared(workers, niceness=0):  # ``pool`` for the one run_worst_case starts
        asked.append(workers)
        yield pool

    monkeypatch.setattr(sapa.common.pool, "stopping_pool", shared)
    kw = dict(ps=(3,), Ns=(3, 6), D=3, steps=2, restarts=1, seed=2)
    serial, parallel = run_worst_case(**kw), run_worst_case(**kw, workers=2)
    assert asked == [2]  # workers=2 did go through a pool
    given = run_worst_case(**kw, executor=pool)  # a caller's executor (the ledger shares one pool) ...
    assert asked == [2] and pool.submit(int, 7).result() == 7  # ... is used as it is and left open
    assert set(parallel.frames) == {3} and parallel.config == serial.config == given.config
    for p, b in ((3, parallel.frames[3]), (3, given.frames[3])):
        a = serial.frames[p]
        assert list(a.columns) == list(b.columns)
        cols = ["constraint", "quantity", "N", "witness"]
        assert a[cols].equals(b[cols])
        num = [c for c in a.columns if c not in cols and a[c].dtype.kind == "f"]
        np.testing.assert_allclose(b[num].to_numpy(), a[num].to_numpy(), rtol=1e-9, atol=0)
