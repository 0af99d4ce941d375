"""Tests for `empirics/sweep.py`: config validation, determinism, order independence, resume."""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import random
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import empirics.sweep as sw
from empirics.sweep import (
    ActivationSpec,
    builtin_config,
    cells,
    config_from_dict,
    fit_exponents,
    load_config,
    read_metadata,
    run_cell,
    run_sweep,
    softmax_typical_norm,
    summarise,
    trials_per_batch,
)
from theory.validate import InputError

TINY = {  # 18 cells: (paper, corr) × (softmax, x/√N, x³/√N) × N
    "seed": 3,
    "trials": 4,
    "N": [4, 8, 16],
    "D": [4],
    "d": ["D"],
    "weight_model": ["paper", "corr"],
    "rho": [0.5],
    "activation": [
        {"kind": "softmax"},
        {"kind": "poly", "p": [1, 3], "scale": "inv_sqrt_n"},
    ],
}


def tiny(**over) -> sw.SweepConfig:
    return config_from_dict({**TINY, **over})


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in df.columns if c != "value"]
    return df.sort_values(cols, kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- config


def test_builtin_configs_load():
    quick, full = load_config(builtin_config("quick")), load_config(builtin_config("full"))
    assert quick.N[0] == 8 and quick.N[-1] == 512 and quick.dtype == "float64"
    assert max(full.N) >= 4096 and set(full.D) >= {64, 384, 768}
    labels = {a.label() for a in quick.activations}
    assert labels == {"softmax", "x^1/sqrt(N)", "x^3/sqrt(N)", "0.0625*x^1", "1*x^3"}
    assert set(quick.weight_model) == {"paper", "iid", "tied", "corr"}


def test_activation_labels():
    assert ActivationSpec("softmax").label() == "softmax"
    assert ActivationSpec("softmax", 0, "const", 0.5).label() == "softmax(tau=0.5)"
    assert ActivationSpec("poly", 3, "inv_sqrt_n").label() == "x^3/sqrt(N)"
    assert ActivationSpec("poly", 1, "const", 0.0625).label() == "0.0625*x^1"
    assert ActivationSpec("poly", 1, "dynamic_causal").label() == "x^1/sqrt(i)"


def test_config_round_trips_through_dict():
    cfg = tiny()
    assert config_from_dict(cfg.as_dict()) == cfg
    assert cfg.hash() == tiny().hash() != tiny(seed=4).hash()


@pytest.mark.parametrize(
    "raw,needle",
    [
        ({"Nn": [4]}, "'Nn'"),
        ({"activation": [{"kind": "poly", "p": 1, "sclae": "const"}]}, "'sclae'"),
    ],
)
def test_unknown_key_is_rejected_by_name(raw, needle):
    with pytest.raises(InputError, match="unknown config key") as exc:
        config_from_dict({**TINY, **raw})
    assert needle in str(exc.value)


@pytest.mark.parametrize(
    "raw,needle",
    [
        ({"N": [8, "16"]}, "N[1]"),
        ({"trials": 1.5}, "trials"),
        ({"seed": -1}, "seed"),
        ({"with_rows": 1}, "with_rows"),
        ({"dtype": "float16"}, "dtype"),
        ({"weight_model": ["shared"]}, "weight_model[0]"),
        ({"rho": [2.0]}, "rho[0]"),
        ({"mask": "diag"}, "mask[0]"),
        ({"d": ["d"]}, "d[0]"),
        ({"activation": [{"kind": "poly", "scale": "const", "p": 1}]}, "needs 'c'"),
        ({"activation": [{"kind": "poly"}]}, "needs 'p'"),
        ({"activation": [{"kind": "softmax", "p": 1}]}, "not used by softmax"),
        ({"activation": [{"kind": "softmax", "scale": "inv_sqrt_n"}]}, "scale"),
        ({"activation": []}, "activation"),
    ],
)
def test_config_types_are_checked(raw, needle):
    with pytest.raises(InputError) as exc:
        config_from_dict({**TINY, **raw})
    assert needle in str(exc.value)


def test_missing_required_and_bad_files(tmp_path):
    with pytest.raises(InputError, match="'N'"):
        config_from_dict({k: v for k, v in TINY.items() if k != "N"})
    with pytest.raises(InputError, match="not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("N = [4,\n")
    with pytest.raises(InputError, match="invalid TOML"):
        load_config(bad)
    good = tmp_path / "good.toml"
    good.write_text('N = 4\nD = 2\n[[activation]]\nkind = "softmax"\n')
    assert load_config(good).N == (4,)


def test_cells_are_canonical_and_deduplicated():
    cfg = tiny(
        weight_model=["paper", "iid", "tied", "corr"],
        rho=[0.5, 0.9],
        mask=["none", "causal"],
        activation=[{"kind": "poly", "p": 1, "scale": ["inv_sqrt_n", "dynamic_causal"]}],
    )
    cs = cells(cfg)
    assert len(cs) == len(set(cs))
    assert {c.rho for c in cs if c.weight_model == "tied"} == {1.0}
    assert {c.rho for c in cs if c.weight_model == "corr"} == {0.5, 0.9}
    assert all(c.mask == "causal" for c in cs if c.scale_policy == "dynamic_causal")
    assert all(c.D == c.d for c in cs if c.weight_model == "paper")
    assert {c.d for c in cells(tiny(d=["D", 2])) if c.weight_model == "corr"} == {4, 2}
    assert [c.N for c in cs[:3]] == [4, 8, 16]  # N innermost


# --------------------------------------------------------------------------- running


def test_run_cell_is_pure_and_tidy():
    cfg = tiny()
    cell = cells(cfg)[5]
    a, b = run_cell(cfg, cell), run_cell(cfg, cell)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == cfg.trials * 3
    assert set(a["quantity"]) == {"fro", "jac_fro", "max_abs"}
    assert (a["value"] > 0).all() and (a["row"] == -1).all()
    assert list(a.columns[:13]) == list(sw.KEY_COLS)


def test_same_seed_gives_identical_parquet(tmp_path):
    cfg = tiny()
    d1 = run_sweep(cfg, tmp_path / "a", progress=False)
    d2 = run_sweep(cfg, tmp_path / "b", progress=False)
    r1, r2 = pd.read_parquet(tmp_path / "a" / "results.parquet"), pd.read_parquet(tmp_path / "b" / "results.parquet")
    pd.testing.assert_frame_equal(r1, r2)
    pd.testing.assert_frame_equal(d1, r1)
    pd.testing.assert_frame_equal(d2, r2)
    assert (tmp_path / "a" / "results.parquet").read_bytes() == (tmp_path / "b" / "results.parquet").read_bytes()
    meta = read_metadata(tmp_path / "a" / "results.parquet")
    assert meta["config_hash"] == cfg.hash() and meta["seed"] == 3 and meta["dtype"] == "float64"
    assert meta["device"] == "cpu" and {"torch", "numpy", "pandas", "pyarrow"} <= set(meta["versions"])
    assert json.loads((tmp_path / "a" / "provenance.json").read_text())["rows"] == len(r1)
    d3 = run_sweep(tiny(seed=4), tmp_path / "c", progress=False)
    assert not np.array_equal(d3["value"].to_numpy(), d1["value"].to_numpy())


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


def test_damaged_or_foreign_part_file_is_recomputed(tmp_path):
    cfg = tiny(N=[4, 8])
    ref = run_sweep(cfg, tmp_path, progress=False)
    parts = sorted((tmp_path / "cells").glob("*.parquet"))
    parts[0].write_bytes(b"not parquet")
    parts[1].write_bytes(parts[2].read_bytes())  # another cell's rows under this name
    pd.testing.assert_frame_equal(run_sweep(cfg, tmp_path, progress=False), ref)


def test_executor_path_matches_serial(tmp_path):
    cfg = tiny(N=[4, 8])
    ref = run_sweep(cfg, tmp_path / "a", progress=False)
    with cf.ThreadPoolExecutor(2) as ex:
        got = run_sweep(cfg, tmp_path / "b", progress=False, executor=ex)
    pd.testing.assert_frame_equal(ref, got)


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


def test_dynamic_causal_and_input_models_run(tmp_path):
    cfg = tiny(
        N=[4, 8],
        x_model=["iso", "spiked", "aniso"],
        mean_norm=[0.0, 2.0],
        spikes=2,
        weight_model=["tied"],
        d=["D"],
        activation=[{"kind": "poly", "p": 1, "scale": "dynamic_causal"}, {"kind": "softmax", "scale": "const", "c": 0.5}],
    )
    df = run_sweep(cfg, tmp_path, progress=False)
    assert set(df["x_model"]) == {"iso", "spiked", "aniso"} and set(df["mean_norm"]) == {0.0, 2.0}
    assert set(df[df["scale_policy"] == "dynamic_causal"]["mask"]) == {"causal"}
    assert np.isfinite(df["value"]).all()


# --------------------------------------------------------------------------- analysis


def test_summarise_and_fit_exponents(tmp_path):
    cfg = tiny(trials=16, N=[8, 16, 32, 64], weight_model=["paper"], d=[4], activation=[{"kind": "poly", "p": 1, "scale": ["const", "inv_sqrt_n"], "c": 1.0}])
    df = run_sweep(cfg, tmp_path, progress=False)
    s = summarise(df)
    assert {"n", "mean", "se", "q05", "q50", "q95", "mean_sq", "se_sq"} <= set(s.columns)
    assert (s["n"] == 16).all() and len(s) == len(cells(cfg)) * 3
    fits = fit_exponents(df, n_boot=200)
    f = fits.set_index(["scale_policy", "quantity"])
    # paper model, φ(x) = x: E‖S‖²_F = N² d, so slope 1; with c = 1/√N, slope 1/2
    assert abs(f.loc[("const", "fro"), "slope"] - 1.0) < 0.1
    assert abs(f.loc[("inv_sqrt_n", "fro"), "slope"] - 0.5) < 0.1
    assert f.loc[("inv_sqrt_n", "fro"), "regime"] == "sqrt_n"
    assert fits.equals(fit_exponents(df, n_boot=200))  # seeded per series
    assert json.loads(f.loc[("const", "fro"), "evidence"])["N"] == [8.0, 16.0, 32.0, 64.0]


def test_attach_exact_z_scores_are_moderate(tmp_path):
    pytest.importorskip("theory.moments")
    # p = 1 only: for p ≥ 2 the squared norms are so heavy-tailed (degree ≥ 8 in Gaussians)
    # that 64 trials usually miss the tail, biasing both mean and se down (z ≈ −10 seen at
    # p = 2, corr, N = 4, although 2·10⁶-sample moments match theory.moments).
    cfg = tiny(trials=64, N=[4, 16], d=[2], weight_model=["paper", "iid", "tied", "corr"], activation=[{"kind": "poly", "p": 1, "scale": ["inv_sqrt_n", "const"], "c": 0.5}])
    df = run_sweep(cfg, tmp_path, progress=False)
    z = sw.attach_exact(summarise(df), cfg)
    zz = z[z["expected_sq"].notna()]
    assert len(zz) == len(cells(cfg)) * 2
    # 32 z-scores of squared norms; |z| < 4.5 each (skewed, so z is only roughly normal)
    assert zz["z"].abs().max() < 4.5, zz[["weight_model", "p", "N", "quantity", "mean_sq", "expected_sq", "z"]]


def test_softmax_typical_norm_is_far_below_sqrt_n():
    df = softmax_typical_norm([8, 64, 512], d=16, trials=4, seed=0)
    assert ((df["fro"] >= 1 - 1e-12) & (df["fro"] <= df["bound"])).all()
    r = df.groupby("N")["ratio"].mean()
    assert r.is_monotonic_decreasing and r.loc[512] < 0.2
    pd.testing.assert_frame_equal(df, softmax_typical_norm([8, 64, 512], d=16, trials=4, seed=0))


def test_memory_plan_for_large_n():
    b = trials_per_batch(16384, 768, 64)
    assert b >= 1 and b * (16 + 80) * 16384 * 768 < 3 * 2**30
    assert trials_per_batch(8, 16, 64) == 64


@pytest.mark.slow
def test_large_cell_stays_under_4_gib(tmp_path):
    # one softmax trial at N = 16384, D = 768 in a fresh process; peak RSS must stay < 4 GiB
    code = textwrap.dedent(
        """
        import resource, sys
        from empirics.sweep import config_from_dict, cells, run_cell
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
