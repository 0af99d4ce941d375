"""Ledger claim ``scale-keeps-training-stable``: Δ_arm = change of acc(arm) − acc(softmax) over N ≥ −δ? (arXiv 2410.18613, §5).

The paper's practical claim: softmax trains well because its attention norm does not grow with the
sequence length N, and φ(x) = x^p/√N keeps the norm in check the same way, so it can replace softmax
at any N; an unscaled x^p, or a constant α tuned at one N (the paper's x/16, x³/16), should not
transfer across N. The training study (``sapa.empirics.training.train_study``) trains tiny transformers
on 8×8 digits (N = 16, 64 patches) and a causal character model (N = context) with every arm at its
own learning-rate sweep and several paired seeds per N.

Readings (rules in :mod:`sapa.rules.stability`, calibrated by ``sapa calibrate``), each per task and
arm with the (arm, N) cell as the unit: Δ = the OLS trend of the cell-mean paired accuracy gap to
softmax over the studied log2 N range. **Headline**: x/√N and x³/√N on every task, a conjunction —
HOLDS only if each of the readings HOLDS, FAILS if any FAILS (Bonferroni: the rule's FAILS level is
1 %/4). Beside it: the same rule for x^p/α* (α tuned at the smallest N, then fixed), unscaled x^p,
x^p/N and x³/√i — the paper predicts some of these degrade; the data decides — and the
``divergence-trend`` reading per arm (the diverged share of the lr grid relative to softmax's).
Findings: the accuracy-vs-N table per arm (best lr, median, [min, max] over seeds), divergence
counts, α*, best learning rates at an edge of their grid, whether softmax left the bigram
plateau on text, and the step at which softmax's validation curve flattened (or that it was still rising).

The check keeps the study in ``ctx.cache["train_study"]``; ``norm-vs-accuracy`` reads the same runs.
"""

from __future__ import annotations

import math
import time

import pandas as pd
from scipy import stats

from sapa.empirics.training.study_config import arm_label
from sapa.evidence.training_study import HEADLINE_ARMS, PLATEAU_MARGIN
from sapa.ledger import Claim, Context, Contract, Outcome, Reading
from sapa.prose import scale_keeps_training_stable_words as words

OTHER_ARMS = ("x_alpha", "x3_alpha", "x", "x3", "x_N", "x3_N", "x3_sqrti")


def check(ctx: Context) -> Outcome:
    """Run (or resume) the training study, judge the trend and learning-speed readings, draw the figures."""
    from sapa.evidence.training_study import error_text, get_study

    t0 = time.perf_counter()
    try:
        study = get_study(ctx)
    except Exception as exc:  # a study that cannot complete is evidence of nothing: say why
        return Outcome(verdict="UNDETERMINED", tested_statement=words.TESTED, rule="stability-trend",
                       headline=f"training study failed: {error_text(exc)}",
                       evidence={"status": "study could not be completed", "error": error_text(exc)})
    g = gather(study)
    a, learn = g["analysis"], g["learning"]
    base = readings(a)
    rs = (with_learning_speed(base[0], learn["readings"]), *learn["readings"], *base[1:])
    fal, robust = conditions(a, rs)
    g["evidence"]["check_wall_seconds"] = round(time.perf_counter() - t0, 1)
    return Outcome(verdict=rs[0].verdict, readings=rs, rule="stability-trend", falsifiability=fal, robustness=robust,
                   headline=words.headline(rs, a), tested_statement=words.TESTED,
                   corrected_claim=words.corrected(rs, g["floored"]), figures=_figures(ctx, study, g),
                   findings=_findings(g), evidence=g["evidence"])


