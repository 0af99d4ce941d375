"""SIGTERM takes Ctrl-C's path: a terminated run stops cleanly and keeps every finished result."""

from __future__ import annotations

import contextlib
import signal
import threading


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within: SIGTERM raises KeyboardInterrupt (main thread only); the previous handler is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):  # noqa: ARG001 (signal handler signature)
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
