"""Tests for `sapa/commands/compare.py`: bad input is one line and exit 2 before any work; --json and --out; an
interrupt is one line, exit 130, and leaves nothing half-written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sapa.cli import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("argv", [["compare", "nope("], ["compare", "x_alpha"], ["compare", "x", "--budget", "huge"],
                                  ["compare", "x", "--json", "--markdown"],
                                  ["compare", "relu_N", "Max(x, 0)/N"], ["compare", "softmax"], ["compare", "x", "--workers", "0"]])
def test_bad_input_is_one_line_and_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sapa") and "Traceback" not in err[0]


def test_json_and_out(tmp_path, capsys, monkeypatch):
    import sapa.api.compare as C

    monkeypatch.setitem(C.BUDGETS, "quick", C.BUDGETS["tiny"])
    assert main(["compare", "x3_sqrtN", "--json", "--out", str(tmp_path)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in d["rows"]] == ["softmax", "x3_sqrtN"]
    assert json.loads((tmp_path / "scorecard.json").read_text())["rows"] == d["rows"]
    assert sorted(p.suffix for p in tmp_path.glob("compare_scorecard*")) == [".pdf", ".png"]


@pytest.fixture
def tiny(monkeypatch):
    import sapa.api.compare as C

    monkeypatch.setitem(C.BUDGETS, "quick", C.BUDGETS["tiny"])
    return C


def test_an_interrupt_during_the_work_is_one_line_exit_130_and_leaves_no_folder(tiny, tmp_path, monkeypatch, capsys):
    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tiny, "run_jobs", stop)
    out = tmp_path / "new"
    assert main(["compare", "x3_sqrtN", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "sapa: interrupted; nothing was written (--out is written once, at the end)"
    assert "Traceback" not in err and not out.exists()  # the folder made to hold the lock is removed again


def test_an_interrupt_while_writing_says_what_was_written(tiny, tmp_path, monkeypatch, capsys):
    import sapa.common.atomic as A

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(A, "atomic_write_json", stop)
    assert main(["compare", "x3_sqrtN", "--out", str(tmp_path)]) == 130
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("sapa: interrupted; the figure was written in") and "scorecard.json not" in last
    assert not (tmp_path / "scorecard.json").exists() and not (tmp_path / ".sapa.lock").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_an_out_that_cannot_be_written_is_refused_before_any_work(tiny, tmp_path, monkeypatch, capsys):
    def work(*a, **k):
        raise AssertionError("work started")

    monkeypatch.setattr(tiny, "compare", work)
    (tmp_path / "f").write_text("")
    assert main(["compare", "x3_sqrtN", "--out", str(tmp_path / "f")]) == 2
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.slow  # the quick budget's timing, then its pool of 2 workers, stopped: ~15 s
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals to a child process")
def test_ctrl_c_in_the_pool_stops_the_workers_at_once_and_exits_130(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "sapa.cli", "compare", "x3_sqrtN", "--out", str(out)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stderr:  # the pool has started: its line is printed as the jobs are submitted
        lines.append(line)
        if "jobs on 2 processes" in line:
            break
    time.sleep(2.0)
    t = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    err = "".join(lines) + rest
    assert proc.returncode == 130, err[-2000:]
    assert time.monotonic() - t < 20, "the pool waited for its work in flight"
    assert err.splitlines()[-1] == "sapa: interrupted; nothing was written (--out is written once, at the end)"
    assert "Traceback" not in err and not out.exists()
