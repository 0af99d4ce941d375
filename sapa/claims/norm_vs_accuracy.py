"""Ledger question ``norm-vs-accuracy``: does accuracy follow ‖φ(S)‖_F over the doses c of x^p/c? (arXiv 2410.18613).

A **question**: the paper argues that softmax works because it keeps ‖φ(S)‖_F bounded; the reviewers
object that x³/1 has lower norms than x/16 yet trains worse. Comparing activations whose norms differ by
construction cannot separate the norm from the activation (with arms as units, 6–7 arms give a smallest
permutation p of 1/720–1/5 040 and little power). Within one family x^p/c the scale c moves the norm and
nothing else: a **dose-response**. The training study trains x/c and x³/c over a log grid of c at each task's
smallest N (c from 1 to beyond √N, the paper's 16 and √N among them) and softmax(S/τ) over a grid of τ, the
same seeds, minibatches and learning-rate grid (:mod:`empirics.training.dose_response`).

Readings (Holm over the entry's readings, family-wise levels 1 % / 5 %):

* ``dose-association`` per (task, family x/c or x³/c, norm ‖φ(S)‖_F or ‖∂φ(S)/∂X‖_F): does a lower final norm
  go with a higher test accuracy over the doses (Spearman ρ < 0, exact permutation p over all D! pairings)?
* ``matched-norm`` per task: at matched final ‖φ(S)‖_F, is x³/c as accurate as x/c (within ±0.02)?

The answer states the reviewer's comparison, x³/1 against x/16, with its norms and accuracies.
"""

from __future__ import annotations

import math

from sapa.ledger import Claim, Context, Contract, Outcome, Reading

from sapa.prose import norm_vs_accuracy_words as words
from sapa.prose.norm_vs_accuracy_words import NORMS, POLY


def gather(study) -> dict:
    """{task: dose table at the task's smallest N} of the study's runs (tasks without a dose grid left out)."""
    from empirics.training.dose_response import dose_table

    out = {}
    for task in ("digits", "text"):
        t = dose_table(study.runs, task)
        if len(t) and set(POLY) <= set(t["family"]):
            out[task] = t
    return out


def judged(tables: dict) -> list[tuple[tuple, object]]:
    """[(key, evidence)]: every dose-association and matched-norm evidence, p-values Holm-adjusted together."""
    from dataclasses import replace

    from empirics.training.censored_trend import holm
    from empirics.training.dose_response import exact_spearman, matched_norm_contrast
    from sapa.rules.association import DoseEvidence, matched_evidence

    dose = [(("dose", task, fam, q), exact_spearman(t.loc[t["family"] == fam, q], t.loc[t["family"] == fam, "test_acc"]))
            for task, t in tables.items() for fam in POLY for q in NORMS]
    matched = [(("matched", task), matched_evidence(matched_norm_contrast(t))) for task, t in tables.items()]
    pf = holm([a.p_greater for _, a in dose] + [m.p_fails for _, m in matched])
    ph = holm([a.p_less for _, a in dose])
    return ([(k, DoseEvidence(a, h, f)) for (k, a), f, h in zip(dose, pf, ph)]
            + [(k, replace(m, p_fails=f)) for (k, m), f in zip(matched, pf[len(dose):])])


def decide(key: tuple, ev, a_fails: float | None = None, a_holds: float | None = None) -> str:
    """The reading's verdict (the rules' levels, or others for robustness)."""
    from sapa.rules import association as RA

    f = RA.ALPHA_FAILS if a_fails is None else a_fails
    if key[0] == "dose":
        return RA.decide_dose(ev, f, RA.ALPHA_HOLDS if a_holds is None else a_holds)
    return RA.decide_matched(ev, f)


def readings(tables: dict, evs: list | None = None) -> tuple[Reading, ...]:
    """One Reading per judged evidence (:func:`judged`), keyed ("dose", task, family, norm) or ("matched", task)."""
    out = []
    for key, ev in evs if evs is not None else judged(tables):
        if key[0] == "dose":
            _, task, fam, q = key
            out.append(Reading(
                name=f"{task}: {fam}, {NORMS[q]} against accuracy over the doses",
                statement=f"{task}: within {fam}, a lower final {NORMS[q]} goes with a higher test accuracy (ρ < 0 over "
                          f"the doses c)", verdict=decide(key, ev), rule="dose-association", key=key,
                why=words.dose_why(tables[task], fam, q, ev.assoc, ev.p_holds, ev.p_fails)))
        else:
            task = key[1]
            out.append(Reading(name=f"{task}: x³/c against x/c at matched ‖φ(S)‖_F",
                               statement=f"{task}: at matched final ‖φ(S)‖_F, x³/c reaches the accuracy of x/c within "
                                         f"±0.02", verdict=decide(key, ev), rule="matched-norm", key=key,
                               why=words.matched_why(ev)))
    return tuple(out)


