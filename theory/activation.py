"""φ(x, N, i) from text: a sympy expression in the logit x, the length N and the row index i, parsed and checked.

The grammar is a whitelist (:data:`_FUNCS`, aliases relu / sigmoid / softplus / gelu); an activation
must be finite and piecewise continuous on the real line, grow at most polynomially when unnormalised,
and (for the exact path) be a polynomial Σ_k a_k(N, i) x^k of degree ≤ :data:`POLY_MAX_DEGREE`. A row
dependence c(N, i)·ψ(x, N) is split off as ``row_factor`` when it is a factor. Part of :mod:`sapa.theory.activation_audit`.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field, replace

import numpy as np
import sympy as sp

from sapa.common.deadline import deadline
from sapa.common.validate import InputError, choice
from sapa.theory.parse_guard import check_powers
from sapa.theory.symbols import symbols_words
from sapa.theory.singular import index_poles, nonintegrable, undefined_part


NORMALIZE = ("none", "row")
MASKS = ("none", "causal")
POLY_MAX_DEGREE = 12  # moments of order 2·12 = 24, as sapa.theory.moments.P_MAX
MAX_TEXT = 400
X_CHECK = np.concatenate([np.linspace(-60.0, 60.0, 2401), [-1e-9, 1e-9]])  # the real line, as far as it is checked
N_CHECK = (1.0, 2.0, 3.0, 16.0, 196.0, 4096.0, 1e6)
TAIL_X = (1e3, 1e6)  # polynomial-growth check of unnormalised φ: |φ(1e6)|/|φ(1e3)| ≤ 10^(3·TAIL_MAX_POWER)
TAIL_MAX_POWER = 2 * POLY_MAX_DEGREE
PARSE_SECONDS = 120.0  # cap on parse_activation as a whole (sympy's simplify can take for ever on a hostile input)
PARSE_CACHE = 256  # validated activations kept per process (parse_activation)
# numpy functions of expressions kept per process (_lam): sympy's lambdify writes and compiles source each call
# (~2 ms), and the same φ, φ' and moment terms come back (two calls in three repeated one during a compare)
LAMBDIFY_CACHE = 2048
MP_SECONDS = 10.0  # cap on one high-precision fallback of _lam (mpmath can take for ever on exp(exp(exp(60))))
x_ = sp.Symbol("x", real=True)
N_ = sp.Symbol("N", positive=True)
i_ = sp.Symbol("i", positive=True)
j_ = sp.Symbol("j", positive=True)  # column index (relative-position logits: sapa.theory.relpos)
_SYMBOL = {"x": x_, "N": N_, "i": i_, "j": j_}  # every name of sapa.theory.symbols.SYMBOLS, and no other (tests/theory)
_FUNCS = ("exp", "log", "sqrt", "Abs", "Max", "Min", "sin", "cos", "tan", "tanh", "sinh", "cosh", "atan", "erf",
          "erfc", "sign", "Heaviside", "Piecewise", "floor", "ceiling", "cbrt", "Rational", "Integer", "Float")
_ALIASES = {
    "relu": lambda t: sp.Max(t, 0),
    "sigmoid": lambda t: 1 / (1 + sp.exp(-t)),
    "softplus": lambda t: sp.log(1 + sp.exp(t)),
    "gelu": lambda t: t * (1 + sp.erf(t / sp.sqrt(2))) / 2,
    "abs": sp.Abs,
    "max": sp.Max,
    "min": sp.Min,
    "ln": sp.log,
}
# the names parse_expr(..., evaluate=False) writes the operators as
_UNEVALUATED = {name: getattr(sp, name) for name in ("Add", "Mul", "Pow", "Lt", "Le", "Gt", "Ge", "Eq", "Ne")}
_ALLOWED_CHARS = re.compile(r"^[A-Za-z0-9_+\-*/^().,<>=\s]*$")


@dataclass(frozen=True)
class Activation:
    """φ(x, N, i) applied element-wise to S (x = S_ij, N tokens, i = row index), optionally row-normalised.

    ``expr`` is φ; ``shape`` = φ at i = 1 and ``row_factor`` = (φ/φ|_{i=1})² when φ depends on i
    separably (φ = c(N, i)·ψ(x, N)); ``coeffs`` = (a_0, …, a_K) of ``shape`` in x when it is a
    polynomial of degree ≤ POLY_MAX_DEGREE (functions of N), else ().
    """

    text: str
    expr: sp.Expr
    normalize: str = "none"  # "none" | "row"
    mask: str = "none"       # "none" | "causal"
    shape: sp.Expr = field(default=None, compare=False)       # ψ(x, N) = φ(x, N, i=1)
    row_factor: sp.Expr = field(default=None, compare=False)  # (c(N,i)/c(N,1))², 1 without i
    separable: bool = True   # φ depends on i only through a factor c(N, i)
    coeffs: tuple = ()       # polynomial coefficients a_k(N) of ψ, k = 0..deg; () if not a polynomial
    singular: tuple = field(default=(), compare=False)  # sapa.theory.singular.Singularity: where E φ² or E φ'² is infinite
    poles: tuple = field(default=(), compare=False)     # sapa.theory.singular.index_poles: (("N", 1000),) for x/(N − 1000)

    @property
    def infinite(self) -> tuple[str, ...]:
        """The expectations that are infinite: ("fro", "jac_s", "jac") if φ² is not integrable somewhere, ("jac_s", "jac") if only φ'²."""
        if any(s.of == "φ" for s in self.singular):
            return ("fro", "jac_s", "jac")
        return ("jac_s", "jac") if self.singular else ()

    @property
    def polynomial(self) -> bool:
        return bool(self.coeffs)

    @property
    def uses_i(self) -> bool:
        return i_ in self.expr.free_symbols

    @property
    def uses_j(self) -> bool:
        return j_ in self.expr.free_symbols

    @property
    def uses_N(self) -> bool:
        return N_ in self.expr.free_symbols

    @property
    def label(self) -> str:
        lab = str(self.expr)
        if self.normalize == "row":
            lab = f"row-normalised {lab}"
        return lab + (" (causal)" if self.mask == "causal" else "")


