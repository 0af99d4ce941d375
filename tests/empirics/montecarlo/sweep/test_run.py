"""Tests for `empirics/montecarlo/sweep/run.py`: pure cells, order independence, resume, any standard executor."""

from __future__ import annotations

import concurrent.futures as cf
import math
import random
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import sapa.empirics.montecarlo.sweep.run as sw  # run_sweep looks run_cell up here
from sapa.common.validate import InputError
from sapa.empirics.montecarlo.sweep import cells, read_metadata, run_cell, run_sweep
from tests.empirics.montecarlo.sweep.sweep_fixture import _sorted, tiny


def test_run_cell_is_pure_and_tidy():
    cfg = tiny()
    cell = cells(cfg)[5]
    a, b = run_cell(cfg, cell), run_cell(cfg, cell)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == cfg.trials * 3
    assert set(a["quantity"]) == {"fro", "jac_fro", "max_abs"}
    assert (a["value"] > 0).all() and (a["row"] == -1).all()
    assert list(a.columns[:13]) == list(sw.KEY_COLS)


def test_shuffled_cell_order_gives_identical_numbers(tmp_path):
    cfg = tiny()
    ref = run_sweep(cfg, tmp_path / "a", progress=False)
    order = cells(cfg)
    random.Random(0).shuffle(order)
    shuffled = run_sweep(cfg, tmp_path / "b", progress=False, order=order)
    pd.testing.assert_frame_equal(ref, shuffled)  # assembled in canonical order
    by_hand = pd.concat([run_cell(cfg, c) for c in order], ignore_index=True)
    pd.testing.assert_frame_equal(_sorted(ref), _sorted(by_hand))
    with pytest.raises(InputError, match="permutation"):
        run_sweep(cfg, tmp_path / "c", progress=False, order=order[:-1])


def test_activations_share_samples_and_trials_extend():
    cfg = tiny(trials=3)
    more = tiny(trials=5)
    c = cells(cfg)[4]
    a, b = run_cell(cfg, c), run_cell(more, c)
    pd.testing.assert_frame_equal(a, b[b["trial"] < 3].reset_index(drop=True))
    assert sw.sampling_key(cfg, cells(cfg)[0]) == sw.sampling_key(cfg, next(x for x in cells(cfg) if x.activation == "poly" and x.N == 4 and x.weight_model == "paper"))


class _Killed(RuntimeError):
    pass


def test_resume_after_kill_loses_and_duplicates_nothing(tmp_path, monkeypatch):
    cfg = tiny()
    n = len(cells(cfg))
    ref = run_sweep(cfg, tmp_path / "ref", progress=False)
    real = sw.run_cell
    calls: list = []

    def dying(config, cell):
        if len(calls) == 7:
            raise _Killed("simulated kill")
        calls.append(cell)
        return real(config, cell)

    monkeypatch.setattr(sw, "run_cell", dying)
    with pytest.raises(_Killed):
        run_sweep(cfg, tmp_path / "out", progress=False)
    assert len(list((tmp_path / "out" / "cells").glob("*.parquet"))) == 7
    assert not (tmp_path / "out" / "results.parquet").exists()
    assert not list((tmp_path / "out" / "cells").glob(".*tmp*"))  # no half-written files
    first = list(calls)
    calls.clear()
    monkeypatch.setattr(sw, "run_cell", lambda config, cell: calls.append(cell) or real(config, cell))
    got = run_sweep(cfg, tmp_path / "out", progress=False)
    assert len(calls) == n - 7 and not set(calls) & set(first)  # finished cells are skipped
    pd.testing.assert_frame_equal(got, ref)
    assert not got.duplicated(["weight_model", "rho", "activation", "p", "scale_policy", "N", "D", "d", "trial", "quantity"]).any()
    calls.clear()
    run_sweep(cfg, tmp_path / "out", progress=False)  # everything finished: nothing recomputed
    assert calls == []


def test_executor_path_matches_serial(tmp_path):
    cfg = tiny(N=[4, 8])
    ref = run_sweep(cfg, tmp_path / "a", progress=False)
    with cf.ThreadPoolExecutor(2) as ex:
        got = run_sweep(cfg, tmp_path / "b", progress=False, executor=ex)
    pd.testing.assert_frame_equal(ref, got)
    with cf.ProcessPoolExecutor(2) as ex:  # the local standard executor: same numbers
        got = run_sweep(cfg, tmp_path / "c", progress=False, executor=ex)
    pd.testing.assert_frame_equal(ref, got)


