"""Tests for `empirics/realmodel/real_records.py`: typed results and their stored JSON form (a lossless round trip)."""

from __future__ import annotations

import json
from dataclasses import asdict, fields, replace

import numpy as np
import pytest

from sapa.empirics.realmodel import real_records as R


def _stats(x: float) -> R.ABStats:
    return R.ABStats(*(x + 0.01 * k for k in range(len(fields(R.ABStats)))))


def _head(layer: int, head: int, beyond: bool) -> R.HeadRecord:
    inv = R.Invariants(*(1.0 + k + layer for k in range(len(fields(R.Invariants)))))
    proxies = tuple(R.ProxyMoments(x, p, 3.0 + p, 0.4, 12, 0.3, 5.0, 0.35, 20, 0.25,
                                   0.33 if beyond else None, 0.28 if beyond else None)
                    for x in R.PROXIES for p in (1, 3))
    ab = R.ABCorrelation(_stats(0.5), _stats(0.6), _stats(0.05), 1.5, 400)
    return R.HeadRecord(layer, head, 0.7, 64, inv, proxies, ab, 2.0, 0.1, 0.9)


def _result(beyond: bool = True) -> R.RealResult:
    rng = np.random.default_rng(0)
    cfg = replace(R.QUICK, Ns=(8, 16, 32), real_range=(8, 16) if beyond else (8, 32))
    heads = tuple(_head(l, h, beyond) for l in range(2) for h in range(3))
    fits = tuple(R.HeadFit(pr, a, kind, l, h, 0.5, 0.4, 0.6, fr, (0.45, 0.55))
                 for pr in ("prefix", "fixed") for a in R.ACTIVATIONS for kind in ("fro", "jac")
                 for fr in (("real", "all") if beyond else ("real",)) for l in range(2) for h in range(3))
    canon = tuple(R.CanonicalRecord(ts, l, h, 0.9, 0.6, 12.0, 100) for ts in R.TOKEN_SETS for l in range(2)
                  for h in range(3))
    norms = (R.NormGrid("prefix", "softmax", rng.random((2, 3, 2, 3)), rng.random((2, 3, 2, 3))),
             R.NormGrid("fixed", "softmax", rng.random((2, 3, 2, 3))))
    meta = R.RealMeta(config=cfg, passages=("a", "b"), protocols={"prefix": {"n": [8, 16, 32]}}, seconds=1.5)
    return R.RealResult(meta, (8, 16, 32), (8, 16) if beyond else (8, 16, 32), heads, fits, canon,
                        (R.LayerRecord(0, 20.0, 15.0), R.LayerRecord(1, 18.0, 14.0)), norms)


@pytest.mark.parametrize("beyond", [True, False])
def test_stored_form_round_trips(beyond):
    res = _result(beyond)
    back = R.RealResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert back.meta == res.meta and back.heads == res.heads and back.fits == res.fits
    assert back.canonical == res.canonical and back.layers == res.layers and (back.Ns, back.Ns_real) == (res.Ns, res.Ns_real)
    for g in res.norms:
        b = back.norm(g.protocol, g.activation)
        np.testing.assert_array_equal(b.fro, g.fro)
        assert (b.jac is None) == (g.jac is None) and (g.jac is None or np.array_equal(b.jac, g.jac))


def test_stored_heads_keep_the_flat_keys():
    res = _result()
    h = res.to_dict()["heads"][4]  # layer 1, head 1
    assert (h["layer"], h["head"]) == (1, 1)
    assert h["identity_p3_n_star"] == res.heads[4].proxy("identity", 3).n_star == 6.0
    assert h["matched_p1_grid_slope_all_jac"] == 0.28 and h["inv_fro"] == res.heads[4].invariants.fro
    assert h["ab_canonical_top"] == res.heads[4].ab.sample.canonical_top
    assert h["ab_null_canonical_top"] == res.heads[4].ab.null.canonical_top
    assert h["ab_identity_canonical_top"] == res.heads[4].ab.identity.canonical_top
    f = res.fit("prefix", "x^3/sqrt(N)", "jac", 1, 1)
    assert h["meas_p3_jac_slope"] == f.slope and h["meas_p3_jac_ci"] == [f.lo, f.hi]
    assert h["meas_p3_jac_local_all"] == list(res.fit("prefix", "x^3/sqrt(N)", "jac", 1, 1, "all").local)
    assert "grid_slope_all" not in str(_result(beyond=False).to_dict()["heads"][0])


def test_readers_accept_the_stored_form_and_older_fits():
    res = _result()
    d = res.to_dict()
    assert R.head_fits(d) == res.head_fits("real") and R.canonical_records(d) == res.canonical
    legacy = {"fits": [{k: v for k, v in asdict(f).items() if k != "local"} for f in res.fits]}
    assert all(f.local == () for f in R.head_fits(legacy, None)) and len(R.head_fits(legacy, None)) == len(res.fits)


def test_lookups():
    res = _result()
    assert res.fit("prefix", "softmax", "fro", 0, 2).head == 2 and res.fit("prefix-content", "softmax", "fro", 0, 2) is None
    assert res.with_meta(from_cache="x").meta.from_cache == "x" and res.meta.from_cache is None
    assert R.RealConfig.from_dict(json.loads(json.dumps(asdict(R.FULL)))) == R.FULL
