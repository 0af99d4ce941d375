"""`sapa train` interrupted and resumed leaves result files byte-identical to an uninterrupted run's (issue 51.5).

The slow test does what a user does: ``sapa train --budget quick --out T1``, SIGINT after 5 s, the same command
again (it resumes), and ``--out T2`` uninterrupted; every sealed chunk file (the study's and the mechanism
probes') must then be the same bytes in both. The timings are in each folder's ``timing/`` sidecars, which may
differ. The mechanism itself is tested fast in tests/empirics/training/test_study_store.py and test_mechanism.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _train(out: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "sapa.cli", "train", "--budget", "quick", "--out", str(out),
                             "--no-progress"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _results(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for d in ("chunks", "mechanism") for p in (out / d).glob("*.json")}


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals to a child process")
def test_an_interrupted_and_resumed_quick_train_writes_the_same_chunk_bytes(tmp_path):
    t1, t2 = tmp_path / "T1", tmp_path / "T2"
    proc = _train(t1)
    time.sleep(5.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()[-2000:]
    interrupted = _results(t1)
    for out in (t1, t2):
        p = _train(out)
        _, err = p.communicate(timeout=3600)
        assert p.returncode == 0, err.decode()[-2000:]
    a, b = _results(t1), _results(t2)
    assert a and set(a) == set(b)
    assert all(a[k] == b[k] for k in a), [k for k in a if a[k] != b[k]]
    assert all(interrupted[k] == a[k] for k in interrupted)  # a chunk finished before the interrupt is kept as is
    assert (t1 / "chunks" / "timing").is_dir()  # the timings live beside the results
