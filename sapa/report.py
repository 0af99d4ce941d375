"""Render the claims ledger: a terminal table and ``report.md`` (arXiv 2410.18613)."""

from __future__ import annotations

import json
import textwrap

from sapa.ledger import Entry

_LEGEND = {
    "HOLDS": "true as stated (and sharp where it is a bound)",
    "HOLDS_LOOSE": "true, but the constant or rate is not sharp",
    "HOLDS_IN_REGIME": "true only under the conditions the evidence names",
    "FAILS": "refuted by the evidence",
    "UNDETERMINED": "not settled (see evidence: not yet examined, inconclusive, or the kinds of evidence disagree)",
    "ANSWERED": "a reviewers' question, answered by decided readings",
}
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
            wrapped = textwrap.wrap(e.headline or "-", rest) or ["-"]
            lines.append(f"{e.id:<{id_w}}  {e.verdict:<{v_w}}  {wrapped[0]}")
            lines += [f"{'':<{id_w}}  {'':<{v_w}}  {w}" for w in wrapped[1:]]
    if mc:
        lines += ["", mc_line(mc)]
    return "\n".join(x for x in lines if x is not None)


def mc_line(mc: dict) -> str:
    """One line: first-pass coverage of the ledger's Monte Carlo intervals against exact values."""
    cov = mc.get("first_pass_coverage")
    if cov is None:
        return "Monte Carlo: no interval was compared with an exact value in this run"
    return (f"Monte Carlo first-pass coverage: {cov:.1%} of {mc.get('series', 0)} nominal-{mc.get('nominal', 0.99):.0%} "
            f"intervals contain the exact value (no reruns)")


def _readings_md(e: Entry) -> list[str]:
    if not e.readings:
        return []
    out = ["| reading | verdict | why | rule (false FAILS / false HOLDS / power) |", "|---|---|---|---|"]
    for r in e.readings:
        c = r.get("calibration") or {}
        cal = (f"`{r['rule']}` ({c.get('false_fails_rate', float('nan')):.1%} / {c.get('false_holds_rate', float('nan')):.1%}"
               f" / {c.get('power', float('nan')):.0%})")
        out.append(f"| {_md_cell(r['name'])} | **{r['verdict']}** | {_md_cell(r.get('why', ''))} | {cal} |")
    return out + [""]


def markdown(entries: list[Entry], prov: dict, mc: dict | None = None) -> str:
    """The ``report.md`` text: claims and questions apart, then one section per entry with its readings."""
    out = [
        "# sapa report — arXiv 2410.18613, *Rethinking Softmax: Self-Attention with Polynomial Activations*",
        "",
        f"Budget `{prov['budget']['name']}`, seed {prov['seed']}, {prov['dtype']} on {prov['device']}, "
        f"sapa {prov['sapa_version']} (commit `{prov.get('git_commit') or 'n/a'}`), "
        f"{prov['wall_seconds']:.1f} s, started {prov['started_utc']}.",
        "",
    ]
    for title, group in groups(entries):
        out += [f"### {title}", "", "| id | verdict | key numbers |", "|---|---|---|"]
        out += [f"| [`{e.id}`](#{_anchor(e.id)}) | **{e.verdict}** | {_md_cell(e.headline)} |" for e in group]
        out.append("")
    if mc:
        out += [mc_line(mc) + ".", ""]
    out += ["Verdicts: " + "; ".join(f"**{k}** — {v}" for k, v in _LEGEND.items()) + ". Each reading names the rule "
            "that decided it and that rule's error rates on synthetic truth (`sapa calibrate`).", ""]
    out += review_section(entries)
    for e in entries:
        label = "Paper's claim" if e.kind == "claim" else "Reviewers' question"
        out += [f"## {e.id}", "", f"**{label}.** {e.statement}", "", f"**Verdict: {e.verdict}.** {e.headline}", ""]
        if e.answer:
            out += [f"**Answer.** {e.answer}", ""]
        out += _readings_md(e)
        out += [f"- {_md_cell(f)}" for f in e.findings] + ([""] if e.findings else [])
        if e.tested_statement:
            out += [f"**Tested statement.** {e.tested_statement}", ""]
        if e.contract:
            out += ["| contract | |", "|---|---|"]
            out += [f"| {k.replace('_', ' ')} | {_md_cell(str(v))} |" for k, v in e.contract.items()]
            out.append("")
        if e.corrected_claim:
            out += [f"**Corrected claim.** {e.corrected_claim}", ""]
        for fig in e.figures:
            out += [f"![{e.id}]({fig})", ""]
        out += ["<details><summary>evidence</summary>", "", "```json",
                json.dumps(e.evidence, indent=1, default=str)[:20_000], "```", "</details>", ""]
    out += ["## Provenance", "", "```json", json.dumps(prov, indent=1, default=str), "```", ""]
    return "\n".join(out)


