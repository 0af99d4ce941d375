"""ETAs for the stages of ``sapa verify``: each entry's seconds in the last ledger of the same budget in ``--out``,
else the entry's shipped cost scaled to this machine (:mod:`sapa.commands.verify_eta`).

A rerun into the same folder (the usual case: ``results/``) knows how long each entry took last time; a first run
scales the CPU-seconds each entry cost on the reference machine by a sub-second probe of this one. Entries with bars
of their own (the sweep, the training study) also give their own ETA.
"""

from __future__ import annotations

import json
from pathlib import Path

from sapa.budget import Budget


def expected_seconds(out_dir: Path, budget: Budget, ids=None, probe=None) -> tuple[dict[str, float], str]:
    """({entry id: seconds expected}, where that comes from): from ``out_dir/ledger.json`` when it is of ``budget``,
    else from the shipped costs (:func:`sapa.commands.verify_eta.shipped_seconds`; ``probe``: its probe, for tests).

    ``ids``: the entries of this run (the shipped costs of the others are not read). No ledger and no shipped costs
    of the budget give ``({}, why there is no estimate)``.
    """
    times, why = _last_run(out_dir, budget)
    if times:
        return times, why
    from sapa.commands.verify_eta import probe_once, shipped_seconds

    shipped, basis = shipped_seconds(budget.name, ids, probe=probe or probe_once)
    return (shipped, f"{why}: {basis}") if shipped else ({}, why)


def _last_run(out_dir: Path, budget: Budget) -> tuple[dict[str, float], str]:
    path = Path(out_dir) / "ledger.json"
    try:
        from sapa.common.readfile import read_regular_text

        led = json.loads(read_regular_text(path, "ledger"))  # never blocks on a FIFO, never reads /dev/zero
        prov = led["provenance"]
        same = (prov.get("budget") or {}).get("name") == budget.name and prov.get("seed") == budget.seed
        times = {c["id"]: float(c["seconds"]) for c in led["claims"] if isinstance(c.get("seconds"), (int, float))}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, f"first {budget.name} run in {out_dir}"
    if not same or not times:
        return {}, f"the ledger in {out_dir} is of another budget or seed"
    return times, f"as long as the last {budget.name} run in {out_dir}"


def announce(args) -> tuple[dict[str, float], str]:
    """Say how long ``sapa verify ARGS`` should take (its first line); return ({entry: seconds expected}, basis).

    From the last ledger of the budget in ``--out``, else the shipped costs scaled by this machine's probe
    (:func:`expected_seconds`). Only the light registry of ids is read, so the line comes before the checks are
    imported; the refusals the run would meet first (an unknown id, an --out that is a file, an --only merge into a
    ledger of another budget) come before it.
    """
    from sapa.common.progress import say
    from sapa.common.validate import InputError
    from sapa.budget import budget_named
    from sapa.claim_ids import ORDER
    from sapa.commands.ledger_merge import prior_ledger
    from sapa.commands.shared import select
    from sapa.commands.verify_eta import eta_line

    ids = select(ORDER, args.only, lambda i: i, "claim id")  # the refusals a run would meet first, before the line
    budget = budget_named(args.budget, args.seed)
    if args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out} exists and is not a directory")
    if args.only:
        prior_ledger(args.out, budget, set(ids))
    expected, basis = expected_seconds(args.out, budget, ids)
    say(eta_line(expected, ids, basis))
    return expected, basis
