"""Tests for `theory/parse_guard.py`: huge literal powers are refused from the unevaluated tree, never computed."""

from __future__ import annotations

import pytest
import sympy as sp
from sympy.parsing.sympy_parser import convert_xor, parse_expr, standard_transformations

from sapa.common.deadline import deadline
from sapa.common.validate import InputError
from sapa.theory.parse_guard import MAX_DIGITS, check_powers

x = sp.Symbol("x", real=True)


def _tree(text: str) -> sp.Basic:
    return parse_expr(text, local_dict={"x": x}, transformations=standard_transformations + (convert_xor,),
                      evaluate=False)


@pytest.mark.parametrize("text,needle", [
    ("9**9**9*x", "has about 3.7e+08 digits"),
    ("2**2**40*x", "digits"),
    ("9^9^9*x", "digits"),
    ("(2**10)**(2**10)*x", "(2**10)**(2**10)"),
    ("x*2**-(10**6)", "digits"),
    ("10**(10**4)*x", "digits"),
    ("x**(10**10)", "power 10**10 is too large"),
    ("(x + 1)**(10**6)", "too large"),
    ("exp(x)**(10**9)", "too large"),
    ("x**(-2000)", "too large"),
    ("(x + 1)**999", "too large (at most 100"),
])
def test_huge_powers_are_refused_without_being_evaluated(text, needle):
    with deadline(60, "the test"), pytest.raises(InputError, match=None) as e:
        check_powers(text, _tree(text))
    assert needle in str(e.value) and "\n" not in str(e.value) and "the test" not in str(e.value)


@pytest.mark.parametrize("text", ["x**3/sqrt(N)", "10**400*x", "x*2**-2000", "1**(10**100)*x", "x**100",
                                  "(-1)**(10**50)*x", "0**(10**9) + x", "x**0.5", "2**(1/2)*x"])
def test_moderate_powers_pass(text):
    with deadline(60, "the test"):
        check_powers(text, parse_expr(text, local_dict={"x": x, "N": sp.Symbol("N")}, evaluate=False))


def test_the_digit_limit_is_where_it_says():
    check_powers("10**1000", _tree("10**1000"))
    assert MAX_DIGITS == 1000
    with pytest.raises(InputError):
        check_powers("10**1001", _tree("10**1001"))


def test_the_digit_count_of_a_refused_constant_reads_as_a_power_beyond_1e15():
    # mutation run: the switch from a plain number to 10^k moved from 15 to 16 digits unnoticed
    from sapa.theory.parse_guard import _digits

    assert _digits(1.0, 15.5) == "10^15.5" and _digits(1.0, 15.0) == "1e+15" and _digits(2.0, 3.0) == "2e+03"


def test_a_float_literal_with_millions_of_digits_is_refused_at_once():
    import time

    import pytest

    from sapa.common.validate import InputError
    from sapa.theory.activation_audit import parse_activation

    t0 = time.monotonic()
    with pytest.raises(InputError, match="10000001 digits of precision"):
        parse_activation("Float(1, 10**7)*x")
    assert time.monotonic() - t0 < 10
    assert parse_activation("Float(1.5, 30)*x").expr is not None
