"""Tests for `figures/real_heads.py`: the map formula, and a small run that saves PNG + PDF (extra ``real``)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from sapa.figures import real_heads
from sapa.theory.moments import exact_moments


pytestmark = pytest.mark.usefixtures("no_network")  # tests/conftest.py: offline, sockets refused


def test_map_exponent_is_the_exact_local_exponent():
    W = np.random.default_rng(0).standard_normal((6, 6)) + np.eye(6)
    for p in (1, 3):
        em = exact_moments(p, "shared", 100, W=W)
        assert real_heads.map_exponent(100, em.crossover_n) == pytest.approx(em.growth_exponent, rel=1e-12)
    assert real_heads.map_exponent(np.array([8, 512]), 2.0) == pytest.approx([0.5, 0.5])


def test_main_small(tmp_path, real_small_cached_in):
    """``main(small=True)`` reuses an analysis cached beside the figures (here the session's, tests/conftest.py)."""
    real_small_cached_in(tmp_path / "real")
    paths = real_heads.main(tmp_path / "figures", small=True)
    assert {p.suffix for p in paths} == {".png", ".pdf"} and len(paths) == 4
    assert all(p.stat().st_size > 10_000 for p in paths)
    assert "budgetsmall" in paths[0].name and "N8-32" in paths[0].name
    assert "real_heads_protocols" in paths[2].name  # the per-protocol exponents beside the regime map


def test_draw_stored_reads_the_newest_analysis(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError):
        real_heads.draw_stored(tmp_path, tmp_path / "figures")
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "real_heads_a.json").write_text('{"tag": "old"}')
    newest = tmp_path / "real" / "real_heads_b.json"
    newest.write_text('{"tag": "new"}')
    os.utime(newest, (2e9, 2e9))
    monkeypatch.setattr(real_heads, "draw", lambda res, out: [res["tag"], out])  # nothing recomputed, only drawn
    assert real_heads.draw_stored(tmp_path, tmp_path / "f") == ["new", tmp_path / "f"]


def test_draw_protocols_from_synthetic_fits(tmp_path):
    """The per-protocol figure needs only the typed fits (no model): 4 protocols × 3 activations × 72 heads."""
    from dataclasses import asdict

    from sapa.empirics.realmodel import real

    rng = np.random.default_rng(2)
    fits = []
    for pr in real.PROTOCOL_NAMES:
        for a, centre in zip(real.ACTIVATIONS, (0.25, 0.6, 0.8)):
            for i in range(72):
                e = centre + 0.2 * rng.standard_normal()
                fits.append(asdict(real.HeadFit(pr, a, "fro", i // 12, i % 12, e, e - 0.03, e + 0.03)))
    res = {"fits": fits, "Ns_real": [8, 256], "meta": {"config": {"name": "synthetic"}, "passages": ["a"] * 8}}
    paths = real_heads.draw_protocols(res, tmp_path)
    assert {p.suffix for p in paths} == {".png", ".pdf"} and all(p.stat().st_size > 10_000 for p in paths)