def _parse(text: str) -> sp.Expr:
    from sympy.parsing.sympy_parser import (
        convert_xor,
        parse_expr,
        standard_transformations,
    )

    if not isinstance(text, str) or not text.strip():
        raise InputError("activation must be a non-empty expression in x (logit), N (length) and i (row index)")
    if len(text) > MAX_TEXT:
        raise InputError(f"activation expression is too long ({len(text)} characters, at most {MAX_TEXT})")
    if not _ALLOWED_CHARS.match(text) or "__" in text or re.search(r"\.\s*[A-Za-z_]", text):
        raise InputError(f"activation {text!r}: only names, numbers, + - * / ** ^ ( ) , and comparisons "
                         "(inside Piecewise) are allowed")
    glob = {name: getattr(sp, name) for name in _FUNCS}
    glob.update({"Symbol": sp.Symbol, "Function": sp.Function, "pi": sp.pi, "E": sp.E, "__builtins__": {}})
    local = {**_SYMBOL, **_ALIASES}
    try:
        check_powers(text, parse_expr(text, local_dict=local, global_dict={**glob, **_UNEVALUATED},
                                      transformations=standard_transformations + (convert_xor,), evaluate=False))
        expr = parse_expr(text, local_dict=local, global_dict=glob,
                          transformations=standard_transformations + (convert_xor,), evaluate=True)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - SyntaxError, TypeError from a wrong call, ...: one line for the user
        raise InputError(f"cannot parse activation {text!r} ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
                         ) from None
    if not isinstance(expr, sp.Expr) or isinstance(expr, (sp.core.relational.Relational, sp.logic.boolalg.BooleanFunction,
                                                          sp.logic.boolalg.BooleanAtom)):
        raise InputError(f"activation {text!r} is not a scalar expression (got {type(expr).__name__})")
    undef = sorted({str(f.func) for f in expr.atoms(sp.core.function.AppliedUndef)})
    if undef:
        hint = ("; softmax is row-wise: write exp(x) with --normalize row" if "softmax" in undef else "")
        raise InputError(f"unknown function {undef[0]}() in {text!r}: only element-wise functions of the logit "
                         f"(exp, log, sqrt, Abs, Max, Min, tanh, erf, sigmoid, relu, ...){hint}")
    unknown = sorted(str(s) for s in expr.free_symbols - set(_SYMBOL.values()))
    if unknown:
        raise InputError(f"unknown symbol {unknown[0]!r} in {text!r}: use {symbols_words()}; write numbers for "
                         "everything else (e.g. d = 64 → x/8)")
    if expr.has(sp.I) or expr.has(sp.zoo) or expr.has(sp.nan) or expr.has(sp.oo):
        raise InputError(f"activation {text!r} is not a finite real expression")
    if _identically_zero(expr):
        raise InputError(f"activation {text!r} is identically 0")
    _check_piecewise_continuous(text, expr)
    dphi = sp.diff(expr, x_)
    if dphi.has(sp.DiracDelta) or dphi.has(sp.Derivative) or dphi.has(sp.Subs):
        raise InputError(f"activation {text!r} jumps (∂φ/∂x = {dphi} is not a function): its Jacobian norm is "
                         "infinite; use a continuous φ (e.g. Max(x, 0) rather than Heaviside(x))")
    return expr


