"""Tests for `common/progress.py`: logs get periodic lines with elapsed time and an ETA; terminals get tqdm."""

from __future__ import annotations

import io

from sapa.common.progress import EVERY_S, Heartbeat, LineProgress, LogClock, StageBeat, progress_bar, skip


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
    assert out.getvalue().strip() == "sweep:  75% cells 3/6, 20 s elapsed, eta 20 s"  # a cost total: no count


def test_nothing_printed_when_nothing_happened():
    out = io.StringIO()
    LineProgress(5, file=out).close()
    assert out.getvalue() == ""


def test_progress_bar_kinds(monkeypatch):
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    bars = [progress_bar(3, desc="x", progress=p) for p in (True, False, "force")]
    assert isinstance(bars[0], LineProgress) and bars[0]._beat is not None  # kept alive by a heartbeat
    assert not isinstance(bars[1], LineProgress) and not isinstance(bars[2], LineProgress)
    assert bars[2]._beat is not None  # the terminal bar is redrawn every second
    for b in bars:
        b.close()
    assert not bars[0]._beat._thread.is_alive() and not bars[2]._beat._thread.is_alive()


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
    assert out.getvalue().splitlines()[-1] == "sweep:  50%, 40 s elapsed, eta 40 s"


def test_a_bar_that_does_not_move_still_logs_elapsed_time():
    """One ensemble chunk training for minutes: the count stays at 28 %, the heartbeat still prints every every_s."""
    out, clock = io.StringIO(), Clock()
    bar = LineProgress(108, desc="train members", unit="member", every_s=10, file=out, clock=clock)
    clock.t = 20
    bar.update(30)  # a line at 20 s
    for t in range(21, 61):  # 40 s without a finished chunk, ticked every second
        clock.t = t
        bar.tick()
    lines = out.getvalue().splitlines()
    assert lines == ["train members:  28% (30/108 member), 20 s elapsed, eta 52 s",
                     "train members:  28% (30/108 member), 30 s elapsed, eta 78 s",
                     "train members:  28% (30/108 member), 40 s elapsed, eta 104 s",
                     "train members:  28% (30/108 member), 50 s elapsed, eta 130 s",
                     "train members:  28% (30/108 member), 60 s elapsed, eta 156 s"]


def test_heartbeat_calls_until_the_wait_reports_a_stop():
    calls, waits = [], iter([False, False, False, True])
    Heartbeat(lambda: calls.append(1), 2.5, wait=lambda s: next(waits)).run()
    assert len(calls) == 3


def test_heartbeat_thread_stops():
    hb = Heartbeat(lambda: None, 0.01).start()
    hb.stop()
    assert not hb._thread.is_alive()


def _simulate(seconds: int, bar_lines_every: int | None, every_s: float = EVERY_S, expected: float | None = None):
    """A stage of ``seconds`` s beating every second; a bar inside it logging every ``bar_lines_every`` s (None: no
    bar). Returns the times of every log line and the stage's own lines."""
    clock = Clock()
    log = LogClock(clock)
    out = io.StringIO()
    basis = "first quick run in results" if expected is None else "as long as the last quick run in results"
    st = StageBeat("[3/16] thm4.2-linear", expected, basis, every_s, out, clock, log)
    times = []
    for t in range(1, seconds + 1):
        clock.t = t
        if bar_lines_every and t % bar_lines_every == 0:
            log.mark()
            times.append(t)
        before = out.getvalue().count("\n")
        st.beat()
        if out.getvalue().count("\n") > before:
            times.append(t)
    return times, out.getvalue().splitlines()


def test_a_stage_without_a_bar_is_never_silent_longer_than_every_s():
    """The sweep inside verify once ran 327 s without a line: with the stage heartbeat, a line every every_s."""
    times, lines = _simulate(327, None, expected=234)
    gaps = [b - a for a, b in zip([0] + times, times)]
    assert max(gaps) <= EVERY_S and len(lines) == 327 // int(EVERY_S)
    assert lines[0] == "[3/16] thm4.2-linear: running 10 s, eta ~224 s (as long as the last quick run in results)"
    assert lines[-1].startswith("[3/16] thm4.2-linear: running 320 s, longer than the 234 s expected")


def test_silence_before_a_stage_began_does_not_make_it_speak():
    """In a process that ran a command long ago (a test worker, a notebook), the log had been silent for minutes when
    the next command began: a command that refused its input after one busy second printed "running 1 s" above its
    error line. The stage speaks after every_s seconds of its own."""
    clock = Clock()
    log = LogClock(clock)
    clock.t = 600.0  # the log's last line was 600 s ago
    out = io.StringIO()
    st = StageBeat("sapa train", None, "", EVERY_S, out, clock, log)
    for t in range(1, int(EVERY_S)):
        clock.t = 600.0 + t
        st.beat()
    assert out.getvalue() == ""
    clock.t = 600.0 + EVERY_S
    st.beat()
    assert out.getvalue() == f"sapa train: running {EVERY_S:.0f} s, no estimate\n"


def test_a_stage_with_its_own_bar_adds_no_second_line():
    times, lines = _simulate(100, 7)  # the bar prints every 7 s: the log is never silent for 10 s
    assert lines == [] and max(b - a for a, b in zip(times, times[1:])) <= 7


def test_a_stage_with_a_sparse_bar_fills_the_gaps():
    times, lines = _simulate(100, 25)  # bar lines every 25 s: the stage speaks in between
    assert max(b - a for a, b in zip([0] + times, times)) <= EVERY_S and lines
    assert all(x.endswith("no estimate (first quick run in results)") for x in lines)


def test_resumed_work_does_not_speed_up_the_eta():
    """Half of a study found finished on disk: the ETA comes from what this run trains, not from the skipped half."""
    out, clock = io.StringIO(), Clock()
    bar = LineProgress(100, desc="train members", unit="member", every_s=0, file=out, clock=clock)
    skip(bar, 50)
    clock.t = 40
    bar.update(10)  # 10 members in 40 s: 40 left → 160 s
    assert out.getvalue().strip() == "train members:  60% (60/100 member), 40 s elapsed, eta 160 s"


def test_skip_on_a_terminal_bar_moves_count_and_start():
    from tqdm import tqdm

    bar = tqdm(total=100, file=io.StringIO())
    skip(bar, 30)
    assert bar.n == 30 and bar.initial == 30
    bar.close()
    skip(tqdm(total=5, disable=True), 2)  # a disabled bar takes it silently


def test_before_the_first_unit_the_line_says_there_is_no_eta_yet():
    out, clock = io.StringIO(), Clock()
    bar = LineProgress(108, desc="train members", unit="member", every_s=10, file=out, clock=clock)
    clock.t = 11
    bar.tick()
    assert out.getvalue().strip() == "train members:   0% (0/108 member), 11 s elapsed, no ETA before a first unit"


def test_lines_from_many_threads_are_never_spliced():
    """A bar's heartbeat and the main thread print at once: each line arrives whole (one write under a lock)."""
    import threading

    from sapa.common.progress import say

    class Slow(io.StringIO):
        def write(self, s):  # a stream that yields between writes, as a pipe does
            n = 0
            for ch in s:
                n += super().write(ch)
            return n

    out = Slow()
    lines = [f"thread {t} line {k} " + "x" * 40 for t in range(4) for k in range(50)]

    def run(t):
        for k in range(50):
            say(f"thread {t} line {k} " + "x" * 40, file=out, log=LogClock(Clock()))

    import sys

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads between characters: unlocked writes splice (checked by hand)
    try:
        threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(before)
    assert sorted(out.getvalue().splitlines()) == sorted(lines)
