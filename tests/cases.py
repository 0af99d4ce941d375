"""The test suite's case table (as scipy.stats' ``_distr_params``): one row per activation family of
``theory/families.py``, with the small sizes the default run checks it at.

``pytest.mark.parametrize`` reads :data:`CASES` (or :func:`params`, which marks the expensive rows ``slow``), so a
family added to the table is tested by every table-driven test without another edit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from sapa.theory.families import FAMILIES, FAMILY_TABLE


@dataclass(frozen=True)
class Case:
    """One family at test sizes: tokens x_i ∈ R^D, head width d, lengths Ns, Monte Carlo trials."""

    family: str                 # a sapa.theory.families id
    D: int = 32                 # token width (wide: S_ij near Gaussian, light tails for x³)
    d: int = 4                  # head width
    Ns: tuple[int, ...] = (4, 8)
    trials: int = 4000          # Monte Carlo draws per N (a z-test at |z| < 4 on the mean ‖φ‖²_F)
    params: dict = field(default_factory=dict)  # values of the family's free parameters (x/α*: α)
    slow: bool = False          # run only under `-m slow`

    @property
    def expr(self) -> str:
        """The family's expression with its parameters set (``x/alpha`` → ``x/4.0``)."""
        text = FAMILIES[self.family].expr
        for k, v in self.params.items():
            text = text.replace(k, repr(float(v)))
        return text

    @property
    def mask(self) -> str:
        """The first mask the family is defined under (``x³/√i``: causal)."""
        return FAMILIES[self.family].masks[0]


CASES: tuple[Case, ...] = tuple(Case(f.id, params={p: 4.0 for p in f.params}) for f in FAMILY_TABLE)


def params(cases=CASES) -> list:
    """``pytest.param`` per case, id = the family id, the slow rows marked."""
    return [pytest.param(c, id=c.family, marks=[pytest.mark.slow] if c.slow else []) for c in cases]
