"""Tests for `sapa/report/templates/report.html.j2` as a reviewer's page, without a browser.

What a reader sees with every ``<details>`` closed is estimated from the parsed HTML (the text of each visible block,
wrapped at a width narrower than the page's, and every visible image) and held to ten screens of 1 400 × 900 px;
the page of a quick-ledger-sized input stays under 3 MB with each figure embedded once; every figure has a caption
of its kind. The estimate errs high: on the report of a real quick ledger (19 entries, 27 figures) it gives 2 022 px
where headless Chromium at 1 400 px measures 1 576 px.
"""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser

import pytest

from sapa import report
from sapa.ledger import Entry
from tests.sapa.report.test_report import MC, PROV, full_ledger  # noqa: F401 — the fixture of a full-size ledger

SCREEN_PX = 900         # one screen of a 1 400 × 900 window
SCREENS = 10            # the page with everything folded
CHARS_PER_LINE = 100    # the page is ≤ 1 300 px wide at 15 px: ≥ 120 characters a line even in the table's last column
LINE_PX = 21            # 15 px × line-height 1.4
BLOCK_PX = 8            # margins and padding of one block
IMAGE_PX = 700          # a visible figure
BLOCKS = {"h1", "h2", "h3", "p", "li", "summary", "tr", "caption", "figcaption", "nav", "dt", "dd"}
VOID = {"img", "meta", "br", "hr", "input", "link", "source", "wbr"}


class Folded(HTMLParser):
    """The blocks of text and the images a reader sees when every ``<details>`` is closed (or when only the
    ``<details>`` whose id is in ``opened`` are open): in a closed one only its own ``<summary>`` shows."""

    def __init__(self, opened: frozenset = frozenset()):
        super().__init__(convert_charrefs=True)
        self.opened = opened
        self.stack: list[dict] = [{"tag": "#root", "visible": True, "closed": False, "text": []}]
        self.blocks: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        parent = self.stack[-1]
        visible = parent["visible"] and (not parent["closed"] or tag == "summary")
        if tag == "img":
            if visible:
                self.images.append(a.get("alt", ""))
            return
        if tag in VOID:
            return
        closed = tag == "details" and a.get("id") not in self.opened and "open" not in a
        self.stack.append({"tag": tag, "visible": visible, "closed": closed, "text": []})

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        while len(self.stack) > 1:
            frame = self.stack.pop()
            if frame["tag"] in BLOCKS and frame["visible"]:
                text = " ".join("".join(frame["text"]).split())
                if text:
                    self.blocks.append(text)
            elif frame["text"]:  # an inline element: its text belongs to the block around it
                self.stack[-1]["text"] += frame["text"]
            if frame["tag"] == tag:
                break

    def handle_data(self, data):
        top = self.stack[-1]
        if top["visible"] and not top["closed"] and top["tag"] not in ("style", "title", "head"):
            top["text"].append(data)

    def height(self) -> int:
        """Estimated height in px: each block's lines at CHARS_PER_LINE, its margins, and each image."""
        lines = sum(math.ceil(len(b) / CHARS_PER_LINE) for b in self.blocks)
        return lines * LINE_PX + len(self.blocks) * BLOCK_PX + len(self.images) * IMAGE_PX


def folded(text: str, opened: frozenset = frozenset()) -> Folded:
    p = Folded(opened)
    p.feed(text)
    p.close()
    return p


def test_the_estimate_sees_what_a_closed_details_hides():
    """Negative control of the parser: a closed <details> shows its summary only; an open one shows all."""
    page = ('<p>intro</p><details id="a"><summary>row</summary><p>hidden text</p><img alt="x">'
            '<details><summary>inner</summary><p>deeper</p></details></details>')
    assert folded(page).blocks == ["intro", "row"] and folded(page).images == []
    opened = folded(page, frozenset({"a"}))
    assert opened.blocks == ["intro", "row", "hidden text", "inner"] and opened.images == ["x"]


