"""A killed ``sapa train`` leaves no process behind and keeps its finished runs (issue 15, item 3; item 6).

The slow tests start ``sapa train --workers 2`` in a subprocess (the CLI's own code path, with the
``quick`` budget swapped for a tiny one whose text runs finish in seconds and whose digits runs
never do), wait until some runs are on disk and both workers are busy, send SIGKILL or SIGTERM to
the parent only, and require every descendant to be gone within a few seconds and every finished
run file to be complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from empirics import training
from empirics.training import _run_file_ok, _run_record_problem, run_keys, sigterm_as_interrupt

SCRIPT = """
import sys
from dataclasses import replace
import empirics.training as t
t.QUICK = replace(t.TINY, digits_arms=("softmax", "x3"), text_arms=("softmax", "x3"),
                  digits=replace(t.TINY.digits, steps=10**6, eval_every=10**5))
from sapa.cli import main
if sys.argv[2] == "train":
    sys.exit(main(["train", "--budget", "quick", "--out", sys.argv[1], "--workers", "2", "--no-progress"]))
sys.exit(main(["verify", "--only", "norm-vs-accuracy", "--out", sys.argv[1]]))  # trains into OUT/train
"""


def _children(pid: int) -> set[int]:
    """Every descendant of ``pid`` (a /proc scan; psutil when installed)."""
    try:
        import psutil

        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - the process is gone
        return set()
    parents = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, pp in parents.items() if pp == p}
        todo += list(kids - out)
        out |= kids
    return out


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait(cond, timeout: float, step: float = 0.5) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process-tree checks use /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("command", ["train", "verify"])
def test_killed_train_leaves_no_descendants_and_keeps_finished_runs(tmp_path, sig, command):
    out = tmp_path / "res"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(out), command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2], start_new_session=True)
    try:
        runs = (out if command == "train" else out / "train") / "runs"
        # text runs (first) finish in seconds; then both workers sit in never-ending digits runs
        assert _wait(lambda: len(list(runs.glob("*.json"))) >= 2, 240), proc.stderr.read1().decode() if proc.poll() else ""
        assert _wait(lambda: len(_children(proc.pid)) >= 2, 60)
        time.sleep(2.0)
        family = _children(proc.pid)
        assert proc.poll() is None and len(family) >= 2
        os.kill(proc.pid, sig)
        rc = proc.wait(timeout=60)
        assert _wait(lambda: not any(_alive(p) for p in family), 10), [p for p in family if _alive(p)]
        if sig == signal.SIGTERM:  # Ctrl-C's path: one line, exit 130, finished runs kept
            err = proc.stderr.read().decode()
            assert rc == 130 and "finished results were kept" in err and "Traceback" not in err, (rc, err)
        files = sorted(runs.glob("*.json"))
        assert len(files) >= 2
        for f in files:
            assert _run_record_problem(json.loads(f.read_text(encoding="utf-8"))) is None, f
    finally:  # whatever happened, nothing of this test outlives it (its session's process group)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# ----------------------------------------------------------------------------- fast checks of the guards


def test_worker_exits_when_parent_pid_is_not_its_parent():
    """_worker_init(parent) in a process whose parent is someone else exits at once (the parent died)."""
    code = "from empirics.training import _worker_init; _worker_init(1); import time; time.sleep(30)"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert r.returncode == 1 and time.monotonic() - t0 < 30


def test_sigterm_raises_keyboard_interrupt_and_is_restored():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) == before


def _record() -> dict:
    """A complete record of one (tiny) run, as run_one writes it."""
    cfg = training.TINY
    k = run_keys(cfg)[0]
    return json.loads(json.dumps(training.run_one(k.task, k.arm, k.weight_decay, k.seed, cfg), default=float))


@pytest.fixture(scope="module")
def record():
    return _record()


@pytest.mark.parametrize("damage", [
    lambda r: r.pop("history"),
    lambda r: r.pop("final"),
    lambda r: r["final"].pop("test_acc"),
    lambda r: r["final"].update(test_acc="0.9"),
    lambda r: r["final"].update(diverged=0),
    lambda r: r["history"].pop("value"),
    lambda r: r["history"]["value"].pop(),
    lambda r: r["history"]["step"].__setitem__(0, "0"),
    lambda r: r["history"]["quantity"].__setitem__(0, 3),
    lambda r: r["history"].update(step=[], layer=[], head=[], quantity=[], value=[]),
    lambda r: r.update(history=[1, 2]),
    lambda r: r.update(schema=0),
    lambda r: r.pop("key"),
], ids=["no-history", "no-final", "no-test_acc", "str-acc", "int-diverged", "no-value", "short-column",
        "str-step", "int-quantity", "empty-history", "history-list", "old-schema", "no-key"])
def test_incomplete_run_record_is_refused(record, damage):
    assert _run_record_problem(record) is None
    bad = json.loads(json.dumps(record))
    damage(bad)
    assert _run_record_problem(bad) is not None


def test_incomplete_run_file_is_recomputed_with_a_warning(record, tmp_path, monkeypatch, capsys):
    """A run file that parses (and passes its checksum) but lacks history is run again, with one warning line."""
    monkeypatch.setattr(training, "check_record", lambda rec, path: None)  # isolate this guard from the checksum
    cfg = training.TINY
    k = run_keys(cfg)[0]
    path = tmp_path / k.file_name
    good = dict(record, config_hash=cfg.hash())
    path.write_text(json.dumps(good), encoding="utf-8")
    assert _run_file_ok(path, k, cfg.hash())
    good.pop("history")
    path.write_text(json.dumps(good), encoding="utf-8")
    assert not _run_file_ok(path, k, cfg.hash())
    assert "invalid (no 'history' object); recomputing" in capsys.readouterr().err