def gather(study) -> dict:
    """The study's evidence: the accuracy analysis, the text gates (bigram plateau, arms on the floor), the learning
    curves' block (:func:`sapa.claims.learning_check.learning_block`), softmax's flattening and the evidence dict."""
    from sapa.empirics.training import study_analysis as SA
    from sapa.empirics.training.train_study import study_floors
    from sapa.claims.learning_check import learning_block
    from sapa.evidence.training_study import bigram_by_n

    table = SA.accuracy_table(study.runs, SA.best_lr(study.runs))
    texts = table[table["task"] == "text"]
    bigram = bigram_by_n(sorted(set(texts["N"])), study.config) if len(texts) else {}
    plateau = plateau_from(table, bigram) if len(texts) else None
    flat_n = frozenset(("text", int(n)) for n, v in ((plateau or {}).get("per_N") or {}).items() if not v["left"])
    floored = floored_arms(table, bigram, flat_n)
    a = analyse(study.runs, flat_n, floored)
    learn = learning_block(study, a["best"], a["accuracy"], study_floors(study))  # floors: chance, validation bigram
    flat = SA.flattening(study.history, a["best"]) if study.history is not None else None
    g = {"analysis": a, "learning": learn, "table": table, "bigram": bigram, "plateau": plateau, "floored": floored,
         "flat": flat, "prov": study.provenance or {}}
    g["evidence"] = _evidence(study, g)
    return g


def _findings(g: dict) -> tuple[str, ...]:
    a, floored = g["analysis"], g["floored"]
    floor = words.floor_line(floored, g["table"], g["bigram"])
    left_out = (f"accuracy trends leave out {', '.join(f'{t} N={n}' for t, n in a['uninformative'])}: softmax did not "
                f"leave the bigram plateau there, so a gap to it says nothing about the scale rule",) \
        if a["uninformative"] else ()
    return (*((floor,) if floor else ()), *g["learning"]["findings"], *words.level_lines(a["table"]), *left_out,
            *words.table_lines(a["table"]), *words.divergence_lines(a["counts"]), words.alpha_line(g["prov"]),
            *words.edge_lines(a["best"]), words.plateau_line(g["plateau"]), words.flattening_line(g["flat"]))


def _figures(ctx: Context, study, g: dict) -> tuple[str, ...]:
    """The study's figures (drawn once per run) and the learning-curve figures (stored for ``sapa figures``)."""
    from sapa.figures import learning_curves as lfig
    from sapa.evidence.training_study import study_figures
    from sapa.ledger import store_figure_data

    data = lfig.stored_data(g["learning"]["cells"], solved=False, budget=ctx.budget.name,
                            trends=g["learning"]["slowdown"])
    store_figure_data(ctx, "study_learning", data, "study_learning")
    drawn = lfig.draw_stored(data, ctx.out_dir / "figures", "study_learning")
    return (*study_figures(ctx, study, g["bigram"]), *(str(p.relative_to(ctx.out_dir)) for p in drawn))


