"""Tests for `figures/style.py`: a figure saved twice is the same bytes (no creation date in PNG or PDF)."""

from __future__ import annotations

import numpy as np
import pytest

from sapa.figures import style


def _draw(out, stem="f"):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    x = np.linspace(1.0, 100.0, 50)
    ax.loglog(x, x ** 0.5, label="√N")
    ax.legend()
    return style.save(fig, out, stem)


def test_two_renders_of_one_figure_are_byte_identical(tmp_path, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    a = _draw(tmp_path / "a")  # a creation date would be today's
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")  # matplotlib's date for reproducible builds: 2 January 1970
    b = _draw(tmp_path / "b")
    assert [p.suffix for p in a] == [".png", ".pdf"]
    for pa, pb in zip(a, b):
        assert pa.read_bytes() == pb.read_bytes(), pa.name
    assert b"/CreationDate" not in a[1].read_bytes()


def _busy(title: str = "t"):
    """A figure with what draw-time layout touches: log axes, a legend placed at draw ("best"), titles, a colour bar,
    mathtext, rotated tick labels, two panels."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(7, 3))
    x = np.linspace(1.0, 100.0, 40)
    a.loglog(x, x ** 0.5, label=r"$\sqrt{N}$")
    a.loglog(x, x ** 1.5, label="N^1.5")
    a.legend(loc="best")
    a.set_title(title)
    im = b.imshow(np.outer(np.arange(5), np.arange(6)), aspect="auto")
    fig.colorbar(im, ax=b, label="value")
    b.tick_params(axis="x", labelrotation=45)
    fig.suptitle("suptitle")
    fig.tight_layout()
    return fig


def test_saving_without_a_draw_first_gives_the_bytes_a_drawn_figure_gives(tmp_path):
    """save() measures the tight box without drawing first (a third of its time); a figure drawn first (the layout
    of every draw-time artist settled) saves to the same PNG and PDF bytes."""
    plain = style.save(_busy(), tmp_path / "plain", "f")
    fig = _busy()
    fig.draw_without_rendering()
    drawn = style.save(fig, tmp_path / "drawn", "f")
    for pa, pb in zip(plain, drawn):
        assert pa.read_bytes() == pb.read_bytes(), pa.name


def test_a_title_fixed_at_one_is_where_matplotlib_would_place_it_without_labels_on_top(tmp_path):
    """RC's axes.titley = 1 skips matplotlib's re-measuring of the ticks at each draw; over axes without tick labels on
    top the automatic placement (titley None) leaves the title there too: the same bytes."""
    import matplotlib.pyplot as plt

    assert style.RC["axes.titley"] == 1.0
    got = {}
    for name, y in (("fixed", 1.0), ("automatic", None)):
        with plt.rc_context({**style.RC, "axes.titley": y}):
            got[name] = style.save(_busy(), tmp_path / name, "f")
    for pa, pb in zip(got["fixed"], got["automatic"]):
        assert pa.read_bytes() == pb.read_bytes(), pa.name


@pytest.mark.parametrize("top", ["ticks", "label", "secondary"])
def test_a_title_over_labels_on_top_is_refused_until_it_is_lifted_clear(tmp_path, top):
    import matplotlib.pyplot as plt

    with plt.rc_context(style.RC):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [3, 4])
        if top == "ticks":
            ax.xaxis.tick_top()
        elif top == "label":
            ax.xaxis.set_label_position("top")
            ax.set_xlabel("an x label on top")
        else:
            ax.secondary_xaxis("top")
        ax.set_title("over the top")
        with pytest.raises(ValueError, match="figure f: the title 'over the top' overlaps the tick labels or x label"):
            style.save(fig, tmp_path, "f")
        ax.set_title("over the top", pad=30)  # lifted clear of them: saved
        assert [p.suffix for p in style.save(fig, tmp_path, "f")] == [".png", ".pdf"]
