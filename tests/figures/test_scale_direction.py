"""Tests for `figures/scale_direction.py` (Figure 4): the small main asserts its claim and saves PNG + PDF."""

from __future__ import annotations

import pandas as pd
import pytest

from figures import scale_direction


def test_main_small(tmp_path):
    paths = scale_direction.main(tmp_path, small=True)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)
    assert "d64_D64_N8-512" in paths[0].name


def test_check_rejects_the_papers_direction():
    """A fit in which c(N) falls as N falls (exponent > 0) must fail the figure's assertion."""
    fit = pd.DataFrame({"criterion": ["typical", "bound", "bound_mc"], "slope": [0.3, 0.2, 0.2],
                        "ci_lo": [0.2, 0.2, 0.1], "ci_hi": [0.4, 0.2, 0.3]})
    with pytest.raises(AssertionError):
        scale_direction.check({"fits": {("tied", 1): fit}})
