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
                       f"{error_text(exc)}", evidence={"error": error_text(exc)}, rule="slowdown-trend")
    if not study.mechanism:
        return Outcome(verdict="UNDETERMINED", tested_statement=TESTED, headline="no mechanism runs in this study",
                       evidence={"status": "not run"}, rule="slowdown-trend")
    verdict, rs, answer, ev, findings = mechanism_outcome(study.mechanism, HEADLINE_ARMS)
    fal, robust = mechanism_conditions(ev.pop("_slow"), rs, verdict)
    from figures import learning_curves as fig

    from sapa.ledger import store_figure_data

    data = fig.stored_data(ev["cells"], solved=True, budget=ctx.budget.name)
    store_figure_data(ctx, "mechanism_learning", data, "mechanism_learning")  # sapa figures redraws it
    paths = fig.draw_stored(data, ctx.out_dir / "figures", "mechanism_learning")
    ev["check_wall_seconds"] = round(time.perf_counter() - t0, 1)
    head = "; ".join(f"{r.name.split(' slowdown')[0]} {r.verdict}" for r in rs)
    return Outcome(verdict=verdict, tested_statement=TESTED, headline=f"slowdown vs softmax over N: {head}",
                   readings=rs, rule="slowdown-trend", answer=answer if verdict == "ANSWERED" else None,
                   findings=findings, evidence=ev, falsifiability=fal, robustness=robust,
                   figures=tuple(str(p.relative_to(ctx.out_dir)) for p in paths))


CLAIMS = [
    Claim(
        id="mechanism-across-n",
        statement=STATEMENT,
        kind="question",
        contract=Contract(
            object="steps to leave chance + 0.03 (and to reach 0.9) of tiny causal transformers on copy (lag 1, 2), an "
                   "induction head and MQAR (Zoology), x^p/√N against softmax at the same seed",
            norm="not a norm: learning speed; the offset-mass profile of layer 1's |φ(S)| is reported beside it",
            randomness="seeded inits and minibatch streams shared by every arm at one (task, N); independent models "
                       "at different N",
            quantifier="the (arm, N) cell is the unit, seeds nested; OLS trend of log2 slowdown in log2 N",
            n_range="N ∈ {16, 32, 64} (quick, full) and 128 (full)",
            predicted_exponent="not a rate: the paper's thesis predicts no growth of the slowdown with N",
            refuted_by="a one-sided 99.75 % lower bound of the slowdown's growth above one doubling",
            logit_scale="S/sqrt(d)",
            logit_note="the tiny transformers compute S = X W_Q W_Kᵀ Xᵀ/√d, as transformers do; the φ arms act on it",
        ),
        check=check_mechanism_across_n,
    ),
]
