"""SIGINT and SIGTERM take one path: a stopped run ends cleanly, keeps every finished result and says so in one line.

A signal that lands inside C code running Python callbacks (numpy's product of exact fractions) can surface as
another exception (a ``SystemError`` chained around the ``KeyboardInterrupt``); :func:`stop_signals` records every
signal it turned into a ``KeyboardInterrupt``, so the caller knows a run was stopped whichever exception surfaced.

What the handlers raise is :class:`Stopped`, a subclass: CPython 3.11 remembers an interrupt of the *exact* type
``KeyboardInterrupt`` that passes through code run by ``exec``/``eval`` of a string (dataclasses, sympy's parser and
lambdify all do that) and, at exit, kills itself with SIGINT whatever exit code the program chose — even after the
program caught it. ``sapa`` caught it, kept its verdicts, printed its one line and returned 130, and the shell saw
"killed by SIGINT" (−2) about once in ten interrupts. A subclass is caught by every ``except KeyboardInterrupt`` and
never matches that exact-type test.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass, field


class Stopped(KeyboardInterrupt):
    """A stop signal (SIGINT or SIGTERM) received within :func:`stop_signals` or :func:`sigterm_as_interrupt`."""


@dataclass
class Stops:
    """The stop signals received within :func:`stop_signals`, by name, in order (empty: none)."""

    received: list[str] = field(default_factory=list)


@contextlib.contextmanager
def stop_signals():
    """Within: SIGINT and SIGTERM raise :class:`Stopped` (a KeyboardInterrupt) and are recorded in the yielded
    :class:`Stops` (main thread only); the previous handlers are restored after."""
    stops = Stops()
    if threading.current_thread() is not threading.main_thread():
        yield stops
        return

    def on_stop(signum, frame):  # noqa: ARG001 (signal handler signature)
        stops.received.append(signal.Signals(signum).name)
        raise Stopped

    # a SIGINT ignored by whoever started the process (a background job) stays ignored
    which = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN]
    old = {s: signal.signal(s, on_stop) for s in which}
    try:
        yield stops
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def process_stops() -> None:
    """For the rest of the process: SIGINT and SIGTERM raise :class:`Stopped` (never the exact ``KeyboardInterrupt``),
    outside any :func:`stop_signals` block too — what :func:`stop_signals` restores when its block ends. Call once,
    from the process's entry (main thread); a signal the process inherited ignored stays ignored."""
    def on_stop(signum, frame):  # noqa: ARG001 (signal handler signature)
        raise Stopped

    for s in STOP_SIGNALS:
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, on_stop)


def exit_with(code: int):
    """End the process with exit status ``code``; a SIGINT or SIGTERM from here on is discarded.

    A stop that lands after the command has finished (while it returns, or while the interpreter shuts down) must
    not turn a finished run into a death by signal: an exact ``KeyboardInterrupt`` escaping ``python -m`` makes
    CPython kill itself with SIGINT (−2), and 22 of 30 SIGINTs sent in the last 0.6 s of ``sapa verify`` did that.
    Both signals are blocked, then ignored (which discards one already pending) and left so through finalization,
    which keeps an ignored signal ignored; a stop raised before that is caught and the sequence retried.
    """
    while True:
        try:
            if threading.current_thread() is threading.main_thread():
                signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
                for s in STOP_SIGNALS:
                    signal.signal(s, signal.SIG_IGN)
            break
        except KeyboardInterrupt:
            continue
    raise SystemExit(code)


def stopped_by_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a KeyboardInterrupt or was raised while handling one (its context or cause chain)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within: SIGTERM raises :class:`Stopped` (a KeyboardInterrupt; main thread only); the previous handler is
    restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):  # noqa: ARG001 (signal handler signature)
        raise Stopped

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