# (x, N, i, j) where a φ is evaluated before simplify is asked whether it is identically 0: rationals, none at a
# usual breakpoint or pole (x = 0, N = i, i = j)
_PROBES = tuple((sp.Rational(a, b), sp.Integer(7), sp.Integer(3), sp.Integer(2)) for a, b in ((3, 7), (-5, 11), (13, 3)))


def _identically_zero(expr: sp.Expr) -> bool:
    """φ ≡ 0, decided by sympy's simplify unless φ is certainly nonzero at one of :data:`_PROBES`.

    ``simplify`` is most of a parse's cost (~40 ms a φ). A value evaluated with ``evalf(strict=True)`` carries its
    requested relative accuracy or raises, so a nonzero one proves φ ≢ 0; a zero, an undefined or a doubtful value
    leaves the question to simplify, as before.
    """
    for x, N, i, j in _PROBES:
        try:
            v = expr.xreplace({x_: x, N_: N, i_: i, j_: j}).evalf(15, strict=True)
        except Exception:  # noqa: BLE001 - PrecisionExhausted (a zero, or too close to one), a pole, ...: no proof
            continue
        if v.is_Number and v.is_finite and v.is_real and v != 0:
            return False
    return sp.simplify(expr) == 0


def _check_piecewise_continuous(text: str, expr: sp.Expr) -> None:
    """Piecewise φ must not jump at its breakpoints (sympy's derivative of a Piecewise ignores a jump)."""
    if not expr.has(sp.Piecewise):
        return
    f = sp.lambdify((x_, N_, i_, j_), expr, ["scipy", "numpy"])
    for rel in expr.atoms(sp.core.relational.Relational):
        try:
            sols = sp.solve(sp.Eq(rel.lhs, rel.rhs), x_)
        except (NotImplementedError, TypeError, ValueError):
            continue
        for sol in sols if isinstance(sols, list) else []:
            for N in N_CHECK[:5]:
                for i in (1.0, N):
                    try:
                        x0 = float(sol.subs({N_: N, i_: i, j_: 1}))
                    except (TypeError, ValueError):
                        continue
                    with np.errstate(all="ignore"):
                        lo, hi = (float(f(x0 + h, N, i, 1.0)) for h in (-1e-9 * max(1.0, abs(x0)), 1e-9 * max(1.0, abs(x0))))
                    if abs(hi - lo) > 1e-6 * max(1.0, abs(lo), abs(hi)):
                        raise InputError(f"activation {text!r} jumps at x = {x0:.6g} (N = {N:g}): its Jacobian norm is "
                                         "infinite; use a continuous φ")


