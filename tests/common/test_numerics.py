"""Tests for `common/numerics.py`: kernel dispatch is pinned before torch is imported, in every process."""

from __future__ import annotations

import pytest

import os
import subprocess
import sys

from sapa.common.numerics import PINNED, pin_kernel_dispatch


def _capability(code: str, env: dict) -> str:
    r = subprocess.run([sys.executable, "-c", code + "; import torch; print(torch.backends.cpu.get_cpu_capability())"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in PINNED}


@pytest.mark.slow  # two fresh interpreters (~4 s)
def test_importing_sapa_or_empirics_pins_dispatch_before_torch():
    env = _clean_env()
    assert _capability("import sapa.cli", env) == "AVX2"
    assert _capability("import sapa.empirics.training.train_study", env) == "AVX2"


def test_a_value_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert pin_kernel_dispatch()["ATEN_CPU_CAPABILITY"] == "default"
    assert os.environ["MKL_CBWR"] == PINNED["MKL_CBWR"]
