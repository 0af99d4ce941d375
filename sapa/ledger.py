"""The claims ledger: one contract per claim of arXiv 2410.18613, a verdict computed from evidence.

Every entry states precisely what is tested (:class:`Contract`): the object, the norm, the
randomness model, the quantifier, the range of N, the predicted exponent and the observation
that would refute it. A check function gathers evidence (exact theory, numerics, Monte Carlo)
and derives the verdict from that evidence by an explicit rule; no verdict is typed in.
Claims whose checks are not built yet are listed as ``UNDETERMINED`` with the reason.
"""

from __future__ import annotations

import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from sapa.budget import Budget

from sapa.rules.base import CLAIM_VERDICTS, QUESTION_VERDICTS

VERDICTS = CLAIM_VERDICTS + tuple(v for v in QUESTION_VERDICTS if v not in CLAIM_VERDICTS)
KINDS = ("claim", "question")  # what the paper states / what only the reviews ask


@dataclass(frozen=True)
class Contract:
    """What exactly a ledger entry tests, and what would refute it."""

    object: str               # e.g. "row-softmax attention matrix P = softmax(S)"
    norm: str                 # e.g. "Frobenius"
    randomness: str           # e.g. "none: for all S in R^{N×N}" or "X rows iid N(0, I_D), W_Q, W_K iid"
    quantifier: str           # "for all inputs" | "in expectation" | ...
    n_range: str              # e.g. "every N ≥ 1"
    predicted_exponent: str   # e.g. "0.5 (∝ √N)" or "bound, not a rate"
    refuted_by: str           # the observation that would refute the claim
    logit_scale: str          # "S" (S = X W_Q W_Kᵀ Xᵀ, the paper's theory) or "S/sqrt(d)" (as transformers compute it)
    logit_note: str = ""      # how the convention enters (e.g. "invariant: a for-all statement over every real S")

    def __post_init__(self) -> None:
        from sapa.conditions import LOGIT_SCALES

        if self.logit_scale not in LOGIT_SCALES:
            raise ValueError(f"unknown logit_scale {self.logit_scale!r}; one of {LOGIT_SCALES}")


@dataclass(frozen=True)
class Context:
    """What a check may use: its budget and where to put figures."""

    budget: Budget
    out_dir: Path
    cache: dict = field(default_factory=dict)  # results shared between checks of one run (e.g. the sweep)
    workers: int = 2  # processes for independent, seeded work (sweep cells, worst-case parts); numbers unchanged


@dataclass(frozen=True)
class Reading:
    """One reading of a claim (or one finding of a question) with the verdict its rule gives.

    The first reading of a claim is its most defensible one (the paper's notation and quantifier);
    the entry's verdict is that reading's. ``rule`` names the :mod:`sapa.rules` rule that decided it.
    ``key`` names the reading within its entry, stably (``("p", 3, "tight")``): code and tests select readings by
    it (:func:`reading_keyed`), never by the display text ``name``; it is written to ledger.json as a list.
    """

    name: str        # e.g. "upper bound O(√N), in expectation" (display text)
    statement: str   # the precise statement judged
    verdict: str     # one of CLAIM_VERDICTS
    rule: str        # a rule name from sapa.rules (its calibration: `sapa calibrate --rule NAME`)
    why: str = ""    # the decisive numbers, in one line
    key: tuple = ()  # stable id within the entry, e.g. ("p", 3, "factor", 1.5); () where none is given

    def __post_init__(self) -> None:
        if self.verdict not in CLAIM_VERDICTS:
            raise ValueError(f"unknown reading verdict {self.verdict!r}")
        if not isinstance(self.key, tuple):
            object.__setattr__(self, "key", tuple(self.key))


def reading_keyed(readings, *key):
    """The reading whose key is ``key``, among :class:`Reading` objects or their ledger.json dicts.

    >>> reading_keyed([Reading("a", "s", "HOLDS", "bound", key=("wrt", "S"))], "wrt", "S").name
    'a'
    """
    for r in readings:
        k = r.get("key", ()) if isinstance(r, dict) else r.key
        if tuple(k) == key:
            return r
    known = [tuple(r.get("key", ()) if isinstance(r, dict) else r.key) for r in readings]
    raise KeyError(f"no reading keyed {key!r}; keys: {known}")


def readings_keyed(readings, *prefix) -> list:
    """Every reading whose key starts with ``prefix`` (Reading objects or ledger.json dicts), in order."""
    n = len(prefix)
    return [r for r in readings if tuple(r.get("key", ()) if isinstance(r, dict) else r.key)[:n] == prefix]


