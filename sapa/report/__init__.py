"""Render the claims ledger: a terminal table, and ``report.md`` / ``report.html`` from Jinja2 templates.

Reader order of both reports: title and provenance line; the bottom line in words
(:mod:`sapa.report.summary`); a table of contents; the verdict labels and terms (:mod:`sapa.glossary`) before
any table uses them; the verdict tables (claims and questions apart, key numbers cut only between whole
clauses); the Monte Carlo first-pass coverage; what each review point asked and which entries answer it; then
one section per entry with its readings (verdict, why, rule) and its figures, each captioned by
:mod:`sapa.figures.captions` and shown once (:mod:`sapa.report.figure_plan`). The raw evidence is in ``ledger.json``
only: each section links to it. Templates live in ``sapa/report/templates/``.
"""

from __future__ import annotations

import re
import textwrap
from functools import lru_cache
from pathlib import Path

from sapa.report import figure_plan
from sapa.report.grid import grids
from sapa.glossary import TERMS, VERDICTS
from sapa.ledger import Entry
from sapa.report.summary import bottom_line, clauses, sentences, short_numbers

ROW_CHARS = 110  # key numbers in a row of report.html's verdict table: about one line at 1 400 px
_LEGEND = VERDICTS  # = sapa.labels.DEFINITIONS: one meaning per label, the same sentences as docs/verdicts.md
_GROUPS = (("claim", "Claims of the paper"), ("question", "Questions only the reviews ask"))


def groups(entries: list[Entry]) -> list[tuple[str, list[Entry]]]:
    """[(title, entries of that kind)] for claims, then questions (empty groups left out)."""
    return [(title, [e for e in entries if e.kind == kind]) for kind, title in _GROUPS
            if any(e.kind == kind for e in entries)]


def table(entries: list[Entry], width: int = 110, mc: dict | None = None) -> str:
    """Fixed-width text table, claims and questions apart: id, verdict, key numbers (wrapped)."""
    id_w = max(len(e.id) for e in entries)
    v_w = max(len(e.verdict) for e in entries)
    rest = max(width - id_w - v_w - 6, 30)
    lines = []
    for title, group in groups(entries):
        lines += ["" if lines else None, title.upper(), f"{'id':<{id_w}}  {'verdict':<{v_w}}  key numbers",
                  "-" * min(width, id_w + v_w + 4 + rest)]
        for e in group:
            flag = unstable(e).strip()
            wrapped = wrap_clauses((flag + "; " if flag else "") + (e.headline or "-"), rest)
            lines.append(f"{e.id:<{id_w}}  {e.verdict:<{v_w}}  {wrapped[0]}")
            lines += [f"{'':<{id_w}}  {'':<{v_w}}  {w}" for w in wrapped[1:]]
    if mc:
        lines += ["", mc_line(mc)]
    return "\n".join(x for x in lines if x is not None)


def unstable(e: Entry) -> str:
    """' (unstable: flips under …)' when the entry's robustness says its verdict flips under a varied condition."""
    r = e.robustness or {}
    if r.get("stable") is False and r.get("flips"):
        return " (unstable: flips under " + "; ".join(r["flips"]) + ")"
    if r.get("stable") is False:
        return " (stability not shown)"
    return ""


def conditions(e: Entry) -> list[str]:
    """One line each: the logit convention, falsifiability (with the control's verdict), robustness, regime."""
    out = []
    c = e.contract or {}
    if c.get("logit_scale"):
        out.append(f"Logits: {c['logit_scale']}" + (f" — {c['logit_note']}" if c.get("logit_note") else ""))
    f = e.falsifiability or {}
    ctrl = f.get("negative_control")
    if f.get("kind") == "by_construction":
        out.append(f"By construction: {f.get('why', '')}" + (f" (pipeline control: {ctrl['statement']} → "
                                                              f"{ctrl['verdict']})" if ctrl else ""))
    elif f.get("kind") == "could_fail" and ctrl:
        out.append(f"Could fail; negative control: {ctrl['statement']} → {ctrl['verdict']}"
                   + ("" if ctrl.get("control_ok") else " (the control did not come out FAILS)"))
    r = e.robustness or {}
    if r.get("varied"):
        rows = [x for x in r["varied"] if x.get("reading", "headline") == "headline"]
        out.append(("Stable" if r.get("stable") else "Not stable") + " under: " + "; ".join(
            f"{x['condition']} → {x['verdict'] if x['verdict'] is not None else x['note']}" for x in rows)
                   + (f". {r['distance']}" if r.get("distance") else ""))
    if e.regime and e.regime.get("boundary"):
        out.append(f"Regime: {e.regime['boundary']}")
    return out


