"""Learning dynamics of the training study and the question ``mechanism-across-n`` (arXiv 2410.18613 §5).

Both entries ask two questions of the slowdown s = log2(steps to a threshold, arm / softmax) per paired
seed, each with its own rule (:mod:`sapa.rules.learning`): does it grow with N at all
(``slowdown-growth``), and by more than 2× over the studied range (``slowdown-doubling``)? Exits are
interval-censored on the evaluation grid (:mod:`empirics.training.censored_trend`), and the p-values are
Holm-adjusted over the entry's slowdown readings, so each entry's family-wise error is its own. Every
reading prints the design's power to see a change of one doubling and the seeds per cell that 80 % power
would take.

* ``scale-keeps-training-stable`` (:func:`learning_block`): exits at the floor + 0.03 (text: the bigram
  predictor), and the final accuracy gap (``final-gap-trend``, whose reason names the condition that bound).
* ``mechanism-across-n`` (:func:`mechanism_outcome`): exits at accuracy 0.5 (the main measure; 0.9 beside it as
  a finding) on the probe cells softmax solves (≥ 90 % of its seeds within the cap); the cells it does not
  solve are reported as too hard for this model at this budget and enter no verdict.
"""

from __future__ import annotations

import math

from sapa.ledger import Reading

__all__ = ["learning_block", "mechanism_outcome", "mechanism_conditions", "slowdown_readings", "power_line",
           "HEADLINE_ARMS", "STATEMENT", "TESTED", "DELTA_POWER"]

HEADLINE_ARMS = ("x_sqrtN", "x3_sqrtN")
DELTA_POWER = 1.0  # the change (log2) whose detection the printed power refers to: one doubling over the range
POWER_TARGET = 0.8


def _lab(a: str) -> str:
    from empirics.training.study_config import arm_label

    return arm_label(a)


def _public(c: dict) -> dict:
    """A cell without its private per-seed arrays (JSON-safe)."""
    return {k: v for k, v in c.items() if not k.startswith("_")}


def _f(v, nd: int = 2) -> str:
    return "undefined" if v is None or not math.isfinite(v) else f"{v:+.{nd}f}"


def power_line(tr, m: int) -> str:
    """The design's power to see Δ = DELTA_POWER at the least favourable Holm level ALPHA_FAILS/m, and the seeds
    per cell 80 % would take (σ̂ from this fit, censoring ignored)."""
    from empirics.training.censored_trend import design_power, seeds_for_power
    from sapa.rules.learning import ALPHA_FAILS

    a = ALPHA_FAILS / max(m, 1)
    pw = design_power(tr.n, tr.N, tr.sigma, DELTA_POWER, a)
    need = seeds_for_power(tr.N, tr.sigma, DELTA_POWER, a, POWER_TARGET) if math.isfinite(tr.sigma) else None
    if not math.isfinite(pw):
        return "power undefined (fewer than 2 cells)"
    return (f"power {pw:.0%} to see Δ {DELTA_POWER:g} doubling past the tested margin at level {ALPHA_FAILS:g}/{m} (σ̂ "
            f"{tr.sigma:.2f}, {min(tr.n)}–{max(tr.n)} seeds per cell); {POWER_TARGET:.0%} needs "
            + (f"{need} seeds per cell" if need else "more than 100 000 seeds per cell"))