@dataclass(frozen=True)
class Outcome:
    """The result of one check: verdict, readings, evidence and (when not HOLDS) the corrected claim.

    Claims: ``verdict`` is the first reading's. Questions: ``ANSWERED`` when every reading the
    ``answer`` relies on is decided (not UNDETERMINED), else ``UNDETERMINED``.
    """

    verdict: str
    evidence: dict
    tested_statement: str
    headline: str = ""                     # the key numbers in one line, for the table
    corrected_claim: str | None = None
    figures: tuple[str, ...] = ()
    readings: tuple[Reading, ...] = ()
    rule: str = ""                         # the rule of the verdict-giving reading (claims)
    answer: str | None = None              # questions: the answer in a few sentences
    findings: tuple[str, ...] = ()         # stated findings that are not verdicts (constants, sizes)
    falsifiability: dict | None = None     # sapa.conditions.by_construction / could_fail (with its negative control)
    robustness: dict | None = None         # sapa.conditions.robustness: the verdict under varied conditions, stable
    regime: dict | None = None             # HOLDS_IN_REGIME: {"boundary", "n_min", "windows" | "cells"}

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}")


@dataclass(frozen=True)
class Claim:
    """A claim of the paper (or a reviewer's question) and the check that settles it."""

    id: str
    statement: str                         # the paper's claim, in words
    contract: Contract | None = None
    check: Callable[[Context], Outcome] | None = None
    owner: str = ""                        # the issue that builds the check, while none exists
    kind: str = "claim"                    # "claim": the paper states it; "question": only the reviews ask

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}")


@dataclass
class Entry:
    """A ledger row as written to ``ledger.json``."""

    id: str
    statement: str
    verdict: str
    evidence: dict
    figures: list[str] = field(default_factory=list)
    headline: str = ""
    tested_statement: str = ""
    contract: dict | None = None
    corrected_claim: str | None = None
    seconds: float = 0.0
    cpu_seconds: float | None = None  # CPU of sapa and its workers while the entry ran (sapa.common.cputime): sapa/costs.json
    kind: str = "claim"
    readings: list[dict] = field(default_factory=list)
    rule: dict | None = None
    answer: str | None = None
    findings: list[str] = field(default_factory=list)
    falsifiability: dict | None = None
    robustness: dict | None = None
    regime: dict | None = None


def run_claim(claim: Claim, ctx: Context) -> Entry:
    """Run one claim's check (or mark it not yet examined) and time it (wall and CPU seconds)."""
    from sapa.common.cputime import tree_cpu_seconds

    t0, c0 = time.perf_counter(), tree_cpu_seconds()
    if claim.check is None:
        outcome = Outcome(
            verdict="UNDETERMINED",
            evidence={"status": "not yet examined", "owner": claim.owner},
            tested_statement="(no check built yet)",
        )
    else:
        outcome = claim.check(ctx)
    allowed = QUESTION_VERDICTS if claim.kind == "question" else CLAIM_VERDICTS
    if outcome.verdict not in allowed:  # a claim is judged; a question is answered
        raise ValueError(f"{claim.id}: a {claim.kind} cannot have verdict {outcome.verdict!r}")
    verdict, evidence = outcome.verdict, outcome.evidence
    if claim.kind == "question" and verdict == "ANSWERED":  # one meaning per label (sapa.labels)
        from sapa.labels import question_verdict, undecided

        if question_verdict(outcome.readings) != "ANSWERED":
            verdict = "UNDETERMINED"
            evidence = {**evidence, "label_rule": "ANSWERED needs every reading decided; undecided: "
                        + ", ".join(undecided(outcome.readings) or ["(no readings)"])}
    readings = [_reading_dict(r) for r in outcome.readings]  # may calibrate a rule: part of the entry's time
    rule = _rule_dict(outcome.rule)
    return Entry(
        id=claim.id,
        statement=claim.statement,
        verdict=verdict,
        evidence=evidence,
        figures=list(outcome.figures),
        headline=outcome.headline or ("not yet examined (" + claim.owner + ")" if claim.check is None else ""),
        tested_statement=outcome.tested_statement,
        contract=asdict(claim.contract) if claim.contract else None,
        corrected_claim=outcome.corrected_claim,
        seconds=round(time.perf_counter() - t0, 3),
        cpu_seconds=round(tree_cpu_seconds() - c0, 2),
        kind=claim.kind,
        readings=readings,
        rule=rule,
        answer=outcome.answer,
        findings=list(outcome.findings),
        falsifiability=outcome.falsifiability or _not_examined_falsifiability(outcome),
        robustness=_other_budget(outcome.robustness or _not_examined_robustness(verdict, outcome), ctx.budget.name),
        regime=outcome.regime,
    )


