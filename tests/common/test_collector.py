"""sapa.common.collector: the cyclic garbage collector's thresholds, set by the `sapa` command (and pool workers:
tests/common/test_pool.py)."""

from __future__ import annotations

import gc

import pytest

from sapa.common.collector import THRESHOLDS, collect_less_often
from sapa.cli import main


def test_thresholds_are_set_and_the_previous_ones_returned():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        assert collect_less_often() == (700, 10, 10) and gc.get_threshold() == THRESHOLDS
        assert collect_less_often() == THRESHOLDS  # idempotent
        assert THRESHOLDS[0] > 700 and THRESHOLDS[1:] == (10, 10)  # generation 0 less often, the ratios kept
    finally:
        gc.set_threshold(*before)


def test_the_sapa_command_sets_them(capsys):
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with pytest.raises(SystemExit) as done:  # argparse's version action exits
            main(["--version"])
        assert done.value.code == 0
        assert gc.get_threshold() == THRESHOLDS
    finally:
        gc.set_threshold(*before)
    assert capsys.readouterr().out.startswith("sapa")