def slowdown_readings(trends: dict, measure: str, key0: tuple = ()) -> tuple[Reading, ...]:
    """Per (task, arm) trend a ``slowdown-growth`` and a ``slowdown-doubling`` reading, Holm over all of them.

    ``measure``: what the exits are ("steps to accuracy 0.5", "steps to leave the floor"); keys are
    ``(*key0, task, arm, question)``.
    """
    from empirics.training.censored_trend import holm
    from sapa.rules.learning import ALPHA_FAILS, QUESTIONS, decide_slowdown, slowdown_test

    raw = [((task, arm, q), slowdown_test(tr, q)) for (task, arm), tr in trends.items() for q in QUESTIONS]
    pf, ph = holm([t.p_fails for _, t in raw]), holm([t.p_holds for _, t in raw])
    m = len(raw)
    out = []
    for ((task, arm, q), t), a_f, a_h in zip(raw, pf, ph):
        ev = slowdown_test(t.trend, q, a_f, a_h)
        mf, mh = QUESTIONS[q]
        tr = t.trend
        cells = ", ".join(f"N={n}: {_f(v)}" + (f" ({c} beyond the cap)" if c else "")
                          for n, v, c in zip(tr.N, tr.fitted, tr.censored))
        said = ("does not grow with N (Δ ≤ 0; read as practically flat when Δ < "
                f"{mh:g})" if q == "growth" else f"grows by no more than 2× over the studied N (Δ ≤ {mf:g})")
        out.append(Reading(
            name=f"{task}: {_lab(arm)} slowdown vs softmax, {'growth' if q == 'growth' else 'more than 2×'}",
            statement=f"{task}: log2({measure}, {_lab(arm)} / softmax) {said}",
            verdict=decide_slowdown(ev), rule=f"slowdown-{q}", key=(*key0, task, arm, q),
            why=(f"Δ = {_f(tr.delta)} (se {_u(tr.se)}, interval-censored fit, {sum(tr.n)} paired seeds); Holm-adjusted "
                 f"p(Δ ≤ {mf:g}) = {_p(a_f)}, p(Δ ≥ {mh:g}) = {_p(a_h)} over {m} readings (FAILS at ≤ {ALPHA_FAILS:g}); "
                 f"fitted log2 slowdown {{{cells}}}; {power_line(tr, m)}")))
    return tuple(out)


def _p(v: float) -> str:
    return "undefined" if not math.isfinite(v) else f"{v:.3g}"


def _u(v: float) -> str:
    return "undefined" if v is None or not math.isfinite(v) else f"{v:.2f}"


def _final_reading(task: str, arm: str, ev, cpu_per_seed: float | None = None) -> Reading:
    """The final-gap reading; an undecided one names the seeds and the command that would decide it (``cpu_per_seed``:
    the study's CPU seconds per replicate, for the estimate)."""
    from sapa.rules.learning import decide_final_gap, final_gap_reason
    from sapa.rules.stability import MARGIN

    t = ev.trend
    cells = ", ".join(f"N={n}: {_f(m, 3)}" for n, m in zip(t.N, t.cell_mean))
    why, seeds = final_gap_reason(ev)
    if seeds is not None:
        cost = f", ≈ {seeds * cpu_per_seed / 3600:.0f} CPU-hours for the whole study" if cpu_per_seed else ""
        why += f": `sapa train --budget full --seeds {seeds} --scheduler tcp://HOST:8786` on a cluster{cost}"
    return Reading(name=f"{task}: {_lab(arm)} final accuracy gap over N",
                   statement=f"{task}: the final test-accuracy gap of {_lab(arm)} to softmax changes by no less "
                             f"than −{MARGIN} over the studied N",
                   verdict=decide_final_gap(ev), rule="final-gap-trend", key=("final-gap", task, arm),
                   why=f"Δ = {_f(t.delta, 3)} (se {t.se:.3f}, df {t.df}); cell means {{{cells}}}; {why}")


def learning_block(study, best, accuracy_trends: dict, floors: dict) -> dict:
    """{"cells", "readings", "slowdown", "norms_at_exit", "findings"} of the study's learning curves."""
    from empirics.training.learning_analysis import norms_at_exit, slowdown_trends, study_learning
    from sapa.rules.learning import MARGINS, FinalGapEvidence

    cells = study_learning(study.runs, study.history, best, floors)
    slow = slowdown_trends(cells, HEADLINE_ARMS, "floor", MARGINS)
    conv = {(c["task"], c["N"], c["arm"]): sum(not v for v in c["converged"].values()) for c in cells}
    rs = list(slowdown_readings(slow, "steps to leave the floor", ("slowdown",)))
    prov, seeds = study.provenance or {}, (study.config or {}).get("seeds")
    per_seed = prov.get("cpu_s_total") / seeds if prov.get("cpu_s_total") and seeds else None
    for (task, arm) in slow:
        tr = accuracy_trends.get((task, arm))
        if tr is not None:
            unc = sum(conv.get((task, n, arm), 0) for n in tr.N)
            rs.append(_final_reading(task, arm, FinalGapEvidence(tr, unc), per_seed))
    findings = [learning_line(c) for c in cells]
    cens = [c for c in cells if c["exits"]["censored"]]
    if cens:
        findings.insert(0, "censored (never left the floor within the cap — not converged within the cap, not evidence "
                           "that the arm cannot learn): " + ", ".join(
                               f"{c['task']} N={c['N']} {_lab(c['arm'])} {c['exits']['censored']}/{c['exits']['n']}"
                               for c in cens))
    nx = norms_at_exit(cells)
    findings += [norm_line(arm, v) for arm, v in nx.items()]
    return {"cells": [_public(c) for c in cells], "readings": tuple(rs),
            "slowdown": {f"{t}/{a}": tr.as_dict() for (t, a), tr in slow.items()}, "norms_at_exit": nx,
            "findings": tuple(findings)}


