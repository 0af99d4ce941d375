"""Ledger entry ``relu-over-n``: ReLU attention divided by the sequence length, ReLU(qᵀk/√d)/N, keeps attention at softmax's scale (the family ``relu_N`` of theory/families.py).

The check is the other papers' shared one (:func:`sapa.claims.like_softmax_check.check_like_softmax`): audited like
arXiv 2410.18613's x^p/√N, rule ``audit-like-softmax`` on E-RMS ‖φ(S)‖_F at the papers' logits qᵀk/√d.
"""

from __future__ import annotations

from sapa.claims.like_softmax_check import activation_of, check_like_softmax, contract
from sapa.ledger import Claim, Context, Outcome
from sapa.theory.families import family

ID, FAMILY = "relu-over-n", "relu_N"
CLAIMED = "ReLU attention divided by the sequence length, ReLU(qᵀk/√d)/N, keeps attention at softmax's scale"


def check(ctx: Context) -> Outcome:
    return check_like_softmax(ctx, ID, FAMILY, CLAIMED)


CLAIM = Claim(ID, f"{family(FAMILY).source}: {CLAIMED}.", contract(*activation_of(FAMILY)), check, kind="claim")
