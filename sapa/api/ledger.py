"""A ``ledger.json`` read back and checked (``sapa.load_ledger``): every claim's verdict, the budget, the provenance.

The document must fit the schema of :mod:`sapa.api.ledger_schema` (as ``sapa verify --only`` requires before it
merges into one), each claim the entry schema; anything else is one :class:`~sapa.common.validate.InputError` line.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sapa.api.results import Result, frozen
from sapa.common.validate import InputError

__all__ = ["Ledger", "load_ledger", "read_ledger_document"]


@dataclass(frozen=True, repr=False)
class Ledger(Result):
    """A claims ledger (:func:`load_ledger`): one verdict per claim, no verdict of its own.

    ``verdicts`` maps each claim id to its verdict (ledger order), ``counts`` each verdict to how many claims have
    it; ``entry(id)`` is one claim's whole entry; ``data`` / ``to_dict()`` is the document."""

    path: str
    budget: str | None
    seed: int | None
    verdicts: Mapping
    counts: Mapping

    def entry(self, claim_id: str) -> Mapping:
        """The entry of ``claim_id`` (read-only), or KeyError naming the ids there are."""
        for c in self.data["claims"]:
            if c["id"] == claim_id:
                return c
        raise KeyError(f"no claim {claim_id!r} in {self.path}; ids: {', '.join(self.verdicts)}")


def read_ledger_document(path: Path) -> dict:
    """The parsed ``ledger.json`` at ``path`` if it fits the ledger schema; else OSError, UnicodeDecodeError or
    ValueError (the schema's one line: where and how it breaks)."""
    from sapa.api.ledger_schema import ledger_problem
    from sapa.common.readfile import read_regular_text

    doc = json.loads(read_regular_text(path, "ledger"))
    why = ledger_problem(doc)
    if why is not None:
        raise ValueError(why)
    return doc


def load_ledger(path) -> Ledger:
    """The ledger at ``path`` (a ``ledger.json`` that ``sapa verify`` wrote), checked against its schema.

    Returns:
      :class:`Ledger`; a missing, unreadable or malformed file raises :class:`sapa.common.validate.InputError`
      (one line naming the file, and where the document breaks the schema).
    """
    from sapa.api.ledger_schema import entry_problem

    if not isinstance(path, (str, Path)):
        raise InputError(f"path must be a file name (str or Path), got {path!r}")
    path = Path(path)
    try:
        doc = read_ledger_document(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(f"ledger {path} cannot be read ({why})") from None
    for c in doc["claims"]:
        why = entry_problem(c)
        if why is not None:
            raise InputError(f"ledger {path}: entry {c['id']!r} is malformed ({why})")
    prov = doc["provenance"]
    budget = prov.get("budget")
    verdicts = {c["id"]: c["verdict"] for c in doc["claims"]}
    return Ledger(data=frozen(doc), path=str(path), budget=budget.get("name") if isinstance(budget, dict) else budget,
                  seed=prov.get("seed"), verdicts=frozen(verdicts), counts=frozen(dict(Counter(verdicts.values()))))