def learning_line(c: dict) -> str:
    ex = c["exits"]
    med = f"median exit step {ex['median']}" if ex["median"] is not None else "median exit beyond the cap"
    m = c.get("acc_at_matched_steps")
    gap = f"; gap to softmax at the cap {m[-1][3]:+.3f}" if m else ""
    conv = sum(c["converged"].values())
    return (f"{c['task']} N={c['N']} {_lab(c['arm'])} (lr {c['lr']:.3g}): left the floor ({c['floor']:.3f} + 0.03) in "
            f"{ex['n'] - ex['censored']}/{ex['n']} seeds, {med}; final accuracy {c['final_acc_median']:.3f}, converged "
            f"{conv}/{len(c['converged'])} (flat within 0.01 over the last doubling of steps){gap}")


def norm_line(arm: str, v: dict) -> str:
    if not v.get("runs"):
        return f"norms at the plateau exit, {_lab(arm)}: no run left its floor"
    return (f"‖φ(S)‖_F at the exit, {_lab(arm)} ({v['runs']} runs aligned on their exit): median log-change into "
            f"the exit evaluation {v['median_change_at_exit']:+.3f} vs {v['median_change_before']:+.3f} one evaluation "
            f"earlier; larger at the exit in {v['larger_at_exit']}/{v['runs']} (sign test p = {v['p_sign_test']:.3g}) — "
            f"a finding with its uncertainty, not a verdict")


# --------------------------------------------------------------------------- mechanism-across-n


STATEMENT = ("Does x^p/√N's learning of attention mechanisms (copy at lag 1, 2 and N/2; induction; multi-query "
             "associative recall) slow down relative to softmax as the sequence length N grows — at all, and by more "
             "than 2×?")
TESTED = ("Per probe task and arm x/√N, x³/√N (one learning rate for every arm, warm-up then constant, paired seeds): "
          "s = log2(steps to validation accuracy 0.5, arm / softmax) per seed and N, the exits interval-censored on "
          "the evaluation grid and right-censored at the cap, on the (task, N) cells softmax solves (accuracy ≥ 0.9 in "
          "≥ 90 % of its seeds within the cap; other cells enter no verdict). The maximum-likelihood change Δ of s over "
          "the N range answers two questions with their own rules, Holm-adjusted over the entry's readings: does it "
          "grow (slowdown-growth) and by more than 2× (slowdown-doubling)? ANSWERED when every reading is decided.")


def mechanism_lines(cells: list[dict]) -> tuple[str, ...]:
    out = []
    for c in cells:
        s, h = c["solve"], c["half"]
        med = lambda e: e["median"] if e["median"] is not None else "beyond the cap"  # noqa: E731
        pe, px = c.get("profile_end"), c.get("profile_at_exit")
        prof = (f"; |φ| share on offsets 0/1/2 at the end {pe[0]:.2f}/{pe[1]:.2f}/{pe[2]:.2f}" if pe else "") + (
            f", at the 0.5 exit {px[0]:.2f}/{px[1]:.2f}/{px[2]:.2f}" if px else "")
        gate = "" if c["arm"] != "softmax" or c["decidable"] or c["role"] != "probe" else \
            " — too hard for this model at this budget: softmax solves it in fewer than 90 % of its seeds, no verdict"
        out.append(f"{c['task']} N={c['N']} {_lab(c['arm'])}: accuracy 0.5 reached {h['n'] - h['censored']}/{h['n']} "
                   f"(median step {med(h)}), solved (≥ 0.9) {s['n'] - s['censored']}/{s['n']} (median step {med(s)}, "
                   f"cap {s['cap']}); final accuracy {c['final_acc_median']:.3f}{prof}{gate}")
    return tuple(out)


