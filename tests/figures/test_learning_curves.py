"""Tests for `figures/learning_curves.py`: the three panels from learning-statistics cells (smoke test)."""

from sapa.figures import learning_curves as fig


def _cell(task, N, arm, median, solved):
    return {"task": task, "N": N, "arm": arm, "floor": 0.1, "curve": [[0, 0.1], [10, 0.2], [100, 0.9]],
            "exits": {"median": median, "cap": 100, "censored": 0 if median else 2, "n": 2},
            "solved_fraction": solved}


def test_draws_curves_exits_and_solved(tmp_path):
    cells = [_cell("copy1", N, a, m, s) for N in (16, 32) for a, m, s in (("softmax", 10, 1.0), ("x_sqrtN", None, 0.5))]
    paths = fig.draw(cells, tmp_path, stem="t", solved=True)
    assert sorted(p.name for p in paths) == sorted(f"t_{k}.{e}" for k in ("curves", "exit", "solved")
                                                   for e in ("png", "pdf"))
    assert all(p.stat().st_size > 0 for p in paths)
    assert fig.draw([], tmp_path) == []


def test_rising_curves_or_a_quick_budget_are_said_on_the_figure(tmp_path, monkeypatch):
    saved = {}
    monkeypatch.setattr(fig.style, "save", lambda f, out, stem: saved.setdefault(stem, f) and [])
    cells = [_cell("copy1", 16, a, m, s) for a, m, s in (("softmax", 10, 1.0), ("x_sqrtN", 20, 0.5))]
    fig.draw(cells, tmp_path, stem="t", solved=True)  # every curve ends 0.2 → 0.9: still rising at the cap
    assert set(saved) == {"t_curves", "t_exit", "t_solved"}
    for f in saved.values():
        assert any("2 of 2 curves still rising" in t.get_text() and "lower bound" in t.get_text() for t in f.texts)
    flat = [dict(c, curve=[[0, 0.1], [10, 0.9], [100, 0.9]]) for c in cells]
    assert fig.undecided_note(flat) is None
    assert fig.undecided_note(flat, budget="quick").startswith("Quick budget")
    assert "cannot decide" in fig.undecided_note(cells, budget="quick")
    full = fig.undecided_note(cells, budget="full")  # a full budget's censoring is a caveat, not "cannot decide"
    assert "still rising" in full and "cannot decide" not in full and "interval-censored" in full
    assert fig.budget_note("full") is None and "cannot decide" in fig.budget_note("quick")
    # the legend uses the one display name per arm
    labels = [t.get_text() for t in saved["t_curves"].axes[0].get_legend().get_texts()]
    assert labels == ["softmax", "x/√N"]


def test_stored_data_redraws_the_same_figures_with_the_same_note(tmp_path, monkeypatch):
    # through figdata (what sapa verify writes and sapa figures reads): same files, same note on their face
    from sapa.common import figdata

    cells = [_cell("copy1", 16, a, m, s) for a, m, s in (("softmax", 10, 1.0), ("x_sqrtN", 20, 0.5))]
    figdata.write(tmp_path / "d.json", fig.stored_data(cells, solved=True, budget="quick"), "t")
    data, stem = figdata.read(tmp_path / "d.json")
    assert data == {"cells": cells, "solved": True, "budget": "quick", "trends": {}} and stem == "t"
    saved = {}
    monkeypatch.setattr(fig.style, "save", lambda f, out, stem: saved.setdefault(stem, f) and [])
    fig.draw_stored(data, tmp_path, stem)
    assert set(saved) == {"t_curves", "t_exit", "t_solved"}
    assert all(any(t.get_text().startswith("Quick budget") for t in f.texts) for f in saved.values())


def test_slowdown_seeds_beyond_the_cap_stay_inside_the_panel(tmp_path, monkeypatch):
    """A seed beyond the cap is drawn as data (a stem to a ▲) so the axis grows to include it, labelled once."""
    saved = {}
    monkeypatch.setattr(fig.style, "save", lambda f, out, stem: saved.setdefault(stem, f) and [])
    trend = {"N": [16, 32], "intervals": [[[0.0, 0.2], [0.1, 0.3]], [[0.5, 0.7], [5.0, "inf"], [6.0, "inf"]]],
             "fitted": [0.1, 0.6], "delta": 0.5}
    fig._draw_slowdown({"copy1/x_sqrtN": trend}, tmp_path, "t", None)
    ax = saved["t_slowdown"].axes[0]
    tips = [ln for ln in ax.lines if ln.get_marker() == "^"]
    assert len(tips) == 2 and [float(ln.get_ydata()[0]) for ln in tips] == [5.0 + fig.CENSORED_STEM,
                                                                             6.0 + fig.CENSORED_STEM]
    assert ax.get_ylim()[1] >= 6.0 + fig.CENSORED_STEM
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels.count("beyond the cap (lower bound)") == 1


def test_a_finding_is_titled_as_such_and_never_shaded_as_a_failed_gate(tmp_path, monkeypatch):
    saved = {}
    monkeypatch.setattr(fig.style, "save", lambda f, out, stem: saved.setdefault(stem, f) and [])
    probe = [dict(_cell("copy1", 16, a, 10, 1.0), role="probe", decidable=False) for a in ("softmax", "x_sqrtN")]
    found = [dict(_cell("mqar", 32, a, 10, 1.0), role="finding", decidable=False) for a in ("softmax", "x_sqrtN")]
    fig.draw(probe + found, tmp_path, stem="t", solved=True)
    ax_copy, ax_mqar = saved["t_solved"].axes
    assert ax_copy.get_title() == "copy1" and len(ax_copy.patches) == 1  # the gate failed there: shaded
    assert ax_mqar.get_title() == "mqar (finding, not judged)" and len(ax_mqar.patches) == 0
