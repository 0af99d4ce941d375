"""The claims of arXiv 2410.18613 in DESIGN.md order, each with its contract and check.

Claims whose checks belong to later work carry ``owner`` and no ``check``; the ledger then
lists them as not yet examined instead of guessing a verdict.
"""

from __future__ import annotations

from sapa.claims import growth_claims, softmax_claims
from sapa.ledger import Claim

# (id, paper statement, owner issue) for claims whose check is not built yet.
_PENDING = [
    ("thm4.2-linear", "For φ(x) = x, ‖φ(S)‖_F and its Jacobian grow like O(N) when X, Q, K are i.i.d. Gaussian.", "issue #3"),
    ("cor4.3-linear-scaled", "φ(x) = x/√N grows like O(√N), like softmax.", "issue #3"),
    ("thm4.4-cubic", "For φ(x) = x³, ‖φ(S)‖_F and its Jacobian grow like O(N).", "issue #3"),
    ("cor4.5-cubic-scaled", "φ(x) = x³/√N grows like O(√N).", "issue #3"),
    ("fig1-scale-direction", "Figure 1: as N decreases the scale applied should decrease.", "issue #5"),
    ("causal-masking", "(silent) Under a causal mask row i sees i tokens; should the scale follow the effective length?", "issue #5"),
    ("other-powers", "(silent) Only x and x³ are tried; what of other powers p?", "issue #3"),
    ("overhead", "(silent) Runtime of polynomial versus softmax attention.", "issue #8"),
    ("norm-vs-accuracy", "Softmax works because it regularizes the attention norm.", "issue #8"),
]


def all_claims() -> list[Claim]:
    """Every claim of DESIGN.md, in order; built checks replace pending placeholders by id."""
    built = {c.id: c for c in softmax_claims.CLAIMS + growth_claims.CLAIMS}
    order = ["thm4.1-norm", "thm4.1-jacobian"] + [cid for cid, _, _ in _PENDING]
    pending = {cid: Claim(id=cid, statement=st, owner=owner) for cid, st, owner in _PENDING}
    return [built.get(cid) or pending[cid] for cid in order]