def _solve_findings(cells: list[dict], arms) -> tuple[str, ...]:
    """The 0.9 threshold beside the main measure: its trend per (task, arm), a finding (no verdict, no Holm)."""
    from empirics.training.learning_analysis import slowdown_trends

    out = []
    for (task, arm), tr in slowdown_trends(cells, arms, "solve", (0.0, 1.0)).items():
        out.append(f"{task}: {_lab(arm)} slowdown in steps to accuracy 0.9 over N {tr.N[0]}…{tr.N[-1]}: Δ = "
                   f"{_f(tr.delta)} (se {_u(tr.se)}), unadjusted p(Δ ≤ 0) = {_p(tr.p_greater[0.0])}, "
                   f"p(Δ ≤ 1) = {_p(tr.p_greater[1.0])} — beside the main measure, not a verdict")
    return tuple(out)


def mechanism_outcome(mech: dict, arms=None) -> tuple[str, tuple[Reading, ...], str, dict, tuple[str, ...]]:
    """(verdict, readings, answer, evidence, findings) of the mechanism runs."""
    from empirics.training.learning_analysis import mechanism_learning, norms_at_exit, slowdown_trends
    from sapa.rules.learning import MARGINS

    cells = mechanism_learning(mech)
    slow = slowdown_trends(cells, arms, "half", MARGINS)
    rs = slowdown_readings(slow, "steps to accuracy 0.5", ("slowdown",))
    decided = bool(rs) and all(r.verdict != "UNDETERMINED" for r in rs)
    answer = mechanism_answer(rs, cells)
    nx = norms_at_exit(cells)
    hard = sorted({(c["task"], c["N"]) for c in cells if c["arm"] == "softmax" and c["role"] == "probe"
                   and not c["decidable"]})
    ev = {"cells": [_public(c) for c in cells], "slowdown": {f"{t}/{a}": e.as_dict() for (t, a), e in slow.items()},
          "too_hard": [{"task": t, "N": n} for t, n in hard], "norms_at_exit": nx, "config": mech["config"],
          "profile_bins": "share of Σ|φ(S)_ij| of layer 1 on offsets i − j = 0 … 7 and ≥ 8 (median over seeds)"}
    findings = (*mechanism_lines(cells), *_solve_findings(cells, arms), *(norm_line(a, v) for a, v in nx.items()))
    ev["_slow"] = slow  # for mechanism_conditions: mechanism-across-n pops it before the evidence is written
    return ("ANSWERED" if decided else "UNDETERMINED"), rs, answer, ev, findings


def mechanism_answer(rs: tuple[Reading, ...], cells: list[dict]) -> str:
    """One sentence per question: for which (task, arm) the slowdown grows, by more than 2×, and what is undecided."""
    by = {}
    for r in rs:
        task, arm, q = r.key[-3:]
        by.setdefault((q, r.verdict), []).append(f"{task} {_lab(arm)}")
    j = lambda q, v: ", ".join(by.get((q, v), [])) or "none"  # noqa: E731
    hard = sorted({f"{c['task']} N={c['N']}" for c in cells if c["arm"] == "softmax" and c["role"] == "probe"
                   and not c["decidable"]})
    found = "; ".join(
        f"{c['task']} N={c['N']} {_lab(c['arm'])} {c['solve']['n'] - c['solve']['censored']}/{c['solve']['n']}"
        + (f" (median step {c['solve']['median']})" if c["solve"]["median"] is not None else "")
        for c in cells if c["role"] == "finding")
    return (f"The slowdown relative to softmax grows with N for {j('growth', 'FAILS')}; it does not grow for "
            f"{j('growth', 'HOLDS')}; undecided for {j('growth', 'UNDETERMINED')}. By more than 2× over the range: "
            f"{j('doubling', 'FAILS')}; by no more than 2×: {j('doubling', 'HOLDS')}; undecided (beyond this design's "
            f"power): {j('doubling', 'UNDETERMINED')}."
            + (f" Too hard for this model at this budget (softmax itself does not solve them): {', '.join(hard)}."
               if hard else "")
            + (f" Findings, not judged (solved within the cap / seeds): {found}." if found else ""))


