"""Tests for `sapa/evidence/monte_carlo.py`: first-pass Monte Carlo checks are recorded once each, never rerun, and summarised."""

from __future__ import annotations

import os

import numpy as np
import pytest

from sapa.budget import QUICK
from sapa.evidence import monte_carlo as mc
from sapa.ledger import Context


@pytest.fixture()
def ctx(tmp_path):
    return Context(budget=QUICK, out_dir=tmp_path)


def test_there_is_no_rerun_path():
    assert not any(n.startswith(("_rerun", "RERUN")) for n in dir(mc))


def test_summary_of_no_checks(ctx):
    s = mc.monte_carlo_summary(ctx)
    assert s["series"] == 0 and s["first_pass_coverage"] is None and s["missed"] == [] and s["nominal"] == 0.99


def test_record_and_summary_count_each_comparison_once(ctx):
    for k in range(10):
        mc.record(ctx, f"growth/x^3/m{k}", covered=k != 3, nominal=mc.LEVEL, detail={"draws": f"d{k}"})
        mc.record(ctx, f"growth/1*x^3/m{k}", covered=k != 3, nominal=mc.LEVEL, detail={"draws": f"d{k}"})  # same draws
    mc.record(ctx, "causal-masking/p1", True, mc.LEVEL, {"z": 0.3})  # positional form
    mc.record(ctx, "causal-masking/p1", True, mc.LEVEL)  # asked again by a second claim: replaces, not appends
    s = mc.monte_carlo_summary(ctx)
    assert s["series"] == 21 and s["missed"] == ["growth/x^3/m3", "growth/1*x^3/m3"]
    assert s["first_pass_coverage"] == pytest.approx(19 / 21)
    assert s["by_family"]["growth"] == {"series": 20, "missed": 2, "coverage": 0.9, "nominal": 0.99}
    assert s["by_family"]["causal-masking"]["series"] == 1
    assert s["independent"] == {"series": 11, "missed": 1, "coverage": pytest.approx(10 / 11)}
    assert s["reruns"] == 0 and "nominal_levels" not in s
    mc.record(ctx, "fig1-scale-direction/a", covered=True, nominal=0.995)
    assert mc.monte_carlo_summary(ctx)["nominal_levels"] == [0.995]


def test_rms_exponent_is_the_analytic_interval():
    rng = np.random.default_rng(5)
    N = [8, 16, 32, 64, 128]
    sq = [n * rng.chisquare(20, size=400) / 20 for n in N]
    a, b = mc.rms_exponent(N, sq), mc.rms_exponent(N, sq)
    assert a == b and a["ci"][0] <= 0.5 <= a["ci"][1] and a["level"] == mc.LEVEL and len(a["local"]) == 4


def _fake_sweep(ctx, slope_shift=0.0):
    """A tiny sweep frame and summary for one x³ series (paper model), planted in the context's cache."""
    import pandas as pd

    from sapa.theory.moments import exact_moments

    rows, summ = [], []
    rng = np.random.default_rng(0)
    for N in (8, 16, 32, 64):
        E = exact_moments(3, "paper", N, None, 4).expected_fro2 / N
        vals = np.sqrt(E * N ** (2 * slope_shift) * rng.chisquare(50, 200) / 50)
        for t, v in enumerate(vals):
            rows.append({"activation": "poly", "p": 3, "scale_policy": "inv_sqrt_n", "row": -1, "mask": "none",
                         "x_model": "iso", "weight_model": "paper", "rho": 0.0, "D": 4, "d": 4, "c": np.nan,
                         "quantity": "fro", "N": N, "trial": t, "value": v})
        summ.append({"activation": "poly", "p": 3, "scale_policy": "inv_sqrt_n", "weight_model": "paper", "rho": 0.0,
                     "D": 4, "d": 4, "quantity": "fro", "row": -1, "mask": "none", "c": np.nan, "N": N,
                     "expected_sq": E, "z": 0.0})
    ctx.cache["sweep"] = (pd.DataFrame(rows), None)
    ctx.cache["summary"] = pd.DataFrame(summ)


