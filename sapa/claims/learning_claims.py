"""Learning dynamics of the training study and the question ``mechanism-across-n`` (arXiv 2410.18613 §5).

For ``scale-keeps-training-stable``: :func:`learning_block` turns the study's history into per (task, N,
arm) learning statistics (:mod:`empirics.training.learning_analysis`) and two readings per headline arm
and task — ``slowdown-trend`` (does the slowdown in steps to leave the floor, relative to softmax,
grow with N?) and ``final-gap-trend`` (does the final accuracy gap grow?). A run that never leaves its
floor within the cap is censored: "not converged within the cap", never evidence that an arm cannot learn.

``mechanism-across-n`` (its check is :mod:`sapa.claims.mechanism_across_n`; a question: the reviews ask whether the scale rule keeps attention trainable
as N grows): on copy at lag 1 and 2, an induction head and multi-query associative recall, does
x^p/√N's learning slow down with N where softmax's does not? Per (task, arm) a ``slowdown-trend``
reading; findings: solved fraction, censored steps to solve and the offset-mass profile per (task, N, arm).
"""

from __future__ import annotations

from sapa.ledger import Reading

__all__ = ["learning_block", "mechanism_outcome", "mechanism_conditions", "slowdown_reading", "HEADLINE_ARMS",
           "STATEMENT", "TESTED"]

HEADLINE_ARMS = ("x_sqrtN", "x3_sqrtN")
LABEL = {"softmax": "softmax", "x_sqrtN": "x/√N", "x3_sqrtN": "x³/√N", "expr": "φ"}


def _lab(a: str) -> str:
    from figures.training_vs_n import LABELS

    return LABEL.get(a) or LABELS.get(a, a)


def _public(c: dict) -> dict:
    """A cell without its private per-seed arrays (JSON-safe)."""
    return {k: v for k, v in c.items() if not k.startswith("_")}


def _f(v, nd: int = 2) -> str:
    import math

    return "undefined" if v is None or not math.isfinite(v) else f"{v:+.{nd}f}"


def slowdown_reading(task: str, arm: str, ev) -> Reading:
    from sapa.rules.learning import MARGIN_SLOW, decide_slowdown

    t = ev.trend
    cells = ", ".join(f"N={n}: {_f(m)}" for n, m in zip(t.N, t.cell_mean))
    cens = f"; censored at the cap per N {list(ev.censored)} (entered at the cap: lower bounds)" if any(ev.censored) \
        else ""
    return Reading(name=f"{task}: {_lab(arm)} slowdown vs softmax over N",
                   statement=f"{task}: log2(steps to leave the floor, {_lab(arm)} / softmax) rises by less than "
                             f"{MARGIN_SLOW:g} over the studied N",
                   verdict=decide_slowdown(ev), rule="slowdown-trend",
                   why=f"Δ = {_f(t.delta)} (se {_f(t.se)}, df {t.df}); cell-mean log2 slowdown {{{cells}}}{cens}"
                       if t.N else "softmax never left the floor at any N with a paired seed: no reference")


def _final_reading(task: str, arm: str, ev) -> Reading:
    from sapa.rules.learning import decide_final_gap

    t = ev.trend
    cells = ", ".join(f"N={n}: {_f(m, 3)}" for n, m in zip(t.N, t.cell_mean))
    unc = f"; {ev.unconverged} member(s) not converged within the cap" if ev.unconverged else ""
    return Reading(name=f"{task}: {_lab(arm)} final accuracy gap over N",
                   statement=f"{task}: the final test-accuracy gap of {_lab(arm)} to softmax changes by no less "
                             f"than −0.05 over the studied N",
                   verdict=decide_final_gap(ev), rule="final-gap-trend",
                   why=f"Δ = {_f(t.delta, 3)} (se {_f(t.se, 3)}, df {t.df}); cell means {{{cells}}}{unc}")


