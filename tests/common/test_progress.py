"""Tests for `common/progress.py`: logs get periodic lines with elapsed time and an ETA; terminals get tqdm."""

from __future__ import annotations

import io

from common.progress import LineProgress, progress_bar


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_lines_are_periodic_and_end_with_a_summary():
    out, clock = io.StringIO(), Clock()
    bar = LineProgress(10, desc="train runs", unit="run", every_s=30, file=out, clock=clock)
    for k in range(10):
        clock.t += 10
        bar.update(1)
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4  # at 30, 60, 90 s, then the final line at 100 s
    assert lines[0] == "train runs:  30% (3/10 run), 30 s elapsed, eta 70 s"
    assert lines[-1] == "train runs: 100% (10/10 run), 100 s elapsed"


def test_eta_counts_only_this_runs_rate_and_postfix_is_shown():
    out, clock = io.StringIO(), Clock()
    bar = LineProgress(100.0, initial=50.0, desc="sweep", every_s=0, file=out, clock=clock)
    bar.set_postfix_str("cells 3/6")
    clock.t = 20
    bar.update(25.0)  # 25 units in 20 s: 25 units left → 20 s
    assert out.getvalue().strip() == "sweep:  75% (75/100) cells 3/6, 20 s elapsed, eta 20 s"


def test_nothing_printed_when_nothing_happened():
    out = io.StringIO()
    LineProgress(5, file=out).close()
    assert out.getvalue() == ""


def test_progress_bar_kinds(monkeypatch):
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert isinstance(progress_bar(3, desc="x", progress=True), LineProgress)
    assert not isinstance(progress_bar(3, desc="x", progress=False), LineProgress)
    assert not isinstance(progress_bar(3, desc="x", progress="force"), LineProgress)


def test_a_short_run_that_stops_early_prints_nothing_a_long_one_says_where_it_stopped():
    """An error in a quick run leaves its error line alone; a run already logging ends with where it stopped."""
    out, clock = io.StringIO(), Clock()
    bar = LineProgress(64, desc="sweep", every_s=30, file=out, clock=clock)
    bar.update(32)
    bar.close()  # stopped at half, before any periodic line
    assert out.getvalue() == ""
    out, clock = io.StringIO(), Clock()
    bar = LineProgress(64, desc="sweep", every_s=30, file=out, clock=clock)
    clock.t = 31
    bar.update(16)
    clock.t = 40
    bar.update(16)
    bar.close()
    assert out.getvalue().splitlines()[-1] == "sweep:  50% (32/64), 40 s elapsed, eta 40 s"