@pytest.mark.parametrize("shift,covered", [(0.0, True), (0.3, False)])
def test_series_judges_the_first_pass_and_records_it(ctx, shift, covered):
    _fake_sweep(ctx, shift)
    (rec,) = mc.series(ctx, p=3, scale_policy="inv_sqrt_n")
    assert rec["agree"] is covered and "rerun" not in rec
    assert {"weight_model", "rho", "D", "d", "quantity", "mc_exponent", "mc_ci", "exact_exponent_on_grid", "agree",
            "trials", "N", "max_abs_z", "cells", "cells_abs_z_gt_4"} <= set(rec)
    assert rec["trials"] == [200] * 4
    (chk,) = ctx.cache["mc_checks"]
    assert chk["name"] == "growth/x^3/sqrt(N)/paper/rho=0/D=4/d=4/fro" and chk["covered"] is covered
    mc.series(ctx, p=3, scale_policy="inv_sqrt_n")  # asked again (theorem and corollary): still one check
    assert mc.monte_carlo_summary(ctx)["series"] == 1


def test_one_gate_records_each_comparison_and_decides_over_them(ctx):
    """`gate` = `record` per comparison + `agreement_gate`, which is the binomial rule of `sapa.rules.agreement`."""
    from sapa.rules.agreement import AgreementEvidence, decide

    comps = {f"k{i}": {"agree": i not in (2, 5), "z": float(i)} for i in range(40)}
    verdict, n, missed = mc.gate(ctx, "fam", comps, 0.99)
    assert (n, missed) == (40, 2) and verdict == decide(AgreementEvidence(40, 2, 0.99))
    s = mc.monte_carlo_summary(ctx)
    assert s["by_family"]["fam"]["series"] == 40 and s["missed"] == ["fam/k2", "fam/k5"]
    assert mc.agreement_gate([], 0.99) == ("UNDETERMINED", 0, 0)
    assert mc.agreement_gate([False] * 5 + [True] * 5, 0.99) == ("FAILS", 10, 5)


def test_merged_ledger_recounts_coverage_from_the_kept_comparisons():
    """verify --only: the rerun's comparisons replace theirs by name, the others stay; the summary is recounted."""
    from sapa.evidence.monte_carlo import summary_of
    from sapa.commands.ledger_merge import merge_into

    def chk(name, covered):
        return {"name": name, "covered": covered, "nominal": 0.99, "detail": {}}

    old = {"claims": [{"id": "a"}, {"id": "b"}], "provenance": {"budget": {"name": "quick"}},
           "monte_carlo": summary_of([chk("growth/x", True), chk("audit/y", False)])}
    fresh = {"claims": [{"id": "b"}], "provenance": {"budget": {"name": "quick"}},
             "monte_carlo": summary_of([chk("audit/y", True)])}
    mc = merge_into(old, fresh)["monte_carlo"]
    assert mc["series"] == 2 and mc["first_pass_coverage"] == 1.0 and mc["missed"] == []
    assert old["monte_carlo"]["first_pass_coverage"] == 0.5 and old["monte_carlo"]["missed"] == ["audit/y"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one usable core: the run is serial")
def test_one_pool_per_run_shared_until_closed(tmp_path):
    """The sweep and the worst-case search take the same pool (started once); closing ends it; one worker: serial."""
    assert mc.run_pool(Context(budget=QUICK, out_dir=tmp_path, workers=1)) is None
    ctx = Context(budget=QUICK, out_dir=tmp_path, workers=2)
    ex = mc.run_pool(ctx)
    assert ex is not None and mc.run_pool(ctx) is ex
    mc.close_run_pool(ctx)
    assert "pool" not in ctx.cache and mc.run_pool(ctx) is not ex
    mc.close_run_pool(ctx)
    mc.close_run_pool(ctx)  # closing twice is harmless
    import time

    busy = mc.run_pool(ctx)
    busy.submit(time.sleep, 120)
    t0 = time.monotonic()
    mc.close_run_pool(ctx, now=True)  # an interrupt: the worker is terminated, nothing waits for the sleep
    assert time.monotonic() - t0 < 30 and "pool" not in ctx.cache
