"""One meaning per label: the definition of every verdict label, and the check of a ledger entry against them.

The same sentences are :data:`sapa.glossary.VERDICTS` (the reports' and README's glossary) and the table "Labels"
of docs/verdicts.md (a test requires each sentence there verbatim, once); :func:`violations` checks a
``ledger.json`` entry against them, and :func:`question_verdict` is the one rule that labels a question.
"""

from __future__ import annotations

from sapa.conditions import LOGIT_SCALES

__all__ = ["DEFINITIONS", "question_verdict", "violations", "undecided"]

DEFINITIONS = {
    "HOLDS": "the claim's headline reading is true as stated (and sharp where it is a bound)",
    "HOLDS_LOOSE": "the headline reading is true, but its constant or rate is not sharp",
    "HOLDS_IN_REGIME": "the headline reading is true only in a stated region of N (or of the grid); the entry's "
                       "`regime` names its boundary and every window where the condition fails, judged from a "
                       "practical minimum N",
    "FAILS": "the evidence refutes the headline reading",
    "UNDETERMINED": "not settled: inconclusive evidence, a reading a question relies on is undecided, a gate (Monte "
                    "Carlo agreement, machine load) is not met, or the kinds of evidence disagree",
    "ANSWERED": "a reviewers' question whose every reading is decided (none UNDETERMINED) and whose gates are met; "
                "its answer is built from those readings",
}


def undecided(readings) -> list[str]:
    """Names of the readings (``Reading`` objects or ledger dicts) whose verdict is UNDETERMINED."""
    out = []
    for r in readings:
        v, name = (r["verdict"], r["name"]) if isinstance(r, dict) else (r.verdict, r.name)
        if v == "UNDETERMINED":
            out.append(name)
    return out


def question_verdict(readings, gates_ok: bool = True) -> str:
    """ANSWERED iff there are readings, every one is decided and the gates are met; else UNDETERMINED."""
    readings = list(readings)
    return "ANSWERED" if readings and gates_ok and not undecided(readings) else "UNDETERMINED"


def violations(entry: dict) -> list[str]:
    """Every way a ``ledger.json`` entry breaks the definitions (empty: it keeps them)."""
    out = []
    cid, v, kind = entry.get("id", "?"), entry.get("verdict"), entry.get("kind", "claim")
    readings = entry.get("readings") or []
    if v not in DEFINITIONS:
        out.append(f"{cid}: unknown verdict {v!r}")
    if kind == "question" and v not in ("ANSWERED", "UNDETERMINED"):
        out.append(f"{cid}: a question is ANSWERED or UNDETERMINED, not {v}")
    if kind == "claim" and v == "ANSWERED":
        out.append(f"{cid}: a claim is not ANSWERED")
    if kind == "question" and v == "ANSWERED":
        if not readings:
            out.append(f"{cid}: ANSWERED without readings")
        for name in undecided(readings):
            out.append(f"{cid}: ANSWERED while its reading {name!r} is UNDETERMINED")
    if kind == "claim" and readings and v not in (readings[0]["verdict"], "UNDETERMINED"):
        out.append(f"{cid}: claim verdict {v} is neither its headline reading's ({readings[0]['verdict']}) nor "
                   "UNDETERMINED (a gate)")
    if v == "HOLDS_IN_REGIME":
        reg = entry.get("regime") or {}
        if not reg.get("boundary"):
            out.append(f"{cid}: HOLDS_IN_REGIME without a stated regime boundary")
        if "windows" not in reg and "n_min" not in reg and "cells" not in reg:
            out.append(f"{cid}: HOLDS_IN_REGIME without its windows (or cells) and practical minimum")
    contract = entry.get("contract") or {}
    if contract.get("logit_scale") not in LOGIT_SCALES:
        out.append(f"{cid}: contract.logit_scale {contract.get('logit_scale')!r} not one of {LOGIT_SCALES}")
    fal = entry.get("falsifiability") or {}
    if fal.get("kind") == "by_construction":
        if not fal.get("why"):
            out.append(f"{cid}: by_construction without its argument")
    elif fal.get("kind") == "could_fail":
        ctrl = fal.get("negative_control") or {}
        if not ctrl.get("statement") or "verdict" not in ctrl:
            out.append(f"{cid}: could_fail without a negative control (statement and computed verdict)")
        elif (ctrl["verdict"] == "FAILS") != bool(ctrl.get("control_ok")):
            out.append(f"{cid}: negative control's control_ok does not match its verdict")
    else:
        out.append(f"{cid}: falsifiability.kind {fal.get('kind')!r} is neither by_construction nor could_fail")
    rob = entry.get("robustness") or {}
    if not isinstance(rob.get("stable"), bool) or not isinstance(rob.get("varied"), list) or not rob["varied"]:
        out.append(f"{cid}: robustness without varied conditions and stable")
    else:
        ref = rob.get("headline", v)
        flips = [r["condition"] for r in rob["varied"] if r.get("reading", "headline") == "headline"
                 and r.get("verdict") is not None and r["verdict"] != ref]
        if rob["stable"] and flips:
            out.append(f"{cid}: robustness says stable, yet the verdict flips under {flips}")
    return out
