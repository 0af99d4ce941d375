"""Tests for `sapa train`'s options --scheduler / --workers, --device, --activation (errors and help)."""

from __future__ import annotations

import pytest
import torch

from sapa.cli import main


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_help_shows_scheduler_device_and_activation(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    for opt in ("--scheduler", "--workers", "--device", "--activation"):
        assert opt in out


def test_cuda_asked_and_absent_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, out, err = _run(["train", "--device", "cuda", "--out", str(tmp_path / "t")], capsys)
    assert code == 2 and err.startswith("sapa: error:") and "CUDA" in err and err.count("\n") == 1


@pytest.mark.parametrize("expr", ["exp(x)", "x +", "y*x"])
def test_untrainable_activation_is_one_line(capsys, tmp_path, expr):
    code, out, err = _run(["train", "--activation", expr, "--out", str(tmp_path / "t")], capsys)
    assert code == 2 and err.startswith("sapa: error:") and err.count("\n") == 1


def test_workers_and_scheduler_are_exclusive(capsys, tmp_path):
    code, out, err = _run(["train", "--workers", "2", "--scheduler", "tcp://localhost:1", "--out", str(tmp_path / "t")],
                          capsys)
    assert code == 2 and err.startswith("sapa: error:") and err.count("\n") == 1


def test_blank_scheduler_is_one_line(capsys, tmp_path):
    code, out, err = _run(["train", "--scheduler", " ", "--out", str(tmp_path / "t")], capsys)
    assert code == 2 and "--scheduler is empty" in err


# --------------------------------------------------------------------------- issue 52, case 10


def test_an_absurd_replicate_count_is_refused_before_anything_is_planned(capsys, tmp_path):
    """`sapa train --seeds 9007199254740992` reached 6.8 GB in 42 s planning its members; it is estimated first."""
    import resource
    import time

    before, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.process_time()
    code, out, err = _run(["train", "--seeds", "9007199254740992", "--out", str(tmp_path / "t")], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("sapa: error: the study needs ≈"), err
    assert "flops (144,115,188,075,855,872 members at 9,007,199,254,740,992 replicates)" in err and "--seeds" in err
    assert time.process_time() - t0 < 20 and (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) < 2**20
    assert not (tmp_path / "t").exists()


def test_the_study_cost_counts_what_the_plan_holds():
    """Members and flops from one replicate scaled up equal the enumerated plan's (progress bar's) at 3 replicates."""
    from dataclasses import replace

    from sapa.empirics.training.study_config import member_count
    from sapa.empirics.training.train_study import StudyProgress, study_config, study_cost

    for budget in ("quick", "full"):
        cfg = replace(study_config(budget, 0), seeds=3)
        cost = study_cost(cfg)
        bar = StudyProgress(lambda work: _Bar(work), cfg)
        assert cost.bytes == member_count(cfg) * 2048 and f"{member_count(cfg):,} members" in cost.how
        assert cost.flops == pytest.approx(bar.bar.total, rel=1e-12)


class _Bar:
    def __init__(self, total):
        self.total = total

    def set_postfix_str(self, s):
        pass
