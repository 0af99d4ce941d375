"""The symbols an activation φ(x, N, i, j) may use, with their meanings: x (logit), N, i, j (arXiv 2410.18613's S_ij).

Plain names, no sympy: the command line's help reads them without importing the parser
(:mod:`sapa.theory.activation` builds its sympy symbols from this table and refuses any other name).
"""

from __future__ import annotations

__all__ = ["SYMBOLS", "symbols_words"]

SYMBOLS = (("x", "logit"), ("N", "sequence length"), ("i", "row index"), ("j", "column index"))


def symbols_words() -> str:
    """Every symbol with its meaning, in words.

    >>> symbols_words()
    'x (logit), N (sequence length), i (row index), j (column index)'
    """
    return ", ".join(f"{name} ({meaning})" for name, meaning in SYMBOLS)