def _not_examined_falsifiability(outcome: Outcome) -> dict:
    """An entry whose check states no falsifiability (or stopped before its evidence): no control was run — said so."""
    return {"kind": "could_fail", "why": "this entry's check runs no negative control (" + (outcome.headline or "-")[:200]
            + ")", "negative_control": {"statement": "(none run: the check states no false variant)",
                                        "verdict": "UNDETERMINED", "control_ok": False}}


def _other_budget(rob: dict, budget: str) -> dict:
    """The checks write their "budget full" row from a quick run; in a full run that row is about the quick budget."""
    if budget == "quick":
        return rob
    rows = [{**r, "condition": "budget quick", "note": "not run: the quick budget's numbers are not part of this "
             f"{budget}-budget run"} if r.get("condition") == "budget full" and r.get("verdict") is None else r
            for r in rob.get("varied", [])]
    return {**rob, "varied": rows}


def _not_examined_robustness(verdict: str, outcome: Outcome) -> dict:
    """Nothing varied by this entry's check: ``stable`` is false — not shown to be stable."""
    return {"headline": verdict, "stable": False, "flips": [],
            "varied": [{"condition": "every condition", "verdict": None, "reading": "headline",
                        "note": "not run: this entry's check varies no condition"}]}


def _reading_dict(r: Reading) -> dict:
    from sapa.rules import rule_named

    return {**asdict(r), "calibration": calibration_note(rule_named(r.rule))}


def _rule_dict(name: str) -> dict | None:
    from sapa.rules import rule_named

    if not name:
        return None
    rule = rule_named(name)
    return {"name": rule.name, "summary": rule.summary, "thresholds": dict(rule.thresholds),
            "calibration": calibration_note(rule)}


def calibration_note(rule) -> dict:
    """The rule's calibration as cited in the ledger: measured rates from ``sapa calibrate`` (cached per run)."""
    from sapa.rules import cached_calibration

    from sapa.rules.base import EXACT_NOTE

    c = cached_calibration(rule.name)
    if rule.evidence == "exact":  # no sampling error: rates of 0 % / 0 % / 100 % would only restate the logic
        return {"exact": True, "note": EXACT_NOTE, "false_fails_rate": None, "false_holds_rate": None, "power": None,
                "decision_logic_check": {"false_fails_rate": c.false_fails_rate,
                                         "false_holds_rate": c.false_holds_rate, "power": c.power, "trials": c.trials},
                "command": f"sapa calibrate --rule {rule.name}"}
    return {"false_fails_rate": c.false_fails_rate, "false_holds_rate": c.false_holds_rate, "power": c.power,
            "trials": c.trials, "meets_targets": c.meets_targets, "command": f"sapa calibrate --rule {rule.name}"}


def store_figure_data(ctx: Context, name: str, res: dict, stem: str) -> None:
    """Keep a figure's computed data (OUT/data/NAME.json, atomic, no pickle) so ``sapa figures`` redraws it."""
    from sapa.common import figdata

    figdata.write(ctx.out_dir / "data" / f"{name}.json", res, stem)


def provenance(budget: Budget, started: float) -> dict:
    """Versions, seed, budget and timing of a ledger run."""
    import numpy
    import scipy
    import sympy
    import torch

    import sapa

    return {
        "sapa_version": sapa.__version__,
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "sympy": sympy.__version__,
        "torch": torch.__version__,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "dtype": "float64",
        "budget": asdict(budget),
        "seed": budget.seed,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_seconds": round(time.time() - started, 3),
        "paper": "arXiv 2410.18613",
    }


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def ledger_dict(entries: list[Entry], prov: dict, monte_carlo: dict | None = None) -> dict:
    """The ``ledger.json`` object: ``{"claims": [...], "monte_carlo": {...}, "provenance": {...}}``.

    ``claims`` holds every entry, claims (``kind: "claim"``) and reviewers' questions (``kind: "question"``).
    """
    return {"claims": [asdict(e) for e in entries], "monte_carlo": monte_carlo or {}, "provenance": prov}
