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