def _evidence(study, g: dict) -> dict:
    from sapa.empirics.training.study_analysis import lr_sensitivity

    a, learn, prov = g["analysis"], g["learning"], g["prov"]
    return {
        "cells_left_out_of_the_accuracy_trends": {
            "cells": [{"task": t, "N": n} for t, n in a["uninformative"]],
            "why": "softmax (the reference) did not leave the bigram plateau there (some seed's test accuracy ≤ "
                   f"the bigram predictor's + {PLATEAU_MARGIN}): a gap to a reference that learned nothing beyond "
                   "bigram statistics says nothing about the scale rule"},
        "learning_curves": learn["cells"],
        "slowdown_trends": learn["slowdown"],
        "norms_at_plateau_exit": learn["norms_at_exit"],
        "accuracy_trends": {f"{t}/{arm}": ev.as_dict() for (t, arm), ev in a["accuracy"].items()},
        "divergence_trends": {f"{t}/{arm}": ev.as_dict() for (t, arm), ev in a["divergence"].items()},
        "accuracy_vs_n": _records(a["table"]),
        "divergence_counts": _records(a["counts"]),
        "best_lr": _records(a["best"]),
        "lr_sensitivity": _records(lr_sensitivity(study.runs)),
        "alpha_star": prov.get("alpha_star"),
        "bigram_plateau": g["plateau"],
        "arms_on_the_floor": {"arms": [{"task": t, "arm": arm} for t, arm in sorted(g["floored"])],
                              "why": "at no N of the trend did every seed's test accuracy at the best lr clear the "
                                     "bigram predictor's by the plateau margin: censored at the floor, the trend "
                                     "reading is not judged"},
        "softmax_flattening": _records(g["flat"]) if g["flat"] is not None else None,
        "config": study.config,
        "numerics": prov.get("numerics"),
        "design": prov.get("design"),  # {sha256, fixed_at, first_data_at, fixed_first}: DESIGN.md item 10
        "shipped_evidence": prov.get("evidence"),  # the shipped, sealed study read instead of training (else None)
        "study_wall_seconds": prov.get("wall_s"),
        "members_trained_now": prov.get("members_trained_now"),
        "interval": "[min, max] over seeds: a distribution-free interval for the median, coverage 1 − 2^(1−n)",
        "caveats": "tiny models trained for minutes on CPU, few seeds and N values: a degradation not shown is not an "
                   "absence; accuracy is compared at each arm's own best learning rate from a finite grid (see the "
                   "edge finding).",
    }


# --------------------------------------------------------------------------- evidence → readings


def analyse(runs: pd.DataFrame, uninformative: frozenset = frozenset(), floored: frozenset = frozenset()) -> dict:
    """Everything the readings and findings use, from the runs table (pure).

    ``uninformative``: (task, N) cells left out of the accuracy trends because softmax, the reference,
    did not train there beyond the task's floor (text: the bigram plateau) — a gap to a reference that
    learned nothing says nothing about what the scale rule does. They stay in every table and figure.
    ``floored``: (task, arm) pairs that sat on the task's floor at every N of the trend
    (:func:`floored_arms`): their accuracy is censored there, so their trend reading is not judged.
    """
    from sapa.empirics.training import study_analysis as SA

    best = SA.best_lr(runs)
    keep = ~pd.Series([(t, int(n)) in uninformative for t, n in zip(runs["task"], runs["N"])], index=runs.index)
    acc_runs = runs[keep]
    acc_best = SA.best_lr(acc_runs) if len(acc_runs) else best
    return {"best": best, "accuracy": SA.accuracy_trends(acc_runs, acc_best) if len(acc_runs) else {},
            "uninformative": sorted(uninformative), "floored": sorted(floored),
            "divergence": SA.divergence_trends(runs),
            "table": SA.accuracy_table(runs, best), "counts": SA.divergence_counts(runs, best),
            "tasks": [t for t in ("digits", "text") if t in set(best["task"])]
            + sorted(set(best["task"]) - {"digits", "text"})}


def _acc_reading(task: str, arm: str, ev, floored: bool = False) -> Reading:
    """The accuracy-trend reading of (task, arm), keyed ("accuracy", task, arm); an arm on the floor is not judged."""
    from sapa.rules.stability import MARGIN, decide_accuracy

    statement = (f"{task}: the test-accuracy gap of {arm_label(arm)} to softmax (both at their best lr, paired seeds) "
                 f"changes by no less than −{MARGIN} over N = {ev.N[0]}…{ev.N[-1]}")
    verdict, why = decide_accuracy(ev), words.trend_why(ev)
    if floored:  # censored at the floor at every N: the rule's Δ would be softmax's own trend, sign reversed
        verdict, why = "UNDETERMINED", (
            f"not judged: {arm_label(arm)} did not leave the task's floor within the step cap (text: the bigram plateau, "
            f"every seed by > {PLATEAU_MARGIN}; censored, not converged) at any N of the trend, so its accuracy is "
            f"pinned there and the gap moves only with softmax's accuracy (the rule would have read {verdict}); {why}")
    return Reading(name=f"{task}: {arm_label(arm)} accuracy vs softmax over N", statement=statement, verdict=verdict,
                   rule="stability-trend", why=why, key=("accuracy", task, arm))