# The review points of ../shared/seeds/000_*.txt and the ledger entries that answer them.
REVIEW_POINTS = [
    ("1.1 — the factor 2 in Eq. 4.2 (a one-hot row gives 1 − 0 = 2)", ["thm4.1-jacobian"]),
    ("1.2 — A = XW_Q and B = XW_K share X, so they are not independent (Cov(A, B) = QKᵀ)",
     ["thm4.2-linear", "thm4.4-cubic", "real-model-regime"]),
    ("1.3 — the final terms mix N and D: √N growth only if N ≫ D (ViT-Base: D = 768, N = 196)",
     ["cor4.3-linear-scaled", "cor4.5-cubic-scaled"]),
    ("2.1 — why should scaled polynomials behave like softmax?", ["cor4.3-linear-scaled", "fig1-scale-direction"]),
    ("2.2 — Figure 1: should the scale decrease or increase as N decreases?", ["fig1-scale-direction"]),
    ("4 — causal masking and dynamic sequence lengths", ["causal-masking"]),
    ("why only x and x³?", ["other-powers"]),
    ("computational overhead of polynomial attention", ["overhead"]),
    ("x³/1 has lower norms than x/16 yet trains worse: does the norm predict success?", ["norm-vs-accuracy"]),
]


def review_section(entries: list[Entry]) -> list[str]:
    """Markdown lines: each review point, then the verdicts and key numbers of the entries answering it."""
    by_id = {e.id: e for e in entries}
    out = ["## What the reviews asked, what sapa found", ""]
    for question, ids in REVIEW_POINTS:
        found = [by_id[i] for i in ids if i in by_id]
        if not found:
            continue
        out.append(f"**{question}**")
        out.append("")
        for e in found:
            answer = e.answer or e.corrected_claim or e.headline
            out.append(f"- [`{e.id}`](#{_anchor(e.id)}) **{e.verdict}** — {_md_cell(answer)}")
        out.append("")
    return out


def _anchor(cid: str) -> str:
    return "".join(ch for ch in cid.lower() if ch.isalnum() or ch == "-")


def _md_cell(s: str) -> str:
    return (s or "-").replace("|", "\\|").replace("\n", " ")


