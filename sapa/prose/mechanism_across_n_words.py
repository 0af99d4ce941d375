"""The words of ``mechanism-across-n``: statement, tested contract, headline, answer and the per-cell findings.

Nothing here decides a verdict; the thresholds in the words come from :mod:`sapa.rules.learning` and
:mod:`sapa.empirics.training.mechanism`.
"""

from __future__ import annotations

import math

from sapa.empirics.training.study_config import arm_label
from sapa.ledger import Reading


def _f(v, nd: int = 2) -> str:
    return "undefined" if v is None or not math.isfinite(v) else f"{v:+.{nd}f}"


def _u(v: float) -> str:
    return "undefined" if v is None or not math.isfinite(v) else f"{v:.2f}"


def _p(v: float) -> str:
    return "undefined" if not math.isfinite(v) else f"{v:.3g}"


def headline(rs) -> str:
    """The verdict of every (task, arm, question) in one line."""
    if not rs:
        return "no probe task has two N cells softmax solves: nothing to judge"
    pairs = zip(rs[0::2], rs[1::2])  # slowdown_readings: growth, then more than 2×, per (task, arm)
    return "slowdown vs softmax over N (grows / more than 2×): " + "; ".join(
        f"{g.key[-3]} {arm_label(g.key[-2])} {g.verdict}/{d.verdict}" for g, d in pairs)


STATEMENT = ("Does x^p/√N's learning of attention mechanisms (copy at lag 1, 2 and N/2; induction; multi-query "
             "associative recall) slow down relative to softmax as the sequence length N grows — at all, and by more "
             "than 2×?")


TESTED = ("Per probe task and arm x/√N, x³/√N (one learning rate for every arm, warm-up then constant, paired seeds): "
          "s = log2(steps to validation accuracy 0.5, arm / softmax) per seed and N, the exits interval-censored on "
          "the evaluation grid and right-censored at the cap, on the (task, N) cells softmax solves (accuracy ≥ 0.9 in "
          "≥ 90 % of its seeds within the cap; other cells enter no verdict). The maximum-likelihood change Δ of s over "
          "the N range answers two questions with their own rules, Holm-adjusted over the entry's readings: does it "
          "grow (slowdown-growth) and by more than 2× (slowdown-doubling)? ANSWERED when every reading is decided.")


def cell_lines(cells: list[dict]) -> tuple[str, ...]:
    """One line per (task, N, arm): reached 0.5, solved, final accuracy, offset profile; softmax's too-hard cells."""
    out = []
    for c in cells:
        s, h = c["solve"], c["half"]
        med = lambda e: e["median"] if e["median"] is not None else "beyond the cap"  # noqa: E731
        pe, px = c.get("profile_end"), c.get("profile_at_exit")
        prof = (f"; |φ| share on offsets 0/1/2 at the end {pe[0]:.2f}/{pe[1]:.2f}/{pe[2]:.2f}" if pe else "") + (
            f", at the 0.5 exit {px[0]:.2f}/{px[1]:.2f}/{px[2]:.2f}" if px else "")
        gate = "" if c["arm"] != "softmax" or c["decidable"] or c["role"] != "probe" else \
            " — too hard for this model at this budget: softmax solves it in fewer than 90 % of its seeds, no verdict"
        out.append(f"{c['task']} N={c['N']} {arm_label(c['arm'])}: accuracy 0.5 reached {h['n'] - h['censored']}/{h['n']} "
                   f"(median step {med(h)}), solved (≥ 0.9) {s['n'] - s['censored']}/{s['n']} (median step {med(s)}, "
                   f"cap {s['cap']}); final accuracy {c['final_acc_median']:.3f}{prof}{gate}")
    return tuple(out)


def solve_lines(trends: dict) -> tuple[str, ...]:
    """The 0.9 threshold beside the main measure: its trend per (task, arm), a finding (no verdict, no Holm)."""
    return tuple(f"{task}: {arm_label(arm)} slowdown in steps to accuracy 0.9 over N {tr.N[0]}…{tr.N[-1]}: Δ = "
                 f"{_f(tr.delta)} (se {_u(tr.se)}), unadjusted p(Δ ≤ 0) = {_p(tr.p_greater[0.0])}, p(Δ ≤ 1) = "
                 f"{_p(tr.p_greater[1.0])} — beside the main measure, not a verdict" for (task, arm), tr in trends.items())


def answer(rs: tuple[Reading, ...], cells: list[dict]) -> str:
    """One sentence per question: for which (task, arm) the slowdown grows, by more than 2×, and what is undecided."""
    by = {}
    for r in rs:
        task, arm, q = r.key[-3:]
        by.setdefault((q, r.verdict), []).append(f"{task} {arm_label(arm)}")
    j = lambda q, v: ", ".join(by.get((q, v), [])) or "none"  # noqa: E731
    hard = sorted({f"{c['task']} N={c['N']}" for c in cells if c["arm"] == "softmax" and c["role"] == "probe"
                   and not c["decidable"]})
    found = "; ".join(
        f"{c['task']} N={c['N']} {arm_label(c['arm'])} {c['solve']['n'] - c['solve']['censored']}/{c['solve']['n']}"
        + (f" (median step {c['solve']['median']})" if c["solve"]["median"] is not None else "")
        for c in cells if c["role"] == "finding")
    return (f"The slowdown relative to softmax grows with N for {j('growth', 'FAILS')}; it does not grow for "
            f"{j('growth', 'HOLDS')}; undecided for {j('growth', 'UNDETERMINED')}. By more than 2× over the range: "
            f"{j('doubling', 'FAILS')}; by no more than 2×: {j('doubling', 'HOLDS')}; undecided (beyond this design's "
            f"power): {j('doubling', 'UNDETERMINED')}."
            + (f" Too hard for this model at this budget (softmax itself does not solve them): {', '.join(hard)}."
               if hard else "")
            + (f" Findings, not judged (solved within the cap / seeds): {found}." if found else ""))
