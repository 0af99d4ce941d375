"""The entries of the ledger (claims of arXiv 2410.18613, the reviewers' questions, other papers' claims), one module each.

A module of this package that defines ``CLAIM`` (one :class:`sapa.ledger.Claim`, its contract and its check) is an
entry; an older module may define ``CLAIMS`` (a list). :func:`all_claims` finds them all and returns them in the
order of :data:`sapa.claim_ids.ORDER`, the one list of ids (the command line reads it without importing a claim); a
module without either (shared helpers of the training entries) is skipped. Adding an entry is its module and its
id in ``ORDER`` (docs/extending.md); a test checks that the two agree.
"""

from __future__ import annotations

import importlib
import pkgutil

from sapa.claim_ids import ORDER  # noqa: F401  (re-exported: the order lives in the light registry)
from sapa.ledger import Claim


def entry_modules() -> dict[str, object]:
    """{module name: module} of every module of this package, by name (each imported once)."""
    import sapa.claims as package

    return {m.name: importlib.import_module(f"sapa.claims.{m.name}")
            for m in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name)}


def discovered() -> dict[str, Claim]:
    """{entry id: Claim} of every module's ``CLAIM`` (or ``CLAIMS``); an id defined twice is an error."""
    out: dict[str, Claim] = {}
    for name, mod in entry_modules().items():
        found = [mod.CLAIM] if hasattr(mod, "CLAIM") else list(getattr(mod, "CLAIMS", ()))
        for c in found:
            if c.id in out:
                raise ValueError(f"ledger entry {c.id!r} is defined twice (again in sapa.claims.{name})")
            out[c.id] = c
    return out


def all_claims() -> list[Claim]:
    """Every claim and question of the ledger, in ledger order (:data:`ORDER`); an entry outside ORDER is an error."""
    built = discovered()
    extra = sorted(set(built) - set(ORDER))
    if extra:
        raise ValueError(f"entries missing from sapa/claim_ids.py ORDER: {', '.join(extra)}")
    missing = [cid for cid in ORDER if cid not in built]
    if missing:
        raise ValueError(f"entries of sapa/claim_ids.py ORDER without a module: {', '.join(missing)}")
    return [built[cid] for cid in ORDER]