@functools.lru_cache(maxsize=LAMBDIFY_CACHE)
def _lam(expr: sp.Expr):
    """numpy function of (x, N, i) for ``expr`` (broadcasting), made once per process for each expression.

    Points where float64 evaluation gives inf/NaN (e.g. exp(−y)/(1 + exp(−y))² at y → −∞: inf/inf) are re-evaluated
    in extended precision (np.longdouble, vectorised; kept where a sample agrees with mpmath) and the rest in mpmath
    at 30 digits, so only values that are themselves out of float64's range stay non-finite."""
    f = sp.lambdify((x_, N_, i_, j_), expr, ["scipy", "numpy"])
    g = None

    def call(x, N, i=1.0, j=1.0):
        nonlocal g
        shape = np.broadcast(np.asarray(x), np.asarray(N), np.asarray(i), np.asarray(j)).shape
        with np.errstate(all="ignore"):
            try:
                out = np.broadcast_to(np.asarray(f(x, N, i, j), dtype=np.float64), shape)
            except (OverflowError, ZeroDivisionError):  # Python ints and floats (10**400·x, N**N): point by point below
                out = np.full(shape, math.nan)
        bad = ~np.isfinite(out)
        if bad.any():
            import mpmath

            if g is None:
                g = sp.lambdify((x_, N_, i_, j_), expr, [_bounded_mpmath(), "mpmath"])
            out = np.array(out, dtype=np.float64, ndmin=1)
            bad = np.atleast_1d(bad)
            args = [np.broadcast_to(np.asarray(a, dtype=np.float64), shape).reshape(out.shape) for a in (x, N, i, j)]

            def precise(idx) -> float:
                try:
                    v = g(*(mpmath.mpf(float(a[idx])) for a in args))
                    return float(mpmath.re(v)) if abs(mpmath.im(v)) == 0 else math.nan
                except ZeroDivisionError:  # a pole (1/x at 0): infinite, not undefined
                    return math.inf
                except (ValueError, OverflowError, TypeError):
                    return math.nan

            with mpmath.workdps(30), deadline(MP_SECONDS, f"evaluating {_short(expr)} in 30-digit arithmetic where "
                                                       "float64 overflows (e.g. exp(exp(x)) at large x)"):
                _fill_in_extended_precision(f, args, out, bad, precise)
                for idx in zip(*np.nonzero(~np.isfinite(out) & bad)):
                    out[idx] = precise(idx)
            out = out.reshape(shape)
        return out

    return call


EXTENDED_SAMPLE = 8  # extended-precision values checked against mpmath before they are used
EXTENDED_RTOL = 1e-12  # ... and kept only if each agrees to this (float64 keeps 1e-16; long double 1e-19)


def _fill_in_extended_precision(f, args: list, out: np.ndarray, bad: np.ndarray, precise) -> None:
    """out[bad] ← f(args[bad]) in np.longdouble where that is finite, if ``EXTENDED_SAMPLE`` of them agree with
    ``precise`` (30-digit mpmath) to ``EXTENDED_RTOL``; else nothing (mpmath, point by point, does them all).

    x86-64's long double reaches 1e±4932 with a 64-bit mantissa, so inf/inf of float64 (exp(−y)/(1 + exp(−y))² at
    y = −800) comes out finite in one vectorised pass, where mpmath takes ~50 µs a point (an audit of sigmoid(x −
    log N), whose quadrature is evaluated at every N asked, meets ~10⁸ such points: over 15 min in mpmath, 38 s with
    this). Where long double is float64 (ARM, Windows) or a function has no long-double loop (scipy.special casts to
    double or refuses), nothing changes. The sample guards against cancellation that 19 digits cannot resolve but
    30 can.
    """
    if np.finfo(np.longdouble).max <= np.finfo(np.float64).max:
        return
    try:
        with np.errstate(all="ignore"):
            v = np.asarray(f(*(a[bad].astype(np.longdouble) for a in args)))
            v = np.broadcast_to(v, (int(bad.sum()),)).astype(np.float64)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, AttributeError):
        return
    finite = np.isfinite(v)
    if not finite.any():
        return
    where, vals = np.argwhere(bad)[finite], v[finite]  # (k, ndim) positions of the finite extended values, (k,)
    picks = np.unique(np.linspace(0, len(where) - 1, min(EXTENDED_SAMPLE, len(where))).round().astype(int))
    for k in picks:
        want = precise(tuple(where[k]))
        if not (math.isfinite(want) and abs(vals[k] - want) <= EXTENDED_RTOL * abs(want)):
            return
    out[tuple(where.T)] = vals


