"""ETAs for the stages of ``sapa verify``: each entry's seconds in the last ledger of the same budget in ``--out``.

A rerun into the same folder (the usual case: ``results/``) knows how long each entry took last time; a first run
says it has no estimate yet. Entries with bars of their own (the sweep, the training study) also give their own ETA.
"""

from __future__ import annotations

import json
from pathlib import Path

from sapa.budget import Budget


def expected_seconds(out_dir: Path, budget: Budget) -> tuple[dict[str, float], str]:
    """({entry id: seconds it took}, where that comes from) from ``out_dir/ledger.json`` when it is of ``budget``.

    Any other case (no ledger, unreadable, another budget or seed) gives ``({}, why there is no estimate)``.
    """
    path = Path(out_dir) / "ledger.json"
    try:
        from common.readfile import read_regular_text

        led = json.loads(read_regular_text(path, "ledger"))  # never blocks on a FIFO, never reads /dev/zero
        prov = led["provenance"]
        same = (prov.get("budget") or {}).get("name") == budget.name and prov.get("seed") == budget.seed
        times = {c["id"]: float(c["seconds"]) for c in led["claims"] if isinstance(c.get("seconds"), (int, float))}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, f"first {budget.name} run in {out_dir}"
    if not same or not times:
        return {}, f"the ledger in {out_dir} is of another budget or seed"
    return times, f"as long as the last {budget.name} run in {out_dir}"
