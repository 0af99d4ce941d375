"""Tests for `empirics/training/mechanism.py` and the expression family of `empirics/training/ensemble.py`."""

import json
from dataclasses import replace

import pytest
import torch

from sapa.common.validate import InputError
from sapa.empirics.training import ensemble as EN
from sapa.empirics.training import mechanism as M
from sapa.empirics.training.tiny_models import TinyModelConfig
from sapa.theory.families import power

TINY = replace(M.MECH_TINY, probes=(M.Probe("copy1", (16,), 4, 2),))


def test_offset_profile_by_brute_force():
    g = torch.Generator().manual_seed(0)
    P = torch.randn(2, 3, 6, 6, generator=g, dtype=torch.float64).tril()  # (E, P, N, N) causal
    got = M.offset_profile(P, 3)
    for e in range(2):
        mass = [0.0] * 4
        for p in range(3):
            for i in range(6):
                for j in range(i + 1):
                    mass[min(i - j, 3)] += abs(P[e, p, i, j].item())
        tot = sum(mass)
        assert torch.allclose(got[e], torch.tensor([m / tot for m in mass], dtype=torch.float64), rtol=1e-12)


def test_expression_family_equals_the_power_family():
    """φ = x³/√N from text gives the poly family's forward (r = 1/√N) to float32 round-off."""
    cfg = TinyModelConfig(width=8, layers=1, heads=2)
    gens = [torch.Generator().manual_seed(s) for s in (1, 2)]
    spec_p = EN.EnsembleSpec("text", 12, cfg, power(3), vocab=10, classes=10)
    spec_e = EN.EnsembleSpec("text", 12, cfg, EN.expression_family("expr", "x^3/sqrt(N)"), vocab=10, classes=10)
    prm = EN.stack_members(spec_p, gens)
    x = torch.randint(0, 10, (2, 3, 12), generator=torch.Generator().manual_seed(3))
    rowc = torch.full((2, 12), 12 ** -0.5)
    a = EN.ensemble_forward(prm, x, spec_p, rowc)
    b = EN.ensemble_forward(prm, x, spec_e, None)
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def test_expression_uses_the_row_index_and_masks():
    spec = EN.EnsembleSpec("text", 4, TinyModelConfig(width=8, layers=1, heads=1),
                           EN.expression_family("expr", "relu(x)/i"), vocab=5, classes=5)
    S = torch.ones(1, 1, 1, 4, 4) * 2.0
    P = EN.phi(S, spec, None)[0, 0, 0]
    want = torch.tensor([[2.0, 0, 0, 0], [1, 1, 0, 0], [2 / 3, 2 / 3, 2 / 3, 0], [0.5, 0.5, 0.5, 0.5]])
    assert torch.allclose(P, want)


def test_untrainable_expression_is_one_input_error():
    with pytest.raises(InputError):
        M.expr_arm("exp(x)")  # refused by the audit parser (overflows)
    with pytest.raises(InputError):
        M.expr_arm("x +")


def test_chunks_identical_serial_and_in_worker_threads(tmp_path):
    """Chunks run by an executor's workers (two threads here; worker processes in the slow run's twin below) are the
    serial chunks, byte for byte."""
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(2) as pool:
        _chunks_identical_serial_and_in(pool, tmp_path)


@pytest.mark.slow  # the session's spawn pool: two fresh interpreters importing torch (~9 CPU-s)
def test_chunks_identical_serial_and_in_a_pool(tmp_path, spawn_pool):
    _chunks_identical_serial_and_in(spawn_pool, tmp_path)  # sapa.common.pool.process_pool(2), shared (tests/conftest.py)


def _chunks_identical_serial_and_in(pool, tmp_path):
    cfg = replace(TINY, activation="x/N")
    a = M.run_mechanisms(cfg, tmp_path / "a")
    b = M.run_mechanisms(cfg, tmp_path / "b", pool)
    assert a["results"] == b["results"] and all("cpu_s" not in r and "wall_s" not in r for r in a["results"])
    f = sorted((tmp_path / "a" / "mechanism").glob("*.json"))
    assert len(f) == 4 and json.loads(f[0].read_text())["config_hash"] == cfg.chunk_hash("copy1")
    # the timings live in mechanism/timing/: the sealed chunk files of the two runs are the same bytes
    assert [p.read_bytes() for p in f] == [(tmp_path / "b" / "mechanism" / p.name).read_bytes() for p in f]
    assert sorted(p.name for p in (tmp_path / "a" / "mechanism" / "timing").iterdir()) == [p.name for p in f]


def test_resume_reuses_stored_chunks(tmp_path, monkeypatch):
    M.run_mechanisms(TINY, tmp_path)
    monkeypatch.setattr(M, "train_mechanism_chunk", lambda *a, **k: pytest.fail("retrained a stored chunk"))
    again = M.run_mechanisms(TINY, tmp_path)
    assert all(r is not None for r in again["results"])


