"""Write sapa/costs.json from a finished run: ``python3 tools/write_costs.py LEDGER --machine TEXT --load TEXT``.

LEDGER is the ``ledger.json`` of a ``sapa verify`` run of one budget (each entry's ``cpu_seconds``: the CPU of sapa
and its workers while it ran). The probe (:func:`sapa.commands.verify_eta.probe_seconds`) is timed now by process CPU time, on the
machine that made the ledger, as the fewest of 40 calls (≈ 1 s: long enough to meet the machine's faster speed,
which a first run's 5 calls may miss; verify_eta.probe_seconds); ``--machine`` and ``--load`` say which machine and how busy it was. The other budgets
already in the file are kept when they were measured on the same ``--machine`` (one probe serves the file).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    from sapa.common.atomic import atomic_write_json
    from sapa.commands.verify_eta import COSTS_FILE, costs_from_ledger, load_costs, probe_seconds

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ledger", type=Path)
    ap.add_argument("--machine", required=True, help="the machine the ledger was made on (cores, CPU)")
    ap.add_argument("--load", required=True, help="how busy it was (e.g. 'load average 16 on 2 cores')")
    ap.add_argument("--out", type=Path, default=COSTS_FILE)
    a = ap.parse_args(argv)
    try:
        ledger = json.loads(a.ledger.read_text(encoding="utf-8"))
        new = costs_from_ledger(ledger, a.machine, a.load, probe_seconds(time.process_time, repeats=40))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"write_costs: {a.ledger}: {exc}", file=sys.stderr)
        return 2
    old = load_costs(a.out) or {}
    same = (old.get("reference") or {}).get("machine") == a.machine  # one probe per file: one machine's costs
    atomic_write_json(a.out, {**new, "budgets": {**(old.get("budgets", {}) if same else {}), **new["budgets"]}})
    print(f"wrote {a.out}: {len(next(iter(new['budgets'].values()))['entries'])} entries, probe "
          f"{new['probe']['reference_cpu_s']} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
