"""The conditions of a verdict: logit convention, falsifiability and robustness of every ledger entry.

A verdict is a statement about the paper made under conditions — the logit convention (S = X W_Q W_Kᵀ Xᵀ as the
theory of arXiv 2410.18613 writes it, or S/√d as transformers compute it), the thresholds of its rule, the seed and
the budget. This module holds the judgement layer's vocabulary for them (docs/verdicts.md, "Conditions of a verdict"):

* ``LOGIT_SCALES`` and :func:`scaled_by_logit_convention` — for φ = c·x^p the S/√d value of E‖φ‖²_F is the S value
  times d^(−p) exactly (RMS: d^(−p/2)), Jacobians included;
* :func:`by_construction` / :func:`could_fail` — an entry's ``falsifiability``: a one-line argument why its verdict
  cannot fail, or a **negative control**: a deliberately false variant of the claim, computed through the same
  evidence pipeline and rule in the same run, whose verdict is reported as it came out (it must be FAILS);
* :func:`robustness` — the verdict under each varied condition that applies, and ``stable``.

Nothing here decides a verdict: the verdicts are computed by the rules in :mod:`sapa.rules`.
"""

from __future__ import annotations

import math

__all__ = ["LOGIT_SCALES", "PAPER_SCALE", "PRACTICE_SCALE", "THRESHOLD_STEP", "scaled_by_logit_convention",
           "by_construction", "could_fail", "robustness", "varied", "not_applicable", "not_run",
           "question_row", "CHANGED_ANSWER"]

CHANGED_ANSWER = "ANSWERED, readings changed"  # decided under a varied condition, with other readings: a flip

PAPER_SCALE = "S"              # the theory's logits S = X W_Q W_Kᵀ Xᵀ (Thm 4.2 – Cor 4.5)
PRACTICE_SCALE = "S/sqrt(d)"   # what transformers compute (and the training study, real heads, other papers)
LOGIT_SCALES = (PAPER_SCALE, PRACTICE_SCALE)
THRESHOLD_STEP = 0.2           # robustness: every threshold varied by ±20 %


def scaled_by_logit_convention(value_s: float, p: int, d: int, squared: bool = False) -> float:
    """E-RMS ‖c·(S/√d)^{∘p}‖ = d^(−p/2)·E-RMS ‖c·S^{∘p}‖ (squared norms: d^(−p)), exactly, for every model and N.

    φ(S/√d) = d^(−p/2) φ(S) entry by entry for a monomial, so every norm (and the Jacobian w.r.t. X or S, which
    is linear in φ) scales by the same factor; growth exponents and the crossover N* do not change.

    >>> round(scaled_by_logit_convention(2092.0, 3, 64), 4)
    4.0859
    """
    if p < 0 or d < 1:
        raise ValueError(f"need p ≥ 0 and d ≥ 1, got p={p}, d={d}")
    return float(value_s) * float(d) ** (-p if squared else -p / 2)


def by_construction(why: str) -> dict:
    """``falsifiability`` of a verdict that follows from a one-line argument (its evidence cannot disagree)."""
    return {"kind": "by_construction", "why": why}


def could_fail(why: str, statement: str, verdict: str, **detail) -> dict:
    """``falsifiability`` with a negative control: ``verdict`` is what the same pipeline and rule gave the false variant.

    ``control_ok`` says whether it came out FAILS, as it must; a control that did not is reported, not hidden.
    """
    return {"kind": "could_fail", "why": why,
            "negative_control": {"statement": statement, "verdict": verdict, "control_ok": verdict == "FAILS",
                                 **detail}}


def varied(condition: str, verdict: str, note: str = "", reading: str = "headline") -> dict:
    """One row of ``robustness``: the verdict recomputed under a varied condition.

    ``reading`` other than ``"headline"`` marks a row about another reading (e.g. a size reading beside a rate
    headline): shown, but not counted in ``stable``.
    """
    return {"condition": condition, "verdict": verdict, "note": note, "reading": reading}


def question_row(condition: str, names: list[str], base: list[str], verdicts: list[str], note: str = "") -> dict:
    """A robustness row of a question: its readings recomputed under ``condition`` (``verdicts`` beside ``base``).

    The row's verdict is ANSWERED iff every reading is decided (UNDETERMINED otherwise); a decided answer whose
    readings differ from the headline run's is another answer, :data:`CHANGED_ANSWER`, and counts as a flip.
    """
    changed = [f"{n}: {a} → {b}" for n, a, b in zip(names, base, verdicts) if a != b]
    v = "ANSWERED" if verdicts and all(x != "UNDETERMINED" for x in verdicts) else "UNDETERMINED"
    if v == "ANSWERED" and changed:
        v = CHANGED_ANSWER
    text = "readings: " + ", ".join(verdicts) + ("; changed: " + "; ".join(changed) if changed else "")
    return varied(condition, v, (note + "; " if note else "") + text)


def not_applicable(condition: str, note: str) -> dict:
    """A condition that does not apply to this entry (e.g. a seed for an exact computation)."""
    return {"condition": condition, "verdict": None, "note": "not applicable: " + note, "reading": "headline"}


def not_run(condition: str, note: str) -> dict:
    """A condition that applies but was not varied in this run (never an invented verdict)."""
    return {"condition": condition, "verdict": None, "note": "not run: " + note, "reading": "headline"}


def robustness(headline: str, rows: list[dict], distance: str = "") -> dict:
    """``{"headline", "varied": rows, "stable", "flips", "distance"}``: stable iff every recomputed verdict equals it.

    Rows with ``verdict`` None (not applicable, not run) do not count either way; ``flips`` lists the conditions
    under which the headline verdict changes. ``distance`` says in words how close the verdict is to flipping.
    """
    flips = [r["condition"] for r in rows
             if r.get("reading", "headline") == "headline" and r["verdict"] is not None and r["verdict"] != headline]
    out = {"headline": headline, "varied": rows, "stable": not flips, "flips": flips}
    if distance:
        out["distance"] = distance
    return out


def threshold_variants(value: float) -> tuple[float, float]:
    """The threshold −20 % and +20 % (robustness), in that order."""
    if not math.isfinite(value):
        raise ValueError(f"threshold must be finite, got {value}")
    return value * (1 - THRESHOLD_STEP), value * (1 + THRESHOLD_STEP)
