"""report.md / report.html from templates: each figure once and linked, claims and questions apart, escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from sapa import report
from sapa.ledger import Entry

CAL = {"false_fails_rate": 0.004, "false_holds_rate": 0.0123, "power": 0.97, "trials": 400}
LONG_ANSWER = ("The paper is silent on this point. " + "A long corrected paragraph that must appear once. " * 8).strip()
PROV = {"sapa_version": "0.1.0", "git_commit": "abc123", "device": "cpu", "dtype": "float64",
        "budget": {"name": "quick"}, "seed": 0, "started_utc": "2026-01-01T00:00:00Z", "wall_seconds": 1.5}
MC = {"first_pass_coverage": 0.984, "series": 64, "nominal": 0.99}


def _reading(name, verdict="HOLDS", rule="bound", cal=CAL):
    return {"name": name, "statement": name, "verdict": verdict, "rule": rule, "why": f"why {name}",
            "calibration": cal}


@pytest.fixture
def ledger(tmp_path):
    """Four entries (2 claims, 2 questions) sharing figures; PNG + PDF files written with matplotlib."""
    from matplotlib.figure import Figure

    (tmp_path / "figures").mkdir()
    for stem in ("shared", "own", "qfig"):
        fig = Figure(figsize=(1, 1))
        fig.add_subplot().plot([0, 1], [1, 0])
        for ext in ("png", "pdf"):
            fig.savefig(tmp_path / "figures" / f"{stem}.{ext}")
    both = ["figures/shared.png", "figures/shared.pdf"]
    entries = [
        Entry(id="thm4.1-norm", statement="a <script>alert(1)</script> claim", verdict="HOLDS", evidence={"x": 1},
              figures=both + ["figures/own.png", "figures/own.pdf"], headline="max ratio 1.0", kind="claim",
              readings=[_reading("for all S"), _reading("w.r.t. X", "FAILS", "growth-tight",
                                                        {"false_fails_rate": 0.0, "false_holds_rate": 0.05,
                                                         "power": 0.5})],
              contract={"object": "softmax", "n_range": "every N"}, tested_statement="tested <b>bold</b>",
              findings=["finding one"], corrected_claim="corrected sharp claim"),
        Entry(id="cor4.3-linear-scaled", statement="grows like √N", verdict="HOLDS_IN_REGIME",
              evidence={"big": "z" * 30_000}, figures=list(both), headline="exponent 0.383 (tied)", kind="claim",
              readings=[_reading("upper bound", "HOLDS_IN_REGIME", "growth-upper-exact", None)]),
        Entry(id="causal-masking", statement="what about masks?", verdict="ANSWERED", evidence={},
              figures=["figures/qfig.png", "figures/qfig.pdf"] + both, headline="", kind="question",
              answer=LONG_ANSWER, readings=[_reading("row profile", "FAILS", "uniform-profile")]),
        Entry(id="other-powers", statement="why only x and x³?", verdict="UNDETERMINED", evidence={},
              figures=["figures/missing.png"], headline="N* rises with p", kind="question",
              corrected_claim=LONG_ANSWER),
    ]
    return entries, tmp_path


def test_html_embeds_each_png_once_and_every_citing_entry_links_to_it(ledger):
    entries, base = ledger
    text = report.html(entries, PROV, base, MC)
    assert text.count("data:image/png;base64") == 3  # shared, own, qfig (missing.png is not on disk)
    assert ".pdf;base64" not in text and "data:application/pdf" not in text
    anchors = {m: text.count(f'id="{m}"') for m in ("fig-shared", "fig-own", "fig-qfig", "fig-missing")}
    assert anchors == {"fig-shared": 1, "fig-own": 1, "fig-qfig": 1, "fig-missing": 1}
    sections = text.split('<section class="entry">')[1:]
    assert len(sections) == 4
    norm, cor, causal, powers = sections
    assert 'id="fig-shared"' in norm and 'id="fig-own"' in norm  # shown where first cited
    assert 'href="#fig-shared"' in cor and 'href="#fig-shared"' in causal  # linked everywhere else
    assert 'id="fig-qfig"' in causal and "data:image/png" in causal
    assert 'href="figures/shared.pdf"' in norm and 'href="figures/shared.pdf"' in cor  # PDFs as links
    assert 'id="fig-missing"' in powers and "PNG not found" in powers


def test_markdown_links_png_paths_and_never_shows_a_pdf_as_an_image(ledger):
    entries, _ = ledger
    text = report.markdown(entries, PROV, MC)
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert sorted(images) == ["figures/missing.png", "figures/own.png", "figures/qfig.png", "figures/shared.png"]
    assert all(not p.endswith(".pdf") for p in images)
    assert "[PDF](figures/shared.pdf)" in text
    sections = text.split("\n## ")
    cor = next(s for s in sections if s.startswith("cor4.3-linear-scaled"))
    assert "](#fig-shared)" in cor and "![" not in cor  # linked, not shown again
    assert "data:image" not in text


def test_claims_and_questions_are_in_separate_tables(ledger):
    entries, base = ledger
    text = report.html(entries, PROV, base, MC)
    tables = re.findall(r'<h2>([^<]+)</h2>\s*<table class="verdicts">(.*?)</table>', text, re.DOTALL)
    assert [t for t, _ in tables] == ["Claims of the paper", "Questions only the reviews ask"]
    (_, claims), (_, questions) = tables
    assert "thm4.1-norm" in claims and "cor4.3-linear-scaled" in claims and "causal-masking" not in claims
    assert "causal-masking" in questions and "other-powers" in questions and "thm4.1-norm" not in questions
    md = report.markdown(entries, PROV, MC)
    c, q = md.index("## Claims of the paper"), md.index("## Questions only the reviews ask")
    assert c < md.index("[`cor4.3-linear-scaled`]") < q < md.index("[`causal-masking`]")


def test_every_reading_appears_with_its_rule_and_calibration(ledger):
    entries, base = ledger
    for text in (report.markdown(entries, PROV, MC), report.html(entries, PROV, base, MC)):
        for e in entries:
            for r in e.readings:
                assert r["name"] in text and f"why {r['name']}" in text and r["rule"] in text
        assert "0.4% / 1.2% / 97%" in text and "0.0% / 5.0% / 50%" in text and "not calibrated" in text
        assert "false FAILS / false HOLDS / power" in text


def test_html_parses_and_escapes_entry_text(ledger):
    entries, base = ledger
    text = report.html(entries, PROV, base, MC)

    class Tags(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags = []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)

    p = Tags()
    p.feed(text)
    p.close()
    assert "script" not in p.tags and "<script" not in text.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "tested &lt;b&gt;bold&lt;/b&gt;" in text
    assert p.tags.count("section") == 4 and p.tags.count("details") == 5  # 4 evidence + provenance


def test_reader_order_and_the_monte_carlo_line(ledger):
    entries, base = ledger
    for text, entry_mark in ((report.markdown(entries, PROV, MC), "\n## thm4.1-norm"),
                             (report.html(entries, PROV, base, MC), 'id="thm41-norm"')):
        line = report.mc_line(MC)
        assert "98.4% of 64 nominal-99%" in line
        order = [text.index("sapa report"), text.index("Budget"), text.index("Claims of the paper"),
                 text.index("Questions only the reviews ask"), text.index(line),
                 text.index("What the reviews asked"), text.index(entry_mark), text.index("Provenance")]
        assert order == sorted(order)
    assert report.mc_line({"first_pass_coverage": None}).startswith("Monte Carlo: no interval")
    assert report.mc_line(MC) not in report.markdown(entries, PROV, None)


def test_review_section_gives_one_line_per_entry_and_never_repeats_paragraphs(ledger):
    entries, base = ledger
    lines = report.review_section(entries)
    assert lines[0] == "## What the reviews asked, what sapa found"
    causal = [x for x in lines if "`causal-masking`" in x]
    assert causal == ["- [`causal-masking`](#causal-masking) **ANSWERED** — The paper is silent on this point."]
    powers = [x for x in lines if "`other-powers`" in x]
    assert powers == ["- [`other-powers`](#other-powers) **UNDETERMINED** — N* rises with p"]
    md = report.markdown(entries, PROV, MC)
    assert md.count(LONG_ANSWER) == 2  # once as causal-masking's answer, once as other-powers' corrected claim
    html = report.html(entries, PROV, base, MC)
    assert html.count(LONG_ANSWER) == 2
    assert report.first_sentence("x = 0.5 holds. Next one.") == "x = 0.5 holds."


def test_evidence_is_collapsed_and_truncated(ledger):
    entries, base = ledger
    md = report.markdown(entries, PROV, MC)
    assert md.count("<details><summary>evidence") == 4
    assert "z" * 20_000 not in md and "z" * 19_000 in md and "truncated: the full evidence is in ledger.json" in md
    html = report.html(entries, PROV, base, MC)
    assert "z" * 20_000 not in html and html.count("truncated: the full evidence") == 1


def test_terminal_table_keeps_groups_and_mc_line(ledger):
    entries, _ = ledger
    out = report.table(entries, mc=MC)
    assert out.index("CLAIMS OF THE PAPER") < out.index("thm4.1-norm") < out.index("QUESTIONS ONLY THE REVIEWS ASK")
    assert out.rstrip().endswith(report.mc_line(MC))
    assert [t for t, _ in report.groups(entries)] == ["Claims of the paper", "Questions only the reviews ask"]


def test_templates_are_shipped_with_the_package():
    from importlib.resources import files

    tpl = files("sapa") / "templates"
    assert {"report.md.j2", "report.html.j2", "review.md.j2"} <= {p.name for p in tpl.iterdir()}
