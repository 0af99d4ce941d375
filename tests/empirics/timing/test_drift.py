"""Tests for `empirics/timing/drift.py`: the moment estimator on runs with a known drift, and the rule's declared
drift recomputed from the stored runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.empirics.timing import drift as dr


def synthetic_runs(sigma_b: float, sigma_w: float, runs: int, cells: int, rounds: int, seed: int) -> list[dict]:
    """Runs of log-normal ratios with a per-(cell, run) drift σ_b and per-round noise σ_w."""
    rng = np.random.default_rng(seed)
    out = [{"process": {}, "wall": {}} for _ in range(runs)]
    for c in range(cells):
        mu = rng.uniform(-0.2, 0.5)
        for r in out:
            b = sigma_b * rng.standard_normal()
            x = np.exp(mu + b + sigma_w * rng.standard_normal(rounds))
            r["process"][f"c{c}"] = list(x)
            r["wall"][f"c{c}"] = list(x)
    return out


def test_the_estimator_finds_a_known_drift():
    """σ_b² is estimated without bias: over 400 cells × 7 runs × 5 rounds its sampling sd is about
    √(2/(J−1))·(σ_b² + σ_w²/R)/√C; the estimate lies within 4 of those of the truth."""
    sb, sw, J, C, R = 0.03, 0.05, 7, 400, 5
    got = dr.drift(synthetic_runs(sb, sw, J, C, R, seed=3))
    sd = math.sqrt(2 / (J - 1)) * (sb**2 + sw**2 / R) / math.sqrt(C)
    assert abs(got.sigma_b**2 - sb**2) <= 4 * sd
    assert got.sigma_b_upper >= got.sigma_b and got.cells == C and got.runs == J and got.rounds == R
    assert got.sigma_w == pytest.approx(sw, rel=0.05)  # 400 × 7 × 4 df: relative sd of σ_w ≈ 0.7 %


def test_two_rounds_per_cell_are_enough():
    got = dr.drift(synthetic_runs(0.03, 0.05, 3, 10, 2, seed=5))
    assert got.rounds == 2 and got.runs == 3 and got.cells == 10


def test_no_drift_gives_an_estimate_near_zero():
    got = dr.drift(synthetic_runs(0.0, 0.05, 7, 400, 5, seed=4))
    assert got.sigma_b < 0.01


def test_the_rule_declares_the_stored_runs_drift():
    """sapa.rules.timing's DRIFT and DRIFT_UPPER are the drift across machine states (five runs in each of quiet,
    compute load, memory-bandwidth load), DRIFT_QUIET the quiet machine's seven runs, rounded to 3 decimals."""
    from sapa.rules.timing import DRIFT, DRIFT_QUIET, DRIFT_UPPER

    quiet = dr.stored_runs(series=dr.QUIET_SERIES)
    states = dr.stored_runs(series=dr.STATES_SERIES)
    assert len(quiet) == 7 and {r["state"] for r in quiet} == {"quiet"}
    assert sorted(r["state"] for r in states) == sorted(["quiet", "compute", "memory"] * 5)
    for runs in (quiet, states):
        assert {r["cores"] for r in runs} == {2} and {r["threads"] for r in runs} == {1}
    for clock in dr.CLOCKS:
        q, got = dr.drift(quiet, clock), dr.drift(states, clock)
        assert (q.runs, q.cells, q.rounds) == (7, 36, 5) and (got.runs, got.cells, got.rounds) == (15, 36, 5)
        assert DRIFT[clock] == round(got.sigma_b, 3)
        assert DRIFT_UPPER[clock] == round(got.sigma_b_upper, 3)
        assert DRIFT_QUIET[clock] == round(q.sigma_b, 3)
    assert DRIFT["thread"] == DRIFT["process"]  # thread CPU time with one torch thread is process CPU time
    assert DRIFT_QUIET["thread"] == DRIFT_QUIET["process"] and DRIFT_UPPER["thread"] == DRIFT_UPPER["process"]


def test_the_platform_series_is_stored_at_the_default_thread_count():
    plat = dr.stored_runs(series=dr.PLATFORM_SERIES)
    assert len(plat) >= 3 and {r["state"] for r in plat} == {"quiet"} and all(r["threads"] > 1 for r in plat)


def test_the_state_shift_recovers_a_planted_shift():
    """Runs of a state whose every ratio is e^0.1 times the quiet one's: the shift is +0.1 in every cell."""
    quiet = synthetic_runs(0.0, 0.02, 4, 20, 5, seed=7)
    loaded = [{"process": {c: [x * math.exp(0.1) for x in v] for c, v in r["process"].items()}} for r in quiet]
    runs = [{**r, "state": "quiet"} for r in quiet] + [{**r, "state": "memory"} for r in loaded]
    got = dr.state_shift(runs)
    assert got["quiet"]["mean"] == 0.0 and got["memory"]["runs"] == 4 and got["memory"]["cells"] == 20
    for k in ("mean", "min", "max"):
        assert got["memory"][k] == pytest.approx(0.1, abs=1e-12)
    with pytest.raises(ValueError, match="reference"):
        dr.state_shift([{**r, "state": "memory"} for r in loaded])
