"""The data of ``sapa compare`` (:mod:`sapa.api.compare`): the axes, the budgets, a row, a cell, a job of the pool.

Its own module so that the axes (:mod:`sapa.api.compare_axes`, :mod:`sapa.api.compare_train`), which the scorecard
calls, import these without importing the scorecard back (no import circle: tests/test_architecture.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

__all__ = ["AXES", "AXIS_WORDS", "BUDGETS", "Cell", "CompareBudget", "Job", "Row", "not_computed"]

AXES = ("size", "growth", "worst_case", "lipschitz", "time", "train")
AXIS_WORDS = {"size": "‖φ‖_F/√N", "growth": "growth exp.", "worst_case": "worst-case exp.",
              "lipschitz": "Lipschitz exp. β=4", "time": "time ÷ SDPA", "train": "log2 steps ÷ softmax"}


@dataclass(frozen=True)
class CompareBudget:
    """How much each axis computes (the quick budget, four activations on 2 cores: ≈ 1 min quiet, ≈ 1.5 min with
    colleagues' work beside it; docs/performance.md)."""

    name: str
    audit_trials: int = 24                          # Monte Carlo draws per N (row-normalised φ)
    ball_ns: tuple[int, ...] = (8, 11, 16, 22, 32)  # the Lipschitz n grid (D = d = d_v = 8)
    ball_restarts: int = 4
    ball_steps: int = 30
    ball_polish: int = 100
    timing_N: int = 256                             # tokens of the timed layer
    timing_repeats: int = 5
    timing_block_s: float = 0.03
    mech: str = "quick"                             # the copy probes (sapa.empirics.training.mechanism budgets)
    mech_Ns: tuple[int, ...] | None = (16, 32)      # None: the budget's own
    digits_Ns: tuple[int, ...] = (16,)
    digits_steps: int | None = None                 # None: the study budget's own
    study: str = "quick"
    train: bool = True
    spawn: bool = True                              # the pool in worker processes (False: here, serially)


BUDGETS = {
    "quick": CompareBudget("quick"),
    "full": CompareBudget("full", audit_trials=200, ball_ns=(2, 4, 8, 11, 16, 22, 32, 45, 64), ball_restarts=8,
                          ball_steps=80, ball_polish=300, timing_N=1024, timing_block_s=0.1, mech="full",
                          mech_Ns=None, digits_Ns=(16, 64), study="full"),
    # for tests: a few seconds, no training, no worker processes (their start-up would cost more than the work)
    "tiny": CompareBudget("tiny", audit_trials=8, ball_ns=(4, 8, 16), ball_restarts=3, ball_steps=4, ball_polish=20,
                          timing_N=32, timing_repeats=3, timing_block_s=0.002, train=False, spawn=False),
}


def builtin_degree(r) -> int | None:
    """p where the row ``r`` (a :class:`sapa.theory.families.Family`) is the paper's x^p/√N without a mask: the
    Lipschitz ball's and the timer's built-in forms; None otherwise (its expression is used)."""
    from sapa.theory.families import INV_SQRT_N

    return r.p if r.kernel == "poly" and r.rule == INV_SQRT_N and r.mask != "causal" else None


def expr_form(r) -> str:
    """The row's expression as the heads, timers and trainers name it: ``expr:<φ>``, or ``row:<ψ>`` when its rows are
    divided by their sums."""
    return ("row:" if r.normalize == "row" else "expr:") + r.expr


def table_id(r) -> str | None:
    """The id of the table row ``r`` is (sapa.theory.families.FAMILIES), None for an expression's unlisted row."""
    from sapa.theory.families import FAMILIES

    return r.id if FAMILIES.get(r.id) is r else None


def row_dict(r) -> dict:
    """A scorecard row as JSON: id (the family id, or the text as given), label, expression, normalisation, mask, the
    table row it came from (None: an expression) and its built-in degree."""
    return {"id": r.id, "label": r.label, "expr": r.expr, "normalize": r.normalize, "mask": r.mask,
            "family": table_id(r), "p": builtin_degree(r)}


@dataclass(frozen=True)
class Cell:
    """One (activation, axis) entry: value, uncertainty, the rule's verdict, and why."""

    axis: str
    value: float | None                          # the headline number; None: not computed (note says why)
    interval: tuple[float, float] | None = None  # None: exact (or not computed)
    interval_kind: str = "exact"
    verdict: str | None = None                   # None: no rule applies (a finding), said so in note
    rule: str | None = None
    note: str = ""
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return _finite(asdict(self))


def not_computed(axis: str, why: str) -> Cell:
    """A cell that cannot be computed for this activation, and why."""
    return Cell(axis, None, None, "none", None, None, f"not computed: {why}")


@dataclass(frozen=True)
class Job:
    """One unit of the pool: ``fn(*arg)`` (a module-level function: picklable) for ``row``'s ``axis``; ``cost``: its
    expected CPU-s (the pool takes the longest first; the progress bar's ETA)."""

    axis: str
    row: str
    fn: Callable
    arg: tuple
    cost: float = 1.0


def _finite(o):
    """``o`` with every non-finite float replaced by None (JSON has no NaN or ∞), tuples as lists."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if hasattr(o, "item") and callable(o.item):  # numpy scalars
        return _finite(o.item())
    return o
