"""Ledger entry ``thm4.4-cubic`` (arXiv 2410.18613, Thm 4.4: φ(x) = x³ grows like O(N)): E‖φ(S)‖²_F from exact moments.

The check is the growth entries' shared one (:func:`sapa.claims.growth_check.check_growth`): exact profiles under
every weight model, the Monte Carlo gate, the worst case over bounded inputs; headline rule ``growth-upper-exact``.
"""

from __future__ import annotations

from sapa.claims.growth_check import check_growth
from sapa.ledger import Claim, Context, Outcome
from sapa.prose.growth_words import growth_contract

P, SCALED = 3, False  # φ(x) = x^P, divided by √N when SCALED


def check(ctx: Context) -> Outcome:
    return check_growth(ctx, P, SCALED)


CLAIM = Claim("thm4.4-cubic", "For φ(x) = x³, ‖φ(S)‖_F (and its Jacobian) grows like O(N).", growth_contract(P, SCALED), check)
