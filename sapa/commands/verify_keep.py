"""``sapa verify`` keeps each verdict as it finishes: however a run ends, every verdict it printed is on disk.

After each entry (before its verdict is printed) the ledger as it then stands is written atomically, then its
``report.md`` and ``report.html``: into ``ledger.json``, merged into the ledger already there when that is of this
budget (as ``--only`` merges); or, beside a ledger of another budget (which part of a run never replaces), into
``ledger.interrupted.json``, merged into the one already there (two interrupted runs keep both runs' verdicts).
Nothing is left to write when the run ends, so a SIGINT inside numpy, a SIGTERM, a full disk or an exception raised
in an entry finds the verdicts already kept, whichever exception surfaces.

A ledger written mid-run carries ``provenance["interrupted"]`` (this run's entries finished and not run) until the
run completes; every ledger that lacks an entry of the registry carries ``provenance["partial"]["not_run"]``
(recomputed at each write, so no merge drops it) until it is whole.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from sapa.common.validate import InputError

LEDGER, PART = "ledger.json", "ledger.interrupted.json"  # the ledger; a part of a run beside another budget's ledger


@dataclass(frozen=True)
class Target:
    """Where a run's verdicts go as they finish, and the ledger they are merged into there."""

    name: str          # LEDGER or PART
    base: dict | None  # the ledger already at ``name`` (of this budget), merged into; None: none

    @property
    def report(self) -> str:
        """The reports' stem beside it: ``report`` (report.md, report.html) or ``report.interrupted``."""
        return "report" if self.name == LEDGER else "report.interrupted"


def choose_target(out_dir: Path, budget, ids: set[str], only: bool) -> Target:
    """Where this run keeps its verdicts (checked before any work starts; InputError when nowhere is safe).

    ``--only``: ledger.json, merged (a ledger of another budget, or one that does not fit the schema, is refused).
    A whole run: ledger.json when it is absent or of this budget; else beside it in ledger.interrupted.json, merged
    into that one when it is of this budget (refused when it is another budget's: it would be lost).
    """
    from sapa.commands.ledger_merge import prior_ledger, read_ledger

    if only:
        return Target(LEDGER, prior_ledger(out_dir, budget, ids))
    try:
        return Target(LEDGER, prior_ledger(out_dir, budget, ids))
    except InputError:  # another budget's, or unreadable: never replaced by part of a run
        pass
    base = read_ledger(out_dir / PART, budget, ids, "this run's partial ledger",
                       f"move {out_dir / PART} away (or {out_dir / LEDGER}) or choose another --out")
    return Target(PART, base)


def with_partial(ledger: dict, order: list[str]) -> dict:
    """``ledger`` with ``provenance["partial"] = {"not_run": [...]}``, the ids of ``order`` it has no entry for;
    without that key when it has them all (whole).

    >>> with_partial({"claims": [{"id": "a"}], "provenance": {}}, ["a", "b"])["provenance"]
    {'partial': {'not_run': ['b']}}
    """
    have = {c["id"] for c in ledger["claims"]}
    prov = {k: v for k, v in ledger["provenance"].items() if k != "partial"}
    missing = [i for i in order if i not in have]
    return {**ledger, "provenance": {**prov, **({"partial": {"not_run": missing}} if missing else {})}}


@dataclass
class Keeper:
    """What this run has kept: :meth:`keep` writes the ledger after each entry, :meth:`line` says what is on disk."""

    out_dir: Path
    target: Target
    order: list[str]  # this run's entries, in ledger order
    prov: dict        # this run's provenance (wall_seconds refreshed at each write)
    started: float
    kept: list[str] = field(default_factory=list)  # ids whose verdicts are in the target ledger
    missing: list[str] = field(default_factory=list)  # the registry's ids that ledger lacks (its partial marker)
    report_error: str | None = None                # why the reports beside it could not be written (None: they were)

    def keep(self, entries: list, mc: dict) -> None:
        """Write the ledger with ``entries`` (this run's, finished), marked interrupted and partial, then its reports."""
        done = {e.id for e in entries}
        prov = {**self._prov(), "interrupted": {"finished": [i for i in self.order if i in done],
                                                "not_run": [i for i in self.order if i not in done]}}
        ledger = self._write(self.target, entries, prov, mc, merge=True)
        self.kept = list(prov["interrupted"]["finished"])
        self.missing = list(ledger["provenance"].get("partial", {}).get("not_run", []))
        self._reports(self.target, ledger)

    def finish(self, entries: list, mc: dict, merge: bool) -> dict:
        """The run completed: write its ledger to ledger.json (merged into the one there when ``merge``: ``--only``),
        then its reports; a part kept beside another budget's ledger is then superseded and removed."""
        target = Target(LEDGER, self.target.base if self.target.name == LEDGER else None)
        ledger = self._write(target, entries, self._prov(), mc, merge=merge)
        self._reports(target, ledger, strict=True)
        if self.target.name == PART:
            for name in (PART, "report.interrupted.md", "report.interrupted.html"):
                try:
                    os.unlink(self.out_dir / name)
                except FileNotFoundError:
                    pass
        return ledger

    def line(self) -> str:
        """One line: how many entries finished and where their verdicts are (or that none was written)."""
        if not self.kept:
            return (f"no ledger entry had finished, so no ledger was written; finished results below {self.out_dir} "
                    "(sweep cells, training chunks) were kept, and a rerun resumes from them")
        stem = self.out_dir / self.target.report
        where = (f"{self.out_dir / self.target.name} and {stem}.md" if self.report_error is None else
                 f"{self.out_dir / self.target.name} ({stem}.md and .html could not be updated: {self.report_error})")
        not_run = [i for i in self.order if i not in self.kept]
        partial = (f"; it says it is partial ({len(self.missing)} entries never ran) until a run completes it"
                   if self.missing else "")
        return (f"{len(self.kept)} of {len(self.order)} entries finished; their verdicts are in {where} "
                f"(not run: {', '.join(not_run) or 'none'}){partial}")

    def _prov(self) -> dict:
        import time

        return {**self.prov, "wall_seconds": round(time.time() - self.started, 3)}

    def _write(self, target: Target, entries: list, prov: dict, mc: dict, merge: bool) -> dict:
        from sapa.common.atomic import atomic_write_json
        from sapa.claim_ids import ORDER
        from sapa.commands.ledger_merge import merge_into
        from sapa.ledger import ledger_dict

        entries = sorted(entries, key=lambda e: self.order.index(e.id))  # the ledger keeps its own order
        ledger = with_partial(merge_into(target.base if merge else None, ledger_dict(entries, prov, mc)), ORDER)
        atomic_write_json(self.out_dir / target.name, ledger)
        return ledger

    def _reports(self, target: Target, ledger: dict, strict: bool = False) -> None:
        """report.md and report.html of ``ledger`` (its merged entries); mid-run, a failure is remembered for
        :meth:`line` and the ledger is still kept; at the end (``strict``) it is raised."""
        from sapa.common.atomic import atomic_write_text
        from sapa import report
        from sapa.commands.ledger_merge import ledger_entries

        shown, prov, mc = ledger_entries(ledger), ledger["provenance"], ledger.get("monte_carlo")
        try:
            atomic_write_text(self.out_dir / f"{target.report}.md", report.markdown(shown, prov, mc, self.out_dir))
            atomic_write_text(self.out_dir / f"{target.report}.html", report.html(shown, prov, self.out_dir, mc))
        except OSError as exc:
            if strict:
                raise
            self.report_error = exc.strerror or " ".join(str(exc).split())
        else:
            self.report_error = None
