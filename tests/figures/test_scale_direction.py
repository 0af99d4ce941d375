"""Tests for `figures/scale_direction.py` (Figure 4): it draws a result, or its stored JSON, and asserts its claim."""

from __future__ import annotations

import pandas as pd
import pytest

from common import figdata
from empirics.experiments.scale_direction import run_scale_direction
from figures import scale_direction


@pytest.fixture(scope="module")
def res():
    return run_scale_direction([8, 16, 32, 64, 128, 256, 512], trials=2, max_trials=256)


def test_draw_and_redraw_from_stored_json(res, tmp_path):
    scale_direction.check(res)
    stem = scale_direction.stored_stem(res, "quick")
    assert "d64_D64_N8-512" in stem
    paths = scale_direction.draw(res, tmp_path / "a", stem)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)
    figdata.write(tmp_path / "data" / "scale_direction.json", res.to_json(), stem)
    again = scale_direction.main(tmp_path, tmp_path / "b")
    assert [p.name for p in again] == [p.name for p in paths]


def test_check_rejects_the_papers_direction():
    """A fit in which c(N) falls as N falls (exponent > 0) must fail the figure's assertion."""
    fit = pd.DataFrame({"criterion": ["typical", "bound", "bound_mc"], "slope": [0.3, 0.2, 0.2],
                        "ci_lo": [0.2, 0.2, 0.1], "ci_hi": [0.4, 0.2, 0.3]})
    with pytest.raises(AssertionError):
        scale_direction.check({"fits": {("tied", 1): fit}})
