"""Tests for `figures/training_vs_n.py` (Figure 13): the three figures draw from a synthetic stored study (diverged
members, an out-of-study α, a text task with three N) and the accuracy panel plots the ledger's own medians."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from sapa.empirics.training.study_analysis import accuracy_table  # noqa: E402
from sapa.figures import training_vs_n as F  # noqa: E402
from tests.empirics.training.study_fixture import make_study  # noqa: E402


def _study():
    return make_study(tasks={"digits": (16, 64), "text": (32, 64, 128)}, seeds=2, lrs=(1e-3, 1e-2),
                      gap=lambda t, a, N: -0.02 * np.log2(N / 16) if a == "x3" else 0.0,
                      diverge=lambda t, a, N, lr, r: a == "x" and lr == 1e-2 and N >= 64, seed=4)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """One ``F.draw`` of the synthetic study into a folder, as the command draws it: (study, paths, the texts of each
    figure by file stem, read as it was saved). Drawing the three figures costs ~2 CPU-s, saving them as much again."""
    st = _study()
    texts, save = {}, F.style.save

    def keep(fig, out, stem):
        texts[stem] = [t.get_text() for t in fig.texts]
        return save(fig, out, stem)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(F.style, "save", keep)
        paths = F.draw(st, tmp_path_factory.mktemp("training_vs_n"))
    return st, paths, texts


def test_draws_three_figures_as_png_and_pdf(drawn):
    st, paths, _ = drawn
    names = sorted(p.name for p in paths)
    stem = F.file_stem(st.config)
    assert names == sorted(f"{stem}_{k}.{e}" for k in ("acc", "norms", "lr") for e in ("png", "pdf"))
    for p in paths:
        assert p.stat().st_size > 1000
        assert p.read_bytes()[:4] in (b"\x89PNG", b"%PDF")


def test_accuracy_panel_plots_the_table_medians(tmp_path, monkeypatch):
    st = _study()
    saved = {}

    def keep(fig, out, stem):
        saved[stem] = fig
        return []

    monkeypatch.setattr(F.style, "save", keep)
    F._accuracy_figure(st, tmp_path, "s")
    fig = saved["s_acc"]
    tab = accuracy_table(st.runs)
    ax = fig.axes[1]  # the text panel (columns: digits, text)
    want = tab[(tab["task"] == "text") & (tab["arm"] == "x3")].sort_values("N")
    lines = [ln for ln in ax.get_lines() if list(ln.get_xdata()) == list(want["N"])]
    assert any(np.array_equal(ln.get_ydata(), want["median"].to_numpy()) for ln in lines)
    plt.close(fig)


def test_the_text_floor_is_drawn_when_given(tmp_path, monkeypatch):
    st = _study()
    saved = {}
    monkeypatch.setattr(F.style, "save", lambda fig, out, stem: saved.setdefault(stem, fig) and [])
    F._accuracy_figure(st, tmp_path, "s", floors={"text": {32: 0.27, 64: 0.26, 128: None}})
    fig = saved["s_acc"]
    text_ax, digits_ax = fig.axes[1], fig.axes[0]
    floor = [ln for ln in text_ax.get_lines() if ln.get_label() == "bigram predictor (floor)"]
    assert len(floor) == 1 and list(floor[0].get_xdata()) == [32, 64] and list(floor[0].get_ydata()) == [0.27, 0.26]
    assert not any("floor" in ln.get_label() for ln in digits_ax.get_lines())  # only the task given
    plt.close(fig)


def test_an_underpowered_study_says_on_every_figure_that_it_cannot_decide(drawn):
    st, _, saved = drawn  # 2 seeds per cell: underpowered
    stem = F.file_stem(st.config)
    assert set(saved) == {f"{stem}_acc", f"{stem}_norms", f"{stem}_lr"}
    for texts in saved.values():
        assert any("cannot decide" in t and "2 seeds per cell" in t for t in texts), texts


def test_a_full_powered_study_carries_no_cannot_decide_note():
    st = _study()
    st.config.update({"name": "full", "seeds": 5})
    assert F.undecided_note(st) is None
    st.config.update({"name": "quick"})
    assert "Quick budget" in F.undecided_note(st)