def test_the_folded_page_fits_ten_screens(full_ledger):  # noqa: F811
    """19 entries as large as the real ledger's largest: folded, the page is ≤ 10 screens and shows no figure."""
    text = report.html(full_ledger, PROV, "/nonexistent", MC)
    page = folded(text)
    assert page.height() <= SCREENS * SCREEN_PX, (page.height(), len(page.blocks))
    assert page.images == []
    rows = re.findall(r'<details class="entry" id="([^"]+)">', text)
    assert len(rows) == len(full_ledger)
    for e in full_ledger:  # every entry's row is visible: id, verdict, key numbers
        assert any(b.startswith(f"{e.id} {e.verdict}") for b in page.blocks), e.id


def test_the_first_screen_holds_what_was_checked_the_links_and_the_verdict_table(full_ledger):  # noqa: F811
    text = report.html(full_ledger, PROV, "/nonexistent", MC)
    page, used, first = folded(text), 0, []
    for b in page.blocks:
        used += math.ceil(len(b) / CHARS_PER_LINE) * LINE_PX + BLOCK_PX
        if used > SCREEN_PX:
            break
        first.append(b)
    assert first[1].startswith("sapa checked 13 claims of the paper and 6 questions only its reviews ask")
    assert any("ledger.json" in b and "Bottom line" in b and "Provenance" in b for b in first)  # the links
    assert sum(b.startswith(("id verdict key numbers",) + tuple(e.id + " " for e in full_ledger)) for b in first) >= 8


def test_an_opened_entry_shows_its_headline_reading_key_numbers_and_one_figure(tmp_path):
    """Opening a row shows the statement, the headline reading, the key numbers and at most one figure; every
    other figure, the readings, the robustness and the findings stay folded inside it."""
    from matplotlib.figure import Figure

    (tmp_path / "figures").mkdir()
    stems = ["norm_vs_n_D16_d16_rho0p5_trials768_N8-512", "jac_norm_vs_n_D16_d16_rho0p5_trials768_N8-512",
             "worst_case_D6_N4-8-16-32_steps15_seed0"]
    for s in stems:
        fig = Figure(figsize=(1, 1))
        fig.add_subplot().plot([0, 1], [1, 0])
        fig.savefig(tmp_path / "figures" / f"{s}.png")
    e = Entry(id="thm4.2-linear", statement="‖S‖_F grows like N", verdict="HOLDS", evidence={},
              figures=[f"figures/{s}.png" for s in stems], headline="exponent 1.000; constant 133×", kind="claim",
              readings=[{"name": "upper bound O(N)", "verdict": "HOLDS", "rule": "growth-upper", "why": "slope 1.000"},
                        {"name": "tight", "verdict": "FAILS", "rule": "growth-tight", "why": "below N_reg"}],
              findings=["finding one"], robustness={"stable": True, "varied": [{"condition": "seeds varied", "verdict": "HOLDS"}]})
    text = report.html([e], PROV, tmp_path, MC)
    assert folded(text).images == []
    opened = folded(text, frozenset({"thm42-linear"}))
    assert len(opened.images) == 1 and opened.images[0].startswith("Figure 1:")
    shown = " ".join(opened.blocks)
    for want in ("‖S‖_F grows like N", "Headline reading: upper bound O(N) — HOLDS. slope 1.000",
                 "exponent 1.000; constant 133×"):
        assert want in shown
    assert "below N_reg" not in shown and "finding one" not in shown and "seeds varied" not in shown  # folded inside
    assert "All 2 readings" in shown and "2 more figures" in shown
    assert text.count('src="data:image/png;base64,') == 3  # all three embedded, each once


