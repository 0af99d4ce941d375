"""Progress of long work: a tqdm bar on a terminal, periodic plain lines in logs (CI, ``| tee``, files).

``progress_bar(..., progress=True)`` gives a tqdm bar when stderr is a TTY and otherwise a
:class:`LineProgress` that prints ``desc: 40% (12/30 run), 95 s elapsed, eta 140 s`` at most every
``every_s`` seconds and once at the end. Both are kept alive by a :class:`Heartbeat` thread: a bar whose
count does not move for minutes (one ensemble chunk still training) still ticks its elapsed time and ETA —
the terminal bar is redrawn every second, the log gets a line every ``every_s`` seconds. A run that stops
early (an error, an interrupt) before its first periodic line prints nothing: its error line stays the only
line of a short failed run.

:func:`stage` covers work without a bar of its own (one ledger entry, drawing the figures): while it runs, a
line ``desc: running 40 s, eta ~30 s (...)`` whenever the log has been silent for ``every_s`` seconds.
Every line goes through :func:`say`, which notes the time in the process's :data:`LOG`, so a stage inside
which a bar is already printing adds no second line.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Callable, TextIO

EVERY_S = 10.0  # seconds between two progress lines in a log (no stage stays silent longer)
FALLBACK_S = EVERY_S + 1.0  # the whole command's own stage: speaks only where no inner stage or bar has spoken


class LogClock:
    """When the process's log (stderr) last got a progress line."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.last = clock()

    def mark(self) -> None:
        self.last = self.clock()

    def silent_for(self) -> float:
        return self.clock() - self.last


LOG = LogClock()  # one per process, as stderr is


_BEATING = threading.Lock()  # a stage's check of the silence and its line, as one step
_WRITING = threading.Lock()  # lines come from several threads (a bar's heartbeat, a stage's, the main thread)


def say(line: str, file: TextIO | None = None, log: LogClock = LOG) -> None:
    """Print one progress line to ``file`` (stderr), above any live terminal bar, and note the time in ``log``.

    One write per line under a lock: two threads never splice their lines together.
    """
    out = file or sys.stderr
    with _WRITING:
        if file is None and out.isatty():
            from tqdm import tqdm

            tqdm.write(line, file=out)  # keeps a live bar intact
        else:
            out.write(line + "\n")
            out.flush()
        log.mark()


