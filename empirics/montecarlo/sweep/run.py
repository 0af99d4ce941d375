"""Running a sweep: one cell (:func:`run_cell`, a pure function of ``(config, cell)``) and all of them.

:func:`run_sweep` runs the pending cells serially or through any ``concurrent.futures.Executor``
(it knows no Dask: :func:`sapa.empirics.montecarlo.distributed.executor_for` hands it one), writes each finished
cell atomically as ``OUT/cells/<cell_id>.parquet``, skips finished cells on a rerun, and
assembles ``OUT/results.parquet`` atomically with provenance in the file metadata.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from sapa.common.atomic import atomic_write_json, make_dirs
from sapa.common.validate import InputError
from sapa.empirics.montecarlo.samplers import make_population, sample_paper_ab, sample_trials
from sapa.common.seeds import trial_generator, trial_generators
from sapa.empirics.montecarlo.sweep.cells import (
    KEY_COLS,
    Cell,
    _cell_cost,
    cell_expression,
    cell_id,
    cell_trials,
    cells,
    check_memory,
    expr_trials_per_batch,
    model_config,
    resolve_activation,
    sampling_key,
    trials_per_batch,
)
from sapa.empirics.montecarlo.sweep.config import SweepConfig, load_config
from sapa.empirics.montecarlo.sweep.store import _part_done, _read_part, _remove_stale_tmp, _write_parquet, provenance

QUANTITIES = ("fro", "jac_fro", "max_abs")


def _to_np(v) -> np.ndarray:
    if isinstance(v, torch.Tensor):
        return v.detach().to("cpu", torch.float64).numpy()
    return np.asarray(v, dtype=np.float64)


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``torch.set_num_threads(n)`` (n = 0: unchanged), then restore.

    One thread per cell is the default: on 2 cores, intra-op parallelism of the many
    medium-sized batched ops here was 2–4× *slower* than one thread (and much worse when
    other processes compete); parallelism comes from running cells in worker processes.
    """
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n:
            torch.set_num_threads(before)


def run_cell(config: SweepConfig, cell: Cell) -> pd.DataFrame:
    """Tidy rows (cell keys, trial, quantity, row, value) of one cell: a pure function of its arguments."""
    with torch_threads(config.threads):
        return _run_cell(config, cell)


def _expr_batch(phi, A: torch.Tensor, B: torch.Tensor, *, paper: bool, with_rows: bool) -> dict[str, np.ndarray]:
    """The norms of a family or expression cell for a batch of trials, per trial with the expression kernels.

    :func:`sapa.empirics.kernels.expr_norms.expr_norms` gives ‖φ(S)‖_F and ‖∂φ/∂X‖_F exactly (range-safe) for
    S = X W Xᵀ (one head W_Q = W, W_K = I); the paper's model S = A Bᵀ with the Jacobian w.r.t. (A, B) is the same
    kernel on X = [A | B] with W_Q = [I; 0], W_K = [0; I] (so dS_ik = da_i·b_k + a_i·db_k, no cross term).
    max |φ| and the per-row norms come from :func:`sapa.empirics.kernels.expr_norms.attention_rows` on S.
    All in float64 on the CPU.
    """
    from sapa.empirics.kernels.activation_fns import activation_functions
    from sapa.empirics.kernels.expr_norms import attention_rows, expr_norms, layer_from_qk, layer_from_w

    a, b = _to_np(A), _to_np(B)  # shared: X (t, N, D), W (t, D, D); paper: A, B (t, N, d)
    fns = activation_functions(phi)
    out: dict[str, list] = {"fro": [], "jac_fro": [], "max_abs": [], "row_fro": []}
    if paper:
        d = a.shape[2]
        eye, zero = np.eye(d), np.zeros((d, d))
        layer = layer_from_qk(np.vstack([eye, zero]), np.vstack([zero, eye]))  # (2d, d) each
    for t in range(a.shape[0]):
        if paper:
            X, S = np.concatenate([a[t], b[t]], axis=1), a[t] @ b[t].T  # (N, 2d); (N, d) @ (d, N)
        else:
            X, layer = a[t], layer_from_w(b[t])
            S = X @ b[t] @ X.T  # (N, D) @ (D, D) @ (D, N)
        r = expr_norms(X, layer, phi)
        P, _ = attention_rows(S, phi, fns)
        out["fro"].append(r.fro[0])
        out["jac_fro"].append(r.jac_fro[0])
        out["max_abs"].append(float(np.abs(P).max()))
        if with_rows:
            out["row_fro"].append(np.sqrt(np.einsum("ik,ik->i", P, P)))
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items() if v}


