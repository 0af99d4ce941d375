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
    "UNDETERMINED": "not settled (see evidence: not yet examined, or inconclusive)",
}


def table(entries: list[Entry], width: int = 110) -> str:
    """Fixed-width text table: id, verdict, key numbers (wrapped)."""
    id_w = max(len(e.id) for e in entries)
    v_w = max(len(e.verdict) for e in entries)
    rest = max(width - id_w - v_w - 6, 30)
    lines = [f"{'claim':<{id_w}}  {'verdict':<{v_w}}  key numbers", "-" * min(width, id_w + v_w + 4 + rest)]
    for e in entries:
        wrapped = textwrap.wrap(e.headline or "-", rest) or ["-"]
        lines.append(f"{e.id:<{id_w}}  {e.verdict:<{v_w}}  {wrapped[0]}")
        lines += [f"{'':<{id_w}}  {'':<{v_w}}  {w}" for w in wrapped[1:]]
    return "\n".join(lines)


def markdown(entries: list[Entry], prov: dict) -> str:
    """The ``report.md`` text: ledger table, then one section per claim with its contract and evidence."""
    out = [
        "# sapa report — arXiv 2410.18613, *Rethinking Softmax: Self-Attention with Polynomial Activations*",
        "",
        f"Budget `{prov['budget']['name']}`, seed {prov['seed']}, {prov['dtype']} on {prov['device']}, "
        f"sapa {prov['sapa_version']} (commit `{prov.get('git_commit') or 'n/a'}`), "
        f"{prov['wall_seconds']:.1f} s, started {prov['started_utc']}.",
        "",
        "| claim | verdict | key numbers |",
        "|---|---|---|",
    ]
    for e in entries:
        out.append(f"| [`{e.id}`](#{_anchor(e.id)}) | **{e.verdict}** | {_md_cell(e.headline)} |")
    out += ["", "Verdicts: " + "; ".join(f"**{k}** — {v}" for k, v in _LEGEND.items()) + ".", ""]
    for e in entries:
        out += [f"## {e.id}", "", f"**Paper's claim.** {e.statement}", "", f"**Verdict: {e.verdict}.** {e.headline}", ""]
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


def _anchor(cid: str) -> str:
    return "".join(ch for ch in cid.lower() if ch.isalnum() or ch == "-")


def _md_cell(s: str) -> str:
    return (s or "-").replace("|", "\\|").replace("\n", " ")