def _bounded_mpmath() -> dict:
    """exp, sinh, cosh, sin, cos, tan for mpmath that answer at once where mpmath would compute for ever.

    exp(a) for |a| > 10¹² is ±∞ or 0 in any float (mpmath would need ln 2 to |a| bits: exp(exp(exp(60))));
    trigonometric functions of |a| > 10¹⁵ are NaN (their argument reduction needs π to |a| bits).
    """
    import mpmath

    big_exp, big_trig = mpmath.mpf(10) ** 12, mpmath.mpf(10) ** 15

    def exp(a):
        if mpmath.im(a) == 0 and abs(a) > big_exp:
            return mpmath.inf if a > 0 else mpmath.mpf(0)
        return mpmath.exp(a)

    def hyp(fn, odd):
        def h(a):
            if mpmath.im(a) == 0 and abs(a) > big_exp:
                return (mpmath.inf if a > 0 else -mpmath.inf) if odd else mpmath.inf
            return fn(a)
        return h

    def trig(fn):
        return lambda a: mpmath.nan if mpmath.im(a) == 0 and abs(a) > big_trig else fn(a)

    return {"exp": exp, "sinh": hyp(mpmath.sinh, True), "cosh": hyp(mpmath.cosh, False),
            "sin": trig(mpmath.sin), "cos": trig(mpmath.cos), "tan": trig(mpmath.tan)}


def _short(expr: sp.Expr) -> str:
    s = str(expr)
    return s if len(s) <= 60 else s[:57] + "..."


def _check_real_line(text: str, expr: sp.Expr, normalize: str, singular: bool = False) -> None:
    """φ and ∂φ/∂x finite on the checked part of the real line, for every checked N and i; growth limits.

    ``singular``: φ has non-integrable singularities (sapa.theory.singular), so ±∞ at a grid point is expected
    (the audit reports an infinite expectation); NaN (undefined) is still refused."""
    f, fp = _lam(expr), _lam(sp.diff(expr, x_))
    X = X_CHECK[None, :]
    for N in N_CHECK:
        positive = {}  # row i -> φ > 0 somewhere in the row (over the checked x and columns j)
        for i, j in sorted({(1.0, 1.0), (N, N), (1.0, N), (N, 1.0)}):
            for g, what in ((f, "φ"), (fp, "∂φ/∂x")):
                with np.errstate(all="ignore"):
                    vals = np.asarray(g(X, N, i, j), dtype=np.float64)
                bad = np.isnan(vals) if singular else ~np.isfinite(vals)
                if bad.any():
                    at = float(np.broadcast_to(X, vals.shape)[bad][0])
                    raise InputError(f"activation {text!r}: {what} is undefined, infinite or beyond float64's range "
                                     "on the real line "
                                     f"(at x = {at:.6g}, N = {N:g}{f', i = {i:g}' if i_ in expr.free_symbols else ''}"
                                     f"{f', j = {j:g}' if j_ in expr.free_symbols else ''})")
                if normalize == "row" and what == "φ" and float(vals.min()) < 0:
                    at = float(X_CHECK[int(np.argmin(vals.ravel()))])
                    raise InputError(f"--normalize row needs φ ≥ 0 (a row sum could vanish): φ({at:.4g}) = "
                                     f"{float(vals.min()):.4g} at N = {N:g}")
            positive[i] = positive.get(i, False) or bool(np.any(np.asarray(f(X, N, i, j)) > 0))
        if normalize == "row" and not all(positive.values()):
            raise InputError(f"--normalize row needs φ > 0 somewhere in every row; φ ≡ 0 at N = {N:g}")
    if normalize == "none":
        for N in (2.0, 196.0):
            for sgn in (1.0, -1.0):
                tail = TAIL_X if not singular else tuple(t * (1 + 2**-20) for t in TAIL_X)  # off a pole at 1000
                a, b = (abs(float(np.asarray(f(sgn * t, N, 1.0)))) for t in tail)
                if math.isnan(a) or math.isnan(b):
                    raise InputError(f"activation {text!r}: φ is undefined, infinite or beyond float64's range on the "
                                     f"real line (at x = {sgn * tail[int(math.isnan(b))]:g}, N = {N:g})")
                if not (math.isfinite(a) and math.isfinite(b)) or (
                        a > 0 and b / a > 10.0 ** (3 * TAIL_MAX_POWER)) or (a == 0 and b > 0 and b > 1e300):
                    raise InputError(
                        f"activation {text!r} overflows: φ(x) grows faster than any power as x → {'+' if sgn > 0 else '-'}∞ "
                        f"(φ({sgn * tail[1]:g}) = {b:.3g}); E‖φ(S)‖² is infinite for Gaussian-product logits "
                        "(for softmax write exp(x) with --normalize row)")