def _run_cell(config: SweepConfig, cell: Cell) -> pd.DataFrame:
    from sapa.empirics.kernels import norms

    dtype = getattr(torch, config.dtype)
    model = model_config(config, cell)
    skey = sampling_key(config, cell)
    phi = cell_expression(cell)  # a family or expression cell: its parsed φ; a kernel cell: None
    if phi is None:
        act, row_scale, mask = resolve_activation(cell)
    N, D, d, T = cell.N, cell.D, cell.d, cell_trials(config, cell)
    itemsize = torch.empty((), dtype=dtype).element_size()
    batch = trials_per_batch(N, D, T, itemsize=itemsize, budget_bytes=config.memory_gib * 2**30)
    if phi is not None:
        batch = min(batch, expr_trials_per_batch(N, T, budget_bytes=config.memory_gib * 2**30))
    opts = {"chunk": None, "device": config.device, "dtype": dtype, "with_rows": config.with_rows}
    per_q: dict[str, list[np.ndarray]] = {q: [] for q in QUANTITIES}
    rows: list[np.ndarray] = []
    paper = cell.weight_model == "paper"
    pop = None
    if not paper and (model.inputs != "iso" or model.mean_norm > 0):
        pop = make_population(model, D, trial_generator(config.seed, model.population_key(D)))
    for start in range(0, T, batch):
        idx = range(start, min(T, start + batch))
        gens = trial_generators(config.seed, skey, idx)  # trial t's draws from its own stream, whatever the batch
        if paper:
            A, B = sample_paper_ab(model, len(idx), N, d, gens)  # (t, N, d) each
            out = norms.paper_model_norms_batched(A, B, act, mask, row_scale, **opts) if phi is None else \
                _expr_batch(phi, A, B, paper=True, with_rows=config.with_rows)
        else:
            X, W = sample_trials(model, N, D, d, len(idx), gens, population=pop)  # X (t, N, D), W (t, D, D)
            out = norms.attention_norms_batched(X, W, act, mask, row_scale, **opts) if phi is None else \
                _expr_batch(phi, X, W, paper=False, with_rows=config.with_rows)
        for q in QUANTITIES:
            per_q[q].append(_to_np(out[q]).reshape(len(idx)))
        if config.with_rows:
            rows.append(_to_np(out["row_fro"]).reshape(len(idx), N))
    quantity = np.repeat(np.array(QUANTITIES, dtype=object), T)  # (3T,)
    trial = np.tile(np.arange(T), len(QUANTITIES))
    row = np.full(len(quantity), -1)
    value = np.concatenate([np.concatenate(per_q[q]) for q in QUANTITIES])
    if config.with_rows:
        R = np.concatenate(rows)  # (T, N)
        quantity = np.concatenate([quantity, np.full(T * N, "row_fro", dtype=object)])
        trial = np.concatenate([trial, np.repeat(np.arange(T), N)])
        row = np.concatenate([row, np.tile(np.arange(N), T)])
        value = np.concatenate([value, R.ravel()])
    return _frame(cell, quantity, trial, row, value)


def _frame(cell: Cell, quantity: np.ndarray, trial: np.ndarray, row: np.ndarray, value: np.ndarray) -> pd.DataFrame:
    """Long-form rows: the cell's keys repeated, then label, trial, quantity, row, value."""
    n = len(value)
    k = cell.key()
    cols = {}
    for name in KEY_COLS:
        v = k[name]
        if name in ("rho", "mean_norm", "c"):
            cols[name] = np.full(n, np.nan if v is None else float(v), dtype=np.float64)
        elif name in ("p", "N", "D", "d"):
            cols[name] = np.full(n, int(v), dtype=np.int64)
        else:
            cols[name] = np.full(n, v, dtype=object)
    cols["label"] = np.full(n, cell.label(), dtype=object)
    cols["trial"] = trial.astype(np.int64)
    cols["quantity"] = quantity.astype(object)
    cols["row"] = row.astype(np.int64)
    cols["value"] = value.astype(np.float64)
    return pd.DataFrame(cols)


# --------------------------------------------------------------------------- the sweep


class CellFailedError(InputError):
    """A cell could not be computed by the executor (its worker kept dying, or it raised a non-input error)."""


def cell_name(cell: Cell) -> str:
    """A cell in one short line, e.g. ``paper/iso/softmax/mask=none N=4 D=3 d=3 float64``."""
    return (f"{cell.weight_model}/{cell.x_model}/{cell.label()}/mask={cell.mask} "
            f"N={cell.N} D={cell.D} d={cell.d} {cell.dtype}")


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _as_completed(futures: list):
    """Futures in the order they finish (``concurrent.futures.as_completed``), else in the order given."""
    if all(isinstance(f, cf.Future) for f in futures):
        return cf.as_completed(futures)
    return iter(futures)


