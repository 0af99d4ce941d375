"""Ledger entry ``thm4.1-norm``: ‖softmax(S)‖_F ≤ √N for every S (Theorem 4.1 of arXiv 2410.18613).

Evidence of two independent kinds: the exact power-sum argument and supremum of ``sapa.theory.softmax`` (√N, approached by
one-hot rows), and a numerical search over random and adversarial logits (``sapa.empirics.experiments.softmax_bounds``).
Rule ``bound``; the negative control claims 0.95·√N through the same search and rule.
"""

from __future__ import annotations

import math

from sapa.ledger import Claim, Context, Contract, Outcome, Reading
from sapa.prose import thm4_1_words as words
from sapa.rules.bound import BoundEvidence
from sapa.rules.bound import decide as decide_bound

CLAIMED = 1.0   # the paper's constant: ‖softmax(S)‖_F ≤ 1·√N
CONTROL = 0.95  # the negative control's constant, deliberately below the supremum


def check(ctx: Context) -> Outcome:
    """‖softmax(S)‖_F ≤ √N for every S: max ratio over random/adversarial S, and the supremum approached."""
    from sapa.empirics.experiments.softmax_bounds import norm_search
    from sapa.theory.softmax import softmax_matrix_bounds

    per_n, worst = norm_search(ctx.budget.Ns, ctx.budget.random_rows, ctx.budget.seed)
    bound = softmax_matrix_bounds(ctx.budget.Ns[-1])
    sup_reached = min(r["one_hot_limit_ratio_at_gaps_1_10_30_700"][-1] for r in per_n)
    # Theory: sup_S ‖softmax(S)‖_F/√N = 1 exactly (power sums); numerics: the largest ratio found.
    sharp = float(bound["fro_sup"]) / math.sqrt(ctx.budget.Ns[-1])
    found = max(worst, sup_reached)
    verdict = decide_bound(BoundEvidence(claimed=CLAIMED, sharp=sharp, found=found))
    ctrl = decide_bound(BoundEvidence(claimed=CONTROL, sharp=math.inf, found=found))
    reading = Reading(name="for all S (the paper's quantifier)", rule="bound", verdict=verdict, key=("for-all-S",),
                      statement="for every N and every real S ∈ R^{N×N}: ‖softmax(S)‖_F ≤ √N",
                      why=words.norm_why(sharp, found))
    return Outcome(
        verdict=verdict,
        readings=(reading,),
        rule="bound",
        falsifiability=words.norm_falsifiability(ctrl, CONTROL, found),
        robustness=words.bound_robustness(verdict, claimed=CLAIMED, sharp=sharp, found=found),
        headline=words.norm_headline(worst, sup_reached),
        tested_statement=words.NORM_TESTED,
        evidence={
            "exact": words.NORM_EXACT,
            "fro_sup_over_sqrtN": float(bound["fro_sup"]) / math.sqrt(ctx.budget.Ns[-1]),
            "max_observed_ratio": worst,
            "supremum_approached_ratio": sup_reached,
            "per_N": per_n,
            "checks": ["exact power-sum argument", "random and adversarial logits at temperatures 1e-3..1e4",
                       "near-one-hot limit"],
        },
    )


CLAIM = Claim(
    id="thm4.1-norm",
    statement="‖softmax(S)‖_F ≤ √N (Theorem 4.1).",
    contract=Contract(
        object="row-softmax attention matrix P = softmax(S), S ∈ R^{N×N}",
        norm="Frobenius",
        randomness="none: a worst-case statement over all real S (checked on random and adversarial S)",
        quantifier="for all inputs",
        n_range="every N ≥ 1",
        predicted_exponent="bound √N (exponent 0.5 of the bound, not a growth rate of typical values)",
        refuted_by="any S with ‖softmax(S)‖_F > √N",
        logit_scale="S",
        logit_note="invariant: a for-all statement over every real S, so it covers S/√d (and any temperature)",
    ),
    check=check,
)
