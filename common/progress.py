"""Progress of long work: a tqdm bar on a terminal, periodic plain lines in logs (CI, ``| tee``, files).

``progress_bar(..., progress=True)`` gives a tqdm bar when stderr is a TTY and otherwise a
:class:`LineProgress` that prints ``desc: 40% (12/30 run) 95 s elapsed, eta 140 s`` at most every
``every_s`` seconds and once at the end, so a log never stays silent for minutes. A run that stops
early (an error, an interrupt) before its first periodic line prints nothing: its error line stays
the only line of a short failed run.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

EVERY_S = 30.0  # seconds between two progress lines in a log


class LineProgress:
    """The subset of tqdm's interface sapa uses (update, set_description_str, set_postfix_str, close), as log lines."""

    def __init__(self, total: float, initial: float = 0.0, desc: str = "", unit: str = "", every_s: float = EVERY_S,
                 file: TextIO | None = None, clock: Callable[[], float] = time.monotonic):
        self.total, self.n, self.desc, self.unit, self.postfix = float(total), float(initial), desc, unit, ""
        self._start_n, self._every, self._file, self._clock = float(initial), float(every_s), file, clock
        self._t0 = self._last = clock()
        self._closed = self._emitted = False

    def line(self) -> str:
        """``desc: pct% (n/total unit) postfix, E s elapsed, eta R s`` (eta from this run's rate)."""
        elapsed = self._clock() - self._t0
        pct = 100.0 * self.n / self.total if self.total else 100.0
        done_now = self.n - self._start_n
        eta = elapsed * (self.total - self.n) / done_now if done_now > 0 else None
        count = f"{self.n:g}/{self.total:g}{' ' + self.unit if self.unit else ''}"
        tail = f", eta {eta:.0f} s" if eta is not None and self.n < self.total else ""
        post = f" {self.postfix}" if self.postfix else ""
        return f"{self.desc}: {pct:3.0f}% ({count}){post}, {elapsed:.0f} s elapsed{tail}"

    def _emit(self) -> None:
        print(self.line(), file=self._file or sys.stderr, flush=True)
        self._last = self._clock()
        self._emitted = True

    def update(self, n: float = 1) -> None:
        self.n += n
        if self._clock() - self._last >= self._every:
            self._emit()

    def set_description_str(self, desc: str, refresh: bool = False) -> None:  # noqa: ARG002 (tqdm's signature)
        self.desc = desc

    def set_postfix_str(self, s: str, refresh: bool = False) -> None:  # noqa: ARG002
        self.postfix = s

    def close(self) -> None:
        """The summary line: when the work finished, or when the log already shows how far a stopped run got."""
        if not self._closed and self.n > self._start_n and (self.n >= self.total or self._emitted):
            self._emit()
        self._closed = True


def progress_bar(total: float, initial: float = 0.0, *, desc: str, unit: str = "", progress: bool | str = True,
                 **tqdm_kwargs):
    """tqdm on a TTY (or ``progress="force"``), LineProgress in a log (``progress=True``), nothing for False."""
    from tqdm import tqdm

    if progress == "force" or (progress is True and sys.stderr.isatty()):
        return tqdm(total=total, initial=initial, file=sys.stderr, desc=desc, unit=unit or "it", **tqdm_kwargs)
    if progress is True:
        return LineProgress(total, initial, desc=desc, unit=unit)
    return tqdm(total=total, initial=initial, disable=True)
