"""Ledger question ``mechanism-across-n``: does x^p/√N's learning of copy / induction / MQAR slow down with N?

The check reads the mechanism runs of the training study (:func:`sapa.claims.scale_keeps_training_stable.get_study`)
and the learning statistics of :mod:`sapa.claims.learning_claims`.
"""

from __future__ import annotations

import time

from sapa.claims.learning_claims import HEADLINE_ARMS, STATEMENT, TESTED, mechanism_conditions, mechanism_outcome
from sapa.ledger import Claim, Context, Contract, Outcome

__all__ = ["check_mechanism_across_n", "CLAIMS"]


def check_mechanism_across_n(ctx: Context) -> Outcome:
    from sapa.claims.scale_keeps_training_stable import error_text, get_study

    t0 = time.perf_counter()
    try:
        study = get_study(ctx)
    except Exception as exc:  # noqa: BLE001 - runs that cannot complete are evidence of nothing
        return Outcome(verdict="UNDETERMINED", tested_statement=TESTED, headline=f"mechanism runs failed: "
                       f"{error_text(exc)}", evidence={"error": error_text(exc)}, rule="slowdown-growth")
    if not study.mechanism:
        return Outcome(verdict="UNDETERMINED", tested_statement=TESTED, headline="no mechanism runs in this study",
                       evidence={"status": "not run"}, rule="slowdown-growth")
    verdict, rs, answer, ev, findings = mechanism_outcome(study.mechanism, HEADLINE_ARMS)
    fal, robust = mechanism_conditions(ev.pop("_slow"), rs, verdict)
    paths = _figures(ctx, ev)
    ev["check_wall_seconds"] = round(time.perf_counter() - t0, 1)
    return Outcome(verdict=verdict, tested_statement=TESTED, headline=headline(rs), readings=rs,
                   rule="slowdown-growth", answer=answer if verdict == "ANSWERED" else None, findings=findings,
                   evidence=ev, falsifiability=fal, robustness=robust,
                   figures=tuple(str(p.relative_to(ctx.out_dir)) for p in paths))


def headline(rs) -> str:
    """The verdict of every (task, arm, question) in one line."""
    from empirics.training.study_config import arm_label

    if not rs:
        return "no probe task has two N cells softmax solves: nothing to judge"
    pairs = zip(rs[0::2], rs[1::2])  # slowdown_readings: growth, then more than 2×, per (task, arm)
    return "slowdown vs softmax over N (grows / more than 2×): " + "; ".join(
        f"{g.key[-3]} {arm_label(g.key[-2])} {g.verdict}/{d.verdict}" for g, d in pairs)


def _figures(ctx: Context, ev: dict) -> list:
    """The learning-curve figures and the slowdown figure, stored so that ``sapa figures`` redraws them."""
    from figures import learning_curves as fig
    from sapa.ledger import store_figure_data

    data = fig.stored_data(ev["cells"], solved=True, budget=ctx.budget.name, trends=ev["slowdown"])
    store_figure_data(ctx, "mechanism_learning", data, "mechanism_learning")
    return fig.draw_stored(data, ctx.out_dir / "figures", "mechanism_learning")


CLAIMS = [
    Claim(
        id="mechanism-across-n",
        statement=STATEMENT,
        kind="question",
        contract=Contract(
            object="steps to validation accuracy 0.5 (and 0.9 beside it) of tiny causal transformers on copy at lag 1, 2 "
                   "and N/2, x^p/√N against softmax at the same seed; one-token induction at batch 64 as a finding",
            norm="not a norm: learning speed; the offset-mass profile of layer 1's |φ(S)| is reported beside it",
            randomness="seeded inits and minibatch streams shared by every arm at one (task, N); independent models "
                       "at different N",
            quantifier="the paired seed is the unit, nested in (arm, N) cells; the maximum-likelihood linear trend of the "
                       "interval-censored log2 slowdown in log2 N, only on cells softmax solves",
            n_range="N ∈ {16, 32} (quick), {16, 32, 64, 128} (full)",
            predicted_exponent="not a rate: the paper's thesis predicts no growth of the slowdown with N",
            refuted_by="growth: a Holm-adjusted p(Δ ≤ 0) ≤ 0.01; more than 2×: p(Δ ≤ 1) ≤ 0.01",
            logit_scale="S/sqrt(d)",
            logit_note="the tiny transformers compute S = X W_Q W_Kᵀ Xᵀ/√d, as transformers do; the φ arms act on it",
        ),
        check=check_mechanism_across_n,
    ),
]
