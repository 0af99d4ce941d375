"""Tests for `figures/dose_response.py`: accuracy against norm over the doses, the reviewers' pair ringed."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from sapa.figures import dose_response as F  # noqa: E402


def _rows():
    out = []
    for fam, doses in (("x/c", (1.0, 4.0, 16.0)), ("x³/c", (1.0, 4.0, 16.0)), ("softmax(S/τ)", (0.5, 1.0, 2.0))):
        for k, c in enumerate(doses):
            out.append({"family": fam, "dose": c, "test_acc": 0.9 - 0.01 * k, "log10_attn_fro": 1.0 - 0.3 * k,
                        "log10_jac_x_fro": 1.5 - 0.3 * k})
    return out


def test_draws_one_panel_per_norm_and_task_with_the_pair_ringed(tmp_path, monkeypatch):
    saved = {}
    monkeypatch.setattr(F.style, "save", lambda fig, out, stem: saved.setdefault(stem, fig) and [])
    F.draw({"digits": _rows(), "text": _rows()}, tmp_path, "d")
    fig = saved["d"]
    assert len(fig.axes) == 4  # (2 norms) × (2 tasks)
    ringed = [ln for ax in fig.axes for ln in ax.lines if ln.get_marker() == "o" and ln.get_markerfacecolor() == "none"]
    assert len(ringed) == 2 * 4  # x³/1 and x/16 on each of the four panels
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["digits: the doses c (τ) labelled", "text: the doses c (τ) labelled"] * 2


def test_writes_png_and_pdf_and_nothing_without_rows(tmp_path):
    paths = F.draw({"digits": _rows()}, tmp_path, "d")
    assert sorted(p.suffix for p in paths) == [".pdf", ".png"] and all(p.stat().st_size > 1000 for p in paths)
    assert F.draw({}, tmp_path) == []


def test_one_curve_per_family_and_lr_styled_by_lr_with_one_shared_legend(tmp_path, monkeypatch):
    saved = {}
    monkeypatch.setattr(F.style, "save", lambda fig, out, stem: saved.setdefault(stem, fig) and [])
    rows = [{**r, "lr": lr} for lr in (1e-3, 1e-2) for r in _rows()]
    F.draw({"digits": rows, "text": [r for r in rows if r["lr"] == 1e-2]}, tmp_path, "d")
    fig = saved["d"]
    curves = [ln for ln in fig.axes[0].lines if ln.get_label().startswith(("x/c", "x³/c", "softmax"))]
    assert sorted(ln.get_label() for ln in curves) == sorted(f"{f}, lr {lr:g}" for f in F.STYLE for lr in (1e-3, 1e-2))
    style = {ln.get_label(): ln.get_linestyle() for ax in fig.axes for ln in ax.lines if ", lr " in ln.get_label()}
    assert style["x/c, lr 0.001"] == "-" and style["x/c, lr 0.01"] == "--"  # one style per lr value, on every panel
    text_x = [ln for ln in fig.axes[1].lines if ln.get_label() == "x/c, lr 0.01"]
    assert len(text_x) == 1 and text_x[0].get_linestyle() == "--"
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == 6  # 3 families × 2 lrs, once
    labelled = [t.get_text() for t in fig.axes[1].texts]
    assert labelled.count("4") == 2  # text: doses labelled on each family's smallest lr there (0.01)


def test_the_second_looks_doses_are_hollow_and_off_the_curve(tmp_path, monkeypatch):
    """Doses marked look 2 are drawn as unconnected hollow markers of their family's colour, unlabelled; the curve
    runs through the grid's doses only, and the legend says what hollow means."""
    saved = {}
    monkeypatch.setattr(F.style, "save", lambda fig, out, stem: saved.setdefault(stem, fig) and [])
    extra = [{"family": "x³/c", "dose": c, "test_acc": 0.8, "log10_attn_fro": 0.2, "log10_jac_x_fro": 0.7, "look": 2}
             for c in (2.0, 8.0)]
    F.draw({"digits": _rows() + extra}, tmp_path, "d")
    ax = saved["d"].axes[0]
    hollow = [ln for ln in ax.lines if ln.get_marker() == "s" and ln.get_markerfacecolor() == "none"]
    assert len(hollow) == 1 and hollow[0].get_linestyle() == "None" and list(hollow[0].get_xdata()) == [0.2, 0.2]
    curve = next(ln for ln in ax.lines if ln.get_label() == "x³/c")
    assert list(curve.get_xdata()) == [1.0, 0.7, 0.4]  # the grid's three doses, in the order of c
    assert "8" not in [t.get_text() for t in ax.texts] and "hollow" in saved["d"].legends[0].get_title().get_text()
