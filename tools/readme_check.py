"""Does the README say what a ledger says, and define every word before it uses it? ``python3 tools/readme_check.py
[results/ledger.json]``.

Without a ledger: checks the README's words — every glossary term (each **term** of "Words the ledger uses") and
verdict label is defined where it is first used (in *italics* before the glossary, or in the glossary itself), every
term defined in passing is in the glossary, and every glossary term is used outside its definition. With a ledger,
also: the verdict in the README's two tables against the ledger's, entry by entry (exactly one row per entry); the
commit named in the reproduce section against the ledger's commit; and every growth exponent quoted for ALiBi with
its lengths, "e (N = a → b)", against x³/√N's additive profile in the ledger (each doubling step from a to b reads
e at the quoted decimals). Prints one line per disagreement and exits 1 if there is any (0 when they agree, 2 on
unreadable input).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROW = re.compile(r"^\| \[`([^`]+)`\]\([^)]*\) \| ([A-Z_]+) \|", re.M)  # | [`id`](link) | VERDICT | ...
COMMIT = re.compile(r"on commit `([0-9a-f]{7,40})`")
GLOSSARY = "Words the ledger uses"
LABELS = ("HOLDS", "HOLDS_LOOSE", "HOLDS_IN_REGIME", "FAILS", "UNDETERMINED", "ANSWERED")
COMMON = {"paper", "shared", "corr", "reading"}  # weight-model names and a word that are also plain English
BOLD = re.compile(r"\*\*([^*]+?(?:\\\*)?)\*\*")
ITALIC = re.compile(r"(?<![*\w\\])\*([^*\n]+?(?:\\\*)?)\*(?![*\w])")  # *term*, not **bold**, not a bare N\*
PROFILE = re.compile(r"(\d+\.(\d+)) \(N = (\d[\d ]*?) → (\d[\d ]*?)\)")  # 2.84 (N = 512 → 1 024)


def table_verdicts(readme: str) -> list[tuple[str, str]]:
    """[(entry id, verdict)] of the README's verdict tables, in order."""
    return ROW.findall(readme)


def section(readme: str, title: str) -> str:
    """The text of the README's ``## title`` section ('' when there is none)."""
    start = readme.find(f"\n## {title}\n")
    if start < 0:
        return ""
    end = readme.find("\n## ", start + 1)
    return readme[start:end if end > 0 else None]


def quoted_commit(readme: str) -> str | None:
    """The commit the README says its ledger ran on (its reproduce section), or None."""
    m = COMMIT.search(section(readme, "Reproducing"))
    return m.group(1) if m else None


def glossary_terms(readme: str) -> list[str]:
    """The glossary's defined terms, in order: every **term** of its bulleted list, as written (N\\* keeps its \\)."""
    items = re.split(r"\n- ", section(readme, GLOSSARY))[1:]  # one bullet each, its continuation lines included
    return [t for item in items for t in BOLD.findall(" ".join(item.split()))]


def _prose(text: str) -> str:
    """``text`` without its fenced code blocks (program output is not the README's own words)."""
    return re.sub(r"```.*?```", "", text, flags=re.S)


def _find(term: str, text: str, start: int = 0) -> int:
    """Index of ``term`` as a whole word in ``text`` from ``start`` (-1: absent)."""
    m = re.compile(rf"(?<![\w\\]){re.escape(term)}(?!\w)").search(text, start)
    return m.start() if m else -1


def term_problems(readme: str) -> list[str]:
    """One sentence per glossary term or label used before it is defined, defined in passing but not in the glossary,
    or defined and never used; empty when every word is defined before its first use and used."""
    words = section(readme, GLOSSARY)
    if not words:
        return [f"the README has no '## {GLOSSARY}' section"]
    start, at = readme.find("\n## "), readme.index(f"\n## {GLOSSARY}\n")  # the opening names the paper only
    before, after = (" ".join(_prose(t).split()) for t in (readme[start:at], readme[at + len(words):]))
    body = f"{before} \0 {' '.join(words.split())} \0 {after}"  # one line: a term may wrap
    glossary_at, glossary_end = len(before), len(body) - len(after)
    terms = glossary_terms(readme)
    out = [f"{t!r} is defined in passing but not in the glossary"
           for t in ITALIC.findall(body[:glossary_at]) if t not in terms]
    for term in terms:
        if term in COMMON:
            continue
        first = _find(term, body)
        italic = body.find(f"*{term}*")
        if first < glossary_at and not (italic >= 0 and first == italic + 1):
            out.append(f"{term!r} is used before it is defined")
        if _find(term, body[:glossary_at]) < 0 and _find(term, body[glossary_end:]) < 0:
            out.append(f"{term!r} is defined but never used")
    for label in LABELS:
        first = body.find(f"`{label}`")
        if first < 0:
            out.append(f"{label} is never defined")
        elif first < glossary_at and not body.startswith(f"`{label}`:", first):
            out.append(f"{label} is used before it is defined")
    return out


