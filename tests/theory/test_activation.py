"""Tests for `theory/activation.py`'s numeric evaluation: where float64 overflows (inf/inf), values come from
long double (vectorised, checked on a sample against 30-digit mpmath) or from mpmath point by point; and for its
cache of validated activations."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import sympy as sp

from sapa.common.validate import InputError
from sapa.theory import activation
from sapa.theory.activation import _fill_in_extended_precision, _lam, parse_activation, x_

EXTENDED = np.finfo(np.longdouble).max > np.finfo(np.float64).max
LOGISTIC = sp.exp(x_) / (1 + sp.exp(x_))  # inf/inf in float64 beyond x ≈ 709.8, in long double beyond ≈ 11356


def _mp(expr, x: float) -> float:
    with mpmath.workdps(30):
        return float(sp.lambdify(x_, expr, "mpmath")(mpmath.mpf(x)))


@pytest.mark.parametrize("expr", [LOGISTIC, sp.exp(x_) / sp.exp(x_ - 1), x_ * sp.exp(x_) / (sp.exp(x_) + 1)])
def test_overflowing_points_equal_30_digit_mpmath(expr):
    xs = np.array([-3.0, 0.5, 700.0, 800.0, 5000.0, 11000.0, 20000.0])
    got = _lam(expr)(xs, 4.0)
    with np.errstate(all="ignore"):
        plain = sp.lambdify(x_, expr, "numpy")(xs)
    assert not np.isfinite(plain).all()  # float64 alone fails here ...
    want = np.array([_mp(expr, x) for x in xs])
    assert np.isfinite(got).all()  # ... every point comes out finite ...
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(np.float64).eps, atol=0)  # ... and right to round-off


@pytest.mark.skipif(not EXTENDED, reason="long double is float64 on this platform")
def test_long_double_does_the_bulk_and_mpmath_only_the_sample_and_the_rest(monkeypatch):
    xs = np.concatenate([np.linspace(710.0, 11000.0, 5000), [20000.0, 30000.0]])
    calls = []
    real_mpf = mpmath.mpf

    def counting_mpf(v, *a):
        calls.append(v)
        return real_mpf(v, *a)

    monkeypatch.setattr(mpmath, "mpf", counting_mpf)
    got = _lam(LOGISTIC)(xs, 4.0)
    assert (got == 1.0).all()
    # mpmath saw the 8 sample points and the 2 beyond long double's range, not all 5 002 points
    assert len([v for v in calls if v >= 710.0]) == activation.EXTENDED_SAMPLE + 2


@pytest.mark.skipif(not EXTENDED, reason="long double is float64 on this platform")
def test_a_sample_that_disagrees_with_mpmath_keeps_nothing():
    f = sp.lambdify((activation.x_, activation.N_, activation.i_, activation.j_), LOGISTIC, ["scipy", "numpy"])
    args = [np.array([800.0, 900.0, 1000.0]), np.full(3, 4.0), np.ones(3), np.ones(3)]
    bad = np.ones(3, dtype=bool)
    out = np.full(3, math.nan)
    _fill_in_extended_precision(f, args, out, bad, lambda idx: 1.0 + 1e-9)  # "mpmath" says otherwise by 1e-9
    assert np.isnan(out).all()
    _fill_in_extended_precision(f, args, out, bad, lambda idx: 1.0)
    assert (out == 1.0).all()
    out[:] = math.nan
    _fill_in_extended_precision(f, args, out, np.array([False, True, False]), lambda idx: 1.0)
    assert np.isnan(out[[0, 2]]).all() and out[1] == 1.0  # only the bad points are touched


def test_a_pole_stays_infinite_and_a_complex_value_stays_undefined():
    got = _lam(1 / x_)(np.array([0.0, 2.0]), 4.0)
    assert got[0] == math.inf and got[1] == 0.5
    got = _lam(sp.log(x_))(np.array([-1.0, math.e]), 4.0)
    assert math.isnan(got[0]) and got[1] == pytest.approx(1.0, rel=1e-15)


def test_a_text_is_validated_once_and_the_mask_shares_its_entry(monkeypatch):
    """parse_activation keeps validated activations: the second call, masked or not, runs no check; each
    result equals a parse without the cache, field by field."""
    text = "tanh(x/8)*log(1 + N)/N + 1e-3*x/sqrt(N)"  # texts no other test parses, so this process has not seen them
    positive = "exp(x/8 + tanh(x)/1000)"
    checks = []
    real = activation._parse_activation
    monkeypatch.setattr(activation, "_parse_activation", lambda *a: checks.append(a) or real(*a))
    first = parse_activation(text)
    again, causal, row = parse_activation(text), parse_activation(text, mask="causal"), parse_activation(positive, "row")
    assert checks == [(text, "none"), (positive, "row")]  # one validation per (text, normalisation)
    assert again is first and causal.mask == "causal" and first.mask == "none"
    fresh = real(text, "none")  # no cache
    for f in ("text", "expr", "normalize", "shape", "row_factor", "separable", "coeffs", "singular"):
        assert getattr(first, f) == getattr(fresh, f) == getattr(causal, f), f
    assert row.normalize == "row" and parse_activation(positive, "row") is row


def test_a_refused_text_is_refused_every_time_and_a_non_text_in_one_line():
    for _ in range(2):  # exceptions are not cached
        with pytest.raises(InputError, match="beyond float64.s range"):
            parse_activation("exp(x**2)")
    for bad in (["x"], None, 3):  # unhashable or not a string: the one-line error, not the cache's TypeError
        with pytest.raises(InputError, match="non-empty expression"):
            parse_activation(bad)


# --------------------------------------------------------------------------- is φ identically 0?

@pytest.mark.parametrize("text", ["sin(x)**2 + cos(x)**2 - 1", "log(exp(x)) - x", "x**2 - x**2", "0*x",
                                  "sqrt(x**2) - Abs(x)"])
def test_a_phi_that_is_identically_zero_is_still_refused(text):
    """Zero at every probe (evalf cannot certify a nonzero value): simplify decides, as before."""
    with pytest.raises(InputError, match="identically 0"):
        activation._parse(text)


def test_a_phi_nonzero_at_a_probe_is_never_simplified(monkeypatch):
    """A strict evalf that returns a nonzero number proves φ ≢ 0: simplify (most of a parse) is not asked."""
    def refuse(*a, **k):
        raise AssertionError("simplify was called")

    monkeypatch.setattr(activation.sp, "simplify", refuse)
    for text in ("x**3/sqrt(N)", "x/(1+Abs(x))", "Max(x,0)**2/N", "sigmoid(x/8 - log(N) - Abs(i - j)/8)", "1e-300*x"):
        activation._parse(text)  # _parse's only simplify is the question "φ ≡ 0?"


def test_a_phi_zero_at_every_probe_but_not_everywhere_is_accepted():
    """Max(x − 5, 0) vanishes at the three probes (x ≤ 13/3): simplify then finds it is not 0."""
    expr = activation._parse("Max(x - 5, 0)")
    assert all(expr.xreplace({x_: p[0]}) == 0 for p in activation._PROBES)
    assert not activation._identically_zero(expr)