def _div_reading(task: str, arm: str, ev) -> Reading:
    from sapa.rules.stability import MARGIN_STABLE, decide_divergence

    return Reading(name=f"{task}: {arm_label(arm)} divergence vs softmax over N",
                   statement=f"{task}: the diverged share of {arm_label(arm)}'s learning-rate grid, relative to "
                             f"softmax's, rises by no more than {MARGIN_STABLE} over N = {ev.N[0]}…{ev.N[-1]}",
                   verdict=decide_divergence(ev), rule="divergence-trend", why=words.trend_why(ev),
                   key=("divergence", task, arm))


def readings(a: dict) -> tuple[Reading, ...]:
    """The headline conjunction first (key ("headline",)), then its components, the other arms, the divergences."""
    from sapa.rules.stability import ALPHA_FAILS, K_HEADLINE, combine

    acc, div, fl = a["accuracy"], a["divergence"], set(a.get("floored", ()))
    heads = [_acc_reading(t, arm, acc[(t, arm)], (t, arm) in fl) for t in a["tasks"] for arm in HEADLINE_ARMS
             if (t, arm) in acc]
    names = ", ".join(f"{r.key[1]}: {arm_label(r.key[2])} {r.verdict}" for r in heads) or "no x^p/√N arm in the study"
    first = Reading(
        name="x^p/√N, p ∈ {1, 3}, every task: accuracy relative to softmax does not degrade with N (conjunction)",
        statement="for x/√N and x³/√N on every task, the paired accuracy gap to softmax does not fall by more than "
                  "the margin over the studied N range",
        verdict=combine(r.verdict for r in heads), rule="stability-trend", key=("headline",),
        why=f"HOLDS only if all {len(heads)} HOLD, FAILS if any FAILS (each at one-sided {ALPHA_FAILS:.2%} = 1 %/"
            f"{K_HEADLINE}): {names}")
    others = [_acc_reading(t, arm, acc[(t, arm)], (t, arm) in fl) for t in a["tasks"] for arm in OTHER_ARMS
              if (t, arm) in acc]
    divs = [_div_reading(t, arm, div[(t, arm)]) for t in a["tasks"] for arm in HEADLINE_ARMS + OTHER_ARMS
            if (t, arm) in div]
    return (first, *heads, *others, *divs)


def with_learning_speed(first: Reading, learning: tuple[Reading, ...]) -> Reading:
    """The headline conjunction with x^p/√N's learning speed: HOLDS needs every slowdown-growth reading to HOLD too.

    A slowdown reading never turns the headline into FAILS (it is reported as its own reading, Holm-adjusted with
    the entry's other slowdown readings): the headline's false-FAILS level stays that of the accuracy readings.
    """
    import dataclasses

    slow = [r for r in learning if r.rule == "slowdown-growth"]
    if not slow:
        return first
    names = ", ".join(f"{r.key[-3]} {arm_label(r.key[-2])} {r.verdict}" for r in slow)
    verdict = "UNDETERMINED" if first.verdict == "HOLDS" and any(r.verdict != "HOLDS" for r in slow) else first.verdict
    return dataclasses.replace(first, verdict=verdict,
                               name=first.name.replace("(conjunction)", "and learning speed (conjunction)"),
                               why=f"{first.why}; learning speed (slowdown-growth, HOLDS needs every one to HOLD; "
                                   f"never FAILS the headline by itself): {names}")


# --------------------------------------------------------------------------- the text floor (gates of the readings)


def off_the_floor(lo: float, floor: float) -> bool:
    """A cell left the floor when every seed did: the lower end of its [min, max] median interval > floor + margin."""
    return bool(lo > floor + PLATEAU_MARGIN)


