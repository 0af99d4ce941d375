"""The frozen result objects of sapa's Python API: named headline fields, every number read-only, ``to_dict()``.

Each API function returns a subclass of :class:`Result`: its own fields (the verdict where the computation has one,
the numbers it rests on) plus ``data``, the whole flat result of the matching command (``sapa audit --json``,
``sapa norms --json``, ``sapa exact --json``, ``ledger.json``), deep-frozen. ``to_dict()`` gives that object back as
plain JSON-ready values (a non-finite number as None, as the commands print it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

import numpy as np

__all__ = ["Result", "frozen", "jsonable"]


def frozen(v):
    """A read-only deep copy: dicts become mapping proxies, lists and tuples tuples, numpy scalars Python numbers.

    >>> r = frozen({"a": [1, {"b": 2.0}]})
    >>> r["a"][1]["b"], type(r["a"]).__name__
    (2.0, 'tuple')
    """
    if isinstance(v, Mapping):
        return MappingProxyType({k: frozen(x) for k, x in v.items()})
    if isinstance(v, (list, tuple)):
        return tuple(frozen(x) for x in v)
    if isinstance(v, np.generic):
        return v.item()
    return v


def jsonable(v):
    """A JSON-ready copy: mappings as dicts, sequences as lists, non-finite floats as None, numpy scalars as Python
    numbers, anything else that JSON lacks as its ``str``.

    >>> jsonable({"x": (1.5, float("inf"), np.int64(3), np.bool_(True))})
    {'x': [1.5, None, 3, True]}
    """
    if isinstance(v, Mapping):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, (int, np.integer)):
        return int(v)
    return v if v is None or isinstance(v, str) else str(v)


@dataclass(frozen=True, repr=False)
class Result:
    """A frozen result: the subclass's named fields, ``data`` (everything, read-only), ``to_dict()``, a short repr."""

    data: Mapping = field(compare=False)

    @classmethod
    def of(cls, out: Mapping, **given):
        """The result of the flat dict ``out``: each named field from ``given``, else from ``out``'s key of its name."""
        named = {f.name: given[f.name] if f.name in given else out.get(f.name) for f in fields(cls) if f.name != "data"}
        return cls(data=frozen(out), **{k: frozen(v) for k, v in named.items()})

    def to_dict(self) -> dict:
        """The whole result as plain JSON-ready values (the command's ``--json`` object)."""
        return jsonable(self.data)

    def __getitem__(self, key: str):
        return self.data[key]

    def __repr__(self) -> str:
        shown = [f"{f.name}={_short(getattr(self, f.name))}" for f in fields(self) if f.name != "data" and f.repr]
        return f"{type(self).__name__}({', '.join(shown)})"


def _short(v) -> str:
    """A value in a repr: floats to 4 significant digits, mappings and sequences by their size."""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k!r}: {_short(x)}" for k, x in v.items()) + "}" if len(v) <= 6 else f"{{{len(v)} keys}}"
    if isinstance(v, tuple):
        return f"({len(v)} items)"
    return repr(v)
