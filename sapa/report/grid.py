"""Readings that form a grid, as tables: verdict[row, column] over the axes their keys name (p × mask × pass).

A reading's ``key`` names it within its entry as alternating axis names and values (``["factor", 1.2, "p", 3,
"mask", "causal", "pass", "fwd"]``, see :class:`sapa.ledger.Reading`). Readings whose keys name the same axes, with
at least two axes varying, are one grid: the last varying axis gives the columns, the axes before it the rows,
and a first varying axis beyond those (three or more varying) splits the grid into one table per value. Nothing here
decides a verdict: each cell is one reading's verdict and its ``why``, as the ledger has them.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

MIN_CELLS = 4  # fewer keyed readings read better as the readings table alone


@dataclass(frozen=True)
class Grid:
    """One table of readings: a title (the axis value it is split on), row and column axes, and the cells."""

    title: str                                   # "factor = 1.2" ('' when not split)
    row_axes: tuple[str, ...]                    # ("p", "mask")
    col_axis: str                                # "pass"
    columns: tuple[str, ...]                     # ("fwd", "fwd+bwd")
    rows: tuple[tuple[tuple[str, ...], tuple[dict | None, ...]], ...]  # (row labels, one reading or None per column)


def axes(key) -> tuple[tuple[str, object], ...] | None:
    """The (name, value) pairs of a reading's key; None when it is not alternating names and values.

    >>> axes(["p", 3, "pass", "fwd"])
    (('p', 3), ('pass', 'fwd'))
    >>> axes(["p", 3, "tight"]) is None
    True
    """
    if not isinstance(key, (list, tuple)) or not key or len(key) % 2:
        return None
    names = key[0::2]
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        return None
    return tuple(zip(names, key[1::2]))


def _text(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def grids(readings: list[dict]) -> list[Grid]:
    """The grids among ``readings`` (ledger.json dicts), in order of their first reading; [] when none."""
    groups: dict[tuple[str, ...], list[tuple[dict, dict]]] = {}
    for r in readings:
        ax = axes(r.get("key"))
        if ax is not None:
            groups.setdefault(tuple(n for n, _ in ax), []).append((r, {n: _text(v) for n, v in ax}))
    out = []
    for names, members in groups.items():
        if len(members) < MIN_CELLS:
            continue
        values = {n: list(dict.fromkeys(v[n] for _, v in members)) for n in names}
        varying = [n for n in names if len(values[n]) > 1]
        if len(varying) < 2:
            continue
        split, varying = (varying[0], varying[1:]) if len(varying) >= 3 else (None, varying)
        row_axes, col = tuple(varying[:-1]), varying[-1]
        for s in values[split] if split else [None]:
            cells = {tuple(v[n] for n in (*row_axes, col)): r for r, v in members if split is None or v[split] == s}
            rows = tuple((labels, tuple(cells.get((*labels, c)) for c in values[col]))
                         for labels in product(*(values[n] for n in row_axes))
                         if any((*labels, c) in cells for c in values[col]))
            out.append(Grid(title=f"{split} = {s}" if split else "", row_axes=row_axes, col_axis=col,
                            columns=tuple(values[col]), rows=rows))
    return out


def gridded(readings: list[dict]) -> set[int]:
    """Indices of the readings that some grid shows (the readings table still lists them, folded)."""
    shown = {id(r) for g in grids(readings) for _, cells in g.rows for r in cells if r is not None}
    return {k for k, r in enumerate(readings) if id(r) in shown}
