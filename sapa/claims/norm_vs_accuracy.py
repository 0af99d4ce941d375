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

NORMS = {"log10_attn_fro": "‖φ(S)‖_F", "log10_jac_x_fro": "‖∂φ(S)/∂X‖_F"}
POLY = ("x/c", "x³/c")
STATEMENT = ("Does accuracy follow the attention norm — within one activation family x^p/c, as the scale c moves "
             "‖φ(S)‖_F, and across families at matched norm (the reviewers' x³/1 against x/16)?")
TESTED = ("At each task's smallest N (digits 8×8 images, N = 16 patches; the causal character model, N = 64), x/c and "
          "x³/c over a log grid of c (1 … 128, including √N and the paper's 16) and softmax(S/τ) over a grid of τ, "
          "tiny transformers trained with the study's seeds, minibatches and learning-rate grid; per dose (the unit: "
          "c at its best lr, seeds averaged) the final ‖φ(S)‖_F, ‖∂φ(S)/∂X‖_F (exact, float64) and test accuracy. "
          "Within x/c and x³/c: Spearman ρ(log10 norm, accuracy) over the doses, exact permutation p (dose-association: "
          "HOLDS if a lower norm goes with a higher accuracy). Across them: x³/c minus x/c at matched ‖φ(S)‖_F "
          "(matched-norm: HOLDS if within ±0.02). Holm over the entry's readings. ANSWERED when every reading is "
          "decided.")


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
                why=dose_why(tables[task], fam, q, ev.assoc, ev.p_holds, ev.p_fails)))
        else:
            task = key[1]
            out.append(Reading(name=f"{task}: x³/c against x/c at matched ‖φ(S)‖_F",
                               statement=f"{task}: at matched final ‖φ(S)‖_F, x³/c reaches the accuracy of x/c within "
                                         f"±0.02", verdict=decide(key, ev), rule="matched-norm", key=key,
                               why=matched_why(ev)))
    return tuple(out)


def _p(v: float) -> str:
    return "undefined" if not math.isfinite(v) else f"{v:.3g}"


def dose_why(t, fam: str, q: str, a, p_holds: float, p_fails: float) -> str:
    """The doses' norms and accuracies and the test, in one line."""
    d = t[t["family"] == fam].sort_values("dose")
    pts = ", ".join(f"c={c:g}: {n:+.2f}/{acc:.3f}" for c, n, acc in zip(d["dose"], d[q], d["test_acc"]))
    best = d.loc[d["test_acc"].idxmax()]
    how = f"exact over all {math.factorial(a.n)} pairings" if a.exact else "Monte Carlo pairings"
    return (f"ρ = {a.rho:+.2f} over {a.n} doses ({how}); Holm-adjusted p(ρ < 0) = {_p(p_holds)}, p(ρ > 0) = {_p(p_fails)}; log10 {NORMS[q]}/accuracy "
            f"per dose {{{pts}}}; the most accurate dose c = {best['dose']:g}")


def matched_why(m) -> str:
    c = m.contrast
    diffs = ", ".join(f"{v:+.3f}" for v in c.diffs)
    return (f"{c.n} doses of x³/c inside x/c's norm range; accuracy differences at matched norm {{{diffs}}}, mean "
            f"{c.mean:+.3f}, 90 % interval [{m.lo:+.3f}, {m.hi:+.3f}]; Holm-adjusted p(beyond ±0.02) = {_p(m.p_fails)}"
            if c.n else "x³/c and x/c reach no common norm: nothing to compare")


def reviewer_pair(t) -> str | None:
    """The reviewer's comparison from the dose table: x³/1 against x/16 (norms and accuracies, per seed)."""
    a = t[(t["family"] == "x³/c") & (t["dose"] == 1)]
    b = t[(t["family"] == "x/c") & (t["dose"] == 16)]
    if not (len(a) and len(b)):
        return None
    a, b = a.iloc[0], b.iloc[0]
    wins = sum(x < y for x, y in zip(a["test_acc_seeds"], b["test_acc_seeds"]))
    return (f"x³/1 ends with ‖φ(S)‖_F 10^{a['log10_attn_fro']:.2f} against x/16's 10^{b['log10_attn_fro']:.2f} "
            f"({'lower' if a['log10_attn_fro'] < b['log10_attn_fro'] else 'higher'}) and accuracy {a['test_acc']:.3f} "
            f"against {b['test_acc']:.3f} (lower in {wins} of {len(a['test_acc_seeds'])} paired seeds)")


