"""The training study: pairing, α tuning, divergence records, exact norms, resumption, serial == parallel."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from sapa.common.validate import InputError
from sapa.empirics.training import train_study as ts
from sapa.empirics.training.tiny_models import TinyModelConfig

# Text only, N ∈ {8, 16}: one arm of each scale rule that the checks below need, 2 lrs × 2 seeds.
MICRO = ts.StudyConfig(
    name="micro",
    digits=ts.TaskPlan(Ns=(16,), steps=3, batch=4, lrs=(1e-3,), warmup=1, evals=1, eval_size=8),
    text=ts.TaskPlan(Ns=(8, 16), steps=4, batch=32, constant="tokens", lrs=(1e-3, 1e-2), warmup=2, evals=2, eval_size=8),
    seeds=2,
    model=TinyModelConfig(width=8, layers=1, heads=2),
    arms=("softmax", "x_sqrtN", "x_alpha", "x3", "x3_sqrti"),
    alphas=(math.sqrt(8.0), 64.0),  # α = √8 makes x/α equal x/√N at the smallest N: a pairing check
    probe=2,
    tasks=("text",),
)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    return out, ts.run_study(MICRO, out, workers=1, progress=False)


def test_every_member_is_a_row_with_the_schema(study):
    _, res = study
    r = res.runs
    cfg = ts.study_config(MICRO)
    aliased = sum(len(MICRO.plan(t).lrs) * MICRO.seeds for t in MICRO.tasks for _ in ts.aliases(cfg, t))
    assert aliased > 0  # x/√N at N = 8 is the α grid's member α = √8: trained once, read under both names
    assert len(r) == ts.member_count(cfg) + aliased == res.provenance["members"]
    need = {"task", "N", "arm", "p", "scale", "alpha", "lr", "seed", "in_study", "steps", "diverged", "diverged_step",
            "loss_start", "chance_acc", "val_acc_final", "val_loss_final", "val_acc_best", "val_loss_best",
            "best_step", "test_acc", "test_loss", "test_acc_at_best_val", "attn_fro", "jac_s_fro", "jac_x_fro",
            "attn_fro_init", "jac_s_fro_init", "jac_x_fro_init", "grad_norm_max", "grad_norm_final", "cpu_s"}
    assert need <= set(r.columns)
    assert not r.duplicated(["task", "N", "arm", "alpha", "lr", "seed"]).any()
    assert set(res.history["quantity"]) == set(ts.HISTORY_QUANTITIES)
    assert set(res.history["step"]) == set(MICRO.text.eval_steps())


def test_replicates_are_paired_across_arms(study):
    """x/α with α = √8 is x/√8 = x/√N at N = 8: same init, batches and lr give the same trajectory — trained here
    apart, as an x/√N chunk of its own, it reproduces the α-grid member the study reads x/√N from (its alias)."""
    _, res = study
    r = res.runs[res.runs["N"] == 8]
    alone = ts.Chunk("text", 8, "p1", 0, tuple(ts.Member("x_sqrtN", math.nan, lr, s) for lr in MICRO.text.lrs
                                               for s in range(MICRO.seeds)))
    a = pd.DataFrame(ts.train_chunk(alone, ts.study_config(MICRO))["rows"]).sort_values(["lr", "seed"])
    a = a.reset_index(drop=True)
    b = r[(r["arm"] == "x_alpha") & np.isclose(r["alpha"], math.sqrt(8.0))].sort_values(["lr", "seed"])
    b = b.reset_index(drop=True)
    read = r[r["arm"] == "x_sqrtN"].sort_values(["lr", "seed"]).reset_index(drop=True)
    assert (read["alpha"].isna().all() and (read["scale"] == "inv_sqrt_n").all()
            and np.array_equal(read["test_acc"], b["test_acc"]))  # the alias rows are the grid member's
    for q in ("val_loss_final", "test_acc", "attn_fro", "jac_x_fro", "grad_norm_max"):
        np.testing.assert_allclose(a[q], b[q], rtol=1e-5)
    # and two replicates are not the same model
    s0, s1 = a[a["seed"] == 0], a[a["seed"] == 1]
    assert not np.allclose(s0["val_loss_final"].to_numpy(), s1["val_loss_final"].to_numpy())


def test_alpha_star_is_selected_on_validation_and_held_fixed(study):
    _, res = study
    r = res.runs
    star = res.provenance["alpha_star"]["text"]["1"]
    assert star == ts.select_alpha(r, "text", 1)
    grid = r[r["arm"] == "x_alpha"]
    assert set(grid.loc[grid["N"] == 8, "alpha"]) == set(MICRO.alphas)
    assert set(grid.loc[grid["N"] == 16, "alpha"]) == {star}  # held fixed beyond the smallest N
    assert (grid["in_study"] == (grid["alpha"] == star)).all()
    assert r.loc[r["arm"] != "x_alpha", "in_study"].all()


def test_select_alpha_takes_each_alpha_at_its_best_lr():
    rows = []
    for alpha, lr, acc in ((4.0, 1e-3, 0.5), (4.0, 1e-2, 0.9), (16.0, 1e-3, 0.8), (16.0, 1e-2, 0.1)):
        for seed, d in enumerate((-0.01, 0.0, 0.01)):
            rows.append({"task": "t", "p": 1, "scale": "alpha", "N": 8, "alpha": alpha, "lr": lr, "seed": seed,
                         "val_acc_final": acc + d})
    rows.append({"task": "t", "p": 1, "scale": "alpha", "N": 16, "alpha": 16.0, "lr": 1e-3, "seed": 0,
                 "val_acc_final": 1.0})  # a larger N never enters the choice
    assert ts.select_alpha(pd.DataFrame(rows), "t", 1) == 4.0
    with pytest.raises(InputError):
        ts.select_alpha(pd.DataFrame(rows), "t", 3)


def test_norms_at_init_match_the_theory(study):
    """‖∂(x/√N)/∂S‖_F = √N exactly for every input; ‖softmax(S)‖_F ≤ √N; masked x³/√i still finite."""
    _, res = study
    r = res.runs
    lin = r[(r["arm"] == "x_sqrtN")]
    # causal mask: only the N(N+1)/2 visible entries carry a derivative, each equal to 1/√N
    expect = np.sqrt(lin["N"] * (lin["N"] + 1) / 2 / lin["N"])
    # r = 1/√N enters training (and the probe) as a float32 number: rounded once, relative error ≤ eps32/2
    np.testing.assert_allclose(lin["jac_s_fro_init"], expect, rtol=np.finfo(np.float32).eps / 2)
    sm = r[r["arm"] == "softmax"]
    assert (sm["attn_fro_init"] <= np.sqrt(sm["N"]) * (1 + 1e-12)).all()
    assert np.isfinite(r.loc[r["arm"] == "x3_sqrti", "attn_fro_init"]).all()


def test_a_diverged_member_is_recorded_as_a_failure(study):
    _, res = study
    r = res.runs
    d = r[r["diverged"]]
    ok = r[~r["diverged"]]
    assert (d["test_acc"] == d["chance_acc"]).all() and np.isinf(d["test_loss"]).all()
    assert (ok["val_loss_final"] <= ok["loss_start"]).all()  # the other half of the definition
    assert (ok["diverged_step"] == -1).all() and (d["diverged_step"] > 0).all()


def test_a_fresh_run_trains_every_member_but_the_aliased_rows(study):
    """A fresh `sapa train` said it "reused the other 10 … finished earlier": they were aliased rows (x^p/√N read
    from the α grid's member), counted as members but never trained. The provenance counts them apart."""
    from sapa.commands.train_summary import reuse_line

    out, res = study
    prov = res.provenance
    assert prov["members_aliased"] == int((res.runs["cpu_s"] == 0).sum()) > 0
    assert prov["members"] - prov["members_aliased"] == prov["members_trained_now"]
    assert reuse_line(prov, out, 1.0).startswith(f"Trained all {prov['members_trained_now']} members")


def test_a_run_resumes_and_recomputes_only_what_is_missing(study, capsys):
    out, res = study
    again = ts.run_study(MICRO, out, workers=1, progress=False)
    assert again.provenance["members_trained_now"] == 0 and again.provenance["chunks_trained_now"] == 0
    victim = sorted((out / "chunks").glob("text_N16_p3_*.json"))[0]
    n_members = len(json.loads(victim.read_text())["members"])
    victim.unlink()
    other = sorted((out / "chunks").glob("text_N16_softmax_*.json"))[0]
    rec = json.loads(other.read_text())
    rec["rows"][0]["test_acc"] = 0.123  # tampered: the checksum no longer matches
    other.write_text(json.dumps(rec))
    capsys.readouterr()
    third = ts.run_study(MICRO, out, workers=1, progress=False)
    assert str(other) in capsys.readouterr().err  # the damaged file is named, then recomputed
    assert third.provenance["members_trained_now"] == n_members + len(rec["members"])
    assert third.provenance["chunks_trained_now"] == 2
    pd.testing.assert_frame_equal(third.runs.drop(columns="cpu_s"), res.runs.drop(columns="cpu_s"))
    loaded = ts.load_study(out)
    pd.testing.assert_frame_equal(loaded.runs, third.runs)


def test_bad_configs_and_budgets_are_refused(tmp_path):
    with pytest.raises(InputError):
        ts.study_config("medium")
    with pytest.raises(InputError):
        ts.study_config("quick", seed=-1)
    with pytest.raises(InputError):
        replace(MICRO, digits=replace(MICRO.digits, Ns=(32,)))
    with pytest.raises(InputError):
        replace(MICRO, text=replace(MICRO.text, Ns=(16, 8)))
    with pytest.raises(InputError):
        replace(MICRO, arms=("softmax", "x_2"))
    with pytest.raises(InputError):
        replace(MICRO, alphas=(0.0,))
    with pytest.raises(InputError):
        ts.load_study(tmp_path)


def test_chunks_fit_the_memory_budget_and_cover_every_member():
    cfg = ts.FULL
    for task in cfg.tasks:
        for N in cfg.plan(task).Ns:
            chunks = ts.plan_chunks(cfg, task, N, {1: 16.0, 3: 16.0})
            for c in chunks:
                assert len(c.members) * ts.bytes_per_member(cfg, task, N) <= ts.MEMORY_BYTES or len(c.members) == 1
            members = [m for c in chunks for m in c.members]
            assert len(members) == len(set(members))


@pytest.mark.slow
def test_serial_equals_parallel(study, tmp_path):
    _, res = study
    par = ts.run_study(MICRO, tmp_path, workers=2, progress=False)
    pd.testing.assert_frame_equal(par.runs.drop(columns="cpu_s"), res.runs.drop(columns="cpu_s"))
    pd.testing.assert_frame_equal(par.history, res.history)


def test_best_snapshot_keeps_the_weights_np_argmax_would_pick():
    """_BestSnapshot holds member e's weights at argmax over evaluations (earliest of ties, −inf never wins late)."""
    import torch

    from sapa.empirics.training.study_chunk import _BestSnapshot

    rng = np.random.default_rng(3)
    E, T = 5, 7
    acc = rng.choice([0.1, 0.5, 0.5, 0.9, -np.inf], size=(T, E))  # ties and non-finite evaluations
    snap = _BestSnapshot()
    for t in range(T):
        snap.update({"w": torch.full((E, 2), float(t))}, acc[t])
    pick = np.argmax(acc, axis=0)  # what _summarise reports as the best evaluation
    np.testing.assert_array_equal(snap.prm["w"][:, 0].numpy(), pick.astype(float))


def test_test_split_is_evaluated_twice_on_the_final_and_the_best_weights(monkeypatch):
    """The held-out split is read twice — on the final weights and on each member's best-validation weights."""
    import torch

    from sapa.empirics.training import study_chunk as sc

    calls = []
    real = sc._evaluate

    def spy(prm, spec, rowc, data, xy, E, cfg):
        calls.append(("test" if xy is data.test else "val", {k: v.detach().clone() for k, v in prm.items()}))
        return real(prm, spec, rowc, data, xy, E, cfg)

    monkeypatch.setattr(sc, "_evaluate", spy)
    cfg = ts.study_config(replace(MICRO, text=replace(MICRO.text, steps=12, evals=4, lrs=(3e-2,))))
    chunk = [c for c in ts.plan_chunks(cfg, "text", 8, None) if c.family == "p1"][0]
    rows = sc.train_chunk(chunk, cfg)["rows"]
    kinds = [k for k, _ in calls]
    steps = cfg.text.eval_steps()
    assert kinds == ["val"] * len(steps) + ["test", "test"]
    val_w = [w for k, w in calls if k == "val"]
    final_w, best_w = calls[-2][1], calls[-1][1]
    assert len({r["best_step"] for r in rows}) > 1, "members should peak at different evaluations"
    for e, r in enumerate(rows):
        at = val_w[steps.index(r["best_step"])]
        for k in final_w:
            assert torch.equal(final_w[k][e], val_w[-1][k][e])
            assert torch.equal(best_w[k][e], at[k][e])


def test_text_floor_is_the_bigram_on_the_validation_windows_the_curves_are_read_on():
    # regression: the floor of the validation curves was the bigram's *test* accuracy (0.270 at N = 64), while the
    # bigram scores 0.348 on the validation windows — every text run then "left the floor" within ~35 steps
    from types import SimpleNamespace

    import torch

    from sapa.empirics.training.bigram import bigram_accuracy
    from sapa.empirics.training.study_chunk import _Data, text_validation
    from sapa.empirics.training.train_data import load_text
    from sapa.empirics.training.train_study import study_config, study_floors, text_validation_floor

    cfg = study_config("full", 0)
    d = _Data(cfg, "text", 64)  # what the trainer evaluates on
    t = load_text(64, cfg.plan("text").eval_size)
    stream, vx, vy = text_validation(t.train, 64, cfg.plan("text").eval_size)
    assert torch.equal(d.val[0], vx) and torch.equal(d.val[1], vy) and torch.equal(d.stream, stream)
    val = bigram_accuracy(stream.numpy(), vx.numpy(), vy.numpy())  # independent of the code under test's wrapper
    test = bigram_accuracy(t.train.numpy(), t.test_x.numpy(), t.test_y.numpy())
    assert text_validation_floor(64) == val and val > test + 0.05
    res = SimpleNamespace(runs=pd.DataFrame({"task": ["text", "digits"], "N": [64, 16]}), config={})
    assert study_floors(res) == {("text", 64): val, ("digits", 16): 0.1}


@pytest.mark.parametrize("task, N", [("digits", 16), ("text", 16)])
def test_evaluation_in_slices_of_the_training_batch_equals_one_forward(monkeypatch, task, N):
    """Evaluation runs in slices of B sequences; each sequence's loss and prediction are those of one whole forward."""
    import torch

    from sapa.empirics.training import study_chunk as sc
    from sapa.empirics.training.ensemble import EnsembleSpec, row_coefficients, stack_members

    cfg = ts.study_config(replace(MICRO, tasks=(task,), arms=("softmax", "x_sqrtN"),
                                  digits=replace(MICRO.digits, batch=8, eval_size=40),
                                  text=replace(MICRO.text, batch=64, eval_size=26)))
    data = sc._Data(cfg, task, N)
    chunk = [c for c in ts.plan_chunks(cfg, task, N, None) if c.family == "p1"][0]
    arm = ts.ARMS[chunk.members[0].arm]
    spec = EnsembleSpec(task, N, cfg.model, arm, vocab=data.vocab, classes=data.classes)
    E = len(chunk.members)
    prm = stack_members(spec, [torch.Generator().manual_seed(e) for e in range(E)])
    rowc = torch.stack([row_coefficients(ts.ARMS[m.arm], N, m.alpha) for m in chunk.members])  # (E, N)
    n = len(data.test[1])
    assert sc._eval_batch(cfg, data, E) == data.B < n  # several slices, the last one short
    loss, acc = sc._evaluate(prm, spec, rowc, data, data.test, E, cfg)
    monkeypatch.setattr(sc, "_eval_batch", lambda *a: n)
    loss1, acc1 = sc._evaluate(prm, spec, rowc, data, data.test, E, cfg)
    per = n * (1 if task == "digits" else N)
    np.testing.assert_allclose(loss, loss1, rtol=1e-6)  # float32 logits: products of other sizes may round differently
    assert np.all(np.abs(acc - acc1) <= 1 / per + 1e-12)  # at most one prediction at a float32 tie
    assert len(set(acc.round(12))) > 1 or len(set(loss.round(9))) > 1  # members differ: the check is not vacuous


def test_progress_weighs_members_by_their_flops_and_counts_a_resumed_run_as_done(study, tmp_path):
    from sapa.common.progress import Tally
    from sapa.empirics.training.tiny_models import step_flops

    out, res = study
    bars = []

    def tally(total):
        bars.append(Tally(total, desc="train"))
        return bars[-1]

    # the total is the sum over the trained members of steps × flops per step at their N: chunking does not enter
    cfg = ts.study_config(MICRO)
    trained = [(t, N) for t in MICRO.tasks for N in MICRO.plan(t).Ns
               for c in ts.plan_chunks(cfg, t, N, {1: 1.0, 3: 1.0}) for _ in c.members]
    work = sum(MICRO.plan(t).steps * step_flops(MICRO.model, MICRO.plan(t).sequences(int(N)), int(N))
               for t, N in trained)
    fresh = ts.run_study(MICRO, tmp_path, workers=1, progress=tally)
    assert bars[0].total == pytest.approx(work, rel=1e-12) and bars[0].n == pytest.approx(work, rel=1e-12)
    assert bars[0].postfix == f"{len(trained)}/{len(trained)} members"
    ts.run_study(MICRO, out, workers=1, progress=tally)  # everything stored: counted as done, none of it as speed
    assert bars[1].n == pytest.approx(work, rel=1e-12) and bars[1]._start_n == bars[1].n
    assert bars[1].postfix == f"{len(trained)}/{len(trained)} members"


def test_the_second_look_trains_the_strata_the_planner_names_and_resumes(tmp_path):
    """``second_look`` sees the phase-1 runs (the grid's doses only) and the config; the strata it names get the finer
    grid's doses as their own chunks, in runs.parquet beside the grid's; a rerun trains nothing; without a planner
    (or with look2_refine 0) there is no second look."""
    cfg = replace(MICRO, name="look2", arms=("x_dose",), alphas=(2.0, 8.0), look2_refine=2,
                  text=replace(MICRO.text, Ns=(8,)))
    seen = []

    def planner(runs, c):
        seen.append((sorted(set(runs["alpha"])), c.look2_refine))
        return [("text", 1, 1e-2)]

    res = ts.run_study(cfg, tmp_path, workers=1, progress=False, mechanism=None, second_look=planner)
    assert seen == [([2.0, 8.0], 2)]
    r = res.runs
    added = r[np.isclose(r["alpha"], 4.0)]
    assert sorted(zip(added["lr"], added["seed"])) == [(1e-2, 0), (1e-2, 1)] and set(added["arm"]) == {"x_dose"}
    assert not added["in_study"].any() and res.provenance["second_look"] == [{"task": "text", "p": 1, "lr": 1e-2}]
    assert sorted(p.name for p in (tmp_path / "chunks").glob("*look2*")) == [f"text_N8_p1_look2_{i}.json"
                                                                            for i in range(2)]
    again = ts.run_study(cfg, tmp_path, workers=1, progress=False, mechanism=None, second_look=planner)
    assert again.provenance["members_trained_now"] == 0 and len(again.runs) == len(r)
    pd.testing.assert_frame_equal(again.runs.drop(columns="cpu_s"), r.drop(columns="cpu_s"))
    for off in ({"second_look": None}, {"second_look": planner, "cfg": replace(cfg, look2_refine=0)}):
        res = ts.run_study(off.get("cfg", cfg), tmp_path / "off", workers=1, progress=False, mechanism=None,
                           second_look=off["second_look"])
        assert not np.isclose(res.runs["alpha"], 4.0).any() and res.provenance["second_look"] == []
