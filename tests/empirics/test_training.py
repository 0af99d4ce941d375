"""Tests for `empirics/training.py`: resume after a kill loses and duplicates nothing; serial and 2 workers give
identical numbers; diverged runs are recorded as results (chance accuracy, infinite norms)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from empirics import training
from empirics.training import TINY, run_experiment, run_keys, run_one, summary_table

CFG = replace(TINY, digits_arms=("softmax", "x3"), text_arms=("softmax", "x3_sqrti"))  # 8 runs of 6 steps
DROP = ["wall_s", "cpu_s"]


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial")
    return out, run_experiment(CFG, out, seed=3, workers=1, progress=False)


def test_tables_and_files(serial):
    out, res = serial
    keys = run_keys(replace(CFG, seed=3))
    assert len(keys) == 8 and len(res["final"]) == 8
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(k.file_name for k in keys)
    for name in ("history.parquet", "final.parquet", "provenance.json"):
        assert (out / name).is_file()
    pd.testing.assert_frame_equal(pd.read_parquet(out / "final.parquet"), res["final"])
    h = res["history"]
    assert set(h["quantity"]) == set(training.HEAD_QUANTITIES) | set(training.RUN_QUANTITIES)
    # step 0, every eval_every = 3 steps and the end; 1 layer × 2 heads × 7 quantities + 4 run-level per step
    per = h[(h["task"] == "digits") & (h["arm"] == "x3") & (h["weight_decay"] == 0.0)]
    assert sorted(per["step"].unique()) == [0, 3, 6]
    assert len(per) == 3 * (2 * 7 + 4)
    f = res["final"]
    assert not f["diverged"].any() and (f["steps_done"] == 6).all()
    assert f["attn_fro"].gt(0).all() and np.isfinite(f["jac_fro"]).all()
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["dtype"] == "training float32; norms float64" and prov["config"]["seed"] == 3
    tab = summary_table(f)
    assert len(tab) == 8 and (tab["runs"] == 1).all()


def test_probe_norms_are_the_exact_kernel_of_the_head(serial):
    """The stored step-0 attn_fro of a head is attention_norms on the probe inputs, averaged over the probe batch."""
    from empirics.norms import attention_norms
    from empirics.tiny_models import ARMS, build_model, head_W

    _, res = serial
    cfg = replace(CFG, seed=3)
    task = training._Task("text", cfg)
    g_init, _ = training._generators(cfg, "text", 0)
    m = build_model("text", ARMS["x3_sqrti"], cfg.text.model, g_init, vocab=task.vocab, context=cfg.text.context)
    X = m.attention_inputs(task.probe)[0].double()  # (P, N, D)
    N = X.shape[1]
    want = np.mean([attention_norms(x, head_W(m.blocks[0].attn, 1), ARMS["x3_sqrti"].activation(N), "causal",
                                    ARMS["x3_sqrti"].row_scale(N)).fro for x in X])
    h = res["history"]
    got = h[(h["task"] == "text") & (h["arm"] == "x3_sqrti") & (h["weight_decay"] == 0.0) & (h["step"] == 0)
            & (h["layer"] == 0) & (h["head"] == 1) & (h["quantity"] == "attn_fro")]["value"]
    assert float(got.iloc[0]) == pytest.approx(want, rel=1e-12)


def test_parallel_two_workers_identical(serial, tmp_path):
    _, res = serial
    par = run_experiment(CFG, tmp_path, seed=3, workers=2, progress=False)
    pd.testing.assert_frame_equal(par["final"].drop(columns=DROP), res["final"].drop(columns=DROP), check_exact=True)
    pd.testing.assert_frame_equal(par["history"], res["history"], check_exact=True)


def test_seed_changes_numbers(serial):
    _, res = serial
    other = run_one("digits", "softmax", 0.0, 0, replace(CFG, seed=4))["final"]
    same = run_one("digits", "softmax", 0.0, 0, replace(CFG, seed=3))["final"]
    f = res["final"].set_index(["task", "arm", "weight_decay", "seed"]).loc[("digits", "softmax", 0.0, 0)]
    assert same["test_loss"] == f["test_loss"] and other["test_loss"] != f["test_loss"]


def test_resume_after_kill_loses_and_duplicates_nothing(tmp_path, monkeypatch):
    calls = []
    real = training.run_one

    def killed_after_two(*args):
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process is killed while the third run trains
        calls.append(args[:4])
        return real(*args)

    monkeypatch.setattr(training, "run_one", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(CFG, tmp_path, workers=1, progress=False)
    runs = tmp_path / "runs"
    done = sorted(p.name for p in runs.iterdir())
    assert len(done) == 2 and not any(n.startswith(".") for n in done)  # finished runs kept, no temporary files
    assert not (tmp_path / "final.parquet").exists()
    stamps = {n: (runs / n).stat().st_mtime_ns for n in done}
    # a half-written file from some other crash is not mistaken for a finished run
    keys = run_keys(CFG)
    (runs / keys[-1].file_name).write_text('{"key": {"task": "te')

    calls.clear()
    monkeypatch.setattr(training, "run_one", lambda *a: (calls.append(a[:4]), real(*a))[1])
    res = run_experiment(CFG, tmp_path, workers=1, progress=False)
    assert len(calls) == len(keys) - 2 and len(set(calls)) == len(calls)
    assert {(k.task, k.arm, k.weight_decay, k.seed) for k in keys} == set(calls) | {
        (k.task, k.arm, k.weight_decay, k.seed) for k in keys if k.file_name in done}
    assert {n: (runs / n).stat().st_mtime_ns for n in done} == stamps  # finished runs were not redone
    f = res["final"]
    assert len(f) == len(keys) and not f.duplicated(["task", "arm", "weight_decay", "seed"]).any()
    calls.clear()
    run_experiment(CFG, tmp_path, workers=1, progress=False)
    assert calls == []  # everything done: nothing reruns
    # a different config (hash) does not reuse these runs
    run_experiment(replace(CFG, digits=replace(CFG.digits, steps=3)), tmp_path, workers=1, progress=False)
    assert len(calls) == len(keys)


def test_diverged_runs_are_results(tmp_path):
    hot = replace(CFG, digits=replace(CFG.digits, lr=10.0, model=replace(CFG.digits.model, init_std=1.0)),
                  text=replace(CFG.text, lr=10.0, model=replace(CFG.text.model, init_std=1.0)),
                  digits_arms=("x3",), text_arms=("x3",), weight_decays=(0.0,))
    res = run_experiment(hot, tmp_path, workers=1, progress=False)
    f = res["final"]
    assert f["diverged"].all()
    assert (f["steps_done"] < hot.digits.steps).all() and (f["diverged_step"] > 0).all()
    assert np.allclose(f["test_acc"], f["chance"]) and np.isinf(f["attn_fro"]).all() and np.isinf(f["jac_fro"]).all()
    assert np.isinf(f["test_loss"]).all()
    back = pd.read_parquet(tmp_path / "final.parquet")
    assert np.isinf(back["attn_fro"]).all()  # inf survives the run file (JSON) and Parquet
    # history stops at the last evaluation before the divergence
    assert res["history"]["step"].max() < hot.digits.steps
    from empirics.tiny_models import ARMS

    assert f.loc[f["task"] == "text", "chance"].iloc[0] == pytest.approx(1 / len(training._Task("text", hot).data.vocab))
    assert ARMS["x3"].label == "x³"


def test_bad_arguments(tmp_path):
    from theory.validate import InputError

    with pytest.raises(InputError):
        run_experiment("medium", tmp_path)
    with pytest.raises(InputError):
        run_experiment(CFG, tmp_path, workers=0)
    with pytest.raises(InputError):
        run_one("digits", "x3_sqrti", 0.0, 0, CFG)
    with pytest.raises(InputError):
        replace(CFG, digits_arms=("x3_sqrti",))


def test_threads_restored():
    before = torch.get_num_threads()
    run_one("digits", "softmax", 0.0, 0, replace(CFG, digits=replace(CFG.digits, steps=1)))
    assert torch.get_num_threads() == before


def test_data_offline_and_deterministic(monkeypatch):
    import sys

    from empirics import train_data

    d = train_data.load_digits()
    assert (len(d.y_train), len(d.y_test)) == (1347, 450) and float(d.x_train.max()) <= 1.0
    assert torch.equal(train_data.load_digits.__wrapped__().y_test, d.y_test)  # fixed split, not just cached
    t = train_data.load_text(64)
    assert t.source == "pydoc_data.topics" and len(t.train) > 300_000 and t.test_x.shape == (128, 64)
    assert torch.equal(t.test_x[:, 1:], t.test_y[:, :-1])  # next-character targets
    monkeypatch.setitem(sys.modules, "pydoc_data.topics", None)  # a Python without pydoc_data
    docs, source = train_data.corpus()
    assert source == "empirics/data" and len(docs) == 9
    small = train_data.load_text(32, 16, docs=docs)
    assert small.source == "given" and small.test_x.shape == (16, 32) and len(small.vocab) < 100
    x, y = train_data.text_batch(small, 4, 32, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 32) and torch.equal(x[:, 1:], y[:, :-1])


def test_main_cli_prints_a_summary(tmp_path, capsys):
    from empirics.training import main_cli

    assert main_cli("tiny", tmp_path, seed=0, workers=1, progress=False) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["task", "arm", "wd"] and len(out) == 1 + 22 + 1
    assert any(line.startswith("text    x³/√i") for line in out) and "training float32, norms float64" in out[-1]
