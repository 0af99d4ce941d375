"""Tests for `common/deadline.py`: a block past its deadline stops with one InputError; a block within it is untouched."""

from __future__ import annotations

import signal
import time

import pytest

from sapa.common.deadline import REFIRE_S, DeadlineExceeded, deadline
from sapa.common.validate import InputError


def test_a_block_past_its_deadline_stops_with_one_line():
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"^spinning took longer than 0\.2 s; stopped$"):
        with deadline(0.2, "spinning"):
            while True:
                pass
    assert time.monotonic() - t0 < 5 and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    assert issubclass(DeadlineExceeded, InputError)


def test_a_block_within_its_deadline_is_untouched_and_the_timer_disarmed():
    with deadline(5, "nothing"):
        x = sum(range(1000))
    assert x == 499500 and signal.getitimer(signal.ITIMER_REAL)[0] == 0


def test_an_inner_deadline_leaves_the_outer_one_in_charge():
    with pytest.raises(DeadlineExceeded, match="outer"):
        with deadline(0.2, "outer"):
            with deadline(100, "inner"):
                while True:
                    pass


def test_a_shorter_inner_deadline_fires_and_the_outer_one_is_rearmed():
    with pytest.raises(DeadlineExceeded, match="outer"):
        with deadline(1.0, "outer"):
            with pytest.raises(DeadlineExceeded, match="inner"):
                with deadline(0.1, "inner"):
                    while True:
                        pass
            assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] < 1.0
            while True:
                pass
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0


def test_a_library_that_swallows_value_errors_or_one_alarm_is_still_stopped():
    """sympy's multiplicity caught the old ValueError alarm, and the one-shot timer never fired again.

    The outcome does not depend on where the alarms land (the old version of this test alternated two sleeps, one
    under ``except Exception``, and which one the alarm landed in depended on the machine's load): the first loop sits
    wholly inside the blanket handler, so the first alarm lands inside it wherever the loop is, and the handler's
    first statement counts it (CPython runs signal handlers only at calls and backward jumps, so no later alarm can
    land between the ``except`` and the count); the second loop has no handler, so the next alarm ends the block
    wherever it lands. Only a stall of the whole 0.2 s between arming the timer and entering the ``try`` could
    change the count."""
    swallowed = 0
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="the loop took longer than 0.2 s"):
        with deadline(0.2, "the loop"):
            try:
                while True:
                    try:
                        time.sleep(0.01)
                    except Exception:  # noqa: BLE001 - a library's blanket handler: the alarm is no Exception
                        pass
            except BaseException:  # noqa: BLE001 - one alarm swallowed ...
                swallowed += 1
            while True:  # ... and the next one stops it
                time.sleep(0.01)
    assert swallowed == 1 and time.monotonic() - t0 < 60  # stopped at all (the bound only rules out "never")


def test_after_its_deadline_the_alarm_repeats_until_the_block_ends():
    """What stops a block that swallowed an alarm: the timer is periodic (REFIRE_S) until the block is left."""
    with deadline(100, "the block"):
        assert signal.getitimer(signal.ITIMER_REAL)[1] == REFIRE_S
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