class Heartbeat:
    """Call ``fn`` every ``interval`` seconds in a daemon thread until :meth:`stop` (``wait``: injectable for tests)."""

    def __init__(self, fn: Callable[[], None], interval: float, wait: Callable[[float], bool] | None = None):
        self.fn, self.interval = fn, float(interval)
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """The loop: wait, call, until the wait reports a stop."""
        while not self._wait(self.interval):
            self.fn()

    def start(self) -> "Heartbeat":
        self._thread = threading.Thread(target=self.run, name="sapa-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


class LineProgress:
    """The subset of tqdm's interface sapa uses (update, set_description_str, set_postfix_str, close), as log lines."""

    def __init__(self, total: float, initial: float = 0.0, desc: str = "", unit: str = "", every_s: float = EVERY_S,
                 file: TextIO | None = None, clock: Callable[[], float] = time.monotonic, log: LogClock = LOG):
        self.total, self.n, self.desc, self.unit, self.postfix = float(total), float(initial), desc, unit, ""
        self._start_n, self._every, self._file, self._clock, self._log = float(initial), float(every_s), file, clock, log
        self._t0 = self._last = clock()
        self._closed = self._emitted = False
        self._lock = threading.Lock()
        self._beat: Heartbeat | None = None

    def line(self) -> str:
        """``desc: pct% (n/total unit) postfix, E s elapsed, eta R s`` (eta from this run's rate, none before its
        first unit is done; the count only when it has a unit: a cost-weighted total is no count a reader knows)."""
        elapsed = self._clock() - self._t0
        pct = 100.0 * self.n / self.total if self.total else 100.0
        done_now = self.n - self._start_n
        eta = elapsed * (self.total - self.n) / done_now if done_now > 0 else None
        count = f" ({self.n:g}/{self.total:g} {self.unit})" if self.unit else ""
        tail = "" if self.n >= self.total else f", eta {eta:.0f} s" if eta is not None else ", no ETA before a first unit"
        post = f" {self.postfix}" if self.postfix else ""
        return f"{self.desc}: {pct:3.0f}%{count}{post}, {elapsed:.0f} s elapsed{tail}"

    def _emit(self) -> None:
        say(self.line(), file=self._file, log=self._log)
        self._last = self._clock()
        self._emitted = True

    def update(self, n: float = 1) -> None:
        with self._lock:
            self.n += n
            if self._clock() - self._last >= self._every:
                self._emit()

    def tick(self) -> None:
        """The heartbeat: a line when ``every_s`` passed since the last one, even if the count has not moved."""
        with self._lock:
            if not self._closed and self._clock() - self._last >= self._every:
                self._emit()

    def keep_alive(self, interval: float | None = None) -> "LineProgress":
        """Tick from a daemon thread until :meth:`close`."""
        self._beat = Heartbeat(self.tick, interval if interval is not None else max(self._every / 4, 0.25)).start()
        return self

    def set_description_str(self, desc: str, refresh: bool = False) -> None:  # noqa: ARG002 (tqdm's signature)
        self.desc = desc

    def set_postfix_str(self, s: str, refresh: bool = False) -> None:  # noqa: ARG002
        self.postfix = s

    def close(self) -> None:
        """The summary line: when the work finished, or when the log already shows how far a stopped run got."""
        if self._beat is not None:
            self._beat.stop()
        with self._lock:
            if not self._closed and self.n > self._start_n and (self.n >= self.total or self._emitted):
                self._emit()
            self._closed = True


class Tally(LineProgress):
    """A :class:`LineProgress` that never prints by itself: work in the background counts into it, and whoever
    waits for that work prints :meth:`line` when it chooses (``sapa verify``: only while it waits)."""

    def _emit(self) -> None:
        self._last = self._clock()


def skip(bar, n: float) -> None:
    """Count ``n`` units found already done (resumed work) without crediting them to this run's speed, so the ETA
    comes from what this run itself computes."""
    if n <= 0:
        return
    if isinstance(bar, LineProgress):
        with bar._lock:
            bar.n += n
            bar._start_n += n
        return
    bar.n += n  # tqdm: update() would feed its rate; this moves the count and the start of its average
    if hasattr(bar, "initial"):
        bar.initial += n
    bar.refresh()


def progress_bar(total: float, initial: float = 0.0, *, desc: str, unit: str = "", progress: bool | str = True,
                 **tqdm_kwargs):
    """tqdm on a TTY (or ``progress="force"``), LineProgress in a log (``progress=True``), nothing for False.

    Both are kept alive until ``close()`` (the bar redrawn every second, a log line every :data:`EVERY_S` s).
    """
    from tqdm import tqdm

    if progress == "force" or (progress is True and sys.stderr.isatty()):
        return _live_tqdm(tqdm)(total=total, initial=initial, file=sys.stderr, desc=desc, unit=unit or "it",
                                **tqdm_kwargs)
    if progress is True:
        return LineProgress(total, initial, desc=desc, unit=unit).keep_alive()
    return tqdm(total=total, initial=initial, disable=True)


def _live_tqdm(tqdm):
    """A tqdm whose elapsed time and ETA keep moving while its count does not (redrawn every second)."""

    class LiveTqdm(tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._beat = Heartbeat(self.refresh, 1.0).start()

        def close(self):
            beat = getattr(self, "_beat", None)
            if beat is not None:
                beat.stop()
            super().close()
            LOG.mark()

    return LiveTqdm


class StageBeat:
    """The progress line of one stage without a bar: elapsed time, and an ETA from an expected duration."""

    def __init__(self, desc: str, expected_s: float | None = None, basis: str = "", every_s: float = EVERY_S,
                 file: TextIO | None = None, clock: Callable[[], float] = time.monotonic, log: LogClock = LOG):
        self.desc, self.expected, self.basis, self.every = desc, expected_s, basis, float(every_s)
        self._file, self._clock, self._log = file, clock, log
        self.t0 = clock()

    def line(self) -> str:
        """``desc: running E s, eta ~R s (basis)``; without an expected duration, ``no estimate (basis)``."""
        elapsed = self._clock() - self.t0
        why = f" ({self.basis})" if self.basis else ""
        if self.expected is None:
            eta = f", no estimate{why}"
        elif elapsed < self.expected:
            eta = f", eta ~{self.expected - elapsed:.0f} s{why}"
        else:
            eta = f", longer than the {self.expected:.0f} s expected{why}"
        return f"{self.desc}: running {elapsed:.0f} s{eta}"

    def beat(self) -> None:
        """A line when the log has been silent for ``every_s`` seconds of this stage (a bar printing inside the stage:
        none).

        Silence before the stage began does not count: in a process that runs several commands (the tests, a
        notebook calling ``sapa.cli.main``) the log was silent since the last one, and a command refusing its input
        after one busy second printed "running 1 s" above its one error line. Checked and printed under one lock:
        two nested stages never both speak for the same silence."""
        with _BEATING:
            if min(self._log.silent_for(), self._clock() - self.t0) >= self.every:
                say(self.line(), file=self._file, log=self._log)


@contextlib.contextmanager
def stage(desc: str, expected_s: float | None = None, basis: str = "", every_s: float = EVERY_S):
    """Within: a :class:`StageBeat` line whenever the log has been silent for ``every_s`` seconds."""
    beat = StageBeat(desc, expected_s, basis, every_s)
    heart = Heartbeat(beat.beat, min(every_s / 4, 1.0)).start()
    try:
        yield beat
    finally:
        heart.stop()