_KEEP = re.compile(r" (?=[/=≈≤≥<>×])|(?<=[/=≈≤≥<>]) ")  # spaces around operators: never a line break there


def wrap_clauses(text: str, width: int) -> list[str]:
    """``text`` wrapped to ``width``: each ``; ``-clause starts a line, and no break falls inside a hyphenated word
    or around an operator ("N^1 / N^1", "N* = 62" stay whole)."""
    out = []
    parts = clauses(" ".join(text.split())) or ["-"]
    for k, c in enumerate(parts):
        glued = _KEEP.sub("\u00a0", c + (";" if k < len(parts) - 1 else ""))
        out += [w.replace("\u00a0", " ") for w in textwrap.wrap(glued, width, break_on_hyphens=False,
                                                                 break_long_words=False)]
    return out or ["-"]


def mc_line(mc: dict) -> str:
    """One line: first-pass coverage of the ledger's Monte Carlo intervals against exact values."""
    cov = mc.get("first_pass_coverage")
    if cov is None:
        return "Monte Carlo: no interval was compared with an exact value in this run"
    return (f"Monte Carlo first-pass coverage: {cov:.1%} of {mc.get('series', 0)} nominal-{mc.get('nominal', 0.99):.0%} "
            f"intervals contain the exact value (no reruns)")


def markdown(entries: list[Entry], prov: dict, mc: dict | None = None, base_dir=None) -> str:
    """The ``report.md`` text (figures as relative PNG paths, PDFs linked as files, never as images; only paths
    inside the results folder ``base_dir``, :func:`figure_plan.referable`)."""
    return _env().get_template("report.md.j2").render(_context(entries, prov, mc, base_dir))


def html(entries: list[Entry], prov: dict, base_dir, mc: dict | None = None) -> str:
    """A self-contained ``report.html``: each PNG under ``base_dir`` embedded once (base64, compacted), linked
    elsewhere; every entry folded (``<details>``) under its row of the verdict table."""
    ctx = _context(entries, prov, mc, base_dir)
    ctx["data_uri"] = {f.anchor: figure_plan.png_data_uri(base_dir, f) for f in ctx["figures"]}
    return _env().get_template("report.html.j2").render(ctx)


# The review points of ../shared/seeds/000_*.txt and the ledger entries that answer them.
REVIEW_POINTS = [
    ("1.1 — the factor 2 in Eq. 4.2 (a one-hot row gives 1 − 0 = 2)", ["thm4.1-jacobian"]),
    ("1.2 — A = XW_Q and B = XW_K share X, so they are not independent (Cov(A, B) = QKᵀ)",
     ["thm4.2-linear", "thm4.4-cubic", "real-model-regime"]),
    ("1.3 — the final terms mix N and D: √N growth only if N ≫ D (ViT-Base: D = 768, N = 196)",
     ["cor4.3-linear-scaled", "cor4.5-cubic-scaled"]),
    ("2.1 — why should scaled polynomials behave like softmax?",
     ["cor4.3-linear-scaled", "fig1-scale-direction", "scale-keeps-training-stable", "mechanism-across-n"]),
    ("2.2 — Figure 1: should the scale decrease or increase as N decreases?", ["fig1-scale-direction"]),
    ("4 — causal masking and dynamic sequence lengths", ["causal-masking"]),
    ("why only x and x³?", ["other-powers"]),
    ("computational overhead of polynomial attention", ["overhead"]),
    ("x³/1 has lower norms than x/16 yet trains worse: does the norm predict success?", ["norm-vs-accuracy"]),
]