def test_curves_have_every_evaluation_and_paired_inits():
    cfg = replace(TINY, probes=(M.Probe("copy1", (16,), 8, 2),), stop_at=2.0)  # accuracy never reaches 2: no stop
    r = M.train_mechanism_chunk(M.plan_mech_chunks(cfg)[0], cfg)
    assert r["steps"] == list(cfg.eval_steps("copy1")) == [0, 2, 4, 8] and len(r["val_acc"]) == len(r["steps"])
    prof = torch.tensor(r["profile"])  # (K, E, bins)
    assert torch.allclose(prof.sum(-1), torch.ones(prof.shape[:2], dtype=prof.dtype), atol=1e-5)
    assert r["stopped"] == [None] * len(r["members"])


def test_grid_steps_are_geometric_and_end_at_the_cap():
    g = M.grid_steps(3000)
    ratios = [b / a for a, b in zip(g[1:-2], g[2:-1])]
    assert g[:2] == (0, 8) and g[-1] == 3000 and all(1.0 < q <= 2 ** 0.2 * 1.15 for q in ratios)
    assert list(g) == sorted(set(g))
    with pytest.raises(InputError):
        M.grid_steps(0)


def test_a_member_stops_once_solved_and_the_others_train_as_before():
    """Members leave the ensemble at their first evaluation ≥ stop_at; everyone else's numbers do not change."""
    import numpy as np

    base = replace(TINY, probes=(M.Probe("copy1", (16,), 24, 3, vocab=4),), model=TinyModelConfig(width=8, layers=1,
                   heads=1), arms=("softmax", "x_sqrtN"), eval_size=16, lr=3e-2)
    chunk = M.plan_mech_chunks(base)[0]  # softmax, 3 seeds
    a = M.train_mechanism_chunk(chunk, replace(base, stop_at=2.0))
    acc = np.array(a["val_acc"], float)  # (K, E)
    t = float(np.median(acc[len(acc) // 2]))  # about half the members reach it by the middle evaluation
    b = M.train_mechanism_chunk(chunk, replace(base, stop_at=t))
    accb, lossa, lossb = (np.array(b["val_acc"], float), np.array(a["val_loss"], float),
                          np.array(b["val_loss"], float))
    stopped = 0
    for e in range(acc.shape[1]):
        hit = np.nonzero(acc[:, e] >= t)[0]
        last = hit[0] if hit.size else len(acc) - 1
        np.testing.assert_allclose(lossb[:last + 1, e], lossa[:last + 1, e], rtol=1e-5)
        assert np.isnan(accb[last + 1:, e]).all() and (b["stopped"][e] == a["steps"][last]) == bool(hit.size)
        stopped += bool(hit.size) and last < len(acc) - 1
    assert stopped >= 1  # the test saw a member leave early


def test_cuda_asked_and_absent_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="no CUDA device"):
        M.resolve_device("cuda")


@pytest.mark.parametrize("activation", ["", "x/N"])
def test_a_training_step_and_the_offset_profile_stay_on_the_parameters_device(activation):
    """--device cuda, checked without a GPU: on the meta device any tensor made on the CPU is a device-mismatch error."""
    cfg = replace(TINY, activation=activation)
    for chunk in M.plan_mech_chunks(cfg):
        arms = {a.id: a for a in cfg.arm_list()}
        mem = [arms[a] for a, _ in chunk.members]
        V = cfg.plan(chunk.task).vocab
        spec = EN.EnsembleSpec("text", chunk.N, cfg.model, mem[0], vocab=V, classes=V)
        prm = {k: v.detach().to("meta").requires_grad_(True)
               for k, v in EN.stack_members(spec, [torch.Generator() for _ in mem]).items()}
        rc = [M.member_scales(a, chunk.N) for a in mem]
        rowc = None if rc[0] is None else torch.stack(rc).to("meta")
        x, y = (t.expand(len(mem), *t.shape).to("meta") for t in M.MD.batch("copy1", 2, chunk.N, V,
                                                                              torch.Generator()))
        alive = torch.ones(len(mem), dtype=torch.bool, device="meta")
        M.train_step(prm, EN.AdamWState.zeros(prm), x, y, alive, torch.full((len(mem),), 1e-3, device="meta"), spec,
                     rowc, cfg.clip)
        with torch.no_grad():
            S = torch.ones(len(mem), 1, 1, chunk.N, chunk.N, device="meta")
            assert M.offset_profile(EN.phi(S, spec, rowc)).device.type == "meta"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_trains_a_chunk_and_starts_where_the_cpu_starts():
    cfg = replace(TINY, steps=20, points=3)
    for chunk in M.plan_mech_chunks(cfg):
        cpu, gpu = (M.train_mechanism_chunk(chunk, cfg, d) for d in ("cpu", "cuda"))
        assert gpu["device"].startswith("cuda") and cpu["device"] == "cpu" and gpu["steps"] == cpu["steps"]
        # step 0: the same initial weights and data, evaluated on either device (float32 round-off, 6 decimals stored)
        assert gpu["val_loss"][0] == pytest.approx(cpu["val_loss"][0], rel=1e-4, abs=1e-5)
        assert gpu["attn_fro"][0] == pytest.approx(cpu["attn_fro"][0], rel=1e-6)
        assert all(v < 1e300 for row in gpu["val_loss"] for v in row)  # trained to the end, every member finite


def test_expression_uses_the_column_index():
    spec = EN.EnsembleSpec("text", 3, TinyModelConfig(width=8, layers=1, heads=1),
                           EN.expression_family("expr", "x*j/N"), vocab=5, classes=5)
    P = EN.phi(torch.ones(1, 1, 1, 3, 3), spec, None)[0, 0, 0]
    assert torch.allclose(P, torch.tensor([[1 / 3, 0, 0], [1 / 3, 2 / 3, 0], [1 / 3, 2 / 3, 1.0]]))


def test_an_edited_stored_chunk_is_trained_again_and_says_so(tmp_path, monkeypatch, capsys):
    """val_acc 1.0 written into a stored chunk used to move a median exit silently: chunks are sealed."""
    import os

    M.run_mechanisms(TINY, tmp_path)
    files = sorted((tmp_path / "mechanism").iterdir())
    rec = json.loads(files[0].read_text())
    rec["result"]["val_acc"] = [[1.0 for _ in row] for row in rec["result"]["val_acc"]]
    files[0].write_text(json.dumps(rec))
    trained = []
    real = M.train_mechanism_chunk
    monkeypatch.setattr(M, "train_mechanism_chunk", lambda c, *a, **k: trained.append(c) or real(c, *a, **k))
    capsys.readouterr()
    again = M.run_mechanisms(TINY, tmp_path)
    assert len(trained) == 1 and all(r is not None for r in again["results"])
    assert "does not match its checksum" in capsys.readouterr().err
    assert rec["result"]["val_acc"] not in [r["val_acc"] for r in again["results"]]  # the edit did not flow in
    os.unlink(files[1])
    os.mkfifo(files[1])  # a named pipe where a chunk was: read without waiting, never replaced
    with pytest.raises(FileExistsError, match="named pipe"):
        M.run_mechanisms(TINY, tmp_path)


def test_a_probe_added_later_keeps_the_other_probes_stored_chunks(tmp_path, monkeypatch):
    """The chunk hash covers the shared settings and the chunk's own probe: growing the study does not retrain it."""
    M.run_mechanisms(TINY, tmp_path)
    grown = replace(TINY, probes=TINY.probes + (M.Probe("copy2", (16,), 4, 2),))
    trained = []
    real = M.train_mechanism_chunk
    monkeypatch.setattr(M, "train_mechanism_chunk", lambda c, *a, **k: trained.append(c.task) or real(c, *a, **k))
    M.run_mechanisms(grown, tmp_path)
    assert set(trained) == {"copy2"} and grown.chunk_hash("copy1") == TINY.chunk_hash("copy1") != grown.hash()


def test_a_sealed_chunk_is_reused_only_under_its_own_chunk_hash(tmp_path):
    """A valid, sealed chunk file of another config (another chunk hash) is trained again, never reused; a file
    that is missing, or sealed without a result, reads as nothing to reuse."""
    from sapa.common.atomic import atomic_write_json
    from sapa.common.integrity import seal_record
    from sapa.empirics.training.mechanism import _stored

    path = tmp_path / "copy1_N16_softmax.json"
    assert _stored(path, "a") is None  # nothing there
    atomic_write_json(path, seal_record({"config_hash": "a", "chunk": {}, "result": {"steps": [0, 8]}}))
    assert _stored(path, "a") == {"steps": [0, 8]}
    assert _stored(path, "b") is None
    atomic_write_json(path, seal_record({"config_hash": "a", "chunk": {}}))
    assert _stored(path, "a") is None


def test_first_seed_gives_fresh_seeds_and_leaves_default_hashes_alone():
    """A probe sized by a pilot trains seeds first_seed … first_seed + seeds − 1 (the pilot's data never read twice);
    first_seed = 0 is the old design, whose stored chunks keep their hash; a bad first_seed is one clear error."""
    fresh = replace(TINY, probes=(M.Probe("copy1", (16,), 6, 3, vocab=16, first_seed=5),))
    chunks = M.plan_mech_chunks(fresh)
    assert {r for c in chunks for _, r in c.members} == {5, 6, 7}
    zero = replace(TINY, probes=(replace(TINY.probes[0], first_seed=0),))
    moved = replace(TINY, probes=(replace(TINY.probes[0], first_seed=2),))
    assert zero.chunk_hash("copy1") == TINY.chunk_hash("copy1") != moved.chunk_hash("copy1")
    a = M.train_mechanism_chunk(chunks[0], fresh)
    b = M.train_mechanism_chunk(M.plan_mech_chunks(replace(fresh, probes=(replace(fresh.probes[0], first_seed=0),)))[0],
                                fresh)
    assert a["val_acc"] != b["val_acc"]  # other seeds: other inits and minibatches
    for bad in (-1, 1.5, True):
        with pytest.raises(InputError, match="first_seed"):
            M.Probe("copy1", (16,), 6, 3, first_seed=bad)
