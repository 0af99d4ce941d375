"""Tests for `sapa/evidence/training_study.py`: the study shared by the training entries, prefetched quietly."""

from __future__ import annotations

from sapa.evidence import training_study as TS


def test_a_prefetched_study_stays_quiet_until_someone_waits_for_it(monkeypatch, capsys, tmp_path):
    # the background study counts into a Tally that never prints; the waiter prints its line every every_s seconds
    import threading

    from sapa.empirics.training import train_study
    from sapa.budget import budget_named
    from sapa.ledger import Context

    import sapa.common.progress as progress_module

    S = TS
    release, counted = threading.Event(), threading.Event()
    say = progress_module.say  # the waiter's line releases the study: no race between a timer and the waiter
    monkeypatch.setattr(progress_module, "say", lambda *a, **k: (say(*a, **k), release.set()))

    def fake_run_study(*a, progress, **k):
        bar = progress(8)
        bar.update(3)
        counted.set()
        release.wait(120)
        bar.update(5)
        bar.close()
        return "study"

    monkeypatch.setattr(train_study, "run_study", fake_run_study)
    ctx = Context(budget_named("quick", seed=0), tmp_path)
    pre = S._Prefetch(ctx)
    assert counted.wait(120)
    assert capsys.readouterr().err == ""  # counting prints nothing
    assert pre.wait(every_s=0.1) == "study"
    lines = capsys.readouterr().err.splitlines()  # the first while the study stood at 3/8; a later one may come
    assert lines[0].startswith("training study (in the background since the run began):  38%, ")  # after its end
    assert all(ln.startswith("training study (in the background since the run began): ") for ln in lines)
    assert pre.tally.n == 8 and pre.wait(every_s=0.1) == "study"  # finished: no further line
    assert capsys.readouterr().err == ""
