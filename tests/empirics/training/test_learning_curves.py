"""Tests for `empirics/training/learning_curves.py`: schedule, exits, Kaplan–Meier summary, convergence."""

import math

import numpy as np
import pytest

from sapa.empirics.training import learning_curves as LC


def test_eval_schedule_is_dense_and_log_spaced():
    for cap in (200, 600, 3200):
        s = LC.log_eval_steps(cap, 16)
        assert s[0] == 0 and s[-1] == cap and len(s) - 1 >= 12 and list(s) == sorted(set(s))
        r = np.diff(np.log(np.array(s[1:], float)))
        assert r.max() < 3 * np.median(r)  # log spacing, not linear


def test_exit_is_the_first_evaluation_above_floor_plus_margin():
    steps = [0, 10, 20, 40]
    assert LC.exit_step(steps, [0.5, 0.52, 0.531, 0.6], 0.5) == 20
    assert LC.exit_step(steps, [0.9, 0.5, 0.52, 0.53], 0.5) is None  # step 0 never counts; 0.53 is not > 0.53


def test_uncensored_median_is_the_empirical_median():
    t = [300, 100, 200, 400, 500]
    s = LC.censored_exits(t, 1000)
    assert s["median"] == int(np.quantile(t, 0.5, method="inverted_cdf")) and s["censored"] == 0
    assert s["p_exit_by_cap"] == 1.0


def test_kaplan_meier_with_censoring_by_hand():
    # times 100, 200 exit; two censored at the cap 400: F(100) = 1/4, F(200) = 1/2 (no censoring before 200)
    s = LC.censored_exits([100, None, 200, None], 400)
    assert s["median"] == 200 and s["censored"] == 2 and math.isclose(s["p_exit_by_cap"], 0.5)
    assert LC.censored_exits([None, None, 100], 400)["median"] is None


def test_flat_compares_the_last_doubling():
    steps = [0, 50, 100, 200]
    assert LC.flat(steps, [0.1, 0.5, 0.8, 0.805])
    assert not LC.flat(steps, [0.1, 0.5, 0.7, 0.8])


def test_curve_stats_pairs_seeds_with_softmax():
    steps = [0, 10, 20, 40]
    arm = {0: [0.1, 0.1, 0.2, 0.5], 1: [0.1, 0.1, 0.1, 0.1]}
    soft = {0: [0.1, 0.4, 0.6, 0.61], 1: [0.1, 0.5, 0.6, 0.6]}
    st = LC.curve_stats(steps, arm, 0.1, soft)
    assert st["steps_to_leave_floor"] == {"0": 20, "1": None}
    assert st["exits"]["censored"] == 1 and st["converged"] == {"0": False, "1": False}
    assert st["acc_at_matched_steps"][-1] == [40, 0.3, 0.605, pytest.approx(-0.305)]
    assert len(st["curve"]) == 4 and st["final_acc"] == {"0": 0.5, "1": 0.1}




def test_exit_change_sign_test():
    rows = [[1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]] * 6  # every run doubles its norm into the exit
    r = LC.exit_change(rows)
    assert r["runs"] == 6 and r["larger_at_exit"] == 6 and math.isclose(r["median_change_at_exit"], round(math.log(2), 5))
    assert r["p_sign_test"] == pytest.approx(2 / 64, abs=1e-5)
