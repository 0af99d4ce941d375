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
    sections = text.split('<details class="entry"')[1:]
    assert len(sections) == 4
    norm, cor, causal, powers = sections
    # each entry shows a figure of its own where the figures allow (cor4.3 cites only the shared one), once
    assert 'id="fig-own"' in norm and 'id="fig-shared"' in cor
    assert 'href="#fig-shared"' in norm and 'href="#fig-shared"' in causal  # linked everywhere else
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
    norm = next(s for s in sections if s.startswith("thm4.1-norm"))
    assert "](#fig-shared)" in norm and norm.count("![") == 1  # its own figure shown, the shared one linked
    assert "data:image" not in text


def test_claims_and_questions_are_in_separate_tables(ledger):
    entries, base = ledger
    text = report.html(entries, PROV, base, MC)
    tables = re.findall(r'<h2[^>]*>([^<]+)</h2>\s*<div class="verdicts"[^>]*>(.*?)(?=<h2|<p class="mc")', text,
                        re.DOTALL)
    assert [t for t, _ in tables] == ["Claims of the paper", "Questions only the reviews ask"]
    rows = [re.findall(r'<summary class="row"[^>]*><code>([^<]+)</code>', t) for _, t in tables]
    assert rows == [["thm4.1-norm", "cor4.3-linear-scaled"], ["causal-masking", "other-powers"]]
    md = report.markdown(entries, PROV, MC)
    c, q = md.index("## Claims of the paper"), md.index("## Questions only the reviews ask")
    assert c < md.index("[`cor4.3-linear-scaled`]", c) < q < md.index("[`causal-masking`]", q)


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
    assert text.count('<details class="entry"') == 4  # one folded row per entry
    assert p.tags.count("nav") == 1  # the links


def test_reader_order_and_the_monte_carlo_line(ledger):
    """report.md: title, provenance line, bottom line (with the Monte Carlo line), contents, verdict labels and terms
    BEFORE the first table that uses them, the tables, the review points, the entries, the provenance. report.html:
    title, what sapa checked, the labels, the verdict table whose rows hold the entries, the Monte Carlo line, then
    the bottom line, the review points, the terms and the provenance (each folded)."""
    entries, base = ledger
    line = report.mc_line(MC)
    assert "98.4% of 64 nominal-99%" in line
    text = report.markdown(entries, PROV, MC)
    order = [text.index("sapa report"), text.index("Budget"), text.index("Bottom line"), text.index(line),
             text.index("Contents"), text.index("Verdicts and terms"), text.index("**HOLDS_IN_REGIME** —"),
             text.index("| id | verdict |"), text.index("Questions only the reviews ask", text.index("| id | verdict |")),
             text.index("What the reviews asked", text.index("| id | verdict |")), text.index("\n## thm4.1-norm"),
             text.rindex("Provenance")]
    assert order == sorted(order)
    text = report.html(entries, PROV, base, MC)
    order = [text.index("sapa report"), text.index("sapa checked 2 claims of the paper and 2 questions"),
             text.index("Budget"), text.index('>HOLDS_IN_REGIME</abbr>'), text.index('<div class="verdicts"'),
             text.index('id="thm41-norm"'), text.index("Questions only the reviews ask", text.index('id="thm41-norm"')),
             text.index(line), text.index('id="bottom-line"'), text.index('id="review"'),
             text.index('id="verdicts-and-terms"'), text.index('id="provenance"')]
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
    assert powers == ["- [`other-powers`](#other-powers) **UNDETERMINED** — N\\* rises with p"]  # * escaped
    md = report.markdown(entries, PROV, MC)
    assert md.count(LONG_ANSWER) == 2  # once as causal-masking's answer, once as other-powers' corrected claim
    html = report.html(entries, PROV, base, MC)
    assert html.count(LONG_ANSWER) == 2
    assert report.first_sentence("x = 0.5 holds. Next one.") == "x = 0.5 holds."


