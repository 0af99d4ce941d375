"""A small context for the growth entries' tests: a tiny seeded sweep planted as the run's sweep, a small worst case."""

from __future__ import annotations

from dataclasses import replace

TINY_SWEEP = {  # 64 cells: 4 models × 4 N × (x/√N, x³/√N, x/16, x³), D = d = 16
    "seed": 0,
    "trials": 32,
    "tail_trials_max": 128,
    "N": [8, 16, 32, 64],
    "D": [16],
    "d": ["D"],
    "weight_model": ["paper", "iid", "tied", "corr"],
    "rho": [0.5],
    "activation": [
        {"kind": "poly", "p": [1, 3], "scale": "inv_sqrt_n"},
        {"kind": "poly", "p": 1, "scale": "const", "c": 0.0625},
        {"kind": "poly", "p": 3, "scale": "const", "c": 1.0},
    ],
}


def small_growth_context(out_dir):
    """A quick-budget Context whose sweep is :data:`TINY_SWEEP` (run here, serially) and whose worst-case search is
    the closed-form witnesses at N = 3, 6 (seeded restarts: tests/empirics/experiments/test_worst_case.py)."""
    from sapa.empirics.montecarlo.sweep import config_from_dict, run_sweep
    from sapa.budget import QUICK
    from sapa.ledger import Context

    ctx = Context(budget=replace(QUICK, worst_Ns=(3, 6), worst_steps=2, worst_restarts=0), out_dir=out_dir, workers=1)
    cfg = config_from_dict(TINY_SWEEP)
    ctx.cache["sweep"] = (run_sweep(cfg, out_dir / "sweep", progress=False), cfg)
    return ctx
