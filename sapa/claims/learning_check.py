"""The slowdown's two questions and the learning-curve readings, shared by two training entries (arXiv 2410.18613 §5).

``scale-keeps-training-stable`` and ``mechanism-across-n`` ask two questions of the slowdown s = log2(steps to a threshold, arm / softmax) per paired
seed, each with its own rule (:mod:`sapa.rules.learning`): does it grow with N at all
(``slowdown-growth``), and by more than 2× over the studied range (``slowdown-doubling``)? Exits are
interval-censored on the evaluation grid (:mod:`sapa.empirics.training.censored_trend`), and the p-values are
Holm-adjusted over the entry's slowdown readings, so each entry's family-wise error is its own. Every
reading prints the design's power to see a change of one doubling and the seeds per cell that 80 % power
would take.

* ``scale-keeps-training-stable`` (:func:`learning_block`): exits at the floor + 0.03 (text: the bigram
  predictor), and the final accuracy gap (``final-gap-trend``, whose reason names the condition that bound).
* ``mechanism-across-n`` (:mod:`sapa.claims.mechanism_across_n`): exits at accuracy 0.5 (the main measure; 0.9 beside it as
  a finding) on the probe cells softmax solves (≥ 90 % of its seeds within the cap); the cells it does not
  solve are reported as too hard for this model at this budget and enter no verdict.
"""

from __future__ import annotations

import math

from sapa.ledger import Reading

__all__ = ["learning_block", "slowdown_readings", "power_line", "learning_line", "norm_line", "DELTA_POWER"]

DELTA_POWER = 1.0  # the change (log2) whose detection the printed power refers to: one doubling over the range
POWER_TARGET = 0.8


def _lab(a: str) -> str:
    from sapa.empirics.training.study_config import arm_label

    return arm_label(a)


def _public(c: dict) -> dict:
    """A cell without its private per-seed arrays (JSON-safe)."""
    return {k: v for k, v in c.items() if not k.startswith("_")}


def _f(v, nd: int = 2) -> str:
    return "undefined" if v is None or not math.isfinite(v) else f"{v:+.{nd}f}"


def power_line(tr, m: int) -> str:
    """The design's power to see Δ = DELTA_POWER at the least favourable Holm level ALPHA_FAILS/m, and the seeds
    per cell 80 % would take (censoring ignored), read at σ̂ of this fit or, where σ̂ is below what the evaluation grid
    can resolve, at the grid's w/√12 (``IntervalTrend.sigma_for_power``)."""
    from sapa.empirics.training.censored_trend import design_power, seeds_for_power
    from sapa.rules.learning import ALPHA_FAILS

    a = ALPHA_FAILS / max(m, 1)
    sd = tr.sigma_for_power
    pw = design_power(tr.n, tr.N, sd, DELTA_POWER, a)
    need = seeds_for_power(tr.N, sd, DELTA_POWER, a, POWER_TARGET) if math.isfinite(sd) else None
    if not math.isfinite(pw):
        return "power undefined (fewer than 2 cells)"
    spread = (f"σ̂ {tr.sigma:.2f}" if sd == tr.sigma else
              f"σ̂ {tr.sigma:.2f} is below the grid's resolution: read at w/√12 = {sd:.2f}")
    return (f"power {pw:.0%} to see Δ {DELTA_POWER:g} doubling past the tested margin at level {ALPHA_FAILS:g}/{m} "
            f"({spread}, {min(tr.n)}–{max(tr.n)} seeds per cell); {POWER_TARGET:.0%} needs "
            + (f"{need} seeds per cell" if need else "more than 100 000 seeds per cell"))


def observed_line(tr, q: str, m: int) -> str:
    """For an undecided reading: the seeds per cell at which its test would decide at the **observed** Δ with
    POWER_TARGET — the side whose margin Δ̂ lies farther from (FAILS past the FAILS margin at ALPHA_FAILS/m, HOLDS below
    the HOLDS margin at ALPHA_HOLDS/m), read at the same spread as :func:`power_line`, censoring ignored."""
    from sapa.empirics.training.censored_trend import seeds_for_power
    from sapa.rules.learning import ALPHA_FAILS, ALPHA_HOLDS, QUESTIONS

    mf, mh = QUESTIONS[q]
    sd = tr.sigma_for_power
    sides = [(tr.delta - mf, ALPHA_FAILS), (mh - tr.delta, ALPHA_HOLDS)]
    sides = [(d, a) for d, a in sides if math.isfinite(d) and d > 0]
    if not sides or not math.isfinite(sd):
        return "at the observed Δ no number of seeds decides it (Δ̂ on a margin)"
    d, a = max(sides)
    need = seeds_for_power(tr.N, sd, d, a / max(m, 1), POWER_TARGET)
    return (f"at the observed Δ, {POWER_TARGET:.0%} power to decide it needs "
            + (f"{need} seeds per cell" if need else "more than 100 000 seeds per cell"))


def slowdown_readings(trends: dict, measure: str, key0: tuple = ()) -> tuple[Reading, ...]:
    """Per (task, arm) trend a ``slowdown-growth`` and a ``slowdown-doubling`` reading, Holm over all of them.

    ``measure``: what the exits are ("steps to accuracy 0.5", "steps to leave the floor"); keys are
    ``(*key0, task, arm, question)``.
    """
    from sapa.empirics.training.censored_trend import holm
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
        verdict = decide_slowdown(ev)
        out.append(Reading(
            name=f"{task}: {_lab(arm)} slowdown vs softmax, {'growth' if q == 'growth' else 'more than 2×'}",
            statement=f"{task}: log2({measure}, {_lab(arm)} / softmax) {said}",
            verdict=verdict, rule=f"slowdown-{q}", key=(*key0, task, arm, q),
            why=(f"Δ = {_f(tr.delta)} (se {_u(tr.se)}, interval-censored fit, {sum(tr.n)} paired seeds); Holm-adjusted "
                 f"p(Δ ≤ {mf:g}) = {_p(a_f)}, p(Δ ≥ {mh:g}) = {_p(a_h)} over {m} readings (FAILS at ≤ {ALPHA_FAILS:g}); "
                 f"fitted log2 slowdown {{{cells}}}; {power_line(tr, m)}"
                 + (f"; {observed_line(tr, q, m)}" if verdict == "UNDETERMINED" else ""))))
    return tuple(out)


def _p(v: float) -> str:
    return "undefined" if not math.isfinite(v) else f"{v:.3g}"


SE_UNBOUNDED = 1e3  # doublings: a standard error beyond this says the data bound Δ on one side only (right-censored)


def _u(v: float) -> str:
    if v is None or not math.isfinite(v):
        return "undefined"
    return "unbounded: the intervals bound Δ on one side only" if v >= SE_UNBOUNDED else f"{v:.2f}"


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
    from sapa.empirics.training.learning_analysis import norms_at_exit, slowdown_trends, study_learning
    from sapa.rules.learning import MARGINS, FinalGapEvidence

    from sapa.evidence.training_study import HEADLINE_ARMS

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