def plateau_from(table: pd.DataFrame, bigram: dict) -> dict | None:
    """Per text N: softmax's test accuracy at its best lr (median, min over seeds) against the bigram predictor's."""
    s = table[(table["task"] == "text") & (table["arm"] == "softmax")]
    rows = {}
    for r in s.itertuples():
        if r.N in bigram and bigram[r.N] is not None:
            gap = float(r.median) - float(bigram[r.N])
            rows[int(r.N)] = {"bigram_acc": round(float(bigram[r.N]), 5), "softmax_acc": round(float(r.median), 5),
                              "softmax_min": round(float(r.lo), 5), "gap": round(gap, 5),
                              "left": off_the_floor(float(r.lo), float(bigram[r.N]))}
    if not rows:
        return None
    return {"margin": PLATEAU_MARGIN, "per_N": rows, "left_at_every_N": all(v["left"] for v in rows.values())}


def floored_arms(table: pd.DataFrame, bigram: dict, uninformative=frozenset()) -> frozenset:
    """(text, arm) that did not leave the bigram plateau (:func:`off_the_floor`) at any trend N.

    The trend N are the text N with a bigram reading that are not ``uninformative`` (softmax on the
    plateau there). An arm pinned to the floor at all of them is censored: its gap to softmax can
    only move with softmax, so "does not degrade" would be read off the reference alone. An arm that
    left the floor at some N is judged by the rule as usual (its gap says what it learned there).
    """
    t = table[(table["task"] == "text") & (table["arm"] != "softmax")]
    out = set()
    for arm, g in t.groupby("arm", sort=True):
        cells = [(int(r.N), float(r.lo)) for r in g.itertuples()
                 if bigram.get(int(r.N)) is not None and ("text", int(r.N)) not in uninformative]
        if len(cells) >= 2 and not any(off_the_floor(lo, bigram[n]) for n, lo in cells):
            out.add(("text", str(arm)))
    return frozenset(out)


# --------------------------------------------------------------------------- conditions


