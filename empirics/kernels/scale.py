"""The scale of an attention activation φ = c·x^p: one name per scale rule, one function rule → coefficient.

arXiv 2410.18613 scales x^p by c = 1/√N; the reviewers ask about the causal effective length,
c_i = 1/√i for row i. The rules (one name each; the sweep's historical ``dynamic_causal`` is an
alias of ``inv_sqrt_i``):

``const``       c = the given constant;
``inv_sqrt_n``  c = 1/√N (global, the paper's);
``inv_sqrt_d``  c = 1/√d (softmax's default temperature);
``inv_sqrt_i``  c_i = 1/√i per row (the effective length under a causal mask);
``inv_i``       c_i = 1/i per row (the shape of softmax's typical causal rows);
``fixed``       c = 1/√N_train, frozen at a training length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sapa.common.validate import InputError, choice, positive_int

__all__ = ["ALIASES", "PER_ROW", "RULES", "Scale", "canonical_rule", "coefficient", "row_coefficients"]

RULES = ("const", "inv_sqrt_n", "inv_sqrt_d", "inv_sqrt_i", "inv_i", "fixed")
PER_ROW = ("inv_sqrt_i", "inv_i")  # rules whose coefficient depends on the row i
ALIASES = {"dynamic_causal": "inv_sqrt_i"}


def canonical_rule(rule: str) -> str:
    """The one name of a scale rule (``dynamic_causal`` → ``inv_sqrt_i``); InputError for an unknown one."""
    return choice("scale rule", ALIASES.get(rule, rule), RULES)


def row_coefficients(rule: str, N: int, *, c: float | None = None, d: int | None = None,
                     N_train: int | None = None) -> np.ndarray:
    """c_i, i = 1..N, of φ = c_i·x^p under ``rule`` at length N; (N,) float64.

    >>> row_coefficients("inv_sqrt_i", 4).tolist()
    [1.0, 0.7071067811865475, 0.5773502691896258, 0.5]
    >>> row_coefficients("inv_sqrt_n", 4).tolist()
    [0.5, 0.5, 0.5, 0.5]
    """
    N = positive_int("N", N)
    rule = canonical_rule(rule)
    if rule == "inv_sqrt_i":
        return 1.0 / np.sqrt(np.arange(1, N + 1, dtype=np.float64))
    if rule == "inv_i":
        return 1.0 / np.arange(1, N + 1, dtype=np.float64)
    return np.full(N, coefficient(rule, N, c=c, d=d, N_train=N_train))


def coefficient(rule: str, N: int | np.ndarray, *, c: float | None = None, d: int | None = None,
                N_train: int | None = None) -> float | np.ndarray:
    """The global coefficient c of φ = c·x^p under ``rule`` at length N (per-row rules have none: InputError).

    ``N`` may also be an array of real lengths > 0 (exact curves drawn between grid sizes):
    the result is then c(N) of the same shape.

    >>> coefficient("inv_sqrt_n", 16), coefficient("const", 16, c=0.0625), coefficient("inv_sqrt_d", 16, d=64)
    (0.25, 0.0625, 0.125)
    >>> coefficient("inv_sqrt_n", np.array([4.0, 6.25])).tolist()
    [0.5, 0.4]
    """
    rule = canonical_rule(rule)
    if isinstance(N, np.ndarray):  # (...) real lengths → (...) coefficients
        Ns = N.astype(np.float64)
        if not np.all(np.isfinite(Ns) & (Ns > 0)):
            raise InputError("lengths N must be finite and > 0")
        if rule == "inv_sqrt_n":
            return 1.0 / np.sqrt(Ns)
        return np.full(Ns.shape, coefficient(rule, 1, c=c, d=d, N_train=N_train))
    if rule == "inv_sqrt_n":
        return 1.0 / math.sqrt(positive_int("N", N))
    if rule == "const":
        if c is None:
            raise InputError("scale rule 'const' needs c")
        return float(c)
    if rule == "inv_sqrt_d":
        if d is None:
            raise InputError("scale rule 'inv_sqrt_d' needs d")
        return 1.0 / math.sqrt(positive_int("d", d))
    if rule == "fixed":
        if N_train is None:
            raise InputError("scale rule 'fixed' needs N_train")
        return 1.0 / math.sqrt(positive_int("N_train", N_train))
    raise InputError(f"scale rule {rule!r} is per row (c_i): use row_coefficients")


@dataclass(frozen=True)
class Scale:
    """A scale rule with its parameters: ``Scale("inv_sqrt_n")``, ``Scale("const", c=0.0625)``, ``Scale("fixed", N_train=256)``."""

    rule: str
    c: float | None = None
    N_train: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rule", canonical_rule(self.rule))

    @property
    def per_row(self) -> bool:
        """Whether the coefficient depends on the row (1/√i, 1/i)."""
        return self.rule in PER_ROW

    def coefficient(self, N: int, d: int | None = None) -> float:
        """The global c at length N (:func:`coefficient`)."""
        return coefficient(self.rule, N, c=self.c, d=d, N_train=self.N_train)

    def row_coefficients(self, N: int, d: int | None = None) -> np.ndarray:
        """c_i, i = 1..N (:func:`row_coefficients`); (N,)."""
        return row_coefficients(self.rule, N, c=self.c, d=d, N_train=self.N_train)
