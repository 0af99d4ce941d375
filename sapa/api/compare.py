"""Scorecard of attention activations φ against softmax (arXiv 2410.18613): one row per φ, one cell per axis.

Axes: ``size`` (E-RMS ‖φ(S)‖_F/√N at ViT-Base, N = 196, D = 768, d = 64), ``growth`` (local exponent at N = 196 and
as N → ∞, N*), ``worst_case`` (exponent of the worst case over bounded tokens), ``lipschitz`` (σ₁ growth on the
balls β = 4 and β = 1), ``time`` (CPU time against SDPA) and ``train`` (steps to threshold against softmax on the
quick probes). Every cell carries its value, its uncertainty, the verdict of the rule that applies (None where no
rule applies, said so in its note) and, where it cannot be computed for this φ, why. The axes themselves live in
:mod:`sapa.api.compare_axes` (audit, ball, timing) and :mod:`sapa.api.compare_train` (training).

>>> from sapa.api.compare import resolve_rows
>>> [r.id for r in resolve_rows(["x3_sqrtN", "Max(x,0)**2/N"])]
['softmax', 'x3_sqrtN', 'Max(x,0)**2/N']
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

from sapa.common.validate import InputError

__all__ = ["AXES", "BUDGETS", "Cell", "CompareBudget", "Row", "Scorecard", "compare", "resolve_rows"]

AXES = ("size", "growth", "worst_case", "lipschitz", "time", "train")
AXIS_WORDS = {"size": "‖φ‖_F/√N", "growth": "growth exp.", "worst_case": "worst-case exp.",
              "lipschitz": "Lipschitz exp. β=4", "time": "time ÷ SDPA", "train": "log2 steps ÷ softmax"}


@dataclass(frozen=True)
class CompareBudget:
    """How much each axis computes (the quick budget: ≈ 1–2 min for four activations on 2 cores)."""

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


BUDGETS = {
    "quick": CompareBudget("quick"),
    "full": CompareBudget("full", audit_trials=200, ball_ns=(2, 4, 8, 11, 16, 22, 32, 45, 64), ball_restarts=8,
                          ball_steps=80, ball_polish=300, timing_N=1024, timing_block_s=0.1, mech="full",
                          mech_Ns=None, digits_Ns=(16, 64), study="full"),
    # for tests: a few seconds, no training
    "tiny": CompareBudget("tiny", audit_trials=8, ball_ns=(4, 8, 16), ball_restarts=3, ball_steps=4, ball_polish=20,
                          timing_N=32, timing_repeats=3, timing_block_s=0.002, train=False),
}


@dataclass(frozen=True)
class Row:
    """One activation: its id (family id or the text as given), label, expression in x = S_ij, normalisation, mask."""

    id: str
    label: str
    expr: str
    normalize: str = "none"
    mask: str = "none"
    family: str | None = None   # the row of sapa.theory.families it came from (None: an expression)
    p: int | None = None        # c·x^p with c = 1/√N: the degree (the ball's and the timer's built-in forms)


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
class Scorecard:
    """Rows (softmax first, the reference) × :data:`AXES` cells, the budget, seconds per axis, provenance."""

    rows: tuple[Row, ...]
    cells: tuple[tuple[Cell, ...], ...]
    budget: str
    seconds: dict
    provenance: dict

    def cell(self, row_id: str, axis: str) -> Cell:
        return self.cells[[r.id for r in self.rows].index(row_id)][AXES.index(axis)]

    def to_dict(self) -> dict:
        """JSON-ready: every non-finite number as None (its cell's note says why)."""
        return {"axes": list(AXES), "budget": self.budget, "rows": [asdict(r) for r in self.rows],
                "cells": [{c.axis: c.to_dict() for c in cs} for cs in self.cells], "seconds": _finite(self.seconds),
                "provenance": self.provenance}

    def table(self) -> str:
        """Plain-text table: one line per activation, value [interval] verdict per axis."""
        head = ["activation", *(AXIS_WORDS[a] for a in AXES)]
        body = [[r.label, *(_short(c) for c in cs)] for r, cs in zip(self.rows, self.cells)]
        w = [max(len(x[k]) for x in [head, *body]) for k in range(len(head))]
        return "\n".join("  ".join(x[k].ljust(w[k]) for k in range(len(x))).rstrip() for x in [head, *body])

    def markdown(self) -> str:
        """A markdown table, then each cell's note (the rule, or why no rule / why not computed)."""
        lines = ["| activation | " + " | ".join(AXIS_WORDS[a] for a in AXES) + " |",
                 "|---" * (len(AXES) + 1) + "|"]
        lines += [f"| {r.label} | " + " | ".join(_short(c).replace("|", "\\|") for c in cs) + " |"
                  for r, cs in zip(self.rows, self.cells)]
        lines += ["", *(f"- **{r.label}, {c.axis}**: {c.note}" + (f" (rule {c.rule})" if c.rule else "")
                        for r, cs in zip(self.rows, self.cells) for c in cs)]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Scorecard(budget={self.budget!r})\n{self.table()}"


def _short(c: Cell) -> str:
    if c.value is None:
        return "— (not computed)" if c.note.startswith("not computed") else "—"
    iv = "" if c.interval is None else f" [{_g(c.interval[0])}, {_g(c.interval[1])}]"
    return f"{_g(c.value)}{iv} {c.verdict or 'no rule'}"


def _g(x) -> str:
    return "∞" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3g}"


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


