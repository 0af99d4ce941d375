"""Tests for `theory/symbols.py`: the table of symbols is exactly what the parser accepts."""

from __future__ import annotations

import pytest

from sapa.common.validate import InputError
from sapa.theory import activation
from sapa.theory.symbols import SYMBOLS, symbols_words


def test_the_parser_accepts_exactly_the_table():
    assert tuple(activation._SYMBOL) == tuple(name for name, _ in SYMBOLS)
    for name, _ in SYMBOLS:  # each one parses (x alone: a term in x is needed)
        act = activation.parse_activation("x" if name == "x" else f"x*(1 + {name}/1000)")
        assert name in {str(s) for s in act.expr.free_symbols}


def test_any_other_name_is_refused_with_the_list():
    with pytest.raises(InputError, match="unknown symbol 'k'") as e:
        activation.parse_activation("x*k")
    assert symbols_words() in str(e.value)
