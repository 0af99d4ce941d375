"""Tests for `empirics/montecarlo/sweep/cells.py`: canonical, de-duplicated cells and the memory plan."""

from __future__ import annotations

from sapa.empirics.montecarlo.sweep import cells, trials_per_batch
from tests.empirics.montecarlo.sweep.sweep_fixture import tiny


def test_cells_are_canonical_and_deduplicated():
    cfg = tiny(
        weight_model=["paper", "iid", "tied", "corr"],
        rho=[0.5, 0.9],
        mask=["none", "causal"],
        activation=[{"kind": "poly", "p": 1, "scale": ["inv_sqrt_n", "inv_sqrt_i"]}],
    )
    cs = cells(cfg)
    assert len(cs) == len(set(cs))
    assert {c.rho for c in cs if c.weight_model == "tied"} == {1.0}
    assert {c.rho for c in cs if c.weight_model == "corr"} == {0.5, 0.9}
    assert {c.mask for c in cs if c.scale_policy == "inv_sqrt_i"} == {"causal"}
    assert all(c.D == c.d for c in cs if c.weight_model == "paper")
    assert {c.d for c in cells(tiny(d=["D", 2])) if c.weight_model == "corr"} == {4, 2}
    assert [c.N for c in cs[:3]] == [4, 8, 16]  # N innermost


def test_memory_plan_for_large_n():
    b = trials_per_batch(16384, 768, 64)
    assert b >= 1 and b * (16 + 80) * 16384 * 768 < 3 * 2**30
    assert trials_per_batch(8, 16, 64) == 64


def test_resolve_activation_is_the_scale_rules():
    import math

    import torch

    from sapa.empirics.montecarlo.sweep import resolve_activation

    cfg = tiny(activation=[{"kind": "poly", "p": 3, "scale": ["inv_sqrt_n", "inv_sqrt_d", "inv_sqrt_i"]},
                           {"kind": "poly", "p": 1, "scale": "const", "c": 0.0625}])
    for cell in cells(cfg):
        act, row_scale, mask = resolve_activation(cell)
        N, d = cell.N, cell.d
        if cell.scale_policy == "inv_sqrt_i":
            i = torch.arange(1, N + 1, dtype=torch.float64)
            assert act.coef == 1.0 and mask == "causal" and torch.equal(row_scale, 1 / i.sqrt())
        else:
            want = {"inv_sqrt_n": 1 / math.sqrt(N), "inv_sqrt_d": 1 / math.sqrt(d), "const": 0.0625}[cell.scale_policy]
            assert act.coef == want and row_scale is None and mask == cell.mask