def html(entries: list[Entry], prov: dict, base_dir, mc: dict | None = None) -> str:
    """A self-contained HTML report (figures embedded as base64 PNG) with the same content as report.md."""
    import base64
    import html as h
    from pathlib import Path

    def esc(x: object) -> str:
        return h.escape(str(x if x is not None else "-"))

    colours = {"HOLDS": "#1b7837", "HOLDS_LOOSE": "#5aae61", "HOLDS_IN_REGIME": "#b8860b", "FAILS": "#b2182b",
               "UNDETERMINED": "#666666", "ANSWERED": "#2166ac"}
    rows = ""
    for title, group in groups(entries):
        rows += f"<tr><th colspan='3'>{esc(title)}</th></tr>" + "".join(
            f"<tr><td><a href='#{_anchor(e.id)}'><code>{esc(e.id)}</code></a></td>"
            f"<td style='color:{colours[e.verdict]};font-weight:bold'>{esc(e.verdict)}</td><td>{esc(e.headline)}</td></tr>"
            for e in group)
    by_id = {e.id: e for e in entries}
    review = ""
    for question, ids in REVIEW_POINTS:
        found = [by_id[i] for i in ids if i in by_id]
        if found:
            items = "".join(f"<li><a href='#{_anchor(e.id)}'><code>{esc(e.id)}</code></a> "
                            f"<b style='color:{colours[e.verdict]}'>{esc(e.verdict)}</b> — "
                            f"{esc(e.answer or e.corrected_claim or e.headline)}</li>" for e in found)
            review += f"<p><b>{esc(question)}</b></p><ul>{items}</ul>"
    sections = ""
    for e in entries:
        figs = ""
        for fig in e.figures:
            path = Path(base_dir) / fig
            if path.suffix == ".png" and path.is_file():
                data = base64.b64encode(path.read_bytes()).decode()
                figs += f"<figure><img src='data:image/png;base64,{data}' style='max-width:100%'><figcaption>{esc(fig)}</figcaption></figure>"
        contract = "".join(f"<tr><th>{esc(k.replace('_', ' '))}</th><td>{esc(v)}</td></tr>" for k, v in (e.contract or {}).items())
        readings = "".join(
            f"<tr><td>{esc(r['name'])}</td><td style='color:{colours[r['verdict']]};font-weight:bold'>{esc(r['verdict'])}"
            f"</td><td>{esc(r.get('why'))}</td><td><code>{esc(r['rule'])}</code> "
            f"{(r.get('calibration') or {}).get('false_fails_rate', float('nan')):.1%} / "
            f"{(r.get('calibration') or {}).get('false_holds_rate', float('nan')):.1%}</td></tr>" for r in e.readings)
        label = "Paper's claim" if e.kind == "claim" else "Reviewers' question"
        sections += (
            f"<h2 id='{_anchor(e.id)}'>{esc(e.id)}</h2><p><b>{label}.</b> {esc(e.statement)}</p>"
            f"<p><b style='color:{colours[e.verdict]}'>Verdict: {esc(e.verdict)}.</b> {esc(e.headline)}</p>"
            + (f"<p><b>Answer.</b> {esc(e.answer)}</p>" if e.answer else "")
            + (f"<table><tr><th>reading</th><th>verdict</th><th>why</th><th>rule: false FAILS / false HOLDS</th></tr>"
               f"{readings}</table>" if readings else "")
            + ("<ul>" + "".join(f"<li>{esc(f)}</li>" for f in e.findings) + "</ul>" if e.findings else "")
            + (f"<p><b>Tested statement.</b> {esc(e.tested_statement)}</p>" if e.tested_statement else "")
            + (f"<table class='c'>{contract}</table>" if contract else "")
            + (f"<p><b>Corrected claim.</b> {esc(e.corrected_claim)}</p>" if e.corrected_claim else "")
            + figs
            + f"<details><summary>evidence</summary><pre>{esc(json.dumps(e.evidence, indent=1, default=str)[:20_000])}</pre></details>"
        )
    style = ("body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;line-height:1.45;padding:0 1em}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}"
             "pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}code{font-size:90%}")
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>sapa report</title>"
        f"<style>{style}</style></head><body>"
        "<h1>sapa report — arXiv 2410.18613, <i>Rethinking Softmax: Self-Attention with Polynomial Activations</i></h1>"
        f"<p>Budget <code>{esc(prov['budget']['name'])}</code>, seed {esc(prov['seed'])}, {esc(prov['dtype'])} on "
        f"{esc(prov['device'])}, sapa {esc(prov['sapa_version'])}, {prov['wall_seconds']:.1f} s.</p>"
        f"<table><tr><th>id</th><th>verdict</th><th>key numbers</th></tr>{rows}</table>"
        + (f"<p>{esc(mc_line(mc))}.</p>" if mc else "") +
        "<p>" + "; ".join(f"<b>{k}</b> — {esc(v)}" for k, v in _LEGEND.items()) + "</p>"
        f"<h2>What the reviews asked, what sapa found</h2>{review}{sections}"
        f"<h2>Provenance</h2><pre>{esc(json.dumps(prov, indent=1, default=str))}</pre></body></html>"
    )
