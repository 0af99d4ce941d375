"""Tests for the sweep's trial design (`sapa.empirics.montecarlo.sweep.cell_trials`, `sapa.empirics.montecarlo.stats.design_trials`).

Trials per cell are fixed in advance by the config: light-tailed cells get ``trials``; with
``tail_trials_max > 0`` the heavy-tailed cells (c·x^p, p ≥ 2) get min(tail_trials_max, ⌈trials·max(N)/N⌉).
"""

from __future__ import annotations

import pytest

from sapa.empirics.montecarlo.stats import design_trials
from sapa.empirics.montecarlo.sweep import (builtin_config, cell_id, cell_trials, cells, config_from_dict, load_config, run_cell,
                            with_overrides)
from sapa.common.validate import InputError

RAW = {"N": [8, 32], "D": [4], "d": [2], "weight_model": ["iid"], "trials": 3, "tail_trials_max": 12,
       "activation": [{"kind": "softmax"}, {"kind": "poly", "p": [1, 3], "scale": "inv_sqrt_n"}]}


def test_heavy_tailed_cells_get_the_design_and_others_the_flat_count():
    cfg = config_from_dict(RAW)
    got = {(c.activation, c.p, c.N): cell_trials(cfg, c) for c in cells(cfg)}
    assert got[("softmax", 0, 8)] == got[("poly", 1, 8)] == 3
    assert got[("poly", 3, 32)] == 3 and got[("poly", 3, 8)] == design_trials(8, [8, 32], base=3, cap=12) == 12
    flat = with_overrides(cfg, tail_trials_max=0)
    assert all(cell_trials(flat, c) == 3 for c in cells(flat))
    # the design is part of what a heavy cell's stored numbers depend on; light cells keep their ids
    for a, b in zip(cells(cfg), cells(flat)):
        same = cell_trials(cfg, a) == cell_trials(flat, b)
        assert (cell_id(cfg, a) == cell_id(flat, b)) == same


def test_run_cell_draws_the_designed_number_of_trials():
    cfg = config_from_dict(RAW)
    heavy = next(c for c in cells(cfg) if c.p == 3 and c.N == 8)
    df = run_cell(cfg, heavy)
    assert (df[(df["quantity"] == "fro") & (df["row"] == -1)]["trial"].nunique()) == 12


def test_builtin_configs_declare_the_design():
    q, f = load_config(builtin_config("quick")), load_config(builtin_config("full"))
    assert q.tail_trials_max == 768 and q.trials == 48 and f.tail_trials_max == 2048
    x3 = [c for c in cells(q) if c.activation == "poly" and c.p == 3 and c.weight_model == "tied" and c.D == 16
          and c.scale_policy == "inv_sqrt_n"]
    assert [cell_trials(q, c) for c in sorted(x3, key=lambda c: c.N)] == [768, 768, 768, 384, 192, 96, 48]


def test_tail_trials_max_is_validated():
    with pytest.raises(InputError):
        config_from_dict({**RAW, "tail_trials_max": -1})
