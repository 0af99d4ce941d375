"""Tests for `sapa/rules/timing.py`: the noise band of a cell, the round gate and the load gate."""

from __future__ import annotations

import pytest

from sapa.rules import timing

def test_timing_cells_have_a_noise_band():
    F, B = timing.FACTOR, 1 + timing.NOISE
    five = lambda r: (r,) * timing.MIN_ROUNDS  # noqa: E731  (five steady rounds)
    assert timing.cell_class(None) == timing.cell_class(()) == "unmeasured"
    assert timing.cell_class(five(F / B)) == "within"
    assert timing.cell_class(five(F)) == "marginal"
    assert timing.cell_class(five(F * B * 1.01)) == "outside"
    assert timing.cell_class((F / B,) * (timing.MIN_ROUNDS - 1)) == "unsteady"  # too few rounds
    T = timing.TimingEvidence
    assert timing.decide(T((("a", five(0.2)), ("b", five(0.5))))) == "HOLDS"
    assert timing.decide(T((("a", five(0.2)), ("b", five(5.0))))) == "HOLDS_IN_REGIME"
    assert timing.decide(T((("a", five(5.0)), ("b", five(1.5))))) == "FAILS"
    assert timing.decide(T((("a", five(1.5)), ("b", ())))) == "UNDETERMINED"


def test_timing_round_gate_rounds_that_disagree_beyond_the_band():
    T = timing.TimingEvidence
    B = 1 + timing.NOISE
    steady = (0.5, 0.52, 0.49, 0.51, 0.5)
    jumpy = (0.5, 0.5, 0.5, 0.5, 0.5 * B * B * 1.01)  # one round beyond ±NOISE about the centre
    assert timing.decide(T((("a", steady),))) == "HOLDS"
    assert timing.decide(T((("a", steady), ("b", jumpy)))) == "UNDETERMINED"
    assert "round gate" in timing.why(T((("a", steady), ("b", jumpy))))


@pytest.mark.parametrize("load, cores, verdict", [(0.4, 2, "HOLDS"), (2.0, 2, "HOLDS"), (2.01, 2, "UNDETERMINED"),
                                                  (6.3, 2, "UNDETERMINED"), (6.3, 8, "HOLDS"), (None, 2, "HOLDS")])
def test_timing_load_gate_with_injected_load(load, cores, verdict):
    """The load gate on injected machine states: above the cores no timing is decided, whatever the ratios."""
    T = timing.TimingEvidence
    steady = (0.5, 0.52, 0.49, 0.51, 0.5)
    ev = T((("a", steady), ("b", steady)), load=load, cores=cores)
    assert timing.decide(ev) == verdict
    far = T((("a", (9.0,) * 5),), load=load, cores=cores)  # a clear FAILS is held back too
    assert timing.decide(far) == ("UNDETERMINED" if verdict == "UNDETERMINED" else "FAILS")
    if verdict == "UNDETERMINED":
        assert timing.why(ev).startswith(f"machine load {load:.2f} exceeds its {cores} cores")


def test_mutation_run_bad_rounds_are_dropped():
    # mutation run: a dropped filter of bad rounds survived
    from sapa.rules.timing import interval

    assert interval([1.0, float("nan"), float("inf"), -2.0, 0.0, None, 3.0]) == (1.0, 3.0)
    assert interval([None, float("nan")]) is None
