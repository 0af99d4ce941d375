"""Ledger entry ``sigmoid-bias-logn``: sigmoid attention with bias b = −log N, sigmoid(qᵀk/√d − log N), behaves like softmax (the family ``sigmoid_logN`` of theory/families.py).

The check is the other papers' shared one (:func:`sapa.claims.like_softmax_check.check_like_softmax`): audited like
arXiv 2410.18613's x^p/√N, rule ``audit-like-softmax`` on E-RMS ‖φ(S)‖_F at the papers' logits qᵀk/√d.
"""

from __future__ import annotations

from sapa.claims.like_softmax_check import activation_of, check_like_softmax, contract
from sapa.ledger import Claim, Context, Outcome
from sapa.theory.families import family

ID, FAMILY = "sigmoid-bias-logn", "sigmoid_logN"
CLAIMED = "sigmoid attention with bias b = −log N, sigmoid(qᵀk/√d − log N), behaves like softmax"


def check(ctx: Context) -> Outcome:
    return check_like_softmax(ctx, ID, FAMILY, CLAIMED)


CLAIM = Claim(ID, f"{family(FAMILY).source}: {CLAIMED}.", contract(*activation_of(FAMILY)), check, kind="claim")
