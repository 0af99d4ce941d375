"""A killed ``sapa train`` leaves no process behind and keeps its finished chunks.

The slow tests start ``sapa train --workers 2`` (or ``sapa verify --only norm-vs-accuracy``, which trains
the same study) in a subprocess — the CLI's own code path, with the ``quick`` budget swapped for a tiny
one whose digits chunks finish in seconds and whose text chunks never do — wait until some chunks are on
disk and both workers are busy, send SIGKILL or SIGTERM to the parent only, and require every descendant
to be gone within a few seconds and every finished chunk file to be complete.
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

from sapa.empirics.training import study_store, train_study as ts
from sapa.common.interrupt import sigterm_as_interrupt

SCRIPT = """
import sys
from dataclasses import replace
import sapa.empirics.training.train_study as t
t.BUDGETS["quick"] = replace(t.TINY, text=replace(t.TINY.text, Ns=(8,), steps=10**6))
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
                            stderr=subprocess.PIPE, cwd=Path(__file__).resolve().parents[3], start_new_session=True)
    try:
        runs = (out if command == "train" else out / "train") / "chunks"
        # digits chunks (the larger, first) finish in seconds; then both workers sit in never-ending text chunks
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
            kept = "finished training chunks are kept in" if command == "train" else "training chunks) were kept"
            assert rc == 130 and kept in err and "Traceback" not in err, (rc, err)
        files = sorted(runs.glob("*.json"))
        assert len(files) >= 2
        for f in files:
            assert ts.chunk_record_problem(json.loads(f.read_text(encoding="utf-8"))) is None, f
    finally:  # whatever happened, nothing of this test outlives it (its session's process group)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# ----------------------------------------------------------------------------- fast checks of the guards


def test_worker_exits_when_parent_pid_is_not_its_parent():
    """worker_init(parent) in a process whose parent is someone else exits at once (the parent died)."""
    code = "from sapa.common.pool import worker_init; worker_init(1); import time; time.sleep(30)"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert r.returncode == 1 and time.monotonic() - t0 < 30


def test_sigterm_raises_keyboard_interrupt_and_is_restored():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) == before


MICRO = ts.StudyConfig(name="micro", digits=ts.TINY.digits, text=ts.TaskPlan(Ns=(8,), steps=2, batch=2, lrs=(1e-3,),
                                                                            warmup=1, evals=1, eval_size=4),
                       seeds=1, model=ts.TINY.model, arms=("softmax",), probe=1, tasks=("text",))


@pytest.fixture(scope="module")
def chunk_file(tmp_path_factory):
    """A finished chunk as the study stores it, and its chunk."""
    chunk = ts.plan_chunks(MICRO, "text", 8, None)[0]
    path = tmp_path_factory.mktemp("chunk") / chunk.file_name
    ts.store_chunk(path, chunk, MICRO.hash(), ts.train_chunk(chunk, MICRO))
    return path, chunk


@pytest.mark.parametrize("damage", [
    lambda r: r.pop("history"),
    lambda r: r.pop("rows"),
    lambda r: r["rows"][0].pop("test_acc"),
    lambda r: r["rows"][0].update(seed="0"),
    lambda r: r["rows"][0].update(diverged=0),
    lambda r: r["rows"].append(r["rows"][0]),
    lambda r: r["history"][0].pop(),
    lambda r: r["history"][0].__setitem__(4, "0"),
    lambda r: r["history"][0].__setitem__(5, 3),
    lambda r: r.update(history=[]),
    lambda r: r.update(members=[]),
    lambda r: r.update(schema=0),
], ids=["no-history", "no-rows", "no-test_acc", "str-seed", "int-diverged", "extra-row", "short-history-row",
        "str-step", "int-quantity", "empty-history", "no-members", "old-schema"])
def test_incomplete_chunk_record_is_refused(chunk_file, damage):
    path, chunk = chunk_file
    rec = json.loads(path.read_text())
    assert ts.chunk_record_problem(rec, chunk) is None
    damage(rec)
    assert ts.chunk_record_problem(rec, chunk) is not None


def test_incomplete_chunk_file_is_recomputed_with_a_warning(chunk_file, tmp_path, monkeypatch, capsys):
    """A chunk file that parses (and passes its checksum) but lacks its history is trained again, with one line."""
    monkeypatch.setattr(study_store, "check_record", lambda rec, path: None)  # isolate this guard from the checksum
    src, chunk = chunk_file
    path = tmp_path / chunk.file_name
    good = json.loads(src.read_text())
    path.write_text(json.dumps(good), encoding="utf-8")
    assert ts.chunk_ok(path, chunk, MICRO.hash())
    assert not ts.chunk_ok(path, chunk, "another config")
    good.pop("history")
    path.write_text(json.dumps(good), encoding="utf-8")
    assert not ts.chunk_ok(path, chunk, MICRO.hash())
    assert "invalid (no 'history' rows); recomputing" in capsys.readouterr().err
