"""Tests for `empirics/realmodel/real_analysis.py`: a small analysis of all-MiniLM-L6-v2 under every protocol (extra ``real``).

No test may touch the network.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sapa.empirics.realmodel import real

# offline, sockets refused (tests/conftest.py); one torch thread (conftest.py here)
pytestmark = pytest.mark.usefixtures("no_network", "real_one_thread")


@pytest.fixture(scope="module")
def small_result(real_small):
    """The session's analysis at ``real.SMALL`` (tests/conftest.py), its config and cache folder."""
    res, file = real_small
    return res, real.SMALL, file.parent

def test_analyse_small(small_result):
    res, cfg, cache = small_result
    assert isinstance(res, real.RealResult)
    assert len(res.heads) == 72 and res.Ns == (8, 16, 32) and res.Ns_real == (8, 16, 32)
    assert res.meta.softmax_norm_le_sqrt_n and res.meta.max_shift_residual < 1e-10
    assert {(m.proxy, m.p) for m in res.heads[0].proxies} == {(x, p) for x in real.PROXIES for p in (1, 3)}
    assert all(r.proxy("identity", 1).n_star == pytest.approx(r.invariants.n_star_p1_identity, rel=1e-9)
               for r in res.heads)
    fro = res.norm("prefix", "softmax").fro  # (L, H, T, K)
    assert fro.shape == (6, 12, 2, 3) and np.all(fro <= np.sqrt([8, 16, 32]) * (1 + 1e-6))
    assert set(res.meta.protocols) == set(real.PROTOCOL_NAMES)
    assert res.meta.protocols["prefix-content"]["n"] == [6, 14, 30]
    fits = real.head_fits(res)
    assert len(fits) == 72 * (4 * 3 + 3)  # ‖φ‖ under 4 protocols, the Jacobian under "prefix" only (quick)
    assert {f.protocol for f in fits if f.kind == "jac"} == {"prefix"}
    assert all(f.lo <= f.hi and math.isfinite(f.slope) and len(f.local) == 2 for f in fits)
    # the stored form keeps the flat per-head keys that readers of stored results use
    stored = res.to_dict()
    h = stored["heads"][2 * 12 + 3]
    for key in ("identity_p3_n_star", "measured_p1_n_star", "matched_p3_n_reg", "ab_canonical_top",
                "ab_null_canonical_top", "meas_p1_fro_slope", "meas_softmax_jac_ci", "inv_sym_share"):
        assert key in h
    assert res.fit("prefix", "x/sqrt(N)", "fro", 2, 3).slope == h["meas_p1_fro_slope"]
    assert res.heads[2 * 12 + 3].ab.sample.canonical_top == h["ab_canonical_top"]
    # at the longest N the fixed-context pass is the prefix pass: identical rows, identical norms
    for a in real.ACTIVATIONS:
        for pair in (("fixed", "prefix"), ("fixed-content", "prefix-content")):
            x, y = (res.norm(m, a).fro[..., -1] for m in pair)
            np.testing.assert_allclose(x, y, rtol=1e-12)
        # shorter N: a different context, different numbers
        assert not np.allclose(res.norm("fixed", a).fro[..., 0], res.norm("prefix", a).fro[..., 0])
    canon = real.canonical_records(res)
    assert len(canon) == 2 * 72 and {c.tokens for c in canon} == {"all", "content"}
    assert all(0 < c.random_top < 1 and 0 < c.real_top <= 1 + 1e-9 and 1 < c.participation_ratio < 384 for c in canon)
    assert {c.n_tokens for c in canon if c.tokens == "content"} == {res.meta.n_tokens_content}
    assert res.meta.n_tokens_content < res.meta.n_tokens_covariance
    again = real.analyse(cfg, cache_dir=cache)  # from the cache, identical numbers
    assert again.meta.from_cache and again.heads == res.heads and again.fits == res.fits
    assert again.canonical == res.canonical and again.meta.config == cfg
    np.testing.assert_array_equal(again.norm("prefix", "softmax").jac, res.norm("prefix", "softmax").jac)
    tab = real.layer_table(res)
    assert list(tab.index) == list(range(6)) and (tab["n_star_p3_identity_max"] >= tab["n_star_p3_identity_median"]).all()


def test_analyse_norms_match_direct_computation(small_result, weights, tok):
    """One stored norm recomputed from scratch with the biases written out (no reduction)."""
    res, cfg, _ = small_result
    name = res.meta.passages[1]
    ids = real.prefix_ids(real.encode(tok, real.load_corpus().passages[name]), 16)
    X = torch.from_numpy(real.forward(weights, ids)[4].double().numpy())  # layer 4 input
    qk = real.head_qk(weights, 4, 7)
    t = torch.from_numpy
    S = (X @ t(qk.W_Q) + t(qk.b_Q)) @ (X @ t(qk.W_K) + t(qk.b_K)).T / math.sqrt(32)  # (N, d) @ (d, N)
    stored = res.norm("prefix", "x^3/sqrt(N)").fro[4, 7, 1, 1]  # layer 4, head 7, text 1, N = 16
    assert stored == pytest.approx(float((S**3 / 4.0).norm()), rel=1e-9)
    stored_sm = res.norm("prefix", "softmax").fro[4, 7, 1, 1]
    assert stored_sm == pytest.approx(float(torch.softmax(S, -1).norm()), rel=1e-9)
    # the same head without [CLS]/[SEP]: the content rows of the same pass, scale 1/√(N − 2)
    Sc = S[1:-1, 1:-1]
    stored_c = res.norm("prefix-content", "x/sqrt(N)").fro[4, 7, 1, 1]
    assert stored_c == pytest.approx(float((Sc / math.sqrt(14)).norm()), rel=1e-9)


def test_an_edited_cache_is_not_used_and_says_so(small_result, tmp_path, capsys):
    """×10 on the fits used to flip real-model-regime silently: the cache is sealed, an edit is recomputed."""
    import json
    import os

    from sapa.empirics.realmodel.real_analysis import _cached

    _, cfg, cache = small_result
    [src] = [p for p in cache.iterdir() if p.name.startswith("real_heads_")]
    rec = json.loads(src.read_text())
    good = tmp_path / src.name
    good.write_text(json.dumps(rec))
    assert _cached(good) is not None and capsys.readouterr().err == ""
    rec["fits"][0]["slope"] = rec["fits"][0]["slope"] * 10
    bad = tmp_path / ("edited_" + src.name)
    bad.write_text(json.dumps(rec))
    assert _cached(bad) is None
    err = capsys.readouterr().err
    assert "does not match its checksum" in err and err.count("\n") == 1
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert _cached(fifo) is None  # refused at once, never waits for a writer
    assert "not a regular file" in capsys.readouterr().err