def _result(fut, cell: Cell) -> pd.DataFrame:
    """The frame of a finished cell; an :class:`InputError` is raised as is, any other failure names the cell."""
    try:
        return fut.result()
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of the task, after the executor's own retries
        raise CellFailedError(
            f"cell {cell_name(cell)} failed in the executor ({type(exc).__name__}: {_short(exc)}); "
            "finished cells are kept, rerun to resume"
        ) from exc


def _progress_bar(total: float, initial: float, n_cells: int, n_done: int, progress: bool | str):
    from sapa.common.progress import progress_bar

    bar = progress_bar(total, initial, desc="sweep", progress=progress,
                       bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}] {postfix}")
    bar.set_postfix_str(f"cells {n_done}/{n_cells}")
    return bar


def run_sweep(
    config: SweepConfig | str | Path,
    out_dir: str | Path,
    *,
    progress: bool | str = True,
    executor=None,
    order: Sequence[Cell] | None = None,
) -> pd.DataFrame:
    """Run (or resume) a sweep into ``out_dir``; return the assembled tidy DataFrame.

    Args:
      config: a :class:`SweepConfig` or the path of a TOML config.
      out_dir: ``cells/<cell_id>.parquet`` per finished cell, then ``results.parquet`` and
        ``provenance.json``.
      progress: ``True`` shows a tqdm bar (ETA, cost-weighted) on stderr if it is a TTY, else periodic lines;
        ``"force"`` always; ``False`` never.
      executor: ``None`` runs cells serially here; otherwise a ``concurrent.futures.Executor``
        (``ProcessPoolExecutor`` locally; on a Dask cluster ``Client.get_executor()``, or
        :func:`sapa.empirics.montecarlo.distributed.executor_for`) gets ``submit(run_cell, config, cell)`` per
        pending cell; part files are written here as results arrive, in completion order. A
        failed cell raises its :class:`InputError`, or :class:`CellFailedError` naming it. An
        executor with a ``describe()`` method names itself in the progress bar.
      order: run the pending cells in this order (a permutation of ``cells(config)``);
        numbers do not depend on it.
    """
    if not isinstance(config, SweepConfig):
        config = load_config(config)
    out = Path(out_dir)
    parts = out / "cells"
    all_cells = cells(config)
    ids = {c: cell_id(config, c) for c in all_cells}
    if order is not None:
        if sorted(str(ids.get(c)) for c in order) != sorted(ids.values()):
            raise InputError("order must be a permutation of cells(config)")
        run_order = list(order)
    else:
        run_order = all_cells
    check_memory(config, all_cells)
    prov = provenance(config)
    try:
        make_dirs(parts)  # never through a link planted below --out
    except OSError as exc:
        raise InputError(f"cannot create the results directory {parts}: {exc.strerror or exc}") from None
    _remove_stale_tmp(parts)
    done = {c for c in all_cells if _part_done(parts / f"{ids[c]}.parquet", ids[c])}
    pending = [c for c in run_order if c not in done]
    if not pending and progress is not False:
        from sapa.common.progress import say

        say(f"sweep: nothing to run: all {len(all_cells)} cells are already finished in {parts} (same config and "
            "seed); assembling them")
    cost = {c: _cell_cost(c, cell_trials(config, c)) for c in all_cells}
    bar = _progress_bar(sum(cost.values()), sum(cost[c] for c in done), len(all_cells), len(done), progress)
    if pending and callable(getattr(executor, "describe", None)):
        bar.set_description_str(f"sweep ({executor.describe()})", refresh=False)
    n_done = len(done)

    def finish(cell: Cell, df: pd.DataFrame) -> None:
        nonlocal n_done
        meta = {"cell_id": ids[cell], "cell": cell.key(), **{k: prov[k] for k in ("config_hash", "seed", "dtype", "device", "schema", "versions")}}
        _write_parquet(parts / f"{ids[cell]}.parquet", df, meta)
        n_done += 1
        bar.set_postfix_str(f"cells {n_done}/{len(all_cells)}", refresh=False)
        bar.update(cost[cell])

    try:
        if executor is None:
            for cell in pending:
                finish(cell, run_cell(config, cell))
        else:
            futures = {executor.submit(run_cell, config, c): c for c in pending}
            try:
                for fut in _as_completed(list(futures)):  # stream: store each cell as it finishes
                    cell = futures.pop(fut)  # drop our reference: the executor may free the result
                    finish(cell, _result(fut, cell))
            except BaseException:
                for fut in futures:  # the cells still pending
                    fut.cancel()
                raise
    finally:
        bar.close()
    frames = [_read_part(parts / f"{ids[c]}.parquet") for c in all_cells]
    df = pd.concat(frames, ignore_index=True)
    _write_parquet(out / "results.parquet", df, {**prov, "cells": len(all_cells)})
    atomic_write_json(out / "provenance.json", {**prov, "cells": len(all_cells), "rows": len(df)})
    return df