def learning_block(study, best, accuracy_trends: dict, floors: dict) -> dict:
    """{"cells", "readings", "slowdown", "norms_at_exit", "findings"} of the study's learning curves."""
    from empirics.training.learning_analysis import norms_at_exit, slowdown_trends, study_learning
    from sapa.rules.learning import FinalGapEvidence

    cells = study_learning(study.runs, study.history, best, floors)
    slow = slowdown_trends(cells, HEADLINE_ARMS)
    conv = {(c["task"], c["N"], c["arm"]): sum(not v for v in c["converged"].values()) for c in cells}
    rs = []
    for (task, arm), ev in slow.items():
        rs.append(slowdown_reading(task, arm, ev))
        tr = accuracy_trends.get((task, arm))
        if tr is not None:
            unc = sum(conv.get((task, n, arm), 0) for n in tr.N)
            rs.append(_final_reading(task, arm, FinalGapEvidence(tr, unc)))
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
            "slowdown": {f"{t}/{a}": ev.as_dict() for (t, a), ev in slow.items()}, "norms_at_exit": nx,
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
    return (f"‖φ(S)‖_F at the plateau exit, {_lab(arm)} ({v['runs']} runs aligned on their exit): median log-change into "
            f"the exit evaluation {v['median_change_at_exit']:+.3f} vs {v['median_change_before']:+.3f} one evaluation "
            f"earlier; larger at the exit in {v['larger_at_exit']}/{v['runs']} (sign test p = {v['p_sign_test']:.3g}) — "
            f"a finding with its uncertainty, not a verdict")


# --------------------------------------------------------------------------- mechanism-across-n


STATEMENT = ("Does x^p/√N's learning of attention mechanisms (copy at lag 1 and 2, an induction head, multi-query "
             "associative recall) slow down with the sequence length N where softmax's does not?")
TESTED = ("Per mechanism task and arm x/√N, x³/√N (one learning rate for every arm, warm-up then constant, paired "
          "seeds): s = log2(steps to leave chance + 0.03, arm / softmax) per seed and N; slowdown-trend reads the OLS "
          "trend of the cell means over log2 N against a doubling (censored runs enter at the cap and can only "
          "remove HOLDS). ANSWERED when every reading is decided.")


def mechanism_lines(cells: list[dict]) -> tuple[str, ...]:
    out = []
    for c in cells:
        s = c["solve"]
        med = s["median"] if s["median"] is not None else "beyond the cap"
        pe, px = c.get("profile_end"), c.get("profile_at_exit")
        prof = (f"; |φ| share on offsets 0/1/2 at the end {pe[0]:.2f}/{pe[1]:.2f}/{pe[2]:.2f}" if pe else "") + (
            f", at the exit {px[0]:.2f}/{px[1]:.2f}/{px[2]:.2f}" if px else "")
        out.append(f"{c['task']} N={c['N']} {_lab(c['arm'])}: solved (accuracy ≥ 0.9) {s['n'] - s['censored']}/{s['n']}, "
                   f"median steps to solve {med} (cap {s['cap']}); final accuracy {c['final_acc_median']:.3f}{prof}")
    return tuple(out)


def mechanism_outcome(mech: dict, arms=None) -> tuple[str, tuple[Reading, ...], str, dict, tuple[str, ...]]:
    """(verdict, readings, answer, evidence, findings) of the mechanism runs."""
    from empirics.training.learning_analysis import mechanism_learning, norms_at_exit, slowdown_trends

    cells = mechanism_learning(mech)
    slow = slowdown_trends(cells, arms)
    rs = tuple(slowdown_reading(t, a, ev) for (t, a), ev in slow.items())
    decided = bool(rs) and all(r.verdict != "UNDETERMINED" for r in rs)
    grows = [r.name.split(" slowdown")[0] for r in rs if r.verdict == "FAILS"]
    keeps = [r.name.split(" slowdown")[0] for r in rs if r.verdict == "HOLDS"]
    und = [r.name.split(" slowdown")[0] for r in rs if r.verdict == "UNDETERMINED"]
    cap = mech["config"]["steps"]
    answer = (f"Within a {cap}-step cap: the slowdown relative to softmax grows by more than ×2 over N for "
              f"{', '.join(grows) or 'none'}; it does not for {', '.join(keeps) or 'none'}; undecided for "
              f"{', '.join(und) or 'none'} (censored runs or too few seeds).")
    nx = norms_at_exit(cells)
    ev = {"cells": [_public(c) for c in cells], "slowdown": {f"{t}/{a}": e.as_dict() for (t, a), e in slow.items()},
          "norms_at_exit": nx, "config": mech["config"],
          "profile_bins": "share of Σ|φ(S)_ij| of layer 1 on offsets i − j = 0 … 7 and ≥ 8 (median over seeds)"}
    findings = mechanism_lines(cells) + tuple(norm_line(a, v) for a, v in nx.items())
    ev["_slow"] = slow  # for mechanism_conditions: mechanism-across-n pops it before the evidence is written
    return ("ANSWERED" if decided else "UNDETERMINED"), rs, answer, ev, findings