def parse_activation(text: str, normalize: str = "none", mask: str = "none") -> Activation:
    """φ(x, N, i) from ``text`` (sympy syntax, ``^`` allowed), validated: one-line InputError otherwise.

    Refused: unknown symbols (anything but :data:`sapa.theory.symbols.SYMBOLS`: x, N, i, j), unknown or non-element-wise
    functions, complex or infinite constants, φ or ∂φ/∂x undefined or infinite on x ∈ [−60, 60] for N ∈ {1, …, 10⁶}
    (unless φ has non-integrable singularities, found symbolically: then ``singular`` lists them, only NaN is refused,
    and the audit reports the expectations as infinite), and —
    without row normalisation — φ growing faster than any power (E φ(S)² would be infinite: S has
    exponential tails); with row normalisation φ must be ≥ 0.

    >>> parse_activation("x**3/sqrt(N)").coeffs[3]
    1/sqrt(N)
    """
    normalize = choice("--normalize", normalize, NORMALIZE)
    mask = choice("--mask", mask, MASKS)
    if not isinstance(text, str):
        _parse(text)  # one line: what an activation must be (and an unhashable text never reaches the cache)
    with deadline(PARSE_SECONDS, f"parsing and checking the activation {text[:60]!r}"):
        act = _checked(text, normalize)
    return act if mask == "none" else replace(act, mask=mask)


@functools.lru_cache(maxsize=PARSE_CACHE)
def _checked(text: str, normalize: str) -> Activation:
    """The validated activation of ``text`` (mask "none"), parsed and checked once per process.

    Validation is the costly part (the real-line check evaluates φ and φ' at ~10⁵ points, sending those beyond
    long double's range to mpmath one by one: 0.5–1.9 s for the ALiBi sigmoid), and the same texts come back
    (a claim's activations in every reading, a test module's parametrisations). The mask is only recorded, so
    masked and unmasked share one entry. An :class:`Activation` is immutable; a refused text raises each time
    (exceptions are not cached).
    """
    return _parse_activation(text, normalize)


def _parse_activation(text: str, normalize: str) -> Activation:
    expr = _parse(text)
    gap = undefined_part(expr, x_, N_, {i_: 1, j_: 2})
    if gap is not None:
        raise InputError(f"activation {text!r}: φ is undefined (not real) on part of the real line: x in {gap}")
    singular = nonintegrable(expr, x_, N_, {i_: 1, j_: 2}) if normalize == "none" else ()
    _check_real_line(text, expr, normalize, bool(singular))
    shape, row_factor, separable = expr, sp.Integer(1), True
    if j_ in expr.free_symbols:  # column index: no row-factor form; sapa.theory.relpos audits it
        separable = False
    elif i_ in expr.free_symbols:
        shape = expr.subs(i_, 1)
        if shape == 0:
            separable = False
        else:
            ratio = sp.simplify(expr / shape)
            separable = x_ not in ratio.free_symbols
            row_factor = sp.simplify(ratio**2) if separable else sp.Integer(1)
    coeffs: tuple = ()
    if normalize == "none" and separable and shape.is_polynomial(x_):
        poly = sp.Poly(sp.expand(shape), x_)
        if poly.degree() <= POLY_MAX_DEGREE:
            coeffs = tuple(sp.simplify(c) for c in reversed(poly.all_coeffs()))
    uses_index = bool(expr.free_symbols & {N_, i_, j_})
    poles = index_poles(expr, x_, N_, i_, j_) if uses_index else ()
    return Activation(text=text, expr=expr, normalize=normalize, shape=shape, row_factor=row_factor,
                      separable=separable, coeffs=coeffs, singular=singular, poles=poles)
