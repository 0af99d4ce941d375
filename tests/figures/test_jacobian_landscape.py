"""Tests for `figures/jacobian_landscape.py`: runs on a small grid and saves PNG + PDF."""

from sapa.figures import jacobian_landscape


def test_main_small(tmp_path):
    paths = jacobian_landscape.main(tmp_path, small=True)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)
    assert "grid60" in paths[0].name


def test_grid_is_on_the_simplex():
    s = jacobian_landscape.simplex_grid(7)
    assert len(s) == 8 * 9 // 2
    assert abs(s.sum(1) - 1).max() < 1e-15 and s.min() >= 0