def conditions(a: dict, rs: tuple[Reading, ...]) -> tuple[dict, dict]:
    """Falsifiability (a degradation injected into the real x/√N trend, same rule) and robustness (margin ±20 %)."""
    from dataclasses import replace

    from sapa.conditions import could_fail, not_applicable, not_run, robustness, threshold_variants, varied
    from sapa.rules.stability import ALPHA_FAILS, MARGIN, combine, decide_accuracy

    acc, fl = a["accuracy"], set(a.get("floored", ()))
    keys = [(t, arm) for t in a["tasks"] for arm in HEADLINE_ARMS if (t, arm) in acc]
    injected = 4 * MARGIN  # the gap falls by a further 0.2 over the N range: a degradation the claim denies
    if keys:
        ev = acc[keys[0]]
        # subtracting a linear trend in log2 N from every seed's gap shifts Δ exactly and leaves se and df unchanged
        ctrl_ev = replace(ev, delta=ev.delta - injected,
                          slope=ev.slope - injected / max(math.log2(ev.N[-1] / ev.N[0]), 1e-12) if len(ev.N) > 1
                          else ev.slope)
        ctrl = decide_accuracy(ctrl_ev)
        what = f"{keys[0][0]}: {arm_label(keys[0][1])}"
        reach = (-MARGIN - float(stats.t.ppf(1 - ALPHA_FAILS, ev.df)) * ev.se
                 if ev.df >= 1 and math.isfinite(ev.se) else math.nan)
    else:
        ctrl, what, reach = "UNDETERMINED", "(no x^p/√N arm in the study)", math.nan
    fal = could_fail("accuracy gaps are measured per seed; a scale rule whose accuracy falls behind softmax's as N grows "
                     "moves Δ below −δ",
                     f"{what}'s gap to softmax stays within −{MARGIN} over N even after losing a further "
                     f"{injected:.2f} accuracy over the range (deliberately false)", ctrl,
                     how=f"the study's own paired gaps with a linear loss of {injected:.2f} over log2 N subtracted (Δ − "
                         f"{injected:.2f}, se and df unchanged), rule stability-trend; at the real per-seed spread "
                         "(≈ 0.14) the rule's measured power is low, so an UNDETERMINED control is reported, not hidden",
                     fails_only_below=None if not math.isfinite(reach) else round(reach, 4),
                     reachable=bool(math.isfinite(reach) and reach > -1.0),
                     note=("with this design the rule says FAILS only for Δ < "
                           + (f"{reach:.3f}" if math.isfinite(reach) else "(undefined)")
                           + " (−δ − t·se); an accuracy gap cannot change by less than −1, so "
                           + ("no false variant can be shown to fail here: the verdict can only be HOLDS or "
                              "UNDETERMINED at this budget" if not (math.isfinite(reach) and reach > -1.0)
                              else "a large enough degradation would be caught")))
    if ctrl != "FAILS" and not (math.isfinite(reach) and reach > -1.0):
        from sapa.conditions import by_construction

        fal = by_construction(
            "cannot come out FAILS at this budget: with its seeds and N cells the rule says FAILS only for Δ < "
            + (f"{reach:.2f}" if math.isfinite(reach) else "(undefined)") + ", and an accuracy gap cannot change by "
            "less than −1 — the verdict can only be HOLDS or UNDETERMINED here; the deliberately false control "
            f"({injected:.2f} accuracy loss injected) came out {ctrl}; the full budget's control FAILS")
    rows = [not_applicable("logit convention", "the tiny transformers compute S/√d; changing it changes the models "
                                               "(a new study), not the judgement")]
    heads = [(t, arm) for t, arm in keys]
    for m in threshold_variants(MARGIN):
        vs = ["UNDETERMINED" if k in fl else decide_accuracy(acc[k], m) for k in heads]
        rows.append(varied(f"margin δ = {m:.3g} (±20 % of {MARGIN})", combine(vs), "readings: " + ", ".join(vs)))
    rows.append(not_run("seed", "a second training study costs the budget again (minutes on 2 cores)"))
    rows.append(not_run("budget full", "the text task and more seeds; not run in this budget"))
    return fal, robustness(rs[0].verdict if rs else "UNDETERMINED", rows)


def _records(df: pd.DataFrame) -> list[dict]:
    """JSON-safe rows: numpy scalars to Python, non-finite floats to None."""
    out = []
    for row in df.to_dict(orient="records"):
        rec = {}
        for k, v in row.items():
            if hasattr(v, "item"):
                v = v.item()
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            rec[k] = v
        out.append(rec)
    return out


CLAIM = Claim(
    id="scale-keeps-training-stable",
    statement=words.STATEMENT,
    kind="claim",
    contract=Contract(
        object="test accuracy of tiny transformers (TinyViT on 8×8 digits; causal char LM) with attention φ(S), "
               "relative to softmax at the same seed (paired: same init and minibatches), each arm at its own best "
               "learning rate; diverged members at chance accuracy",
        norm="not a norm: accuracy gap to softmax (and the diverged share of the lr grid)",
        randomness="seeded inits and minibatch streams (replicate r shared by every arm and lr at one N); "
                   "independent models at different N",
        quantifier="the (arm, N) cell is the unit, seeds nested; OLS trend in log2 N over the studied range",
        n_range="digits N ∈ {16, 64}; text N ∈ {64, 128} (full budget only; quick: digits)",
        predicted_exponent="not a rate: Δ (change of the gap over the N range) ≥ −0.05 for x^p/√N",
        refuted_by="a one-sided 99.75 % upper bound of Δ below −0.05 for x/√N or x³/√N on any task",
        logit_scale="S/sqrt(d)",
        logit_note="the tiny transformers' scores q·k/√d (sapa.empirics.training.tiny_models); x^p/√N is applied to them",
    ),
    check=check,
)