def review_points(entries: list[Entry]) -> list[tuple[str, list[dict]]]:
    """[(review point, [{id, verdict, line}])]: the entries answering each point, each with ONE line.

    The line is the entry's headline (its key numbers), or the first sentence of its answer when it has no
    headline; the long answers and corrected claims stay in the entry's own section.
    """
    by_id = {e.id: e for e in entries}
    out = []
    for question, ids in REVIEW_POINTS:
        found = [by_id[i] for i in ids if i in by_id]
        if found:
            out.append((question, [{"id": e.id, "verdict": e.verdict, "line": _one_line(e)} for e in found]))
    return out


def _one_line(e: Entry) -> str:
    """The entry's key numbers in whole clauses ('; …' when some are left out), or its answer's first sentence."""
    if not e.headline:
        return first_sentence(e.answer or e.corrected_claim or "")
    text, more = short_numbers(e.headline)
    return text + ("; …" if more else "")


def review_section(entries: list[Entry]) -> list[str]:
    """Markdown lines: each review point, then the verdict and one line of every entry answering it."""
    return _env().get_template("review.md.j2").render(points=review_points(entries)).splitlines()


def first_sentence(text: str) -> str:
    """Text up to its first sentence end ('. ', '! ', '? ' before a capital or bracket), on one line."""
    ss = sentences(text)
    return ss[0] if ss else ""


def partial_line(not_run: list[str]) -> str:
    """One line: the ledger is partial — which entries of the registry never ran, and how to complete it."""
    from sapa.claim_ids import ORDER

    return (f"Partial ledger: {len(not_run)} of the {len(ORDER)} entries never ran ({', '.join(not_run)}); "
            f"`sapa verify --only {' '.join(not_run)}` with the same --out, budget and seed completes it.")


def _context(entries: list[Entry], prov: dict, mc: dict | None, base_dir=None) -> dict:
    """What both templates render: provenance, bottom line, contents, glossary, groups, MC line, review points,
    entry sections (no evidence: it is in ledger.json)."""
    figures = figure_plan.plan(entries, base_dir)
    partial = partial_line(prov["partial"]["not_run"]) if prov.get("partial") else None
    return {
        "notices": [partial] if partial else [],  # report.html: one line each, above everything else
        "checked": checked(entries),
        "prov": _prov_view(prov),
        "prov_rows": _prov_rows(prov),
        "partial": partial,
        "bottom": bottom_line(entries, mc),
        "groups": groups(entries),
        "short": {e.id: short_numbers(e.headline) for e in entries},
        "row_numbers": {e.id: short_numbers(e.headline, ROW_CHARS) for e in entries},
        "mc_line": mc_line(mc) if mc else None,
        "legend": _LEGEND,
        "terms": TERMS,
        "points": review_points(entries),
        "figures": figures,
        "sections": {e.id: _section(e, figures, k, base_dir) for k, e in enumerate(entries)},
    }


def checked(entries: list[Entry]) -> str:
    """One sentence: how many claims and questions this ledger judged, and how many got each verdict."""
    n = {kind: sum(e.kind == kind for e in entries) for kind, _ in _GROUPS}
    counts = {}
    for e in entries:
        counts[e.verdict] = counts.get(e.verdict, 0) + 1
    what = " and ".join(x for x in (
        f"{n['claim']} claim{'s' if n['claim'] != 1 else ''} of the paper" if n["claim"] else "",
        f"{n['question']} question{'s' if n['question'] != 1 else ''} only its reviews ask" if n["question"] else "")
        if x)
    return (f"sapa checked {what or 'nothing'}, each with its own computation and one verdict from its headline "
            "reading: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: _order(kv[0])))
            + ".")


def _order(verdict: str) -> int:
    return list(_LEGEND).index(verdict) if verdict in _LEGEND else len(_LEGEND)


