"""Does the README's verdict table say what a ledger says? ``python3 tools/readme_check.py results/ledger.json``.

Compares, entry by entry, the verdict in the README's two tables with the ledger's, checks that every ledger entry
has exactly one row, and that the commit named in the README's reproduce section is the ledger's commit. Prints
one line per disagreement and exits 1 if there is any (0 when they agree, 2 on unreadable input).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROW = re.compile(r"^\| \[`([^`]+)`\]\([^)]*\) \| ([A-Z_]+) \|", re.M)  # | [`id`](link) | VERDICT | ...
COMMIT = re.compile(r"on commit `([0-9a-f]{7,40})`")


def table_verdicts(readme: str) -> list[tuple[str, str]]:
    """[(entry id, verdict)] of the README's verdict tables, in order."""
    return ROW.findall(readme)


def quoted_commit(readme: str) -> str | None:
    """The commit the README says its ledger ran on (its reproduce section), or None."""
    start = readme.find("\n## Reproducing\n")
    if start < 0:
        return None
    end = readme.find("\n## ", start + 1)
    m = COMMIT.search(readme[start:end if end > 0 else None])
    return m.group(1) if m else None


def disagreements(readme: str, ledger: dict) -> list[str]:
    """One sentence per way the README's tables and reproduce section disagree with ``ledger`` (empty: agree)."""
    rows = table_verdicts(readme)
    ours = dict(rows)
    out = [f"{i}: {n} rows in the README" for i in sorted(ours) if (n := [r[0] for r in rows].count(i)) > 1]
    theirs = {c["id"]: c["verdict"] for c in ledger.get("claims", [])}
    for i, v in theirs.items():
        if i not in ours:
            out.append(f"{i}: no row in the README (ledger: {v})")
        elif ours[i] != v:
            out.append(f"{i}: README says {ours[i]}, ledger says {v}")
    out += [f"{i}: in the README, not in the ledger" for i in ours if i not in theirs]
    commit = quoted_commit(readme)
    ran_on = str(ledger.get("provenance", {}).get("git_commit") or "")
    if commit is None:
        out.append("the reproduce section names no commit")
    elif not ran_on.startswith(commit):
        out.append(f"the README quotes commit {commit}, the ledger ran on {ran_on or 'an unknown commit'}")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 tools/readme_check.py LEDGER.json", file=sys.stderr)
        return 2
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    try:
        ledger = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"readme_check: error: cannot read {argv[0]}: {e}", file=sys.stderr)
        return 2
    found = disagreements(readme, ledger)
    for line in found:
        print(line)
    if not found:
        print(f"README agrees with {argv[0]}: {len(table_verdicts(readme))} verdicts and the quoted commit")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
