"""Tests for `sapa/api/compare.py`: rows, the ReLU² half, every parameter-free family and two unseen expressions."""

from __future__ import annotations

import json
import math

import pytest

from sapa.api.compare import AXES, compare, resolve_rows
from sapa.common.validate import InputError
from sapa.theory.families import FAMILY_TABLE


@pytest.fixture(scope="module")
def card(tiny_scorecard):
    """The suite's one tiny scorecard (tests/conftest.py): x**2/N, Max(x,0)**2/N, x/(1+Abs(x)), x3_sqrti among its rows."""
    names, sc = tiny_scorecard
    assert {"x**2/N", "Max(x,0)**2/N", "x/(1+Abs(x))", "x3_sqrti"} <= set(names)
    return sc


def test_relu_square_is_exactly_half_of_the_square_under_iid_weights(card):
    """W_K → −W_K leaves iid weights' law unchanged and flips S: E Max(S,0)⁴ = ½ E S⁴, entry by entry (quadrature
    against a closed form: round-off)."""
    a, b = (card.cell(r, "size").extra for r in ("x**2/N", "Max(x,0)**2/N"))
    assert b["expected_fro2"] / a["expected_fro2"] == pytest.approx(0.5, rel=1e-12)
    assert b["expected_jac_fro2"] / a["expected_jac_fro2"] == pytest.approx(0.5, rel=1e-12)


def test_every_axis_of_every_row_and_json_without_nan(card):
    d = card.to_dict()
    json.dumps(d, allow_nan=False)
    assert [r["id"] for r in d["rows"]][0] == "softmax" and all(set(c) == set(AXES) for c in d["cells"])
    for row in card.cells:
        for c in row:
            assert c.value is not None or c.note.startswith("not computed"), c
            assert c.verdict is not None or c.note, c


def test_a_mask_only_family_says_why_its_ball_is_not_computed(card):
    c = card.cell("x3_sqrti", "lipschitz")
    assert c.value is None and "causal" in c.note


@pytest.mark.parametrize("bad", ["nope(", "x_alpha", "x@col", ""])
def test_bad_input_is_refused_before_any_work(bad):
    with pytest.raises(InputError):
        resolve_rows([bad])


def test_a_family_id_and_its_expression_give_the_same_audit_and_together_are_refused_as_one_activation():
    from sapa.api import compare_axes as AX

    (_, fam), (_, expr) = resolve_rows(["relu_N"]), resolve_rows(["Max(x, 0)/N"])
    assert fam.id == "relu_N" and expr.id == "Max(x, 0)/N" and expr.label == fam.label
    a, b = (AX.audit_row(r, 8, "S/sqrt(d)", 0) for r in (fam, expr))
    assert a["expected_fro2"] == b["expected_fro2"] and a["verdict"] == b["verdict"]
    with pytest.raises(InputError, match="relu_N.*once"):
        resolve_rows(["relu_N", "Max(x,0)/N"])


@pytest.mark.slow
def test_every_parameter_free_family_and_two_unseen_expressions_walk_through():
    ids = [f.id for f in FAMILY_TABLE if not f.params and f.id != "softmax"]
    card = compare([*ids, "Max(x,0)**2/N", "x/(1+Abs(x))"], "tiny")
    assert len(card.rows) == len(ids) + 3
    for r, row in zip(card.rows, card.cells):
        for c in row:
            assert c.value is None or isinstance(c.value, float) and (math.isfinite(c.value) or c.note), (r.id, c)


def test_the_two_balls_as_separate_jobs_give_run_balls_numbers():
    """The ascents of β = 4 and β = 1 run as two jobs of the pool: the same σ̲ as one run_ball over both."""
    from sapa.api.compare import BUDGETS, resolve_rows, run_jobs
    from sapa.api.compare_axes import ball_activation, ball_cells, ball_jobs
    from sapa.empirics.experiments.lipschitz_ball import BallConfig, run_ball
    from sapa.empirics.kernels.ball_ascent import AscentConfig

    b, rows = BUDGETS["tiny"], resolve_rows(["x3_sqrtN"])
    jobs, refused = ball_jobs(rows, b, 0)
    assert not refused and len(jobs) == 4
    got = run_jobs(jobs, 1)
    done: dict = {}
    for j, res in zip(jobs, got):
        done.setdefault(j.row, []).append((res["value"], res["error"]))
    whole = run_ball(BallConfig(ns=b.ball_ns, activations=("poly3",), seed=0,
                                ascent=AscentConfig(b.ball_restarts, b.ball_steps, polish_iters=b.ball_polish)))
    split = [r for res, _ in done["x3_sqrtN"] for r in res.rows]
    key = (lambda r: (r["beta"], r["n"]))
    assert [(key(r), r["sigma_lower"]) for r in sorted(split, key=key)] == \
        [(key(r), r["sigma_lower"]) for r in sorted(whole.rows, key=key) if r["activation"] == "poly3"]
    assert ball_cells(rows, b, done)["x3_sqrtN"]["lipschitz"].interval is not None
    assert ball_activation(rows[1]) == "poly3"


def test_seconds_say_wall_and_cpu_per_axis(card):
    s = card.seconds
    assert {"time", "pool", "audit_cpu", "lipschitz_cpu", "total", "cpu_total", "workers"} <= set(s)
    assert s["workers"] == 1 and s["total"] >= s["time"] + s["pool"] - 0.1 and s["cpu_total"] > 0


def test_an_input_error_in_a_job_is_its_cells_reason_not_a_crash():
    from sapa.api.compare import Job, run_jobs

    got = run_jobs([Job("audit", "r", _refuse, ("bad φ",))], 1)
    assert got[0]["value"] is None and got[0]["error"] == "no: bad φ"


def _refuse(why):
    raise InputError(f"no: {why}")


@pytest.mark.slow  # two spawned workers (torch and sapa imported in each): ~10 s on 2 cores
def test_the_pool_gives_the_numbers_of_a_serial_run():
    from sapa.api.compare import BUDGETS, resolve_rows, run_jobs
    from sapa.api.compare_axes import audit_jobs, ball_jobs

    b, rows = BUDGETS["tiny"], resolve_rows(["x/(1+Abs(x))"])
    jobs = ball_jobs(rows, b, 0)[0] + audit_jobs(rows, b, "S/sqrt(d)", 0)[0]
    serial, pooled = run_jobs(jobs, 1), run_jobs(jobs, 2)
    for a, p in zip(serial, pooled):
        if hasattr(a["value"], "rows"):
            assert a["value"].rows == p["value"].rows
        else:
            assert json.dumps(_numbers(a["value"]), sort_keys=True, default=str) == \
                json.dumps(_numbers(p["value"]), sort_keys=True, default=str)


def _numbers(o):
    """``o`` without its timing fields (seconds: the clock, not the result)."""
    if isinstance(o, dict):
        return {k: _numbers(v) for k, v in o.items() if k not in ("seconds", "cpu_s", "wall_s")}
    if isinstance(o, (list, tuple)):
        return [_numbers(v) for v in o]
    return o
