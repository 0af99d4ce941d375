"""Tests for `theory/singular.py`: non-integrable singularities on the real line, found symbolically (not on a grid)."""

from __future__ import annotations

import pytest
import sympy as sp

from sapa.theory.singular import nonintegrable, undefined_part

x = sp.Symbol("x", real=True)
N = sp.Symbol("N", positive=True)


def _find(text: str):
    return nonintegrable(sp.sympify(text, locals={"x": x, "N": N}), x, N)


# (expression, which square is not integrable, where): a pole of order ≥ ½ in φ makes E φ² infinite; an
# integrable φ² (|x|^(-1/3), log|x|) with a steeper derivative makes only the Jacobian's expectation infinite.
@pytest.mark.parametrize("text,of,at", [
    ("tan(x)", "φ", sp.pi / 2),
    ("1/(x - 1/40)", "φ", sp.Rational(1, 40)),
    ("1/x", "φ", 0),
    ("Abs(x)**(-1)", "φ", 0),
    ("Abs(x - 3)**(-1/2)", "φ", 3),
    ("1/cos(x)", "φ", sp.pi / 2),
    ("1/(x**2 - N)", "φ", sp.sqrt(2)),
    ("log(Abs(x - 1/40))", "∂φ/∂x", sp.Rational(1, 40)),
    ("Abs(x)**(-1/3)", "∂φ/∂x", 0),
    ("sqrt(Abs(x))", "∂φ/∂x", 0),
])
def test_non_integrable_singularities_are_found(text, of, at):
    found = _find(text)
    assert found and found[0].of == of and found[0].point == pytest.approx(float(at), abs=1e-15)


@pytest.mark.parametrize("text", ["x**3/sqrt(N)", "exp(x/8)", "tanh(x)", "Max(x, 0)", "x/(x**2 + 1)", "erf(x)",
                                  "1/(1 + exp(-x))", "Abs(x)**(3/2)", "log(1 + x**2)", "log(1 + exp(x))/N"])
def test_smooth_or_square_integrable_functions_have_none(text):
    assert _find(text) == ()


@pytest.mark.parametrize("text,where", [("sqrt(100 - x)", "Interval.open(100, oo)"), ("log(x - 100)", "Interval(-oo, 100)"),
                                        ("sqrt(x)", "Interval.open(-oo, 0)"), ("sqrt(N - x**2)", "sqrt(2)")])
def test_undefined_stretches_of_the_real_line_are_named(text, where):
    assert where in undefined_part(sp.sympify(text, locals={"x": x, "N": N}), x, N)


@pytest.mark.parametrize("text", ["1/x", "tan(x)", "x**3", "log(Abs(x))"])
def test_isolated_points_are_not_undefined_stretches(text):
    assert undefined_part(sp.sympify(text, locals={"x": x, "N": N}), x, N) is None


@pytest.mark.parametrize("text,of", [("tan(x)", "φ"), ("1/(x**2 - N)", "φ"), ("log(Abs(x - 1/40))", "∂φ/∂x")])
def test_the_search_reports_the_first_singularity_once(text, of):
    # mutation run: `found[-1].of == of` → `!=` kept searching every N and reported one singularity per N
    found = _find(text)
    assert len(found) == 1 and found[0].of == of


@pytest.mark.parametrize("text,poles", [("x/(N-1000)", (("N", 1000),)), ("x/(N**2-49)", (("N", 7),)),
                                        ("x/(i-5)", (("i", 5),)), ("x/(N-1000.5)", ()), ("x/sqrt(N)", ())])
def test_poles_in_the_length_or_a_position_are_found_at_integers(text, poles):
    from sapa.theory.activation import parse_activation

    assert parse_activation(text).poles == poles


def test_index_poles_directly_including_those_the_grid_check_refuses_first():
    from sapa.theory.activation import N_, i_, j_, x_
    from sapa.theory.singular import index_poles

    assert index_poles(x_ / (j_ - 3), x_, N_, i_, j_) == (("j", 3),)
    assert index_poles(x_ / (N_ - 1), x_, N_, i_, j_) == ()  # N = 1 is no length an audit uses