def _alibi_steps(ledger: dict) -> dict[int, float] | None:
    """{N: growth exponent from N to 2N} of x³/√N with ALiBi's additive bias, from the ledger (None: not there)."""
    entry = next((c for c in ledger.get("claims", []) if c.get("id") == "alibi-scaling"), None)
    prof = ((entry or {}).get("evidence") or {}).get("additive_profile", {}).get("3")
    return dict(zip(prof["N"], prof["local_exponents"])) if prof else None


def profile_quotes(readme: str) -> list[tuple[str, int, int]]:
    """[(value as written, N from, N to)] of every "e (N = a → b)" in a paragraph or table row that names ALiBi."""
    blocks = [b for p in readme.split("\n\n") for b in (p.splitlines() if p.startswith("|") else [p])]
    return [(m.group(1), int(m.group(3).replace(" ", "")), int(m.group(4).replace(" ", "")))
            for b in blocks if "ALiBi" in b for m in PROFILE.finditer(" ".join(b.split()))]


def profile_problems(readme: str, ledger: dict) -> list[str]:
    """One sentence per ALiBi exponent the README quotes for lengths at which the ledger's profile reads otherwise."""
    quotes = profile_quotes(readme)
    steps = _alibi_steps(ledger)
    if quotes and steps is None:
        return ["alibi-scaling: the README quotes growth exponents by N, the ledger has no additive profile"]
    out = []
    for value, lo, hi in quotes:
        inside = [e for n, e in sorted(steps.items()) if n >= lo and 2 * n <= hi]
        decimals = len(value.split(".")[1])
        if not inside or any(f"{e:.{decimals}f}" != value for e in inside):
            read = ", ".join(f"{e:.3f}" for e in inside) or "no doubling step"
            out.append(f"alibi-scaling: the README quotes {value} for N = {lo} → {hi}, the ledger reads {read} there")
    return out


def disagreements(readme: str, ledger: dict) -> list[str]:
    """One sentence per way the README's tables, reproduce section and quoted ALiBi profile disagree with
    ``ledger`` (empty: agree)."""
    rows = table_verdicts(readme)
    ours = dict(rows)
    out = [f"{i}: {n} rows in the README" for i in sorted(ours) if (n := [r[0] for r in rows].count(i)) > 1]
    theirs = {c["id"]: c["verdict"] for c in ledger.get("claims", [])}
    for i, v in theirs.items():
        if i not in ours:
            out.append(f"{i}: no row in the README (ledger: {v})")
        elif ours[i] != v:
            out.append(f"{i}: README says {ours[i]}, ledger says {v}")
    out += [f"{i}: in the README, not in the ledger" for i in ours if i not in theirs]
    commit = quoted_commit(readme)
    ran_on = str(ledger.get("provenance", {}).get("git_commit") or "")
    if commit is None:
        out.append("the reproduce section names no commit")
    elif not ran_on.startswith(commit):
        out.append(f"the README quotes commit {commit}, the ledger ran on {ran_on or 'an unknown commit'}")
    return out + profile_problems(readme, ledger)


def main(argv: list[str]) -> int:
    if len(argv) > 1 or argv[:1] in (["-h"], ["--help"]):
        print("usage: python3 tools/readme_check.py [LEDGER.json]", file=sys.stderr)
        return 2
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    found = term_problems(readme)
    if argv:
        try:
            ledger = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            print(f"readme_check: error: cannot read {argv[0]}: {e}", file=sys.stderr)
            return 2
        found += disagreements(readme, ledger)
    for line in found:
        print(line)
    if not found:
        done = f"{len(glossary_terms(readme))} terms defined before use"
        print(f"README agrees with {argv[0]}: {len(table_verdicts(readme))} verdicts, the quoted commit, "
              f"{len(profile_quotes(readme))} ALiBi exponents; {done}" if argv else f"README: {done}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