def test_evidence_is_only_linked_never_dumped(ledger):
    """The raw evidence lives in ledger.json: the reports link each entry's evidence path and print none of it."""
    entries, base = ledger
    for text in (report.markdown(entries, PROV, MC), report.html(entries, PROV, base, MC)):
        assert "zzzz" not in text and "```json" not in text and "<pre" not in text
        assert text.count("claims[1].evidence") == 1 and "(big)" in text  # cor4.3's evidence: path and keys
        assert 'href="ledger.json"' in text or "](ledger.json)" in text
        assert '"budget"' not in text  # the provenance is a table, not JSON


def test_terminal_table_keeps_groups_and_mc_line(ledger):
    entries, _ = ledger
    out = report.table(entries, mc=MC)
    assert out.index("CLAIMS OF THE PAPER") < out.index("thm4.1-norm") < out.index("QUESTIONS ONLY THE REVIEWS ASK")
    assert out.rstrip().endswith(report.mc_line(MC))
    assert [t for t, _ in report.groups(entries)] == ["Claims of the paper", "Questions only the reviews ask"]


def test_templates_are_shipped_with_the_package():
    from importlib.resources import files

    tpl = files("sapa.report") / "templates"
    assert {"report.md.j2", "report.html.j2", "review.md.j2"} <= {p.name for p in tpl.iterdir()}


# --------------------------------------------------------------------------- a reviewer's report at full size

REAL_STEMS = ["softmax_jacobian_landscape_grid240", "worst_case_D6_N4-8-16-32_steps15_seed0",
              "norm_vs_n_D16_d16_rho0p5_trials768_N8-512", "norm_vs_n_D64_d16_rho0p5_trials768_N8-512",
              "jac_norm_vs_n_D16_d16_rho0p5_trials768_N8-512", "regime_map_p1-3_d64_rho0p5_N8-65536_D16-1024_grid241x49",
              "scale_direction_d64_D64_N8-1024_trials4_budgetquick", "causal_masking_modeliid_d64_D64_N256-1024",
              "overhead_d64_N128-1024_threads1", "overhead_d64_N128-1024_threads1_crossover",
              "training_vs_n_budgetquick_seeds2_seed0_acc", "training_vs_n_budgetquick_seeds2_seed0_norms",
              "training_vs_n_budgetquick_seeds2_seed0_lr", "real_heads_minilm_p1-3_N8-256_texts8_budgetquick",
              "real_heads_protocols_N8-256_texts8_budgetquick", "audit_compare_D64_d64_trials16_seed0"]
HEADLINE = "; ".join(f"clause {k} with numbers ‖φ‖/√N = {k}.5 (x/α* {k}, N* = 62)" for k in range(12))


@pytest.fixture(scope="module")
def full_ledger():
    """16 entries as large as the real ledger's largest (13 readings, 13 findings, 10 figures, 7 contract rows,
    a 400-character headline) with 40 000 characters of nested evidence each."""
    from sapa.claim_ids import ORDER

    entries = []
    for k, cid in enumerate(ORDER):
        evidence = {f"series_{j}": {"N": list(range(64)), "values": [0.5 + j / 1e3] * 64, "note": "e" * 300}
                    for j in range(40)}
        entries.append(Entry(
            id=cid, statement=f"statement of {cid}", verdict="HOLDS" if k % 3 else "UNDETERMINED", evidence=evidence,
            figures=[f"figures/{REAL_STEMS[(k + j) % len(REAL_STEMS)]}.{x}" for j in range(10) for x in ("png", "pdf")],
            headline=HEADLINE, kind="question" if 7 <= k <= 12 else "claim",
            readings=[_reading(f"reading {j} of {cid}", "FAILS" if j == 2 else "HOLDS") for j in range(13)],
            contract={f"field_{j}": "a contract sentence " * 5 for j in range(7)}, tested_statement="tested " * 40,
            findings=[f"finding {j}: " + "words " * 30 for j in range(13)], corrected_claim="Corrected. " * 20,
            answer="The paper is silent. An answer sentence. " * 5 if 7 <= k <= 12 else None))
    return entries