@pytest.mark.slow  # a fresh interpreter (~2 s); import-linter checks the same contract statically
def test_sweep_knows_no_dask():
    """Importing the sweep loads neither ``sapa.empirics.montecarlo.distributed`` nor dask (the contract in pyproject.toml checks the graph)."""
    code = ("import sys, sapa.empirics.montecarlo.sweep; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed') or m == 'sapa.empirics.montecarlo.distributed']; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_failed_cell_is_one_line_naming_it(tmp_path):
    """A non-input failure in an executor becomes CellFailedError naming the cell; an InputError stays itself."""
    from sapa.empirics.montecarlo.sweep import CellFailedError

    class Failing(cf.ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            return super().submit(_boom, *args)

    cfg = tiny(N=[4])
    with Failing(1) as ex, pytest.raises(CellFailedError, match=r"N=4 .*failed in the executor \(RuntimeError: boom\)") as info:
        run_sweep(cfg, tmp_path, progress=False, executor=ex)
    assert "\n" not in str(info.value)


def _boom(config, cell):
    raise RuntimeError("boom")


def test_progress_bar_when_forced_or_tty_and_lines_in_a_log(tmp_path, capsys):
    cfg = tiny(N=[4], weight_model=["iid"], d=["D"])
    run_sweep(cfg, tmp_path / "a", progress=True)  # stderr is not a TTY under pytest: plain progress lines
    err = capsys.readouterr().err
    assert "\r" not in err and err.strip().splitlines()[-1].startswith("sweep") and "elapsed" in err
    run_sweep(cfg, tmp_path / "b", progress="force")
    assert "cells" in capsys.readouterr().err
    run_sweep(cfg, tmp_path / "c", progress=False)
    assert capsys.readouterr().err == ""


def test_float32_and_rows_are_recorded(tmp_path):
    cfg = tiny(N=[4, 8], dtype="float32", with_rows=True, weight_model=["paper", "iid"], d=["D"])
    df = run_sweep(cfg, tmp_path, progress=False)
    assert set(df["dtype"]) == {"float32"} and read_metadata(tmp_path / "results.parquet")["dtype"] == "float32"
    rows = df[df["quantity"] == "row_fro"]
    assert len(rows) == cfg.trials * sum(c.N for c in cells(cfg))
    # per-row norms recompose the Frobenius norm
    fro = df[df["quantity"] == "fro"].set_index(["weight_model", "activation", "p", "scale_policy", "N", "trial"])["value"]
    rec = rows.assign(v2=rows["value"] ** 2).groupby(["weight_model", "activation", "p", "scale_policy", "N", "trial"])["v2"].sum() ** 0.5
    assert np.allclose(fro.sort_index().to_numpy(), rec.sort_index().to_numpy(), rtol=1e-5)


def test_inv_sqrt_i_and_input_models_run(tmp_path):
    cfg = tiny(
        N=[4, 8],
        x_model=["iso", "spiked", "aniso"],
        mean_norm=[0.0, 2.0],
        spikes=2,
        weight_model=["tied"],
        d=["D"],
        activation=[{"kind": "poly", "p": 1, "scale": "inv_sqrt_i"}, {"kind": "softmax", "scale": "const", "c": 0.5}],
    )
    df = run_sweep(cfg, tmp_path, progress=False)
    assert set(df["x_model"]) == {"iso", "spiked", "aniso"} and set(df["mean_norm"]) == {0.0, 2.0}
    assert set(df[df["scale_policy"] == "inv_sqrt_i"]["mask"]) == {"causal"}
    assert np.isfinite(df["value"]).all()


@pytest.mark.slow
def test_large_cell_stays_under_4_gib(tmp_path):
    # one softmax trial at N = 16384, D = 768 in a fresh process; peak RSS must stay < 4 GiB
    code = textwrap.dedent(
        """
        import resource, sys
        from sapa.empirics.montecarlo.sweep import config_from_dict, cells, run_cell
        cfg = config_from_dict({"N": [16384], "D": [768], "d": [64], "trials": 1,
                                "activation": [{"kind": "softmax"}]})
        df = run_cell(cfg, cells(cfg)[0])
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=3000)
    peak = int(out.stdout.split()[-1])
    assert peak < 4 * 2**30, f"peak RSS {peak / 2**30:.2f} GiB"
    assert math.isfinite(peak)


def test_a_resumed_sweep_with_nothing_to_do_says_so(tmp_path, capsys):
    cfg = tiny()
    first = run_sweep(cfg, tmp_path, progress=True)
    assert "nothing to run" not in capsys.readouterr().err
    again = run_sweep(cfg, tmp_path, progress=True)
    err = capsys.readouterr().err
    n = len(list((tmp_path / "cells").glob("*.parquet")))
    assert f"sweep: nothing to run: all {n} cells are already finished in {tmp_path / 'cells'}" in err
    pd.testing.assert_frame_equal(first, again)
    run_sweep(cfg, tmp_path, progress=False)
    assert capsys.readouterr().err == ""  # progress=False: silent