def test_a_grid_of_readings_is_a_table():
    """The overhead's readings p × mask × pass (per factor) are a table of verdicts, not a list of labels."""
    readings = [{"name": f"p = {p}, mask {m}, {s}", "verdict": "HOLDS" if p == 1 else "FAILS", "rule": "timing-ratio",
                 "why": f"ratio {p}.{len(m)}", "key": ["factor", f, "p", p, "mask", m, "pass", s]}
                for f in (1.2, 2.0) for p in (1, 2, 3) for m in ("none", "causal") for s in ("fwd", "fwd+bwd")]
    e = Entry(id="overhead", statement="cost?", verdict="ANSWERED", evidence={}, kind="question",
              readings=readings, headline="h")
    text = report.html([e], PROV, "/nonexistent", MC)
    tables = re.findall(r'<table class="grid">(.*?)</table>', text, re.S)
    assert len(tables) == 2 and "Readings at factor = 1.2" in tables[0] and "factor = 2" in tables[1]
    rows = re.findall(r"<tr>(.*?)</tr>", tables[0])
    assert rows[0] == "<th>p</th><th>mask</th><th>pass fwd</th><th>pass fwd+bwd</th>"
    assert len(rows) == 1 + 6 and rows[1].startswith("<th>1</th><th>none</th><td class=\"v v-HOLDS\" title=\"ratio 1.4\"")
    assert rows[-1].count("v-FAILS") == 2
    md = report.markdown([e], PROV, MC)
    assert "| p | mask | pass fwd | pass fwd+bwd |\n|---|---|---|---|\n| 1 | none | HOLDS | HOLDS |" in md


QUICK_FIGURES = 27  # the figures of a quick ledger
MAX_BYTES = 3 * 2**20


def _draw_like_sapa(path, seed: int) -> None:
    """A figure as large as the quick ledger's (≈ 11 × 9 in at 150 dpi: four panels, five arms with markers and
    shading, legends, grids, text)."""
    import numpy as np
    from matplotlib.figure import Figure

    rng = np.random.default_rng(seed)
    fig = Figure(figsize=(11, 8.8), dpi=150)
    for j, ax in enumerate(fig.subplots(2, 2).ravel()):
        n = np.geomspace(4, 4096, 40)
        for c in range(5):
            y = n ** (0.2 + 0.1 * c) * (1 + 0.1 * rng.standard_normal(40))
            ax.loglog(n, y, marker="os^vD"[c], label=f"arm {c}")
            ax.fill_between(n, y * 0.8, y * 1.25, alpha=0.2)
        ax.set_title(f"panel {j}: ‖φ(S)‖_F against N")
        ax.legend(fontsize=7)
        ax.grid(True, alpha=0.3)
    fig.savefig(path)


def test_a_quick_sized_report_fits_3_mb(tmp_path, full_ledger):  # noqa: F811
    """The page of 19 full-size entries without figures, plus 27 figures each as large as one realistic figure once
    compacted and base64-encoded, is under 3 MB (the whole page with 27 drawn figures: the slow test below)."""
    import base64

    from sapa.report.figure_plan import compact_png

    _draw_like_sapa(tmp_path / "f.png", 0)
    raw = (tmp_path / "f.png").read_bytes()
    one = len(base64.b64encode(compact_png(raw)))
    page = len(report.html(full_ledger, PROV, "/nonexistent", MC).encode())
    assert len(raw) * QUICK_FIGURES > MAX_BYTES  # as drawn, they would not fit
    assert page + QUICK_FIGURES * one <= MAX_BYTES, (page, one)


@pytest.mark.slow
def test_a_quick_sized_report_is_under_3_mb_with_each_figure_embedded_once(tmp_path):
    """27 figures as large as the quick ledger's, compacted: the page stays under 3 MB and embeds each once."""
    import shutil

    (tmp_path / "figures").mkdir()
    drawn = []
    for k in range(3):  # three distinct drawings, each copied under nine stems (drawing 27 costs a minute)
        path = tmp_path / "figures" / f"drawn{k}.png"
        _draw_like_sapa(path, k)
        drawn.append(path)
    stems = [f"norm_vs_n_D{k}_d16_N8-512" for k in range(QUICK_FIGURES)]
    for k, s in enumerate(stems):
        shutil.copy(drawn[k % 3], tmp_path / "figures" / f"{s}.png")
    assert sum(p.stat().st_size for p in drawn) * 9 > MAX_BYTES  # raw, they would not fit
    entries = [Entry(id=f"e{j}", statement="s", verdict="HOLDS", evidence={}, headline="h", kind="claim",
                     figures=[f"figures/{s}.png" for s in stems[j * 3:(j + 1) * 3]] + ["figures/" + stems[0] + ".png"])
               for j in range(9)]
    text = report.html(entries, PROV, tmp_path, MC)
    assert len(text.encode()) <= MAX_BYTES, len(text.encode())
    uris = re.findall(r'src="(data:image/png;base64,[^"]+)"', text)
    assert len(uris) == QUICK_FIGURES and all(text.count(f'id="fig-{s.lower()}"') == 1 for s in stems)


