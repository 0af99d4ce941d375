"""The reports' bottom line in words, and key numbers cut only between whole clauses — both derived from the ledger.

Nothing here decides or types a verdict: every sentence is assembled from the entries' verdicts, readings,
statements, corrected claims and answers, so the bottom line always says what this ledger says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SHORT_CHARS = 220  # key numbers in a summary table: whole clauses up to about this length
BRIEF_CHARS = 260  # one item of the bottom line: whole clauses up to about this length


@dataclass(frozen=True)
class Point:
    """One paragraph of the bottom line: a bold lead, a sentence, then (entry id, phrase) items."""

    lead: str
    text: str
    items: tuple[tuple[str, str], ...] = ()


def clauses(text: str) -> list[str]:
    """``text`` split at its top-level ``; `` (never inside brackets), each clause whole."""
    out, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth <= 0 and text.startswith("; ", k):
            out.append(text[start:k])
            start = k + 2
    out.append(text[start:])
    return [c.strip() for c in out if c.strip()]


def short_numbers(headline: str, limit: int = SHORT_CHARS) -> tuple[str, bool]:
    """(the headline's first whole clauses within ``limit`` characters, whether clauses were left out)."""
    parts = clauses(" ".join((headline or "").split()))
    if not parts:
        return "-", False
    kept = [parts[0]]
    for c in parts[1:]:
        if len("; ".join(kept + [c])) > limit:
            break
        kept.append(c)
    return "; ".join(kept), len(kept) < len(parts)


def sentences(text: str) -> list[str]:
    """``text`` split after '.', '!' or '?' followed by a space and a capital or bracket (one line each)."""
    one = " ".join((text or "").split())
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(\[])", one) if s]


def lead_sentence(text: str) -> str:
    """The first sentence that says something (a sentence noting that the paper is silent is skipped)."""
    ss = sentences(text)
    for s in ss:
        if "paper is silent" not in s:
            return s
    return ss[0] if ss else ""


def _first(text: str | None, fallback: str) -> str:
    ss = sentences(text or "")
    return ss[0] if ss else fallback


def brief(text: str, limit: int = BRIEF_CHARS) -> str:
    """``text`` cut to its first whole clauses within ``limit`` characters, ``; …`` marking what was left out."""
    kept, more = short_numbers(text, limit)
    return kept + ("; …" if more else "")


def _statement(e) -> str:
    return (e.statement or "").strip().rstrip(".")


def _readings(e, verdict: str) -> list[str]:
    return [r["name"] for r in e.readings[1:] if r.get("verdict") == verdict]


def _listed(names: list[str], most: int = 3) -> str:
    shown = "; ".join(names[:most])
    return shown + (f"; and {len(names) - most} more" if len(names) > most else "")


def bottom_line(entries, mc: dict | None = None) -> list[Point]:
    """What holds, what holds only with a correction, what fails, what is not settled, and the questions' answers."""
    claims = [e for e in entries if e.kind == "claim"]
    questions = [e for e in entries if e.kind == "question"]
    pts: list[Point] = []
    holds = [e for e in claims if e.verdict == "HOLDS"]
    if holds:
        pts.append(Point("What holds.", f"{len(holds)} of the {len(claims)} claims hold as stated in their headline "
                                        "reading:", tuple((e.id, _statement(e)) for e in holds)))
    corrected = [e for e in claims if e.verdict in ("HOLDS_LOOSE", "HOLDS_IN_REGIME")]
    if corrected:
        how = {"HOLDS_LOOSE": "true but not sharp", "HOLDS_IN_REGIME": "true only in a regime"}
        pts.append(Point("What holds only with a correction.", f"{len(corrected)} claim(s):", tuple(
            (e.id, f"{how[e.verdict]}: " + _first(e.corrected_claim, short_numbers(e.headline, 160)[0]))
            for e in corrected)))
    failed = [e for e in claims if e.verdict == "FAILS"]
    side = [(e.id, _listed(_readings(e, "FAILS"))) for e in entries if _readings(e, "FAILS")]
    if failed or side:
        head = (f"{len(failed)} claim(s) fail in their headline reading" if failed else
                "No claim fails in its headline reading") + (
            "; these other readings fail (each stated in its entry):" if side else ".")
        items = tuple((e.id, "headline: " + _first(e.corrected_claim, _statement(e))) for e in failed) + tuple(side)
        pts.append(Point("What fails.", head, items))
    open_ = [e for e in entries if e.verdict == "UNDETERMINED"]
    n_und = sum(len(_readings(e, "UNDETERMINED")) for e in entries if e.verdict != "UNDETERMINED")
    if open_ or n_und:
        where = sorted({e.id for e in entries if e.verdict != "UNDETERMINED" and _readings(e, "UNDETERMINED")})
        more = (f" Beside them, {n_und} reading(s) of decided entries stay UNDETERMINED (in "
                f"{', '.join(where)})." if n_und else "")
        pts.append(Point("What is not settled.",
                         (f"{len(open_)} entr{'y' if len(open_) == 1 else 'ies'} UNDETERMINED:" if open_ else
                          "Every headline is decided.") + ("" if open_ else more),
                         tuple((e.id, _first(e.corrected_claim, short_numbers(e.headline, 200)[0])) for e in open_)))
        if open_ and more:
            pts.append(Point("", more.strip()))
    if questions:
        pts.append(Point("The reviewers' questions.", f"{sum(e.verdict == 'ANSWERED' for e in questions)} of "
                                                      f"{len(questions)} answered:",
                         tuple((e.id, lead_sentence(e.answer or "") or short_numbers(e.headline, 200)[0])
                               for e in questions)))
    return [Point(p.lead, p.text, tuple((i, brief(t)) for i, t in p.items)) for p in pts]
