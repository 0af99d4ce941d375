"""The claims of arXiv 2410.18613 in the ledger's order, each with its contract and check.

Claims whose checks belong to later work carry ``owner`` and no ``check``; the ledger then
lists them as not yet examined instead of guessing a verdict.
"""

from __future__ import annotations

from sapa.claims import (alibi_scaling, lipschitz_on_a_ball, mechanism_across_n, norm_vs_accuracy,
                         other_papers, overhead, real_model_regime, scale_direction_and_causal, scale_keeps_training_stable, thm4_1,
                         thm4_2_to_cor4_5)
from sapa.claim_ids import ORDER  # noqa: F401  (re-exported: the order lives in the light registry)
from sapa.ledger import Claim

# Claims whose check is not built yet: (paper statement, owner issue).
_PENDING: dict[str, tuple[str, str]] = {}


def all_claims() -> list[Claim]:
    """Every claim and question of the ledger (and the real-model entry), in order."""
    modules = (thm4_1, thm4_2_to_cor4_5, scale_direction_and_causal, overhead, scale_keeps_training_stable,
               norm_vs_accuracy, mechanism_across_n, real_model_regime, other_papers, alibi_scaling,
               lipschitz_on_a_ball)
    built = {c.id: c for m in modules for c in m.CLAIMS}
    pending = {cid: Claim(id=cid, statement=st, owner=owner) for cid, (st, owner) in _PENDING.items()}
    return [built.get(cid) or pending[cid] for cid in ORDER]
