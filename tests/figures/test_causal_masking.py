"""Tests for `figures/causal_masking.py` (Figure 5): the small main asserts its claim and saves PNG + PDF."""

from __future__ import annotations

from figures import causal_masking


def test_main_small(tmp_path):
    paths = causal_masking.main(tmp_path, small=True)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)
    assert "N64-256" in paths[0].name and "Ntrain64" in paths[0].name
