"""Tests for `figures/overhead.py`: both figures draw (PNG + PDF) from stored benchmark data and from main(small)."""

from __future__ import annotations

import pytest

import json

from sapa.empirics.timing.overhead import OverheadGrid, bench_overhead
from sapa.figures import overhead


@pytest.mark.slow  # times a grid (~5 s); test_main_small draws the figure by default
def test_draw_from_stored_data_with_gaps_and_every_crossover_status(tmp_path):
    g = OverheadGrid(Ns=(16, 32, 64), d=8, ps=(1, 2, 3), repeats=1, methods=("naive", "linearised"),
                     crossover_ds=(4, 8), crossover_masks=("none", "causal"), time_cap_s=5.0, block_s=0.002)
    res = json.loads(json.dumps(bench_overhead(grid=g, device="cpu", threads=1)))  # as stored: tuples -> lists
    for r in res["rows"]:  # a series cut short by a cap
        if r["method"] == "linearised" and r["p"] == 3 and r["N"] > 16:
            r["seconds"], r["status"] = None, "skipped: predicted 99 s per call > time cap 20 s"
    statuses = [("crossed", 24.0), ("below grid", 16.0), ("none ≤ 64", None), ("no data", None)]
    for c, (s, n) in zip(res["crossover"], statuses * 10):
        c["measured_status"], c["measured_crossover_N"] = s, n
    paths = overhead.draw(res, tmp_path, "overhead_tiny")
    assert [p.name for p in paths] == ["overhead_tiny.png", "overhead_tiny.pdf", "overhead_tiny_crossover.png",
                                       "overhead_tiny_crossover.pdf", "overhead_tiny_model.png", "overhead_tiny_model.pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)
    res["cost_rates"] = None  # a wall-clock run measures no rates: no model figure
    assert len(overhead.draw(res, tmp_path, "overhead_wall")) == 4


def test_main_small(tmp_path):
    paths = overhead.main(tmp_path, small=True)
    assert {p.suffix for p in paths} == {".png", ".pdf"} and len(paths) == 6  # times, crossover, cost model
    assert "overhead_d16_N32-128" in paths[0].name and "dtypefloat32" in paths[0].name


def test_legend_names_every_form_the_caption_names():
    """The caption names naive, compiled (torch.compile) and linearised forms: the legend has each, a form the run
    did not time marked as such."""
    import matplotlib.pyplot as plt

    from sapa.figures.captions import caption_for

    g = OverheadGrid(Ns=(16, 32), d=8, ps=(3,), repeats=1, methods=("naive", "linearised"), crossover_ds=(8,),
                     crossover_masks=("none",), time_cap_s=5.0, block_s=0.002)
    res = json.loads(json.dumps(bench_overhead(grid=g, device="cpu", threads=1)))
    fig = overhead._time_panels(res)
    labels = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    plt.close(fig)
    cap = caption_for("overhead_d8_N16-32_threads1").text
    for form, label in overhead.LABEL.items():
        assert sum(label in x for x in labels) == 1, (form, labels)
    assert "torch.compile(naive): not timed in this run" in labels
    assert "naive" in cap and "linearised" in cap and "torch.compile" in cap and "not timed" in cap
