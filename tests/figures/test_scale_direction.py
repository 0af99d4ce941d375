"""Tests for `figures/scale_direction.py` (Figure 4): it draws a result, or its stored JSON, and asserts its claim."""

from __future__ import annotations

import pandas as pd
import pytest

from sapa.common import figdata
from sapa.empirics.experiments.scale_direction import run_scale_direction
from sapa.figures import scale_direction


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


def test_shading_and_legend_say_what_the_verdict_reads(res):
    """The verdict (HOLDS) reads the divisor α = 1/c of x^p/α: every drawn α-curve lies in the shaded "paper's
    direction"; no legend label reuses the panel letters (a)/(b)/(c)."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig = scale_direction.figure(res)
    try:
        axes = fig.axes
        labels = [t.get_text() for ax in axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        assert labels and not any(tag in x for x in labels for tag in ("(a)", "(b)", "(c)"))
        assert [ax.get_title()[:3] for ax in axes] == ["(a)", "(b)", "(c)"]
        for ax in axes[1:]:
            assert scale_direction.SHADE_LABEL in [t.get_text() for t in ax.get_legend().get_texts()]
            curves = [ln for ln in ax.get_lines() if "criterion" in ln.get_label()]
            assert len(curves) == 2 * len(res.models)
            for ln in curves:
                N, y = (np.asarray(v, float) for v in ln.get_data())
                assert scale_direction.in_shaded(N, y).all(), ln.get_label()
                assert y[N < scale_direction.N_REF].max() < 1 < y[N > scale_direction.N_REF].min()
                lo, hi = ax.get_ylim()
                assert lo <= y.min() and y.max() <= hi  # the whole curve is on the panel
    finally:
        plt.close(fig)


def test_in_shaded_is_the_papers_direction():
    import numpy as np

    N = np.array([8.0, 256.0, 1024.0])
    assert scale_direction.in_shaded(N, [0.2, 1.0, 3.0]).all()       # α falls as N falls
    assert not scale_direction.in_shaded(N[[0, 2]], [5.0, 0.3]).any()  # the coefficient c's direction: outside
