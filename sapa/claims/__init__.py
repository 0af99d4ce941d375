"""The claims of arXiv 2410.18613 in DESIGN.md order, each with its contract and check.

Claims whose checks belong to later work carry ``owner`` and no ``check``; the ledger then
lists them as not yet examined instead of guessing a verdict.
"""

from __future__ import annotations

from sapa.claims import growth_claims, overhead_claims, real_claims, scale_claims, softmax_claims, training_claims
from sapa.claims import study_claims
from sapa.claims import other_papers
from sapa.claims import position_claims
from sapa.claims import lipschitz_claims
from sapa.claim_ids import ORDER  # noqa: F401  (re-exported: the order lives in the light registry)
from sapa.ledger import Claim

# Claims whose check is not built yet: (paper statement, owner issue).
_PENDING: dict[str, tuple[str, str]] = {}


def all_claims() -> list[Claim]:
    """Every claim of DESIGN.md (and the real-model entry), in order."""
    built = {c.id: c for c in softmax_claims.CLAIMS + growth_claims.CLAIMS + scale_claims.CLAIMS + overhead_claims.CLAIMS
             + study_claims.CLAIMS + training_claims.CLAIMS + real_claims.CLAIMS + other_papers.CLAIMS
             + position_claims.CLAIMS + lipschitz_claims.CLAIMS}
    pending = {cid: Claim(id=cid, statement=st, owner=owner) for cid, (st, owner) in _PENDING.items()}
    return [built.get(cid) or pending[cid] for cid in ORDER]