def test_report_md_stays_under_2000_lines_and_dumps_no_evidence(full_ledger):
    md = report.markdown(full_ledger, PROV, MC)
    assert len(md.splitlines()) < 2000
    assert "series_0" in md and '"values"' not in md and "eeeeeeeeee" not in md  # keys named, values in ledger.json
    assert "```" not in md


def test_table_of_contents_links_every_section(full_ledger):
    md = report.markdown(full_ledger, PROV, MC)
    toc = md[md.index("## Contents"):md.index("## Verdicts and terms")]
    for e in full_ledger:
        assert f"[`{e.id}`](#{report._anchor(e.id)})" in toc and f"\n## {e.id}\n" in md
    for title in ("bottom-line", "verdicts-and-terms", "claims-of-the-paper", "questions-only-the-reviews-ask",
                  "what-the-reviews-asked-what-sapa-found", "provenance"):
        assert f"](#{title})" in toc
    html = report.html(full_ledger, PROV, "/nonexistent", MC)
    nav = html[html.index('<nav class="links"'):html.index("</nav>")]
    ids = set(re.findall(r'id="([^"]+)"', html))
    assert set(re.findall(r'href="#([^"]+)"', nav)) >= {"bottom-line", "review", "verdicts-and-terms", "provenance"}
    assert set(re.findall(r'href="#([^"]+)"', html)) <= ids  # every link inside the page has its target
    rows = re.findall(r'<details class="entry" id="([^"]+)">', html)
    assert rows == [report._anchor(e.id) for _, g in report.groups(full_ledger) for e in g]  # the table's rows


def test_every_figure_has_a_caption_that_is_sentences(full_ledger):
    """A caption per figure kind (figures/captions.py), in full on every figure of the kind, with the figure's own
    setup in words; a later figure of a kind also says what differs from the first; never the file name."""
    md = report.markdown(full_ledger, PROV, MC)
    caps = re.findall(r"\*\*Figure (\d+): ([^*]+)\.\*\* (.+?) \*File: `([^`]+)`\*", md)
    assert len(caps) == len(REAL_STEMS)
    for number, title, caption, stem in caps:
        assert title != stem and stem not in caption
        assert caption[0].isupper() and caption.endswith(".") and len(caption.split(". ")) >= 2
        assert "same kind of figure" not in caption and re.search(r"\b(Look|look|Compare|compare|Read|read)\b", caption)
    d64 = next(c for _, _, c, s in caps if s.startswith("norm_vs_n_D64"))  # the second norm_vs_n figure
    assert "token width D = 64" in d64 and "token width D = 16" in d64  # its own setup, and the first one's
    html = report.html(full_ledger, PROV, "/nonexistent", MC)
    assert len(re.findall(r"<figcaption><b>Figure \d+: [^<]+\.</b> [A-Z]", html)) == len(REAL_STEMS)


def test_summary_table_cells_are_whole_clauses(full_ledger):
    from sapa.report.summary import clauses

    md = report.markdown(full_ledger, PROV, MC)
    rows = re.findall(r"^\| \[`[^`]+`\]\(#[^)]+\) \| \*\*[A-Z_]+\*\* \| (.+) \|$", md, re.M)
    assert len(rows) == len(full_ledger)
    whole = clauses(HEADLINE.replace("*", "\\*"))
    for cell in rows:
        kept = cell.split("; … (")[0].split("; ")
        assert kept == whole[:len(kept)]  # a prefix of whole clauses, never a cut inside one


OUTSIDE = ["javascript:alert(document.domain)//a.png", "/ABS/secret.png", "../../secret/secret.png", "../secret.png",
           "figures/../../secret.png", "figures/./ok.png", "figures//ok.png", "https://example.org/a.png",
           "data:image/png;base64,AAAA", "figures/%2e%2e/%2e%2e/secret.png", "figures/a.png?x=1", "figures/a.png#x",
           "figures\\..\\secret.png", "figures/link.png", "linkdir/ok.png", "figures/dir.png", ""]