def conditions(tables: dict, rs: tuple[Reading, ...], verdict: str) -> tuple[dict, dict]:
    """Falsifiability: one family's doses with accuracy replaced by their own norms (a higher norm, a higher
    accuracy: deliberately against the premise) through the same exact test and rule, one reading (Holm m = 1).
    Robustness: the family-wise levels halved and doubled."""
    from empirics.training.dose_response import exact_spearman
    from sapa.conditions import could_fail, not_applicable, not_run, question_row, robustness
    from sapa.rules import association as RA

    task, t = next(iter(tables.items()))
    d = t[t["family"] == POLY[0]]
    a = exact_spearman(d["log10_attn_fro"], d["log10_attn_fro"])
    ctrl = RA.decide_dose(RA.DoseEvidence(a, a.p_less, a.p_greater))
    fal = could_fail("Spearman ρ over the doses with an exact permutation p can come out either side of 0",
                     f"{task}: within {POLY[0]}, a lower ‖φ(S)‖_F goes with a higher accuracy — on accuracies replaced "
                     f"by the doses' own log10 ‖φ(S)‖_F (a higher norm, a higher accuracy: deliberately false)", ctrl,
                     how=f"the same {a.n} doses, exact_spearman and rule dose-association (one reading); the smallest "
                         f"attainable p is 1/{a.n}! = {1 / math.factorial(a.n):.2g}" if a.n else "no doses")
    names, base = [r.name for r in rs], [r.verdict for r in rs]
    rows = [not_applicable("logit convention", "the trained models compute S/√d; another convention is another study")]
    evs = dict(judged(tables))
    for k in (0.5, 2.0):
        vs = [decide(r.key, evs[r.key], RA.ALPHA_FAILS * k, RA.ALPHA_HOLDS * k) for r in rs]
        rows.append(question_row(f"family-wise levels ×{k:g} (FAILS {RA.ALPHA_FAILS * k:g}, HOLDS "
                                 f"{RA.ALPHA_HOLDS * k:g})", names, base, vs))
    rows.append(not_run("seed", "a second training study costs the budget again"))
    return fal, robustness(verdict, rows)


def _figures(ctx: Context, tables: dict) -> tuple[str, ...]:
    from figures import dose_response as fig
    from sapa.ledger import store_figure_data

    data = fig.stored_data(tables)
    store_figure_data(ctx, "dose_response", data, "dose_response")  # sapa figures redraws it
    return tuple(str(p.relative_to(ctx.out_dir)) for p in fig.draw(data, ctx.out_dir / "figures", "dose_response"))


def check(ctx: Context) -> Outcome:
    """Gather the dose tables from the training study, judge the readings, draw accuracy against norm."""
    from sapa.evidence.training_study import error_text, get_study
    from sapa.labels import question_verdict

    try:
        tables = gather(get_study(ctx))
    except Exception as exc:  # runs that cannot complete are evidence of nothing: say why
        return Outcome(verdict="UNDETERMINED", tested_statement=words.TESTED, headline=f"training runs failed: "
                       f"{error_text(exc)}", evidence={"error": error_text(exc)}, rule="dose-association")
    if not tables:
        return Outcome(verdict="UNDETERMINED", tested_statement=words.TESTED, rule="dose-association",
                       headline="no dose grid of x/c and x³/c in this budget's study", evidence={"status": "not run"})
    rs = readings(tables)
    verdict = question_verdict(rs)
    fal, robust = conditions(tables, rs, verdict)
    return Outcome(verdict=verdict, readings=rs, rule="dose-association", tested_statement=words.TESTED,
                   headline="; ".join(f"{r.key[1]} {r.key[2]} {NORMS[r.key[3]]}: {r.verdict}" for r in rs
                                      if r.key[0] == "dose"),
                   answer=words.answer(tables, rs) if verdict == "ANSWERED" else None, findings=words.findings(tables),
                   falsifiability=fal, robustness=robust, figures=_figures(ctx, tables),
                   evidence={"doses": {task: t.to_dict(orient="records") for task, t in tables.items()},
                             "answer_if_undecided": words.answer(tables, rs),
                             "dtype": "training float32; norms measured in float64 (exact kernels)",
                             "caveats": "tiny models, minutes of training, 3 seeds per dose: an association not shown "
                                        "is not an absence; within a family the dose moves the norm and nothing "
                                        "else, so the association is a dose-response, not a comparison of "
                                        "activations."})


CLAIM = Claim(
    id="norm-vs-accuracy",
    statement=words.STATEMENT,
    kind="question",
    contract=Contract(
        object="final ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F (mean over layers, heads and a fixed probe batch) against final "
               "test accuracy over the doses c of x^p/c (and τ of softmax(S/τ)) at one N per task",
        norm="Frobenius (exact kernels, float64)",
        randomness="trained weights: seeded inits and minibatch streams shared by every dose at one replicate",
        quantifier="over doses (the unit: c at its best learning rate, seeds averaged), within one family; across "
                   "families at matched norm",
        n_range="digits N = 16; text N = 64 (the tasks' smallest N)",
        predicted_exponent="not a rate: the paper's thesis predicts that a lower (bounded) norm trains better",
        refuted_by="within a family, ρ(log10 norm, accuracy) > 0 over the doses with Holm-adjusted exact p ≤ 0.01",
        logit_scale="S/sqrt(d)",
        logit_note="the tiny transformers' scores q·k/√d (empirics.training.tiny_models)",
    ),
    check=check,
)
