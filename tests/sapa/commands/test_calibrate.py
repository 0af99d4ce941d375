"""Tests for `sapa/commands/calibrate.py`: a --trials count beyond the limits is refused up front (issue 52, case 10)."""

from __future__ import annotations

import time

import pytest

from sapa.cli import main


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_an_absurd_trial_count_is_refused_at_once(capsys):
    """`sapa calibrate --trials 9007199254740992` ran without end; its verdict lists alone would take 16 bytes × 2⁵³."""
    from sapa.rules import all_rules

    t0 = time.process_time()
    code, out, err = _run(["calibrate", "--trials", "9007199254740992"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"sapa: error: the calibration needs ≈{16 * 2**53 / 2**30:.3g} GiB of memory "
                          f"({len(all_rules())} rules × 2 truths × 9,007,199,254,740,992 trials)")
    assert "reduce --trials, or pass --force" in err
    assert time.process_time() - t0 < 10  # no pilot: memory alone rules it out


def _spinning_rule(cpu_s: float, calls: list):
    """A rule whose every synthetic evidence costs ``cpu_s`` of CPU time."""
    from sapa.rules.base import Rule

    def simulate(truth, rng):
        calls.append(truth)
        t0 = time.process_time()
        while time.process_time() - t0 < cpu_s:
            pass
        return truth

    return Rule(name="spin", summary="", thresholds={}, decide=lambda e: "HOLDS" if e == "holds" else "FAILS",
                simulate=simulate, design={})


def test_the_time_is_estimated_from_a_pilot_and_refused_beyond_the_limit(capsys, monkeypatch):
    """2 ms of CPU per evidence × 2 truths × 10⁸ trials ≈ 4.6 days > 2 days: refused after a pilot of 2·(1 + 4)
    evidences, never 2·10⁸; 10⁶ trials (≈ 1.1 h) pass the check."""
    import sapa.empirics.montecarlo.workload as workload
    from sapa.commands import calibrate as cmd

    calls: list = []
    rule = _spinning_rule(0.002, calls)
    monkeypatch.setattr(workload, "available_memory", lambda: 2**40)
    cost = cmd.calibration_cost([rule], 10**8)
    assert len(calls) == 2 * (1 + cmd.PILOT_TRIALS) and cost.bytes == 16 * 10**8
    assert cost.seconds == pytest.approx(0.002 * 2 * 10**8, rel=0.5)  # CPU time of a busy loop: within a factor
    with pytest.raises(workload.InputError, match="the calibration needs ≈.* days of CPU time"):
        workload.check_cost(cost, "the calibration", "reduce --trials", memory=2**40)
    assert workload.check_cost(cmd.calibration_cost([rule], 10**6), "the calibration", "x", memory=2**40)