# --------------------------------------------------------------------------- rows


SOFTMAX = Row("softmax", "softmax", "exp(x)", "row", "none", "softmax")


def resolve_rows(activations) -> list[Row]:
    """Softmax (the reference) then each activation: a family id of sapa.theory.families (no free parameter) or a
    sympy expression in x, N, i, j (``EXPR@row``: row-normalised); InputError naming the bad one, before any work."""
    from sapa.theory.activation_audit import parse_activation
    from sapa.theory.families import FAMILIES, label_of, resolve

    if isinstance(activations, str):
        activations = [activations]
    rows, seen = [SOFTMAX], {"softmax"}
    for text in activations:
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"an activation must be a family id or an expression, got {text!r}")
        body, _, tag = text.partition("@")
        if tag not in ("", "row"):
            raise InputError(f"{text!r}: the only suffix is @row (row-normalised), got @{tag}")
        expr, normalize, mask = resolve(body, "row" if tag else "none")
        f = FAMILIES.get(body)
        if f is None:
            parse_activation(expr, normalize, mask)  # one clear InputError for an unparsable expression
        if text in seen or (f is not None and f.id in seen):
            continue
        seen.add(text)
        p = f.p if (f is not None and f.kernel == "poly" and f.scale == "inv_sqrt_n" and "causal" not in f.masks[:1]) \
            else None
        rows.append(Row(text, f.label if f else label_of(body) + (" (row-normalised)" if tag else ""), expr,
                        normalize, mask, f.id if f else None, p))
    return rows


# --------------------------------------------------------------------------- the scorecard


def compare(activations, budget: str | CompareBudget = "quick", *, logit_scale: str = "S/sqrt(d)", seed: int = 0,
            workers: int = 2, progress: bool = False) -> Scorecard:
    """The scorecard of ``activations`` (family ids or expressions) against softmax under ``budget``.

    Order: parse every row (InputError before any work), time each row alone (one thread), then the audits (size,
    growth, worst case), the Lipschitz ascent and the training probes (a pool of ``workers`` processes).
    """
    from sapa.api import compare_axes as AX
    from sapa.commands.audit_conventions import CONVENTIONS

    b = BUDGETS.get(budget) if isinstance(budget, str) else budget
    if not isinstance(b, CompareBudget):
        raise InputError(f"unknown budget {budget!r}; choose one of {', '.join(BUDGETS)}")
    if logit_scale not in CONVENTIONS:
        raise InputError(f"logit scale must be one of {CONVENTIONS}, got {logit_scale!r}")
    rows = resolve_rows(activations)
    say = _sayer(progress)
    seconds, cells = {}, {r.id: {} for r in rows}
    t0 = time.perf_counter()
    for axis, run in (("time", lambda: AX.timing(rows, b, seed, say)),
                      ("audit", lambda: AX.audits(rows, b, logit_scale, seed, say)),
                      ("lipschitz", lambda: AX.lipschitz(rows, b, seed, say)),
                      ("train", lambda: _train(rows, b, seed, workers, say))):
        t = time.perf_counter()
        for rid, got in run().items():
            cells[rid].update(got)
        seconds[axis] = round(time.perf_counter() - t, 2)
        say(f"[compare] {axis}: {seconds[axis]:.1f} s")
    seconds["total"] = round(time.perf_counter() - t0, 2)
    table = tuple(tuple(cells[r.id].get(a) or not_computed(a, "no result") for a in AXES) for r in rows)
    return Scorecard(tuple(rows), table, b.name, seconds, _provenance(b, logit_scale, seed))


def _train(rows, b: CompareBudget, seed: int, workers: int, say) -> dict:
    from sapa.api.compare_train import trainability

    if not b.train:
        return {r.id: {"train": not_computed("train", f"the {b.name} budget trains nothing")} for r in rows}
    return trainability(rows, b, seed, workers, say)


def _sayer(progress: bool):
    from sapa.common.progress import say

    return (lambda line: say(line)) if progress else (lambda line: None)


def _provenance(b: CompareBudget, logit_scale: str, seed: int) -> dict:
    import os
    import platform

    import torch

    import sapa

    return {"sapa": sapa.__version__, "torch": torch.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "cores": os.cpu_count(), "load_1min": round(os.getloadavg()[0], 2),
            "budget": asdict(b), "logit_scale": logit_scale, "seed": seed,
            "model": "iid weights, D = 768, d = 64, N = 196 (ViT-Base)"}
