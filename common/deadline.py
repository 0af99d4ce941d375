"""A wall-clock cap on a block of work: after ``seconds`` it stops with one clear :class:`InputError`.

Used where a user's input can make a library compute for ever (sympy simplifying a hostile
expression, mpmath raising its precision at a point where a function explodes). It arms
``SIGALRM`` (``setitimer``), so it works in the main thread only; elsewhere, or when a cap is already
armed by an enclosing block, it lets the block run as it is (the enclosing cap still holds).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from common.validate import InputError

__all__ = ["DeadlineExceeded", "deadline"]


class DeadlineExceeded(InputError):
    """The capped block ran past its deadline."""


@contextlib.contextmanager
def deadline(seconds: float, what: str) -> Iterator[None]:
    """Run the block; raise DeadlineExceeded(``what`` …) if it takes longer than ``seconds``."""
    if threading.current_thread() is not threading.main_thread() or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        yield
        return

    def fire(signum, frame):
        raise DeadlineExceeded(f"{what} took longer than {seconds:g} s; stopped")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
