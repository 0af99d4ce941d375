"""Monte Carlo sweeps of ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F against N (arXiv 2410.18613, Thm 4.1–Cor 4.5).

A TOML file (:func:`load_config`) fixes grids over N, D, d, weight model, ρ, mask, input
model and a list of activations (softmax with temperature τ, or ``c·x^p`` with a scale
policy, on the exact kernels; or any row of :data:`sapa.theory.families.FAMILY_TABLE` and any expression
φ(x, N, i, j), on the expression kernels); :func:`cells` expands it into canonical, de-duplicated cells; :func:`run_cell` is a
pure function of ``(config, cell)`` returning tidy rows (cell keys, trial, quantity, value);
:func:`run_sweep` runs the cells (serially, or through a ``concurrent.futures.Executor``),
writes each finished cell atomically as ``OUT/cells/<cell_id>.parquet``, skips finished cells
on a rerun, and assembles ``OUT/results.parquet`` atomically with provenance in the file
metadata.

The package along its seams (this module re-exports the public API):

* :mod:`sapa.empirics.montecarlo.sweep.config`: :class:`SweepConfig`, TOML / dict parsing, the stored activation
  columns ``(activation, p, scale_policy, c)`` (:func:`cell_columns` of a family, :func:`activation_label`);
* :mod:`sapa.empirics.montecarlo.sweep.cells`: :class:`Cell`, the grid, sampling keys, cell ids, trial counts;
* :mod:`sapa.empirics.montecarlo.sweep.run`: :func:`run_cell` and :func:`run_sweep` (any standard executor);
* :mod:`sapa.empirics.montecarlo.sweep.store`: sealed Parquet part files and their provenance;
* :mod:`sapa.empirics.montecarlo.sweep.analysis`: :func:`summarise`, :func:`fit_exponents`, :func:`attach_exact`.
"""

from __future__ import annotations

from sapa.empirics.montecarlo.sweep.analysis import attach_exact, fit_exponents, softmax_typical_norm, summarise
from sapa.empirics.montecarlo.sweep.cells import (
    KEY_COLS,
    SCHEMA,
    Cell,
    cell_id,
    cell_expression,
    cell_trials,
    cells,
    check_memory,
    expr_trials_per_batch,
    model_config,
    resolve_activation,
    sampling_key,
    trials_per_batch,
)
from sapa.empirics.montecarlo.sweep.config import (
    ACTIVATIONS,
    DTYPES,
    MASKS,
    POLICIES,
    SOFTMAX_POLICIES,
    SweepConfig,
    builtin_config,
    cell_columns,
    config_from_dict,
    expression,
    is_kernel,
    load_config,
    with_overrides,
)
from sapa.empirics.montecarlo.sweep.config import label as activation_label
from sapa.empirics.montecarlo.sweep.run import QUANTITIES, CellFailedError, cell_name, run_cell, run_sweep, torch_threads
from sapa.empirics.montecarlo.sweep.store import STALE_TMP_S, provenance, read_metadata

__all__ = [
    "ACTIVATIONS",
    "DTYPES",
    "KEY_COLS",
    "MASKS",
    "POLICIES",
    "QUANTITIES",
    "SCHEMA",
    "SOFTMAX_POLICIES",
    "STALE_TMP_S",
    "Cell",
    "CellFailedError",
    "SweepConfig",
    "activation_label",
    "attach_exact",
    "builtin_config",
    "cell_columns",
    "cell_expression",
    "cell_id",
    "cell_name",
    "cell_trials",
    "cells",
    "check_memory",
    "config_from_dict",
    "expr_trials_per_batch",
    "expression",
    "fit_exponents",
    "is_kernel",
    "load_config",
    "model_config",
    "provenance",
    "read_metadata",
    "resolve_activation",
    "run_cell",
    "run_sweep",
    "sampling_key",
    "softmax_typical_norm",
    "summarise",
    "torch_threads",
    "trials_per_batch",
    "with_overrides",
]
