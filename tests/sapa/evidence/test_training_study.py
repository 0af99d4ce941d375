"""Tests for `sapa/evidence/training_study.py`: the study shared by the training entries, prefetched quietly."""

from __future__ import annotations

from sapa.evidence import training_study as TS


def test_a_prefetched_study_stays_quiet_until_someone_waits_for_it(monkeypatch, capsys, tmp_path):
    # the background study counts into a Tally that never prints; the waiter prints its line every every_s seconds
    import threading

    from empirics.training import train_study
    from sapa.budget import budget_named
    from sapa.ledger import Context

    S = TS
    release, counted = threading.Event(), threading.Event()

    def fake_run_study(*a, progress, **k):
        bar = progress(8)
        bar.update(3)
        counted.set()
        release.wait(5)
        bar.update(5)
        bar.close()
        return "study"

    monkeypatch.setattr(train_study, "run_study", fake_run_study)
    ctx = Context(budget_named("quick", seed=0), tmp_path)
    pre = S._Prefetch(ctx)
    assert counted.wait(5)
    assert capsys.readouterr().err == ""  # counting prints nothing
    threading.Timer(0.35, release.set).start()
    assert pre.wait(every_s=0.1) == "study"
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(ln.startswith("training study (in the background since the run began):  38%, ")
                         for ln in lines)
    assert pre.tally.n == 8 and pre.wait(every_s=0.1) == "study"  # finished: no further line
    assert capsys.readouterr().err == ""
