"""Are two ledgers the same in every verdict and number? ``python3 tools/ledger_compare.py BEFORE AFTER``.

BEFORE and AFTER are ``ledger.json`` files (or the results directories holding them). The two are walked field by
field; each difference is one line ``path: before → after``, sorted into three groups:

* **ignored** — what changes from run to run by design: the run's clock and commit (``provenance.started_utc``,
  ``wall_seconds``, ``git_commit``), each entry's ``seconds``, a training design's ``fixed_at`` and
  ``first_data_at`` (its ``sha256`` is compared), and a reading's ``key`` that only AFTER has (readings gained a
  stable key; a key present in both must agree);
* **timing** — the measurements of the ``overhead`` entry (CPU and wall seconds, their ratios and what is said
  of them: headline, answer, the readings' verdicts and why, robustness), which are one machine in one run, and
  every number whose key names seconds;
* **differs** — everything else: a verdict, a number, a text, a field added or lost.

Exit 0 when nothing differs (timing and ignored differences are listed, not counted), 1 otherwise, 2 on unreadable
input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

IGNORED = {("provenance", "started_utc"), ("provenance", "wall_seconds"), ("provenance", "git_commit")}
TIMED_ENTRIES = ("overhead",)  # entries whose evidence is a timing of this machine
# what a timed entry states without measuring it: its contract and statement stay compared
TIMED_KEEP = ("id", "statement", "contract", "kind", "tested_statement")
SECONDS_WORDS = ("seconds", "_s", "wall")
DESIGN_TIMES = ("fixed_at", "first_data_at")  # a training entry's evidence["design"]: its sha256 is compared


def load(path: str | Path) -> dict:
    """The ledger at ``path`` (a ledger.json, or a directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "ledger.json"
    return json.loads(p.read_text(encoding="utf-8"))


def walk(a, b, path: tuple = ()):
    """Yield (path, a, b) for every leaf where ``a`` and ``b`` differ (a missing side is the string '<absent>')."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            yield from walk(a.get(k, "<absent>"), b.get(k, "<absent>"), path + (k,))
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            yield from walk(a[i] if i < len(a) else "<absent>", b[i] if i < len(b) else "<absent>", path + (i,))
    elif a != b and not (_nan(a) and _nan(b)):
        yield path, a, b


def _nan(v) -> bool:
    return isinstance(v, float) and v != v


def entry_id(ledger: dict, path: tuple) -> str | None:
    """The id of the ledger entry a path lies in (``claims``, index, …), else None."""
    if len(path) >= 2 and path[0] == "claims" and isinstance(path[1], int):
        claims = ledger.get("claims", [])
        return claims[path[1]].get("id") if path[1] < len(claims) else None
    return None


def classify(ledger: dict, path: tuple, a, b) -> str:
    """'ignored', 'timing' or 'differs' for one difference."""
    if path[:2] in IGNORED or (len(path) == 3 and path[0] == "claims" and path[2] == "seconds"):
        return "ignored"
    if len(path) >= 2 and path[-2] == "design" and path[-1] in DESIGN_TIMES:
        return "ignored"  # when this run's design was fixed and its first result stored: the clock, not the design
    if len(path) >= 5 and path[2] == "readings" and path[4] == "key" and a == "<absent>":
        return "ignored"  # readings gained a stable key
    if entry_id(ledger, path) in TIMED_ENTRIES and path[2] not in TIMED_KEEP:
        return "timing"
    if any(isinstance(k, str) and any(w in k for w in SECONDS_WORDS) for k in path):
        return "timing"
    return "differs"


def compare(before: dict, after: dict) -> dict[str, list[tuple[tuple, object, object]]]:
    """{'ignored' | 'timing' | 'differs': [(path, before, after)]} over every differing leaf."""
    out: dict[str, list] = {"ignored": [], "timing": [], "differs": []}
    for path, a, b in walk(before, after):
        out[classify(before, path, a, b)].append((path, a, b))
    return out


def _short(v, n: int = 100) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v
    return s if len(s) <= n else s[: n - 1] + "…"


def report(groups: dict, before: dict) -> str:
    """The comparison in words: counts per group, then every line of 'differs' and a summary of the rest."""
    lines = []
    n_claims = len(before.get("claims", []))
    n_read = sum(len(c.get("readings", [])) for c in before.get("claims", []))
    lines.append(f"compared {n_claims} entries, {n_read} readings")
    for g in ("differs", "timing", "ignored"):
        lines.append(f"{g}: {len(groups[g])}")
    for path, a, b in groups["differs"]:
        lines.append(f"  DIFFERS {'.'.join(map(str, path))}: {_short(a)} → {_short(b)}")
    fields = sorted({".".join(str(k) for k in p[2:3]) + f" ({entry_id(before, p)})" for p, _, _ in groups["timing"]})
    if fields:
        lines.append("  timing fields: " + ", ".join(fields))
    kinds = sorted({p[-1] if isinstance(p[-1], str) else p[0] for p, _, _ in groups["ignored"]})
    if kinds:
        lines.append("  ignored fields: " + ", ".join(map(str, kinds)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    try:
        before, after = load(args[0]), load(args[1])
    except (OSError, ValueError) as exc:
        print(f"ledger_compare: {exc}", file=sys.stderr)
        return 2
    groups = compare(before, after)
    print(report(groups, before))
    return 1 if groups["differs"] else 0


if __name__ == "__main__":
    sys.exit(main())
