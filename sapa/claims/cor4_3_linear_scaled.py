"""Ledger entry ``cor4.3-linear-scaled`` (arXiv 2410.18613, Cor 4.3: φ(x) = x/√N grows like O(√N), like softmax): E‖φ(S)‖²_F from exact moments.

The check is the growth entries' shared one (:func:`sapa.claims.growth_check.check_growth`): exact profiles under
every weight model, the Monte Carlo gate, the worst case over bounded inputs; headline rule ``growth-upper-exact``.
"""

from __future__ import annotations

from sapa.claims.growth_check import check_growth
from sapa.ledger import Claim, Context, Outcome
from sapa.prose.growth_words import growth_contract

P, SCALED = 1, True  # φ(x) = x^P, divided by √N when SCALED


def check(ctx: Context) -> Outcome:
    return check_growth(ctx, P, SCALED)


CLAIM = Claim("cor4.3-linear-scaled", "φ(x) = x/√N grows like O(√N), like softmax.", growth_contract(P, SCALED), check)