INJECTED_SLOWDOWN = 4.0  # log2: a further ×16 over the N range, added to every paired slowdown of one (task, arm)


def mechanism_conditions(slow: dict, rs: tuple[Reading, ...], verdict: str) -> tuple[dict, dict]:
    """Falsifiability and robustness of ``mechanism-across-n``, recomputed from this run's intervals.

    The control: the more-than-2× question on one (task, arm) — the one with the smallest se — refitted after a
    further rise of INJECTED_SLOWDOWN doublings over the N range has been added to every paired interval (a shift
    of INJECTED_SLOWDOWN·(x − x_min)/L in log2 moves both ends; censored ends stay censored), through the same
    estimator and rule (one reading: Holm m = 1). Robustness: the family-wise levels halved and doubled.
    """
    from sapa.conditions import could_fail, not_applicable, not_run, question_row, robustness
    from sapa.rules import learning as RL

    usable = [(k, t) for k, t in slow.items() if math.isfinite(t.se) and t.se > 0]
    if usable:
        (task, arm), t = min(usable, key=lambda kv: kv[1].se)
        ctrl_tr = t.shifted(INJECTED_SLOWDOWN)
        ctrl = RL.decide_slowdown(RL.slowdown_test(ctrl_tr, "doubling"))
        what, detail = f"{task}: {_lab(arm)}", {"delta": round(t.delta, 4), "se": round(t.se, 4),
                                                  "control_delta": round(ctrl_tr.delta, 4)}
    else:
        ctrl, what, detail = "UNDETERMINED", "(no (task, arm) with a trend)", {}
    fal = could_fail(
        "steps to accuracy 0.5 are measured per seed against softmax at the same seed: an arm whose slowdown grows "
        "with N moves Δ above the margin",
        f"{what}'s slowdown vs softmax grows by no more than 2× over N even after a further ×{2 ** INJECTED_SLOWDOWN:g} "
        "is added over the range (deliberately false)", ctrl,
        how=f"the run's own paired exit intervals with a linear rise of {INJECTED_SLOWDOWN:g} (log2) over log2 N added to "
            "both ends, refitted by the same interval-censored estimator, rule slowdown-doubling (one reading)", **detail)
    names, base = [r.name for r in rs], [r.verdict for r in rs]
    rows = [not_applicable("logit convention", "the tiny transformers compute S/√d; changing it changes the models "
                                               "(a new study), not the judgement")]
    for k in (0.5, 2.0):
        vs = _verdicts_at_levels(rs, slow, RL.ALPHA_FAILS * k, RL.ALPHA_HOLDS * k)
        rows.append(question_row(f"family-wise levels ×{k:g} (FAILS {RL.ALPHA_FAILS * k:g}, HOLDS "
                                 f"{RL.ALPHA_HOLDS * k:g})", names, base, vs))
    rows.append(not_run("seed", "a second set of training runs costs the budget again"))
    from empirics.training.mechanism import MECH_FULL as F

    rows.append(not_run("budget full", f"{max(p.seeds for p in F.probes)} seeds, N up to {max(F.Ns)}, "
                                       f"{len(F.probes)} tasks; not run in this budget"))  # a full ledger renames it
    return fal, robustness(verdict, rows)


def _verdicts_at_levels(rs, slow, a_fails: float, a_holds: float) -> list[str]:
    """The readings' verdicts with the family-wise levels replaced (same Holm-adjusted p-values)."""
    from empirics.training.censored_trend import holm
    from sapa.rules.learning import slowdown_test

    raw = [slowdown_test(slow[(task, arm)], q) for (*_, task, arm, q) in (r.key for r in rs)]
    pf, ph = holm([t.p_fails for t in raw]), holm([t.p_holds for t in raw])
    out = []
    for f_, h_ in zip(pf, ph):
        out.append("FAILS" if math.isfinite(f_) and f_ <= a_fails else
                   "HOLDS" if math.isfinite(h_) and h_ <= a_holds else "UNDETERMINED")
    return out