def test_every_figure_kind_a_ledger_can_produce_has_a_real_caption():
    """Every stem a ledger can list (each kind of figures/catalogue.py with every suffix its module saves, and every
    stem a figure module names) gets its kind's caption in the report; the placeholder of an unknown kind never
    appears for one of them."""
    from sapa.figures.catalogue import FIGURES as KINDS
    from sapa.report.figure_plan import UNKNOWN_KIND, plan
    from tests.figures.test_captions import _module_suffixes, _saved_stems

    stems = sorted(_saved_stems() | {p + "_cfg1" + s for f in KINDS for p in f.stems for s in _module_suffixes(f.module)})
    e = Entry(id="e", statement="s", verdict="HOLDS", evidence={}, figures=[f"figures/{s}.png" for s in stems])
    figs = plan([e])
    assert len(figs) == len(stems) >= 25
    for f in figs:
        assert UNKNOWN_KIND not in f.caption and f.title != f.name and re.search(r"\b(Look|look|Compare|compare|Read|read)\b",
                                                                               f.caption), f.name
    text = report.html([e], PROV, "/nonexistent", MC)
    assert "No caption is registered" not in text and UNKNOWN_KIND not in text
    foreign = plan([Entry(id="e", statement="s", verdict="HOLDS", evidence={}, figures=["figures/not_sapas.png"])])
    assert foreign[0].caption.startswith(UNKNOWN_KIND)  # negative control: a stem of no known kind


def test_every_entry_shows_a_figure_of_its_own_where_the_figures_allow():
    """The four growth entries cite the same five figures (two of them also the regime map): each shows one of its
    own, each figure is shown once, and an entry citing only figures others need links to them."""
    from sapa.report.figure_plan import plan

    growth = ["norm_vs_n_D16", "norm_vs_n_D64", "jac_norm_vs_n_D16", "jac_norm_vs_n_D64", "worst_case_D6"]
    cites = {"thm4.2-linear": growth, "cor4.3-linear-scaled": growth + ["regime_map_p1-3"], "thm4.4-cubic": growth,
             "cor4.5-cubic-scaled": growth + ["regime_map_p1-3"], "other-powers": ["regime_map_p1-3"],
             "overhead": ["norm_vs_n_D16"]}
    entries = [Entry(id=i, statement="s", verdict="HOLDS", evidence={}, figures=[f"figures/{f}.png" for f in fs])
               for i, fs in cites.items()]
    figs = plan(entries)
    owners = [f.owner for f in figs]
    assert len(figs) == 6 and sorted(owners) == sorted(cites)  # six figures for six entries: one each
    assert {f.name: f.owner for f in figs}["norm_vs_n_D16"] == "overhead"  # the first citer gave it up
    assert all(f.owner in f.cited_by for f in figs)
    assert {f.name: f.owner for f in figs}["regime_map_p1-3"] == "other-powers"  # its only figure


def test_a_partial_ledger_says_so_above_everything_else(full_ledger):  # noqa: F811
    """The notice slot under the title carries the partial-ledger line (sapa.report.partial_line) before the table."""
    prov = {**PROV, "partial": {"not_run": ["overhead", "alibi-scaling"]}}
    text = report.html(full_ledger, prov, "/nonexistent", MC)
    notice = text.index('<p class="notice"')
    assert text.index("<h1>") < notice < text.index("sapa checked") < text.index('<div class="verdicts"')
    assert "Partial ledger: 2 of the" in folded(text).blocks[1]
    assert '<p class="notice"' not in report.html(full_ledger, PROV, "/nonexistent", MC)
