"""A wall-clock cap on a block of work: after ``seconds`` it stops with one clear :class:`InputError`.

Used where a user's input can make a library compute for ever (sympy simplifying a hostile
expression, mpmath raising its precision at a point where a function explodes). It arms
``SIGALRM`` (``setitimer``), so it works in the main thread only (elsewhere the block runs uncapped);
caps nest (the one that ends first fires). The alarm raises a private ``BaseException``, which the
library's own ``except ValueError`` / ``except Exception`` cannot swallow (sympy's ``multiplicity`` did
swallow an ``InputError``), and it repeats every :data:`REFIRE_S` until the block has ended, so even an
``except BaseException`` that swallows one alarm is stopped by the next; only on leaving the block does it become
:class:`DeadlineExceeded`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator

from sapa.common.validate import InputError

__all__ = ["DeadlineExceeded", "deadline", "REFIRE_S"]

REFIRE_S = 0.25  # after the deadline, the alarm fires again this often until the block ends


class DeadlineExceeded(InputError):
    """The capped block ran past its deadline."""


@contextlib.contextmanager
def deadline(seconds: float, what: str) -> Iterator[None]:
    """Run the block; raise DeadlineExceeded(``what`` …) if it takes longer than ``seconds``.

    Nested caps: the inner one is armed only if it ends first; on leaving it the outer cap is re-armed
    with what is left of it (at least a millisecond, so an outer cap that expired meanwhile still fires).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]
    if outer_left and outer_left <= seconds:  # the enclosing cap ends first: it stays in charge
        yield
        return

    class Expired(BaseException):  # this cap's own alarm (an outer cap's passes through untouched)
        pass

    def fire(signum, frame):
        raise Expired

    t0 = time.monotonic()
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds, REFIRE_S)
    try:
        yield
    except Expired:
        raise DeadlineExceeded(f"{what} took longer than {seconds:g} s; stopped") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, outer_left - (time.monotonic() - t0)), REFIRE_S)