INJECTED_SLOWDOWN = 8.0  # log2: a further ×256 over the N range (2 seeds × 2 cells detect ≳ ×54; 3 × 3 ≳ ×1.4)


def mechanism_conditions(slow: dict, rs: tuple[Reading, ...], verdict: str) -> tuple[dict, dict]:
    """Falsifiability and robustness of ``mechanism-across-n``, recomputed from this run's slowdown evidence.

    The control: the real paired slowdowns of one (task, arm) with a further rise of INJECTED_SLOWDOWN doublings
    over the N range added (a linear trend in log2 N added to every seed's value shifts Δ exactly and leaves se
    and df unchanged; the exits it implies are extrapolated past the cap), through rule slowdown-trend — the
    claim "the slowdown does not grow" must be rejected. The (task, arm) is the one the rule can decide best:
    nothing censored below the largest N, the smallest se. Robustness: the margin ±20 %.
    """
    import math
    from dataclasses import replace

    from scipy import stats

    from sapa.conditions import (could_fail, not_applicable, not_run, question_row, robustness,
                                 threshold_variants)
    from sapa.rules.learning import MARGIN_SLOW, decide_slowdown
    from sapa.rules.stability import ALPHA_FAILS

    usable = [(k, e) for k, e in slow.items() if not any(e.censored[:-1]) and e.trend.df >= 1
              and math.isfinite(e.trend.se) and e.trend.se > 0 and math.isfinite(e.trend.delta)]
    if usable:
        (task, arm), e = min(usable, key=lambda kv: kv[1].trend.se)
        ctrl_ev = replace(e, trend=replace(e.trend, delta=e.trend.delta + INJECTED_SLOWDOWN))
        ctrl = decide_slowdown(ctrl_ev)
        need = MARGIN_SLOW + float(stats.t.ppf(1 - ALPHA_FAILS, e.trend.df)) * e.trend.se - e.trend.delta
        what, detail = f"{task}: {_lab(arm)}", {
            "delta": round(e.trend.delta, 4), "se": round(e.trend.se, 4), "df": e.trend.df,
            "control_delta": round(ctrl_ev.trend.delta, 4), "fails_only_above_injection": round(need, 4)}
    else:
        ctrl, what, detail = "UNDETERMINED", "(no (task, arm) with uncensored exits below the largest N)", {}
        need = math.nan
    fal = could_fail(
        "steps to leave the floor are measured per seed against softmax at the same seed: an arm whose slowdown grows "
        "with N moves Δ above the margin",
        f"{what}'s slowdown vs softmax rises by less than ×{2 ** MARGIN_SLOW:g} over N even after a further "
        f"×{2 ** INJECTED_SLOWDOWN:g} is added over the range (deliberately false)", ctrl,
        how=f"the run's own paired log2 slowdowns with a linear rise of {INJECTED_SLOWDOWN:g} (log2) over log2 N added "
            f"(Δ + {INJECTED_SLOWDOWN:g}, se and df unchanged; the implied exits lie past the cap), rule slowdown-trend"
            + (f"; with this design the rule says FAILS for an injection above {need:.2f} (log2)"
               if math.isfinite(need) else ""),
        **detail)
    names, base = [r.name for r in rs], [r.verdict for r in rs]
    rows = [not_applicable("logit convention", "the tiny transformers compute S/√d; changing it changes the models "
                                               "(a new study), not the judgement")]
    keys = list(slow)
    for m in threshold_variants(MARGIN_SLOW):
        vs = [decide_slowdown(slow[k], m) for k in keys]
        rows.append(question_row(f"margin {m:.3g} log2 (±20 % of {MARGIN_SLOW:g}: ×{2 ** m:.2f})", names, base, vs))
    rows.append(not_run("seed", "a second set of training runs costs the budget again"))
    from empirics.training.mechanism import MECH_FULL as F

    rows.append(not_run("budget full", f"{F.seeds} seeds, N up to {max(F.Ns)}, a {F.steps}-step cap, {len(F.tasks)} "
                                       "tasks; not run in this budget"))  # a full ledger renames it (sapa.ledger)
    return fal, robustness(verdict, rows)