def _results(tmp_path):
    """A results folder with a good PNG, a link out, a linked folder, a folder named .png, a huge and a non-PNG file."""
    from sapa.report import figure_plan as rf

    base = tmp_path / "results"
    (base / "figures" / "dir.png").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    secret = tmp_path / "secret" / "secret.png"
    secret.write_bytes(rf.PNG_MAGIC + b"secret")
    (tmp_path / "secret" / "ok.png").write_bytes(rf.PNG_MAGIC + b"secret")
    (base / "figures" / "link.png").symlink_to(secret)
    (base / "linkdir").symlink_to(tmp_path / "secret")
    with open(base / "figures" / "big.png", "wb") as fh:
        fh.write(rf.PNG_MAGIC)
        fh.truncate(rf.MAX_EMBED + 1)
    (base / "figures" / "notpng.png").write_bytes(b"#!/bin/sh\n")
    (base / "figures" / "ok.png").write_bytes(rf.PNG_MAGIC + b"fine")
    return base


@pytest.mark.parametrize("name", OUTSIDE)
def test_a_figure_path_outside_the_results_folder_is_never_referenced(tmp_path, name):
    """Issue 52.7: a ledger's figure list may have been edited. A path that is absolute, has '.', '..' or an empty
    segment, a URL scheme, a percent escape, a query, a fragment or a backslash, or that reaches outside the folder
    through a symbolic link (lstat: links never followed), is neither linked nor shown by report.html or report.md;
    it is named as text (in a code span) once."""
    from sapa.report import figure_plan as rf

    base = _results(tmp_path)
    name = name.replace("/ABS", str(tmp_path))
    e = Entry(id="x", statement="s", verdict="HOLDS", evidence={}, figures=[name, "figures/ok.png"])
    assert not rf.referable(base, name) and rf.referable(base, "figures/ok.png")
    [good] = rf.plan([e], base)
    assert good.png == "figures/ok.png" and rf.refused(e, base) == [name]
    html, md = report.html([e], PROV, base, MC), report.markdown([e], PROV, MC, base)
    links = re.findall(r'(?:href|src)="([^"]*)"', html)
    assert all(x.startswith(("#", "data:image/png;base64,")) or x in ("ledger.json", "report.md", "figures/ok.png")
               for x in links), links
    assert html.count('src="data:image/png;base64,') == 1  # ok.png only
    targets = re.findall(r"\]\(([^)]*)\)", md)
    assert all(x.startswith("#") or x in ("ledger.json", "figures/ok.png") for x in targets), targets
    if name:
        assert "not files inside the results folder" in html and "not files inside the results folder" in md
    assert "javascript:" not in " ".join(links + targets)


@pytest.mark.parametrize("name", ["figures/big.png", "figures/notpng.png"])
def test_html_embeds_only_regular_pngs_of_bounded_size(tmp_path, name):
    """Inside the folder but huge or not a PNG: referenced as a file, never embedded."""
    from sapa.report import figure_plan as rf

    base = _results(tmp_path)
    [bad] = rf.plan([Entry(id="x", statement="s", verdict="HOLDS", evidence={}, figures=[name])], base)
    [good] = rf.plan([Entry(id="x", statement="s", verdict="HOLDS", evidence={}, figures=["figures/ok.png"])], base)
    assert rf.png_data_uri(base, bad) is None
    assert rf.png_data_uri(base, good).startswith("data:image/png;base64,")


def test_a_link_planted_after_planning_is_not_followed(tmp_path):
    """The check runs when the PNG is read, not only when the plan is made: a link put in place of a planned file
    in between is refused."""
    from sapa.report import figure_plan as rf

    base = _results(tmp_path)
    [fig] = rf.plan([Entry(id="x", statement="s", verdict="HOLDS", evidence={}, figures=["figures/ok.png"])], base)
    (base / "figures" / "ok.png").unlink()
    (base / "figures" / "ok.png").symlink_to(tmp_path / "secret" / "secret.png")
    assert rf.png_data_uri(base, fig) is None