def answer(tables: dict, rs: tuple[Reading, ...]) -> str:
    """The answer in sentences: per task the dose-association verdicts, the matched-norm reading and the pair."""
    parts = []
    for task, t in tables.items():
        mine = [r for r in rs if r.key[1] == task]
        dose = "; ".join(f"{r.key[2]} with {NORMS[r.key[3]]}: {_said(r.verdict)}" for r in mine if r.key[0] == "dose")
        m = next((r for r in mine if r.key[0] == "matched"), None)
        pair = reviewer_pair(t)
        parts.append(f"{task}: {dose}." + (f" At matched ‖φ(S)‖_F, x³/c against x/c: {_said_matched(m.verdict)}."
                                           if m else "") + (f" The reviewers' pair: {pair}." if pair else ""))
    return " ".join(parts)


def _said(v: str) -> str:
    return {"HOLDS": "a lower norm goes with a higher accuracy", "FAILS": "a higher norm goes with a higher accuracy",
            "UNDETERMINED": "no monotone association shown"}[v]


def _said_matched(v: str) -> str:
    return {"HOLDS": "the family does not matter (within ±0.02)", "FAILS": "the family matters beyond ±0.02",
            "UNDETERMINED": "undecided"}[v]


def findings(tables: dict) -> tuple[str, ...]:
    """The softmax temperature sweep and each family's most accurate dose (descriptive)."""
    from empirics.training.dose_response import exact_spearman

    out = []
    for task, t in tables.items():
        s = t[t["family"] == "softmax(S/τ)"].sort_values("dose")
        if len(s):
            a = exact_spearman(s["log10_attn_fro"], s["test_acc"])
            pts = ", ".join(f"τ={c:g}: {n:+.2f}/{acc:.3f}" for c, n, acc in zip(s["dose"], s["log10_attn_fro"],
                                                                             s["test_acc"]))
            out.append(f"{task}: softmax(S/τ), log10 ‖φ(S)‖_F/accuracy per τ {{{pts}}}; ρ = {a.rho:+.2f} (unadjusted "
                       f"p(ρ < 0) = {_p(a.p_less)}, {a.n} temperatures: a finding, not a verdict)")
        for fam in POLY:
            d = t[t["family"] == fam]
            best = d.loc[d["test_acc"].idxmax()]
            out.append(f"{task}: {fam} is most accurate at c = {best['dose']:g} ({best['test_acc']:.3f}, lr "
                       f"{best['lr']:g}); least at c = {d.loc[d['test_acc'].idxmin(), 'dose']:g} "
                       f"({d['test_acc'].min():.3f})")
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


def check_norm_vs_accuracy(ctx: Context) -> Outcome:
    """Gather the dose tables from the training study, judge the readings, draw accuracy against norm."""
    from sapa.claims.scale_keeps_training_stable import error_text, get_study
    from sapa.labels import question_verdict

    try:
        tables = gather(get_study(ctx))
    except Exception as exc:  # runs that cannot complete are evidence of nothing: say why
        return Outcome(verdict="UNDETERMINED", tested_statement=TESTED, headline=f"training runs failed: "
                       f"{error_text(exc)}", evidence={"error": error_text(exc)}, rule="dose-association")
    if not tables:
        return Outcome(verdict="UNDETERMINED", tested_statement=TESTED, rule="dose-association",
                       headline="no dose grid of x/c and x³/c in this budget's study", evidence={"status": "not run"})
    rs = readings(tables)
    verdict = question_verdict(rs)
    fal, robust = conditions(tables, rs, verdict)
    return Outcome(verdict=verdict, readings=rs, rule="dose-association", tested_statement=TESTED,
                   headline="; ".join(f"{r.key[1]} {r.key[2]} {NORMS[r.key[3]]}: {r.verdict}" for r in rs
                                      if r.key[0] == "dose"),
                   answer=answer(tables, rs) if verdict == "ANSWERED" else None, findings=findings(tables),
                   falsifiability=fal, robustness=robust, figures=_figures(ctx, tables),
                   evidence={"doses": {task: t.to_dict(orient="records") for task, t in tables.items()},
                             "answer_if_undecided": answer(tables, rs),
                             "dtype": "training float32; norms measured in float64 (exact kernels)",
                             "caveats": "tiny models, minutes of training, 3 seeds per dose: an association not shown "
                                        "is not an absence; within a family the dose moves the norm and nothing "
                                        "else, so the association is a dose-response, not a comparison of "
                                        "activations."})


CLAIMS = [
    Claim(
        id="norm-vs-accuracy",
        statement=STATEMENT,
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
        check=check_norm_vs_accuracy,
    ),
]
