"""``sapa verify --only ID ... --out DIR`` into an existing ledger: replace the rerun entries, keep the rest.

A partial rerun must never silently drop the other verdicts. The rerun entries replace their old
versions in place (new ids are appended), each marked ``"rerun": true`` with ``"rerun_utc"``. The
provenance is this run's, with ``"reran"`` (its ids) and ``"earlier_runs"`` (the provenance of every
run before it, oldest first): nothing is lost. Entries of a different budget or seed are not mixed:
such a ledger is refused before any work starts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path

from sapa.budget import Budget
from sapa.common.validate import InputError


def prior_ledger(out_dir: Path, budget: Budget, rerun=frozenset()) -> dict | None:
    """The ledger already in ``out_dir`` (None if none) when it can take a rerun of ``budget``; else InputError.

    The document must fit :mod:`sapa.api.ledger_schema` and every entry it keeps the entry schema: checked here,
    before any work and before ``ledger.json`` is rewritten. A malformed entry in ``rerun`` (the ids about to be
    replaced) is dropped instead: its rerun replaces it.
    """
    return read_ledger(Path(out_dir) / "ledger.json", budget, rerun, "--only",
                       "rerun without --only or choose another --out")


def read_ledger(path: Path, budget: Budget, rerun, who: str, instead: str) -> dict | None:
    """The ledger at ``path`` (None if there is none), checked to take a rerun of ``budget``; else InputError.

    ``who`` (what would merge into it: "--only") and ``instead`` (what the user can do) word the one-line refusal.
    """
    from sapa.api.ledger import read_ledger_document
    from sapa.api.ledger_schema import entry_problem

    if not path.exists():
        return None
    try:
        prior = read_ledger_document(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(f"{who} would merge into {path}, which cannot be read ({why}); {instead}") from None
    # a malformed entry this run reruns is dropped now (replaced when its rerun finishes, else listed as never run):
    # a ledger kept mid-run never shows it
    prior["claims"] = [c for c in prior["claims"] if c["id"] not in rerun or entry_problem(c) is None]
    for c in prior["claims"]:
        why = entry_problem(c)
        if why is not None:
            raise InputError(f"{who} would merge into {path}, whose entry {c['id']!r} is malformed ({why}); "
                             "rerun that entry too (add it to --only), or move the ledger away")
    theirs = _budget_of(prior["provenance"])
    ours = json.loads(json.dumps(asdict(budget)))
    if theirs != ours:
        raise InputError(f"{who} would mix budgets: {path} is from "
                         f"{_describe(theirs, ours)}, this run is {_describe(ours, None)}; {instead}")
    return prior


def merge_into(prior: dict | None, fresh: dict) -> dict:
    """``fresh`` (a ledger of the rerun claims) merged into ``prior`` (returned as is when there is none)."""
    if prior is None:
        return fresh
    prov = fresh["provenance"]
    rerun = {c["id"]: {**c, "rerun": True, "rerun_utc": prov.get("started_utc")} for c in fresh["claims"]}
    claims = [rerun.pop(c["id"], c) for c in prior["claims"]]
    claims += list(rerun.values())  # ids the old ledger did not have
    old = prior["provenance"]
    earlier = [*old.get("earlier_runs", []), {k: v for k, v in old.items() if k != "earlier_runs"}]
    # other top-level summaries (e.g. "monte_carlo") describe the whole ledger: the old ones stay, and this run's
    # own are kept in its provenance
    extra = {k: v for k, v in fresh.items() if k not in ("claims", "provenance")}
    merged_mc = _merged_monte_carlo(prior.get("monte_carlo"), fresh.get("monte_carlo"))
    return {**extra, **prior, **({"monte_carlo": merged_mc} if merged_mc is not None else {}), "claims": claims,
            "provenance": {**prov, "reran": [c["id"] for c in fresh["claims"]], "rerun_summaries": extra,
                           "earlier_runs": earlier}}


def _merged_monte_carlo(old: dict | None, new: dict | None) -> dict | None:
    """The whole ledger's first-pass coverage: the rerun's comparisons replace theirs by name, the others stay.

    None (keep the old summary) when either side lacks its list of comparisons (a ledger written before they were kept).
    """
    if not old or "checks" not in old or not new or "checks" not in new:
        return None
    from sapa.evidence.monte_carlo import summary_of

    by_name = {c["name"]: c for c in old["checks"]}
    by_name.update({c["name"]: c for c in new["checks"]})
    return summary_of(list(by_name.values()))


def ledger_entries(ledger: dict) -> list:
    """The ledger's claims as :class:`sapa.ledger.Entry` objects (for the report); unknown keys are dropped."""
    from sapa.ledger import Entry

    names = {f.name for f in fields(Entry)}
    return [Entry(**{k: v for k, v in c.items() if k in names}) for c in ledger["claims"]]


def _budget_of(prov: object) -> dict | None:
    if not isinstance(prov, dict) or not isinstance(prov.get("budget"), dict):
        return None
    return {**prov["budget"], "seed": prov.get("seed", prov["budget"].get("seed"))}


def _describe(b: dict | None, other: dict | None) -> str:
    """``budget 'quick', seed 0`` (plus the parameters that differ from ``other`` when name and seed agree)."""
    if b is None:
        return "an unknown budget"
    text = f"budget {b.get('name')!r}, seed {b.get('seed')}"
    if other is not None and (b.get("name"), b.get("seed")) == (other.get("name"), other.get("seed")):
        diff = sorted(k for k in set(b) | set(other) if b.get(k) != other.get(k))
        text += f" with other parameters ({', '.join(diff)})"
    return text
