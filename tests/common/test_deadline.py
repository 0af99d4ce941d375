"""Tests for `common/deadline.py`: a block past its deadline stops with one InputError; a block within it is untouched."""

from __future__ import annotations

import signal
import time

import pytest

from common.deadline import DeadlineExceeded, deadline
from common.validate import InputError


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
    """sympy's multiplicity caught the old ValueError alarm, and the one-shot timer never fired again."""
    import time

    import pytest

    from common.deadline import DeadlineExceeded, deadline

    t0 = time.monotonic()
    swallowed = 0
    with pytest.raises(DeadlineExceeded, match="the loop took longer than 0.2 s"):
        with deadline(0.2, "the loop"):
            while True:
                try:
                    time.sleep(0.01)
                except Exception:  # noqa: BLE001 - a library's blanket handler
                    pass
                try:
                    time.sleep(0.01)
                except BaseException:  # noqa: BLE001 - one alarm swallowed, the next one stops it
                    if swallowed:
                        raise
                    swallowed += 1
    assert swallowed == 1 and time.monotonic() - t0 < 5

