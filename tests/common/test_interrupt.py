"""Tests for `common/interrupt.py`: stop signals recorded whichever exception surfaces, handlers restored."""

from __future__ import annotations

import os
import signal
import time

import pytest

from common.interrupt import stop_signals, stopped_by_interrupt


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_raises_keyboardinterrupt_and_is_recorded(sig):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with stop_signals() as stops:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig)
            time.sleep(5)
        assert stops.received == [sig.name]
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_signal_swallowed_by_c_code_is_still_recorded():
    """numpy's product of exact fractions turned the KeyboardInterrupt into a SystemError with no chain left."""
    with stop_signals() as stops:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass
        assert stops.received == ["SIGINT"]


def test_an_ignored_sigint_stays_ignored():
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with stop_signals() as stops:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert stops.received == []
    finally:
        signal.signal(signal.SIGINT, old)


def test_stopped_by_interrupt_reads_the_chain():
    def surfaced():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("returned a result with an exception set")

    with pytest.raises(SystemError) as err:
        surfaced()
    assert stopped_by_interrupt(err.value) and stopped_by_interrupt(KeyboardInterrupt())
    assert not stopped_by_interrupt(ValueError("x"))