def _prov_rows(prov: dict) -> list[tuple[str, str]]:
    """The provenance as (key, value) rows: versions, budget parameters, timing; earlier runs counted, not listed."""
    rows = []
    for k, v in prov.items():
        if k == "earlier_runs":
            rows.append(("earlier runs merged into this ledger", str(len(v))))
        elif k == "rerun_summaries":
            continue
        elif k == "partial":
            rows.append(("partial: entries never run", ", ".join(v.get("not_run", []))))
        elif isinstance(v, dict):
            rows.append((k, ", ".join(f"{a} = {b}" for a, b in v.items())))
        elif isinstance(v, list):
            rows.append((k, ", ".join(map(str, v))))
        else:
            rows.append((k, str(v)))
    return rows


def _prov_view(prov: dict) -> dict:
    """The provenance line's fields, with 'n/a' where a (merged or old) ledger lacks one."""
    wall = prov.get("wall_seconds")
    return {"budget": (prov.get("budget") or {}).get("name", "n/a"), "seed": prov.get("seed", "n/a"),
            "dtype": prov.get("dtype", "n/a"), "device": prov.get("device", "n/a"),
            "version": prov.get("sapa_version", "n/a"), "commit": prov.get("git_commit") or "n/a",
            "wall": f"{wall:.1f} s" if isinstance(wall, (int, float)) else "n/a",
            "started": prov.get("started_utc", "n/a")}


def _section(e: Entry, figures: list, index: int, base_dir=None) -> dict:
    """An entry's section: what its row opens to (headline reading, key numbers, one figure) and what folds inside."""
    cited = [(f, f.owner == e.id) for f in figure_plan.cited_in(figures, e.id)]
    main = next((k for k, (_, own) in enumerate(cited) if own), 0 if cited else None)  # the first it shows
    readings = [{**r, "calibration_text": _calibration_text(r.get("calibration"))} for r in e.readings]
    return {
        "e": e,
        "label": "Paper's claim" if e.kind == "claim" else "Reviewers' question",
        "readings": readings,
        "headline_reading": readings[0] if readings else None,
        "grids": grids(e.readings),
        "conditions": conditions(e),
        "contract": [(k.replace("_", " "), str(v)) for k, v in (e.contract or {}).items()],
        "figures": cited,
        "main_figure": cited[main] if main is not None else None,
        "other_figures": [c for k, c in enumerate(cited) if k != main],
        "refused": figure_plan.refused(e, base_dir),
        "evidence_path": f"claims[{index}].evidence",
        "evidence_keys": ", ".join(list(e.evidence or {})[:8]) + (", …" if len(e.evidence or {}) > 8 else ""),
    }


def _calibration_text(c: dict | None) -> str:
    """'false FAILS / false HOLDS / power' as '0.4% / 1.2% / 97%' ('not calibrated' without rates)."""
    if not c:
        return "not calibrated"
    if c.get("exact"):
        return c.get("note", "exact: no sampling error")

    def pct(key: str, digits: int) -> str:
        x = c.get(key)
        return f"{x:.{digits}%}" if isinstance(x, (int, float)) else "n/a"

    return f"{pct('false_fails_rate', 1)} / {pct('false_holds_rate', 1)} / {pct('power', 0)}"


@lru_cache(maxsize=1)
def _env():
    """The Jinja2 environment of ``sapa/report/templates``: autoescape for ``*.html.j2``, none for Markdown."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent / "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False, default=False),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["anchor"] = _anchor
    env.filters["unstable"] = unstable
    env.filters["anchor_title"] = lambda t: _anchor(t.replace(" ", "-"))
    env.filters["cell"] = _md_cell
    env.filters["md"] = _md_text
    env.filters["nocode"] = lambda t: " ".join(str(t).replace("`", "'").split())  # a code span: never a link
    env.filters["suffix"] = lambda p: (Path(p).suffix.lstrip(".") or "file").upper()
    return env


def _anchor(cid: str) -> str:
    return "".join(ch for ch in cid.lower() if ch.isalnum() or ch == "-")


def _md_text(s: str) -> str:
    """Text for Markdown: a literal ``*`` (x/α*, N*) escaped, so two of them never turn into emphasis."""
    return str(s or "").replace("*", "\\*")


def _md_cell(s: str) -> str:
    return _md_text(s or "-").replace("|", "\\|").replace("\n", " ")
