"""E‖φ(S)‖²_F = N(N−1)·E φ(S_12)² + N·E φ(S_11)² for any element-wise attention activation φ(x, N, i).

The paper (arXiv 2410.18613, Cor 4.3 / 4.5) fixes the scale of x^p by 1/√N so that the attention
norm "grows like softmax's" √N. Other papers make claims of the same shape with other activations
(ReLU/N, Wortsman et al. 2023; sigmoid with bias −log N, Ramapuram et al. 2024; normalised
polynomial kernels, Kacham et al., PolySketchFormer). This module audits any such φ, given as a
sympy expression in the logit ``x``, the sequence length ``N`` and (optionally) the row index
``i``:

* **polynomial φ** = Σ_k a_k(N, i) x^k (degree ≤ :data:`POLY_MAX_DEGREE`): exact.
  E φ(S_12)² = Σ_{k,l} a_k a_l E S_12^{k+l}, and the moments of every order come from the same
  quadratic-form cumulants as :mod:`theory.moments` (odd off-diagonal moments vanish, the diagonal's
  do not). The Jacobian w.r.t. X needs E[S_12^k (‖Wx_2‖² + ‖Wᵀx_1‖²)] and E[S_11^k ‖(W+Wᵀ)x_1‖²]
  (per-sample identity of :mod:`empirics.norms`), also exact for every k.
* **other element-wise φ**: quadrature. Given x_2 (and the weights) an off-diagonal logit is
  Gaussian, S_12 ~ N(0, v), v = ‖W x_2‖², so E φ(S_12)² = E_v ∫ φ(√v z)² dγ(z): Gauss–Hermite in z,
  averaged over v with the Gauss rule of v's law built from v's exact moments (Golub–Welsch on the
  Chebyshev-algorithm recurrence, in high precision). The diagonal S_11 = xᵀW_s x is not Gaussian:
  its law's Gauss rule comes from its exact moments too (under iid weights it is a Gaussian scale
  mixture, S_11 | ‖x‖, α_K ~ N(0, σ⁴‖x‖⁴‖α_K‖²), and gets Hermite in z as well). The Jacobian weights enter as measures
  v dP(v) and ‖(W+Wᵀ)x‖² dP(S_11), again from exact (mixed) moments. ``error_bound`` is the
  a-posteriori relative difference, at the audited N, to the rule of half the order in the laws of v
  and S_11, plus the last change when the Hermite order in z was doubled.
* causal mask (row i sees j ≤ i) and row-index dependence c(N, i)·ψ(x, N): exact sums over rows.
* row normalisation (divide each row by its sum) has no closed form: :mod:`empirics.audit` does
  Monte Carlo with exact kernels; this module supplies the worst case (rows are probability
  vectors).

Besides the expectations: the local growth exponent e(N) = ½ d log E‖φ‖²/d log N, the crossover N*
where the N(N−1) off-diagonal entries weigh as much as the N diagonal ones, the constant against
softmax's bound √N (Thm 4.1), the coefficient c(N) = √(N / E‖φ‖²) that would match that bound, and
the worst case over token-bounded inputs: |S_ij| ≤ ‖W‖₂ r² =: B gives ‖φ(S)‖_F ≤ N·max_{|s|≤B}|φ(s)|,
attained in rate by aligned tokens (every S_ij = s*).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache, lru_cache

import numpy as np
import sympy as sp

from theory.gaussian import (
    chi2_moment,
    double_factorial,
    linear_traces,
    power_traces,
    qf_moment_times_linear,
    qf_moments,
    to_exact,
)
from theory.moments import _rw_p_moments
from theory.parse_guard import check_powers
from theory.singular import nonintegrable, undefined_part
from common.deadline import deadline
from common.validate import (
    InputError,
    choice,
    finite_matrix,
    positive_float,
    positive_int,
    unit_interval,
)

__all__ = [
    "MASKS",
    "MODELS",
    "NORMALIZE",
    "POLY_MAX_DEGREE",
    "Activation",
    "Audit",
    "EntryMoments",
    "ModelSpec",
    "audit",
    "entry_moments",
    "gauss_rule",
    "model_spec",
    "parse_activation",
    "profile",
    "v_moments",
    "worst_case",
]

MODELS = ("paper", "shared", "iid", "tied", "corr")
NORMALIZE = ("none", "row")
MASKS = ("none", "causal")
POLY_MAX_DEGREE = 12  # moments of order 2·12 = 24, as theory.moments.P_MAX
MAX_TEXT = 400
N_GRID = tuple(float(v) for v in np.geomspace(2, 2**20, 61))  # where the sup of the local exponent is taken
X_CHECK = np.concatenate([np.linspace(-60.0, 60.0, 2401), [-1e-9, 1e-9]])  # the real line, as far as it is checked
N_CHECK = (1.0, 2.0, 3.0, 16.0, 196.0, 4096.0, 1e6)
TAIL_X = (1e3, 1e6)  # polynomial-growth check of unnormalised φ: |φ(1e6)|/|φ(1e3)| ≤ 10^(3·TAIL_MAX_POWER)
TAIL_MAX_POWER = 2 * POLY_MAX_DEGREE
V_LEVELS = (8, 16)            # fixed W: Gauss nodes for the law of v = ‖W x‖² (coarse, fine)
DIAG_LEVELS = (16, 32)        # fixed W: Gauss nodes for the law of S_11
RW_LEVELS = ((6, 16), (10, 32))  # random weights: (nodes per χ² factor, Gauss nodes of the product law) (coarse, fine)
Z_LEVELS = (64, 128, 256, 512, 1024, 2048)  # Gauss–Hermite nodes in z, doubled until the change is below Z_RTOL
Z_RTOL = 1e-10
MP_SECONDS = 10.0  # cap on one high-precision fallback of _lam (mpmath can take for ever on exp(exp(exp(60))))

x_ = sp.Symbol("x", real=True)
N_ = sp.Symbol("N", positive=True)
i_ = sp.Symbol("i", positive=True)

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


# ----------------------------------------------------------------------------- the expression


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
    singular: tuple = field(default=(), compare=False)  # theory.singular.Singularity: where E φ² or E φ'² is infinite

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
    local = {"x": x_, "N": N_, "i": i_, **_ALIASES}
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
    unknown = sorted(str(s) for s in expr.free_symbols - {x_, N_, i_})
    if unknown:
        raise InputError(f"unknown symbol {unknown[0]!r} in {text!r}: use x (logit), N (sequence length), "
                         "i (row index); write numbers for everything else (e.g. d = 64 → x/8)")
    if expr.has(sp.I) or expr.has(sp.zoo) or expr.has(sp.nan) or expr.has(sp.oo):
        raise InputError(f"activation {text!r} is not a finite real expression")
    if sp.simplify(expr) == 0:
        raise InputError(f"activation {text!r} is identically 0")
    _check_piecewise_continuous(text, expr)
    dphi = sp.diff(expr, x_)
    if dphi.has(sp.DiracDelta) or dphi.has(sp.Derivative) or dphi.has(sp.Subs):
        raise InputError(f"activation {text!r} jumps (∂φ/∂x = {dphi} is not a function): its Jacobian norm is "
                         "infinite; use a continuous φ (e.g. Max(x, 0) rather than Heaviside(x))")
    return expr


def _check_piecewise_continuous(text: str, expr: sp.Expr) -> None:
    """Piecewise φ must not jump at its breakpoints (sympy's derivative of a Piecewise ignores a jump)."""
    if not expr.has(sp.Piecewise):
        return
    f = sp.lambdify((x_, N_, i_), expr, ["scipy", "numpy"])
    for rel in expr.atoms(sp.core.relational.Relational):
        try:
            sols = sp.solve(sp.Eq(rel.lhs, rel.rhs), x_)
        except (NotImplementedError, TypeError, ValueError):
            continue
        for sol in sols if isinstance(sols, list) else []:
            for N in N_CHECK[:5]:
                for i in (1.0, N):
                    try:
                        x0 = float(sol.subs({N_: N, i_: i}))
                    except (TypeError, ValueError):
                        continue
                    with np.errstate(all="ignore"):
                        lo, hi = (float(f(x0 + h, N, i)) for h in (-1e-9 * max(1.0, abs(x0)), 1e-9 * max(1.0, abs(x0))))
                    if abs(hi - lo) > 1e-6 * max(1.0, abs(lo), abs(hi)):
                        raise InputError(f"activation {text!r} jumps at x = {x0:.6g} (N = {N:g}): its Jacobian norm is "
                                         "infinite; use a continuous φ")


def _lam(expr: sp.Expr):
    """numpy function of (x, N, i) for ``expr`` (broadcasting). Points where float64 evaluation gives
    inf/NaN (e.g. exp(−y)/(1 + exp(−y))² at y → −∞: inf/inf) are re-evaluated in mpmath at 30 digits,
    so only values that are themselves out of float64's range stay non-finite."""
    f = sp.lambdify((x_, N_, i_), expr, ["scipy", "numpy"])
    g = None

    def call(x, N, i=1.0):
        nonlocal g
        shape = np.broadcast(np.asarray(x), np.asarray(N), np.asarray(i)).shape
        with np.errstate(all="ignore"):
            try:
                out = np.broadcast_to(np.asarray(f(x, N, i), dtype=np.float64), shape)
            except (OverflowError, ZeroDivisionError):  # Python ints and floats (10**400·x, N**N): point by point below
                out = np.full(shape, math.nan)
        bad = ~np.isfinite(out)
        if bad.any():
            import mpmath

            if g is None:
                g = sp.lambdify((x_, N_, i_), expr, [_bounded_mpmath(), "mpmath"])
            out = np.array(out, dtype=np.float64, ndmin=1)
            bad = np.atleast_1d(bad)
            xs, Ns, is_ = (np.broadcast_to(np.asarray(a, dtype=np.float64), shape).reshape(out.shape) for a in (x, N, i))
            with mpmath.workdps(30), deadline(MP_SECONDS, f"evaluating {_short(expr)} in 30-digit arithmetic where "
                                                       "float64 overflows (e.g. exp(exp(x)) at large x)"):
                for idx in zip(*np.nonzero(bad)):
                    try:
                        v = g(mpmath.mpf(float(xs[idx])), mpmath.mpf(float(Ns[idx])), mpmath.mpf(float(is_[idx])))
                        out[idx] = float(mpmath.re(v)) if abs(mpmath.im(v)) == 0 else math.nan
                    except ZeroDivisionError:  # a pole (1/x at 0): infinite, not undefined
                        out[idx] = math.inf
                    except (ValueError, OverflowError, TypeError):
                        out[idx] = math.nan
            out = out.reshape(shape)
        return out

    return call


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

    ``singular``: φ has non-integrable singularities (theory.singular), so ±∞ at a grid point is expected
    (the audit reports an infinite expectation); NaN (undefined) is still refused."""
    f, fp = _lam(expr), _lam(sp.diff(expr, x_))
    X = X_CHECK[None, :]
    for N in N_CHECK:
        for i in sorted({1.0, N}):
            for g, what in ((f, "φ"), (fp, "∂φ/∂x")):
                with np.errstate(all="ignore"):
                    vals = np.asarray(g(X, N, i), dtype=np.float64)
                bad = np.isnan(vals) if singular else ~np.isfinite(vals)
                if bad.any():
                    at = float(np.broadcast_to(X, vals.shape)[bad][0])
                    raise InputError(f"activation {text!r}: {what} is undefined, infinite or beyond float64's range "
                                     "on the real line "
                                     f"(at x = {at:.6g}, N = {N:g}{f', i = {i:g}' if i_ in expr.free_symbols else ''})")
                if normalize == "row" and what == "φ" and float(vals.min()) < 0:
                    at = float(X_CHECK[int(np.argmin(vals.ravel()))])
                    raise InputError(f"--normalize row needs φ ≥ 0 (a row sum could vanish): φ({at:.4g}) = "
                                     f"{float(vals.min()):.4g} at N = {N:g}")
            if normalize == "row" and not np.any(np.asarray(f(X, N, i)) > 0):
                raise InputError(f"--normalize row needs φ > 0 somewhere; φ ≡ 0 at N = {N:g}")
    if normalize == "none":
        for N in (2.0, 196.0):
            for sgn in (1.0, -1.0):
                a, b = (abs(float(np.asarray(f(sgn * t, N, 1.0)))) for t in TAIL_X)
                if math.isnan(a) or math.isnan(b):
                    raise InputError(f"activation {text!r}: φ is undefined, infinite or beyond float64's range on the "
                                     f"real line (at x = {sgn * TAIL_X[int(math.isnan(b))]:g}, N = {N:g})")
                if not (math.isfinite(a) and math.isfinite(b)) or (
                        a > 0 and b / a > 10.0 ** (3 * TAIL_MAX_POWER)) or (a == 0 and b > 0 and b > 1e300):
                    raise InputError(
                        f"activation {text!r} overflows: φ(x) grows faster than any power as x → {'+' if sgn > 0 else '-'}∞ "
                        f"(φ({sgn * TAIL_X[1]:g}) = {b:.3g}); E‖φ(S)‖² is infinite for Gaussian-product logits "
                        "(for softmax write exp(x) with --normalize row)")


def parse_activation(text: str, normalize: str = "none", mask: str = "none") -> Activation:
    """φ(x, N, i) from ``text`` (sympy syntax, ``^`` allowed), validated: one-line InputError otherwise.

    Refused: unknown symbols (anything but x, N, i), unknown or non-element-wise functions, complex or
    infinite constants, φ or ∂φ/∂x undefined or infinite on x ∈ [−60, 60] for N ∈ {1, …, 10⁶} (unless φ has
    non-integrable singularities, found symbolically: then ``singular`` lists them, only NaN is refused, and the
    audit reports the expectations as infinite), and —
    without row normalisation — φ growing faster than any power (E φ(S)² would be infinite: S has
    exponential tails); with row normalisation φ must be ≥ 0.

    >>> parse_activation("x**3/sqrt(N)").coeffs[3]
    1/sqrt(N)
    """
    normalize = choice("--normalize", normalize, NORMALIZE)
    mask = choice("--mask", mask, MASKS)
    expr = _parse(text)
    gap = undefined_part(expr, x_, N_, {i_: 1})
    if gap is not None:
        raise InputError(f"activation {text!r}: φ is undefined (not real) on part of the real line: x in {gap}")
    singular = nonintegrable(expr, x_, N_, {i_: 1}) if normalize == "none" else ()
    _check_real_line(text, expr, normalize, bool(singular))
    shape, row_factor, separable = expr, sp.Integer(1), True
    if i_ in expr.free_symbols:
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
    return Activation(text=text, expr=expr, normalize=normalize, mask=mask, shape=shape, row_factor=row_factor,
                      separable=separable, coeffs=coeffs, singular=singular)


# ----------------------------------------------------------------------------- the randomness model


@dataclass(frozen=True)
class ModelSpec:
    """The randomness of S, as in ``sapa exact``: paper (S = ABᵀ), shared (S = XWXᵀ, W fixed), iid / tied / corr."""

    name: str
    D: int | None
    d: int | None
    rho: Fraction = Fraction(0)
    sigma: Fraction = Fraction(1)         # weight (or A, B entry) std, as the exact rational sapa exact uses
    W: np.ndarray | None = field(default=None, compare=False)        # (D, D), shared only
    sigma_x: np.ndarray | None = field(default=None, compare=False)  # (D, D) token covariance, shared only


def _frac(x) -> Fraction:
    r = sp.Rational(repr(float(x))) if not isinstance(x, (Fraction, int)) else sp.Rational(x)
    return Fraction(int(r.p), int(r.q))


def model_spec(model: str, D=None, d=None, *, rho=0.0, sigma=None, W=None, sigma_x=None) -> ModelSpec:
    """Validate a model like :func:`theory.moments.exact_moments` (sigma default: 1/√D, paper 1)."""
    from theory.moments import _size, _validate_sigma_x

    model = choice("model", model, MODELS)
    if model == "shared":
        if W is None:
            raise InputError("model 'shared' needs W, a (D, D) matrix")
        Wa = finite_matrix("W", W, (None, None))
        if Wa.shape[0] != Wa.shape[1]:
            raise InputError(f"W must be square (D, D), got shape {Wa.shape}")
        if D is not None and _size("D", D) != Wa.shape[0]:
            raise InputError(f"D = {D} does not match W of shape {Wa.shape}")
        Sx = None
        if sigma_x is not None:
            Sx = _validate_sigma_x(sigma_x, Wa.shape[0])
            Sx = 0.5 * (Sx + Sx.T)
        return ModelSpec("shared", int(Wa.shape[0]), None, W=Wa, sigma_x=Sx)
    if W is not None or sigma_x is not None:
        raise InputError(f"W and sigma_x apply only to model 'shared', not {model!r}")
    if d is None:
        raise InputError(f"model {model!r} needs d (head dimension)")
    d = _size("d", d)
    if model != "paper" and D is None:
        raise InputError(f"model {model!r} needs D (token dimension)")
    D = None if D is None else _size("D", D)
    if sigma is None:
        sigma = 1.0 if model == "paper" else 1.0 / math.sqrt(D)
    sig = _frac(positive_float("sigma", sigma))
    r = {"iid": Fraction(0), "tied": Fraction(1)}.get(model, Fraction(0))
    if model == "corr":
        r = _frac(unit_interval("rho", rho))
    return ModelSpec(model, D, d, rho=r, sigma=sig)


# ----------------------------------------------------------------------------- exact moments


def _mu(n, k: int):
    """μ_k(n) = E(χ²_n)^k = n(n+2)…(n+2k−2)."""
    return chi2_moment(n, k)


@lru_cache(maxsize=64)
def _corr_v_moments(D: int, d: int, rho: Fraction, K: int) -> tuple:
    """E v^k / σ^{4k}, k = 0..K, v = ‖W_Q W_Kᵀ x‖², W_K = ρW_Q + √(1−ρ²)W_⊥, x ~ N(0, I_D).

    Rotating x to ‖x‖e₁: v = σ⁴ c_x [s²w² + (w² + (1−ρ²)c_r) c_b], with c_x ~ χ²_D, s² ~ χ²_d,
    w = ρs + √(1−ρ²)t, t ~ N(0,1), c_r ~ χ²_{d−1}, c_b ~ χ²_{D−1}, all independent (q = first row of
    W_Q = σ s q̂; first row of W_⊥ = σ(t q̂ + r_⊥)). Expanding binomially,
    E[s^{2a} w^{2m}] = Σ_e C(2m, 2e) ρ^{2e} (1−ρ²)^{m−e} (2m−2e−1)!! μ_{a+e}(d); ρ = 0 gives
    μ_k(D)² μ_k(d) (iid), ρ = 1 gives μ_k(D) Σ_j C(k,j) μ_{k+j}(d) μ_{k−j}(D−1) (tied). With ρ = p/q
    every term of order k has denominator q^{2k}, so the sums run in integers.
    """
    if rho == 0:
        return tuple(Fraction(_mu(D, k) ** 2 * _mu(d, k)) for k in range(K + 1))
    if abs(rho) == 1:
        return tuple(Fraction(_mu(D, k) * sum(math.comb(k, j) * _mu(d, 2 * k - j) * _mu(D - 1, j) for j in range(k + 1)))
                     for k in range(K + 1))
    p, q = rho.numerator, rho.denominator
    p2, om = p * p, q * q - p * p  # ρ² = p2/q², 1 − ρ² = om/q²
    mu_d = [_mu(d, k) for k in range(2 * K + 1)]
    mu_d1 = [_mu(d - 1, k) for k in range(K + 1)]
    mu_D1 = [_mu(D - 1, k) for k in range(K + 1)]

    @cache
    def F(a: int, m: int) -> int:  # q^{2m} E[s^{2a} w^{2m}]
        return sum(math.comb(2 * m, 2 * e) * p2**e * om ** (m - e) * double_factorial(2 * m - 2 * e - 1) * mu_d[a + e]
                   for e in range(m + 1))

    out = []
    for k in range(K + 1):
        acc = 0
        for j in range(k + 1):
            a = k - j
            inner = sum(math.comb(j, l) * om ** (j - l) * mu_d1[j - l] * F(a, a + l) for l in range(j + 1))
            acc += math.comb(k, j) * mu_D1[j] * inner
        out.append(Fraction(_mu(D, k) * acc, q ** (2 * k)))
    return tuple(out)


def _dot(A, B):
    return A.dot(B) if A.dtype == object else A @ B


def _shared_mats(spec: ModelSpec):
    """Exact (D ≤ 32) or float W, Σ and the products the moments use."""
    from theory.gaussian import EXACT_MAX_DIM

    exact = spec.D <= EXACT_MAX_DIM
    W = to_exact(spec.W) if exact else np.asarray(spec.W, dtype=np.float64)
    S = None if spec.sigma_x is None else (to_exact(spec.sigma_x) if exact else spec.sigma_x)
    half = Fraction(1, 2) if exact else 0.5
    return W, S, (W + W.T) * half


def v_moments(spec: ModelSpec, K: int) -> list:
    """E v^k, k = 0..K, v = Var(S_12 | x_2, W) = ‖W x_2‖² (paper: σ²‖b_j‖²; shared Σ: x_2ᵀWᵀΣW x_2), exact."""
    if spec.name == "paper":
        return [spec.sigma ** (4 * k) * _mu(spec.d, k) for k in range(K + 1)]
    if spec.name == "shared":
        W, S, _ = _shared_mats(spec)
        A = _dot(W.T, W) if S is None else _dot(S, _dot(W.T, _dot(S, W)))
        return list(qf_moments(power_traces(A, K))) if K > 0 else [1]
    base = _corr_v_moments(spec.D, spec.d, spec.rho, K)
    return [spec.sigma ** (4 * k) * base[k] for k in range(K + 1)]


@dataclass(frozen=True)
class EntryMoments:
    """Exact per-entry moments, k = 0..K (lists of exact numbers).

    off[k] = E S_12^k; diag[k] = E S_11^k; joff[k] = E[S_12^k (‖Wx_2‖² + ‖Wᵀx_1‖²)] (paper: ‖a_i‖² + ‖b_j‖²);
    jdiag[k] = E[S_11^k ‖(W + Wᵀ)x_1‖²] (paper: = joff).
    """

    off: tuple
    diag: tuple
    joff: tuple
    jdiag: tuple


def entry_moments(spec: ModelSpec, K: int) -> EntryMoments:
    """The four moment sequences up to order K (Jacobian ones up to K as well), exact."""
    K = int(K)
    half = K // 2
    if spec.name == "paper":
        v = v_moments(spec, half + 1)
        off = [double_factorial(k - 1) * v[k // 2] if k % 2 == 0 else 0 for k in range(K + 1)]
        s2 = spec.sigma**2
        joff = [2 * double_factorial(k - 1) * v[k // 2 + 1] / s2 if k % 2 == 0 else 0 for k in range(K + 1)]
        return EntryMoments(tuple(off), tuple(off), tuple(joff), tuple(joff))
    v = v_moments(spec, half + 1)
    off = [double_factorial(k - 1) * v[k // 2] if k % 2 == 0 else 0 for k in range(K + 1)]
    if spec.name == "shared" and spec.sigma_x is not None:
        W, S, Ws = _shared_mats(spec)
        SA1, SB1 = _dot(S, _dot(W.T, _dot(S, W))), _dot(S, _dot(W.T, W))
        SA2, SB2 = _dot(S, _dot(W, _dot(S, W.T))), _dot(S, _dot(W, W.T))
        q1 = qf_moments(power_traces(SA1, half)) if half else [1]
        q2 = qf_moments(power_traces(SA2, half)) if half else [1]
        l1, l2 = linear_traces(SA1, SB1, half), linear_traces(SA2, SB2, half)
        joff = [double_factorial(k - 1) * (qf_moment_times_linear(q1, l1, k // 2) + qf_moment_times_linear(q2, l2, k // 2))
                if k % 2 == 0 else 0 for k in range(K + 1)]
    else:
        joff = [2 * double_factorial(k - 1) * v[k // 2 + 1] if k % 2 == 0 else 0 for k in range(K + 1)]
    if spec.name == "shared":
        W, S, Ws = _shared_mats(spec)
        SWs = Ws if S is None else _dot(S, Ws)
        SWs2 = _dot(Ws, Ws) if S is None else _dot(S, _dot(Ws, Ws))
        dm = qf_moments(power_traces(SWs, K)) if K else [1]
        lt = linear_traces(SWs, SWs2, K)
        jdiag = [4 * qf_moment_times_linear(dm, lt, k) for k in range(K + 1)]
        diag = list(dm)
    else:
        D, d, rho, sig = spec.D, spec.d, spec.rho, spec.sigma
        eP = _rw_p_moments(K + 2, d, rho)  # E P^k, P = α_Qᵀα_K (theory.moments)
        diag = [sig ** (2 * k) * _mu(D, k) * eP[k] for k in range(K + 1)]
        h = Fraction(1, 2)
        u = [d * (((rho + 1) * h) ** m * (1 + rho) ** 2 + ((rho - 1) * h) ** m * (1 - rho) ** 2) for m in range(K + 1)]
        jdiag = [sig ** (2 * k + 4) * _mu(D, k + 1) * (4 * eP[k + 2] + (D - 1) * qf_moment_times_linear(eP, u, k))
                 for k in range(K + 1)]
    return EntryMoments(tuple(off), tuple(diag), tuple(joff), tuple(jdiag))


# ----------------------------------------------------------------------------- Gauss rules from moments


def gauss_rule(moments, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes t_k, weights w_k of the n-point Gauss rule of a positive measure with moments m_0..m_{2n−1}.

    Σ_k w_k f(t_k) = ∫ f dμ exactly for polynomials of degree ≤ 2n − 1. The moments are exact; they
    are centred and scaled exactly, the Chebyshev algorithm runs in mpmath at 30 + 4n digits, and
    the Jacobi matrix is diagonalised in float64 (Golub–Welsch). A measure with fewer than n support
    points (e.g. a point mass) gets as many nodes as it has.

    >>> t, w = gauss_rule([1, 0, 1, 0, 3, 0], 3); [round(float(v), 6) for v in t]   # N(0, 1): ±√3, 0
    [-1.732051, 0.0, 1.732051]
    """
    import mpmath
    from scipy.linalg import eigh_tridiagonal

    n = positive_int("n", n)
    m = [Fraction(v) if not isinstance(v, sp.Basic) else Fraction(int(sp.Rational(v).p), int(sp.Rational(v).q))
         for v in moments[: 2 * n]]
    if len(m) < 2 * n:
        raise InputError(f"a {n}-point Gauss rule needs {2 * n} moments, got {len(m)}")
    m0 = m[0]
    if m0 <= 0:
        raise InputError("the measure has no mass (moment 0 ≤ 0)")
    c = m[1] / m0
    var = m[2] / m0 - c * c if n > 1 else Fraction(0)
    if var <= 0 or float(var) <= 1e-300 * max(1.0, float(c * c)):
        return np.array([float(c)]), np.array([float(m0)])
    s = math.sqrt(float(var))
    # centring loses about k·log10(|mean|/sd) digits at order k: carry them
    lost = (2 * n) * max(0.0, math.log10(max(1.0, abs(float(c)) / s)))
    with mpmath.workdps(int(40 + 4 * n + lost)):
        mp = [mpmath.mpf(v.numerator) / v.denominator for v in m]
        cm, sm = mp[1] / mp[0], mpmath.mpf(s)
        mu = []  # standardised moments ν_k = E[((X − c)/s)^k]
        for k in range(2 * n):
            acc = mpmath.fsum(math.comb(k, j) * mp[j] * (-cm) ** (k - j) for j in range(k + 1))
            mu.append(acc / (mp[0] * sm**k))
        a, b = [mu[1] / mu[0]], [mu[0]]
        sig_prev = [mpmath.mpf(0)] * (2 * n)
        sig = list(mu)
        tiny = mpmath.mpf(10) ** (-(10 + 2 * n))
        for k in range(1, n):
            new = [mpmath.mpf(0)] * (2 * n)
            for l in range(k, 2 * n - k):
                new[l] = sig[l + 1] - a[k - 1] * sig[l] - b[k - 1] * sig_prev[l]
            if new[k] <= tiny * abs(sig[k - 1]) or new[k] <= 0:
                break  # fewer support points than n (to this precision)
            a.append(new[k + 1] / new[k] - sig[k] / sig[k - 1])
            b.append(new[k] / sig[k - 1])
            sig_prev, sig = sig, new
        alpha = np.array([float(v) for v in a])
        beta = np.array([math.sqrt(float(v)) for v in b[1:]])
        c = float(cm)
    if alpha.size == 1:
        t, vec = alpha, np.ones((1, 1))
    else:
        t, vec = eigh_tridiagonal(alpha, beta)
    w = vec[0, :] ** 2  # weights of the standardised probability measure
    return c + s * t, float(m0) * w


def _hermite(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Hermite nodes and weights for E f(z), z ~ N(0, 1) (scipy.special.roots_hermite, rescaled)."""
    from scipy.special import roots_hermite

    t, w = roots_hermite(n)
    return math.sqrt(2.0) * t, w / math.sqrt(math.pi)


# ----------------------------------------------------------------------------- per-entry expectations


@dataclass(frozen=True)
class _Nodes:
    """A discrete measure (x, w) standing in for the law of one logit (or a Jacobian-weighted law)."""

    x: np.ndarray  # (K,)
    w: np.ndarray  # (K,)


def _offdiag_nodes(vx: np.ndarray, vw: np.ndarray, nz: int) -> _Nodes:
    z, g = _hermite(nz)
    X = np.sqrt(np.maximum(vx, 0.0))[:, None] * z[None, :]  # (n_v, n_z)
    return _Nodes(X.ravel(), (vw[:, None] * g[None, :]).ravel())


@dataclass(frozen=True)
class _Rules:
    """Quadrature nodes for the six per-entry expectations (fro, Jacobian w.r.t. S, Jacobian w.r.t. X; off, diag)."""

    off: _Nodes
    diag: _Nodes
    joff: _Nodes  # already includes both halves (‖Wx_2‖² + ‖Wᵀx_1‖²)
    jdiag: _Nodes


@lru_cache(maxsize=32)
def _rules_cached(spec_key, level: int, nz: int, spec: ModelSpec) -> _Rules:
    if spec.name != "shared":
        nb, m = RW_LEVELS[level]
        return _random_rules(spec, nb, m, nz)
    return _shared_rules(spec, V_LEVELS[level], DIAG_LEVELS[level], nz)


def _shared_rules(spec: ModelSpec, nv: int, nd: int, nz: int) -> _Rules:
    """Fixed W: v = ‖Wx‖² and S_11 = xᵀW_s x are Gaussian quadratic forms (light tails): Gauss rules from exact moments."""
    vm = v_moments(spec, 2 * nv + 1)
    vx, vw = gauss_rule(vm[: 2 * nv], nv)
    if spec.sigma_x is not None:
        W, S, _ = _shared_mats(spec)
        pieces = []
        for SA, SB in ((_dot(S, _dot(W.T, _dot(S, W))), _dot(S, _dot(W.T, W))),
                       (_dot(S, _dot(W, _dot(S, W.T))), _dot(S, _dot(W, W.T)))):
            q = qf_moments(power_traces(SA, 2 * nv))
            lt = linear_traces(SA, SB, 2 * nv)
            jm = [qf_moment_times_linear(q, lt, k) for k in range(2 * nv)]
            pieces.append(_offdiag_nodes(*gauss_rule(jm, nv), nz))
        joff = _Nodes(np.concatenate([p.x for p in pieces]), np.concatenate([p.w for p in pieces]))
    else:
        jx, jw = gauss_rule([vm[k + 1] * 2 for k in range(2 * nv)], nv)
        joff = _offdiag_nodes(jx, jw, nz)
    off = _offdiag_nodes(vx, vw, nz)
    diag, jdiag = _shared_diag_nodes(_spec_key(spec), nd, spec)
    return _Rules(off, diag, joff, jdiag)


TENSOR_RANK = 3  # S_11 with at most this many non-zero eigenvalues: tensor Gauss–Hermite (exact structure)


@lru_cache(maxsize=32)
def _shared_diag_nodes(spec_key, nd: int, spec: ModelSpec) -> tuple[_Nodes, _Nodes]:
    """Nodes for E f(S_11) and E[f(S_11) R], S_11 = xᵀW_s x = Σ_k λ_k u_k², R = ‖(W+Wᵀ)x‖² ≡ Σ_k c_k u_k² in law.

    u ~ N(0, I) in the eigenbasis of Σ^{½}W_sΣ^{½} (cross terms c_jk u_j u_k, j ≠ k, vanish: S_11 is even in each
    u_j). A Gauss rule of this law built from its moments resolves a sharp φ badly (its nodes are O(sd) apart),
    so: with at most TENSOR_RANK non-zero λ_k, tensor Gauss–Hermite in those u_k (nd nodes each, exact
    structure; this also covers the singular densities of low rank); otherwise the density of S_11 and the
    R-weighted density from the characteristic function, ψ(t) = Π_k (1 − 2iλ_k t)^{−½} and
    E[R e^{itS}] = ψ(t) Σ_k c_k/(1 − 2iλ_k t), by FFT on 2^(10 + nd/8) points of [mean ± (14 sd + 60 max|λ|)]
    (rectangle rule: spectrally accurate for the smooth densities of rank ≥ 4).
    """
    W = np.asarray(spec.W, dtype=np.float64)
    Ws = 0.5 * (W + W.T)
    if spec.sigma_x is None:
        B, C = Ws, 4 * Ws @ Ws
    else:
        lam_s, U_s = np.linalg.eigh(spec.sigma_x)
        L = (U_s * np.sqrt(np.maximum(lam_s, 0.0))) @ U_s.T  # Σ^{½}
        B, C = L @ Ws @ L, 4 * L @ Ws @ Ws @ L
    lam, U = np.linalg.eigh(0.5 * (B + B.T))
    c = np.einsum("ik,ij,jk->k", U, C, U)  # diag(Uᵀ C U)
    top = float(np.max(np.abs(lam))) if lam.size else 0.0
    nz_mask = np.abs(lam) > 1e-12 * top if top > 0 else np.zeros(lam.size, dtype=bool)
    if top == 0.0:
        return _Nodes(np.zeros(1), np.ones(1)), _Nodes(np.zeros(1), np.array([float(np.sum(c))]))
    lam_nz, c_nz, c_zero = lam[nz_mask], c[nz_mask], float(np.sum(c[~nz_mask]))
    if lam_nz.size <= TENSOR_RANK:
        z, g = _hermite(nd)
        grids = np.meshgrid(*([z] * lam_nz.size), indexing="ij")
        wz = np.ones_like(grids[0])
        for gg in np.meshgrid(*([g] * lam_nz.size), indexing="ij"):
            wz = wz * gg
        sx = sum(l * G.ravel() ** 2 for l, G in zip(lam_nz, grids))
        R = c_zero + sum(cc * G.ravel() ** 2 for cc, G in zip(c_nz, grids))
        wz = wz.ravel()
        return _Nodes(sx, wz), _Nodes(sx, wz * R)
    mean, sd = float(np.sum(lam_nz)), math.sqrt(2.0 * float(np.sum(lam_nz**2)))
    half = 14.0 * sd + 60.0 * top
    a, b = mean - half, mean + half
    n = 2 ** (10 + nd // 8)
    ds = (b - a) / n
    dt = 2 * math.pi / (n * ds)
    k = np.fft.ifftshift(np.arange(-n // 2, n // 2))  # FFT order
    t = k * dt  # (n,)
    one = 1.0 - 2j * lam_nz[None, :] * t[:, None]  # (n, r)
    psi = np.exp(-0.5 * np.sum(np.log(one), axis=1))
    psi_r = psi * (c_zero + np.sum(c_nz[None, :] / one, axis=1))
    sj = a + ds * np.arange(n)
    phase = np.exp(-1j * t * a)
    dens = (dt / (2 * math.pi)) * np.fft.fft(psi * phase).real  # p(s_j)
    rdens = (dt / (2 * math.pi)) * np.fft.fft(psi_r * phase).real  # E[R | S = s_j] p(s_j)
    return _Nodes(sj, dens * ds), _Nodes(sj, rdens * ds)


@lru_cache(maxsize=64)
def _chi2_rule(k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n-point Gauss rule of χ²_k (from its exact moments μ_j(k); χ²_0 is the point mass at 0)."""
    return gauss_rule([_mu(k, j) for j in range(2 * n)], n)


def _tensor(*rules) -> tuple[list, np.ndarray]:
    """Tensor product of 1-D rules: (flattened node arrays, product weights)."""
    grids = np.meshgrid(*[r[0] for r in rules], indexing="ij")
    W = np.ones_like(grids[0])
    for g, r in zip(np.meshgrid(*[r[1] for r in rules], indexing="ij"), rules):
        W = W * g
    return [g.ravel() for g in grids], W.ravel()


def _gauss_of_discrete(v: np.ndarray, W: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The m-point Gauss rule of the discrete measure Σ_a W_a δ(v_a) (W ≥ 0): Lanczos on diag(v) from √W.

    Exact for polynomials of degree ≤ 2m − 1 in v (so polynomial φ stay exact); full reorthogonalisation keeps
    the Lanczos vectors orthogonal in float64 (the RKPW / Gragg–Harrod reading of Golub–Welsch). Stops early
    when the measure has fewer than m distinct atoms.
    """
    from scipy.linalg import eigh_tridiagonal

    W = np.asarray(W, dtype=np.float64)
    keep = W > 0
    v, W = np.asarray(v, dtype=np.float64)[keep], W[keep]
    mass = float(W.sum())
    scale = float(np.max(np.abs(v))) or 1.0
    x = v / scale
    q = np.sqrt(W / mass)
    Q = [q]
    alpha, beta = [], []
    prev, b_prev = np.zeros_like(q), 0.0
    for k in range(min(m, v.size)):
        r = x * q
        a = float(q @ r)
        alpha.append(a)
        r = r - a * q - b_prev * prev
        for qq in Q:  # full reorthogonalisation (twice is enough)
            r -= (qq @ r) * qq
        for qq in Q:
            r -= (qq @ r) * qq
        b = float(np.linalg.norm(r))
        if k == min(m, v.size) - 1 or b <= 1e-13 * max(1.0, abs(a)):
            break
        beta.append(b)
        prev, q, b_prev = q, r / b, b
        Q.append(q)
    al = np.array(alpha)
    if al.size == 1:
        return np.array([al[0] * scale]), np.array([mass])
    t, vec = eigh_tridiagonal(al, np.array(beta[: al.size - 1]))
    return t * scale, mass * vec[0, :] ** 2


@lru_cache(maxsize=32)
def _random_laws(spec_key, nb: int, m: int, spec: ModelSpec) -> dict:
    """Random weights: v and S_11 as products of independent χ² (and normal) variables, each with its own Gauss rule.

    Moments of products of χ² grow like (3k)!: their moment problem is ill-conditioned and the Gauss rule of v's
    law from its moments converges badly for small D; the factors' own rules do not have that problem. The tensor
    rule of the factors is then compressed to an m-point Gauss rule of the product law (:func:`_gauss_of_discrete`).
    With σ² the weight variance (paper: the entry variance of A, B), all at σ = 1 and then scaled:
    paper v = χ²_d; iid v = χ²_D χ²_d χ²_D'; tied v = χ²_D χ²_d(χ²_d + χ²_{D−1}); corr (see _corr_v_moments)
    v = χ²_D [s²w² + (w² + (1−ρ²)χ²_{d−1})χ²_{D−1}], w = ρs + √(1−ρ²)t. Diagonal: paper = off; iid S_11 | ·
    ~ N(0, u), u = (χ²_D)²χ²_d, E[R | ·] = χ²_D[(4χ²_d + D − 1)z² + (d − 1 + χ²_d)(D − 1)]; tied S_11 = χ²_Dχ²_d,
    E[R | ·] = 4χ²_Dχ²_d(χ²_d + D − 1); corr S_11 = χ²_D P, P = ((1+ρ)c_u − (1−ρ)c_w)/2,
    E[R | ·] = χ²_D[4P² + ((1+ρ)c_u + (1−ρ)c_w + 2ρP)(D − 1)] (R = ‖(W + Wᵀ)x‖²).
    """
    s2 = float(spec.sigma) ** 2
    d = spec.d
    name = spec.name
    out = {}
    if name == "paper":
        (c,), W = _tensor(_chi2_rule(d, 4 * nb))
        v = s2 * s2 * c
        jscale = 2.0 / s2
    else:
        D = spec.D
        cx = _chi2_rule(D, nb)
        if name == "iid":
            (a, b, c), W = _tensor(cx, _chi2_rule(d, nb), _chi2_rule(D, nb))
            v = a * b * c
        elif name == "tied":
            (a, b, c), W = _tensor(cx, _chi2_rule(d, nb), _chi2_rule(D - 1, nb))
            v = a * b * (b + c)
        else:
            rho = float(spec.rho)
            om = 1.0 - rho * rho
            nc = max(4, nb - 2)  # five factors: keep the tensor at ≤ 10⁵ atoms
            (a, sv, t, cr, cb), W = _tensor(_chi2_rule(D, nc), _chi2_rule(d, nc), _hermite(nc),
                                           _chi2_rule(d - 1, nc), _chi2_rule(D - 1, nc))
            w = rho * np.sqrt(sv) + math.sqrt(om) * t
            v = a * (sv * w * w + (w * w + om * cr) * cb)
        v = s2 * s2 * v
        jscale = 2.0
    out["off"] = _gauss_of_discrete(v, W, m)
    out["joff"] = _gauss_of_discrete(v, W * jscale * v, m)
    if name == "paper":
        return out
    D = spec.D
    if name == "iid":
        (a, b), W2 = _tensor(cx, _chi2_rule(d, nb))
        u = s2 * s2 * a * a * b
        out["diag_u"] = _gauss_of_discrete(u, W2, m)
        out["jdiag_u2"] = _gauss_of_discrete(u, W2 * s2 * s2 * a * (4 * b + D - 1), m)  # weight of z²
        out["jdiag_u0"] = _gauss_of_discrete(u, W2 * s2 * s2 * a * (d - 1 + b) * (D - 1), m)  # weight of 1
        return out
    if name == "tied":
        (a, b), W2 = _tensor(cx, _chi2_rule(d, 2 * nb))
        sd = s2 * a * b
        R = 4 * s2 * s2 * a * b * (b + D - 1)
    else:
        rho = float(spec.rho)
        (a, cu, cw), W2 = _tensor(cx, _chi2_rule(d, 2 * nb), _chi2_rule(d, 2 * nb))
        P = 0.5 * ((1 + rho) * cu - (1 - rho) * cw)
        sd = s2 * a * P
        R = s2 * s2 * a * (4 * P * P + ((1 + rho) * cu + (1 - rho) * cw + 2 * rho * P) * (D - 1))
    out["diag"] = (sd, W2)
    out["jdiag"] = (sd, W2 * R)
    return out


def _random_rules(spec: ModelSpec, nb: int, m: int, nz: int) -> _Rules:
    """Nodes of the six expectations for random weights (see :func:`_random_laws`), nz Hermite nodes in z."""
    laws = _random_laws(_spec_key(spec), nb, m, spec)
    off = _offdiag_nodes(*laws["off"], nz)
    joff = _offdiag_nodes(*laws["joff"], nz)
    if spec.name == "paper":
        return _Rules(off, off, joff, joff)
    if spec.name == "iid":
        z, _ = _hermite(nz)
        diag = _offdiag_nodes(*laws["diag_u"], nz)
        n2, n0 = _offdiag_nodes(*laws["jdiag_u2"], nz), _offdiag_nodes(*laws["jdiag_u0"], nz)
        zz = np.tile(z * z, laws["jdiag_u2"][0].size)  # z² at each node of n2 (v-major, z-minor)
        return _Rules(off, diag, joff, _Nodes(np.concatenate([n2.x, n0.x]), np.concatenate([n2.w * zz, n0.w])))
    return _Rules(off, _Nodes(*laws["diag"]), joff, _Nodes(*laws["jdiag"]))


def _spec_key(spec: ModelSpec) -> tuple:
    wk = None if spec.W is None else (spec.W.shape, spec.W.tobytes())
    sk = None if spec.sigma_x is None else spec.sigma_x.tobytes()
    return (spec.name, spec.D, spec.d, spec.rho, spec.sigma, wk, sk)


def _rules(spec: ModelSpec, level: int, nz: int) -> _Rules:
    """Quadrature nodes at ``level`` (0: coarse, 1: fine) with nz Hermite nodes in z."""
    return _rules_cached(_spec_key(spec), level, nz, spec)


@dataclass(frozen=True)
class _PerEntry:
    """Per-entry expectations as numpy functions of N (arrays): value and d/dN, for the six quantities."""

    fro_off: object
    fro_diag: object
    jac_s_off: object
    jac_s_diag: object
    jac_off: object
    jac_diag: object


def _poly_exprs(act: Activation, em: EntryMoments) -> dict:
    """Exact per-entry expectations of a polynomial ψ(x, N) = Σ a_k x^k as sympy expressions in N."""
    a = list(act.coeffs)
    b = [k * a[k] for k in range(1, len(a))]  # ψ' coefficients

    def quad(c, mom):
        acc = sp.Integer(0)
        for k, ck in enumerate(c):
            if ck == 0:
                continue
            for l, cl in enumerate(c):
                if cl == 0:
                    continue
                mkl = mom[k + l]
                if mkl != 0:
                    acc += ck * cl * _rat(mkl)
        return sp.expand(acc)

    out = {"fro_off": quad(a, em.off), "fro_diag": quad(a, em.diag)}
    out["jac_s_off"] = quad(b, em.off) if b else sp.Integer(0)
    out["jac_s_diag"] = quad(b, em.diag) if b else sp.Integer(0)
    out["jac_off"] = quad(b, em.joff) if b else sp.Integer(0)
    out["jac_diag"] = quad(b, em.jdiag) if b else sp.Integer(0)
    return out


def _rat(v) -> sp.Expr:
    if isinstance(v, Fraction):
        return sp.Rational(v.numerator, v.denominator)
    return sp.sympify(v)


# ----------------------------------------------------------------------------- totals over rows


def _row_sums(act: Activation, N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A(N), B(N)): E‖φ‖² = A·E ψ(S_12)² + B·E ψ(S_11)², A = Σ_i c_i²·#off(i), B = Σ_i c_i² (N an integer array)."""
    N = np.asarray(N, dtype=np.float64)
    causal = act.mask == "causal"
    if not act.uses_i:
        A = N * (N - 1) / 2 if causal else N * (N - 1)
        return A, N.copy()
    rf = _lam(act.row_factor)
    A, B = np.empty_like(N), np.empty_like(N)
    for k, n in enumerate(N):
        n_int = round(float(n))
        i = np.arange(1, n_int + 1, dtype=np.float64)
        c2 = np.asarray(rf(0.0, float(n_int), i), dtype=np.float64) * np.ones_like(i)
        A[k] = float(np.sum(c2 * ((i - 1) if causal else (n_int - 1))))
        B[k] = float(np.sum(c2))
    return A, B


# ----------------------------------------------------------------------------- the audit


@dataclass(frozen=True)
class Profile:
    """Exact or quadrature per-entry expectations and totals of one activation under one model, as functions of N."""

    act: Activation
    spec: ModelSpec
    method: str                 # "exact" | "quadrature"
    error_bound: float          # relative, a posteriori (0 for exact)
    _f: dict = field(repr=False, compare=False)        # name -> callable(N array) -> per-entry expectation
    _df: dict = field(repr=False, compare=False)       # name -> callable(N array) -> d/dN of it
    exact_exprs: dict | None = field(default=None, repr=False, compare=False)  # polynomial: sympy in N
    _coarse: dict | None = field(default=None, repr=False, compare=False)     # quadrature of half the order
    z_error: float = 0.0        # relative change of the last Hermite doubling (max over probes)

    def errors(self, N) -> dict:
        """Relative a-posteriori error of E‖φ‖², E‖∂φ/∂S‖², E‖∂φ/∂X‖² at N: |fine − half-order| + Hermite change."""
        if self._coarse is None:
            return {"fro": 0.0, "jac_s": 0.0, "jac": 0.0}
        fine = self.totals(N)
        coarse = Profile(self.act, self.spec, self.method, 0.0, self._coarse, self._df).totals(N)
        return {q: _rel(fine[q], coarse[q]) + self.z_error for q in fine}

    def entries(self, N) -> dict:
        """Per-entry expectations at N (arrays): fro_off, fro_diag, jac_s_off, jac_s_diag, jac_off, jac_diag."""
        N = np.atleast_1d(np.asarray(N, dtype=np.float64))
        return {k: np.asarray(f(N), dtype=np.float64) * np.ones_like(N) for k, f in self._f.items()}

    def totals(self, N) -> dict:
        """{fro, jac_s, jac}: E‖φ‖²_F, E‖∂φ/∂S‖²_F, E‖∂φ/∂X‖²_F at N (arrays)."""
        N = np.atleast_1d(np.asarray(N, dtype=np.float64))
        e = self.entries(N)
        A, B = _row_sums(self.act, N)
        return {q: A * e[f"{q}_off"] + B * e[f"{q}_diag"] for q in ("fro", "jac_s", "jac")}

    def exponents(self, N) -> dict:
        """Local growth exponents ½ d log E‖·‖²/d log N at N, exact derivative (finite difference over rows if i or a mask)."""
        N = np.atleast_1d(np.asarray(N, dtype=np.float64))
        if self.act.uses_i or self.act.mask == "causal":  # sums over rows: integer N only, centred difference
            Ni = np.round(N)
            k = np.maximum(1.0, np.round(0.02 * Ni))
            lo, hi = np.maximum(Ni - k, 1.0), Ni + k
            tl, th = self.totals(lo), self.totals(hi)
            with np.errstate(all="ignore"):
                return {q: 0.5 * (np.log(th[q]) - np.log(tl[q])) / (np.log(hi) - np.log(lo)) for q in tl}
        e = self.entries(N)
        de = {k: np.asarray(f(N), dtype=np.float64) * np.ones_like(N) for k, f in self._df.items()}
        out = {}
        for q in ("fro", "jac_s", "jac"):
            F = N * (N - 1) * e[f"{q}_off"] + N * e[f"{q}_diag"]
            dF = (2 * N - 1) * e[f"{q}_off"] + N * (N - 1) * de[f"{q}_off"] + e[f"{q}_diag"] + N * de[f"{q}_diag"]
            with np.errstate(all="ignore"):
                out[q] = 0.5 * N * dF / F
        return out

    def crossover(self) -> float | None:
        """N* where the off-diagonal entries weigh as much as the diagonal: A(N)·E ψ(S_12)² = B(N)·E ψ(S_11)².

        Without a mask and with ψ independent of N this is N* = 1 + m_diag/m_off exactly. None if the
        off-diagonal share never reaches the diagonal's for N ≤ 10¹² (or if there is no diagonal term).
        """
        if self.method == "exact" and not self.act.uses_N and not self.act.uses_i and self.exact_exprs:
            mo, md = self.exact_exprs["fro_off"], self.exact_exprs["fro_diag"]
            if mo == 0:
                return None
            r = float(md / mo)
            return 1.0 + (2.0 * r if self.act.mask == "causal" else r)
        grid = np.unique(np.round(np.geomspace(1, 1e12, 241)))
        if self.act.uses_i:
            grid = grid[grid <= 2**20]
        e = self.entries(grid)
        A, B = _row_sums(self.act, grid)
        g = A * e["fro_off"] - B * e["fro_diag"]
        if not np.any(g > 0):
            return None
        k = int(np.argmax(g > 0))
        if k == 0:
            return float(grid[0])
        lo, hi, glo, ghi = grid[k - 1], grid[k], g[k - 1], g[k]
        if self.act.uses_i:  # integer N only: log-linear interpolation
            return float(math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * (-glo) / (ghi - glo)))
        from scipy.optimize import brentq

        def gf(n):
            ee = self.entries(np.array([n]))
            a, b = _row_sums(self.act, np.array([n]))
            return float(a[0] * ee["fro_off"][0] - b[0] * ee["fro_diag"][0])

        return float(brentq(gf, lo, hi, xtol=1e-12 * hi, rtol=1e-13))


def _numeric(expr: sp.Expr):
    """numpy function of N for a sympy expression in N (constants broadcast)."""
    f = sp.lambdify(N_, expr, "numpy")

    def call(N):
        ones = np.ones_like(np.asarray(N, dtype=np.float64))
        try:
            with np.errstate(over="ignore"):
                return np.asarray(f(N), dtype=np.float64) * ones
        except OverflowError:  # exact rationals beyond float64 (--sigma 1e300): infinite, refused by audit()
            return math.inf * ones

    return call


def profile(act: Activation, spec: ModelSpec, *, quadrature: bool = False) -> Profile:
    """Exact (polynomial) or quadrature per-entry expectations of ``act`` under ``spec`` (``quadrature``: force it)."""
    if act.normalize == "row" or not act.separable:
        raise InputError("row-normalised or non-separable i-dependent activations have no closed form: "
                         "use empirics.audit (Monte Carlo)")
    if act.polynomial and not quadrature:
        K = 2 * (len(act.coeffs) - 1)
        em = entry_moments(spec, max(K, 0))
        ex = _poly_exprs(act, em)
        f = {k: _numeric(v) for k, v in ex.items()}
        df = {k: _numeric(sp.diff(v, N_)) for k, v in ex.items()}
        return Profile(act, spec, "exact", 0.0, f, df, exact_exprs=ex)
    return _quadrature_profile(act, spec)


def _quadrature_profile(act: Activation, spec: ModelSpec) -> Profile:
    psi = act.shape
    fns = {"fro": (_lam(psi), _lam(sp.diff(psi, N_))),
           "jac": (_lam(sp.diff(psi, x_)), _lam(sp.diff(psi, x_, N_)))}

    def evaluate(rules: _Rules) -> tuple[dict, dict]:
        f, df = {}, {}
        for q, nodes, which in (("fro_off", rules.off, "fro"), ("fro_diag", rules.diag, "fro"),
                                ("jac_s_off", rules.off, "jac"), ("jac_s_diag", rules.diag, "jac"),
                                ("jac_off", rules.joff, "jac"), ("jac_diag", rules.jdiag, "jac")):
            g, gN = fns[which]

            def val(N, g=g, nodes=nodes):
                N = np.atleast_1d(np.asarray(N, dtype=np.float64))
                vals = g(nodes.x[None, :], N[:, None])  # (G, K)
                return (vals * vals) @ nodes.w

            def dval(N, g=g, gN=gN, nodes=nodes):
                N = np.atleast_1d(np.asarray(N, dtype=np.float64))
                return (2 * g(nodes.x[None, :], N[:, None]) * gN(nodes.x[None, :], N[:, None])) @ nodes.w

            f[q], df[q] = val, dval
        return f, df

    probe = np.array([2.0, 14.0, 196.0, 4096.0, 2.0**20])
    prev, z_err = None, math.inf
    for nz in Z_LEVELS:  # double the Hermite order until the expectations stop moving
        best = evaluate(_rules(spec, 1, nz))
        vals = {k: v(probe) for k, v in best[0].items()}
        if prev is not None:
            z_err = max(_rel(vals[k], prev[k]) for k in vals)
            if z_err <= Z_RTOL:
                break
        prev = vals
    coarse = evaluate(_rules(spec, 0, nz))  # fewer nodes in the laws of v and S_11
    cvals = {k: v(probe) for k, v in coarse[0].items()}
    err = float(z_err + max(_rel(vals[k], cvals[k]) for k in vals))
    return Profile(act, spec, "quadrature", err, best[0], best[1], _coarse=coarse[0], z_error=float(z_err))


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(all="ignore"):
        r = np.where(scale > 0, np.abs(a - b) / scale, 0.0)
    return float(np.max(r)) if r.size else 0.0


# ----------------------------------------------------------------------------- worst case


WORST_N = (2.0**30, 2.0**31)  # where the asymptotic worst-case exponent is read (i-dependent: 2**16, 2**17)


def worst_case(act: Activation, B: float = 1.0, N=196) -> dict:
    """Worst case over token-bounded inputs (‖x_i‖ ≤ r, |S_ij| ≤ ‖W‖₂ r² = B): exponents of the bound and of a witness.

    Element-wise φ: ‖φ(S)‖_F ≤ (Σ_i n_i max_{|s|≤B} φ(s, N, i)²)^{½} (n_i visible entries of row i), and
    ‖∂φ/∂S‖_F, ‖∂φ/∂X‖_F likewise with max|φ'| (‖∂φ/∂X‖²_F ≤ max φ'² r²‖W‖₂²[2N(N−1) + 4N]). The aligned
    input (every x_i = r u, u a unit eigenvector of W_s: every S_ij = s*) attains N·|φ(s*)|; it attains
    the rate when |φ(s*, N)| / max|φ| stays bounded below as N grows, which is checked numerically.
    Row-normalised φ ≥ 0: each row is a probability vector, so ‖P‖_F ≤ √N (exponent ½) always; if
    min_{|s|≤B} φ > 0 then P_ij ≤ R/N (R = max φ / min φ) and ‖P‖_F ≤ √R: exponent 0, attained by equal
    logits (‖P‖_F = 1). Exponents are asymptotic (N = 2³⁰ → 2³¹; with a row index 2¹⁶ → 2¹⁷) and local at ``N``.
    """
    B = positive_float("B", B)
    s = np.concatenate([np.linspace(-B, B, 4001), [0.0]])
    f = _lam(act.expr)
    fp = _lam(sp.diff(act.expr, x_))
    big = (2.0**16, 2.0**17) if act.uses_i else WORST_N
    rf = _lam(act.row_factor) if act.uses_i and act.separable else None
    s_coarse = np.concatenate([np.linspace(-B, B, 201), [0.0]])

    def upper2(g, n):  # Σ_i n_i max_s g(s, n, i)²
        n = float(n)
        if act.uses_i:
            i = np.arange(1, int(n) + 1, dtype=np.float64)
            if rf is not None:  # φ = c(N, i)·ψ(x, N): max over s once, times (c_i/c_1)²
                m = float(np.max(np.asarray(g(s, n, 1.0)) ** 2)) * np.asarray(rf(0.0, n, i)) * np.ones_like(i)
            else:
                m = np.zeros_like(i)
                for blk in range(0, i.size, 2048):
                    ii = i[blk:blk + 2048]
                    m[blk:blk + 2048] = np.max(np.asarray(g(s_coarse[None, :], n, ii[:, None])) ** 2, axis=1)
            cnt = i if act.mask == "causal" else np.full_like(i, n)
            return float(np.sum(cnt * m))
        m = float(np.max(np.asarray(g(s, n, 1.0)) ** 2))
        cnt = n * (n + 1) / 2 if act.mask == "causal" else n * n
        return cnt * m

    def witness2(g, n, s_star):
        n = float(n)
        if act.uses_i:
            i = np.arange(1, int(n) + 1, dtype=np.float64)
            cnt = i if act.mask == "causal" else np.full_like(i, n)
            return float(np.sum(cnt * np.asarray(g(s_star, n, i)) ** 2))
        cnt = n * (n + 1) / 2 if act.mask == "causal" else n * n
        return cnt * float(np.asarray(g(s_star, n, 1.0))) ** 2

    def exp_of(fun, n1, n2):
        a, b = fun(n1), fun(n2)
        if a <= 0 or b <= 0:
            return -math.inf if b < a or b == 0 else math.nan
        return 0.5 * math.log(b / a) / math.log(n2 / n1)

    out = {"B": B, "normalize": act.normalize}
    if act.normalize == "row":
        vals = np.asarray(f(s[None, :], np.array([[2.0], [196.0], [4096.0], [2.0**20]]), 1.0))
        positive = bool(np.all(vals.min(axis=1) > 0))
        out.update({
            "fro": {"exponent": 0.0 if positive else None, "bracket": [0.0, 0.0] if positive else [0.0, 0.5],
                    "witness": "equal logits (every S_ij equal): ‖P‖_F = 1",
                    "why": ("min φ > 0 on [−B, B]: P_ij ≤ R/N, ‖P‖_F ≤ √R" if positive else
                            "φ vanishes in [−B, B]: rows can approach one-hot (‖P‖_F ≤ √N); not pinned")},
            "jac_s": None, "jac": None,
        })
        out["exponent"] = out["fro"]["exponent"] if positive else 0.5
        out["exponent_is_exact"] = positive
        return out
    for name, g in (("fro", f), ("jac_s", fp), ("jac", fp)):
        e_up = exp_of(lambda n, g=g: upper2(g, n), *big)
        e_loc = exp_of(lambda n, g=g: upper2(g, n), max(float(N) / 1.05, 1.0), float(N) * 1.05) if N > 1 else math.nan
        # witness: the s* that maximises |g| at the large N, held fixed as N grows
        gv = np.abs(np.asarray(g(s, big[0], 1.0)))
        s_star = float(s[int(np.argmax(gv))])
        e_wit = exp_of(lambda n, g=g, s_star=s_star: witness2(g, n, s_star), *big)
        attains = bool(math.isfinite(e_up) and math.isfinite(e_wit) and abs(e_wit - e_up) < 1e-3)
        out[name] = {"exponent": e_up, "local_exponent_at_N": e_loc, "witness_exponent": e_wit, "s_star": s_star,
                     "witness": f"aligned tokens x_i = r·u (uᵀW_s u·r² = s* = {s_star:.4g}): every S_ij = s*",
                     "witness_attains_rate": attains}
    out["exponent"] = out["fro"]["exponent"]
    out["exponent_is_exact"] = out["fro"]["witness_attains_rate"]
    return out


# ----------------------------------------------------------------------------- one audit


def _monomial(act: Activation):
    """(p, c(N)) if φ = c(N)·x^p with 1 ≤ p ≤ 12, no mask and no row index; else None."""
    if not act.polynomial or act.uses_i or act.mask != "none":
        return None
    nz = [(k, c) for k, c in enumerate(act.coeffs) if c != 0]
    if len(nz) != 1 or nz[0][0] < 1:
        return None
    return nz[0]


@dataclass(frozen=True)
class Audit:
    """The audit of one activation under one model at one N (closed form or quadrature)."""

    activation: str
    normalize: str
    mask: str
    model: str
    N: int
    D: int | None
    d: int | None
    method: str               # "exact" | "quadrature"
    error_bound: float        # relative a-posteriori error of E‖φ‖², E‖∂φ/∂S‖², E‖∂φ/∂X‖² at N, the largest (0 exact)
    expected_fro2: float      # E‖φ(S)‖²_F
    expected_jac_s_fro2: float  # E‖∂φ(S)/∂S‖²_F
    expected_jac_fro2: float  # E‖∂φ(S)/∂X‖²_F (paper model: w.r.t. (A, B))
    growth_exponent: float    # ½ d log E‖φ‖²/d log N at N
    growth_exponent_jac_s: float
    growth_exponent_jac: float
    sup_growth_exponent: float  # max over N ∈ [2, 2²⁰] of the local exponent (norm and both Jacobians)
    sup_growth_at: tuple        # (quantity "fro" | "jac_s" | "jac", N) where that maximum is
    asymptotic_exponent: float  # local exponent at N = 2²⁰ (norm)
    asymptotic_exponent_all: float  # the largest local exponent at N = 2²⁰ over the norm and both Jacobians (O(·))
    crossover_n: float | None
    constant_vs_softmax: float  # √E‖φ‖² / √N (softmax's bound, Thm 4.1)
    constant_jac_s_vs_softmax: float  # √E‖∂φ/∂S‖² / (√N/2) (softmax's sharp Jacobian bound w.r.t. S)
    matching_scale: float     # c(N) = √(N / E‖φ‖²): c·φ has E-RMS norm √N
    matching_scale_exponent: float  # d log c / d log N = ½ − e(N)
    worst_case_exponent: float | None
    worst_case: dict
    error_bounds: dict = field(default_factory=dict)  # {fro, jac_s, jac}: relative error of each at N
    exact_fro2: object = None  # sympy exact value (polynomials without a mask)
    m_off: float = math.nan    # per-entry E ψ(S_12)² and E ψ(S_11)² at N
    m_diag: float = math.nan

    def as_dict(self) -> dict:
        from dataclasses import asdict

        d = asdict(self)
        d.pop("exact_fro2")
        return d


def audit(act: Activation, spec: ModelSpec, N: int, *, prof: Profile | None = None) -> Audit:
    """Closed-form (polynomial) or quadrature audit of ``act`` under ``spec`` at ``N`` (see module docstring)."""
    from theory.moments import _size

    N = _size("N", N)
    prof = prof or profile(act, spec)
    tot = prof.totals([N])
    ex = prof.exponents([N])
    grid = np.array(N_GRID)
    eg = prof.exponents(grid)
    finite = [q for q in ("fro", "jac_s", "jac") if np.any(np.isfinite(eg[q]))]  # a constant φ has no Jacobian
    if not finite:
        raise InputError(f"the expectations of {act.text!r} under this model are 0 or beyond float64's range at every N "
                         "(underflow or overflow); rescale the activation or the weights (--sigma)")
    sup_q = max(finite, key=lambda q: float(np.nanmax(eg[q])))
    sup = float(np.nanmax(eg[sup_q]))
    sup_n = float(grid[int(np.nanargmax(eg[sup_q]))])
    fro2 = float(tot["fro"][0])
    exact = None
    if prof.exact_exprs is not None and not act.uses_i and act.mask == "none":
        exact = sp.nsimplify(N * (N - 1)) * prof.exact_exprs["fro_off"].subs(N_, N) + N * prof.exact_exprs["fro_diag"].subs(N_, N)
        exact = sp.simplify(exact)
        fro2 = float(exact)
    jac2 = float(tot["jac"][0])
    if exact is not None:
        ej = prof.exact_exprs
        jac2 = float(sp.nsimplify(N * (N - 1)) * ej["jac_off"].subs(N_, N) + N * ej["jac_diag"].subs(N_, N))
    for k, v in (("E‖φ‖²", fro2), ("E‖∂φ/∂X‖²", jac2)):
        if not math.isfinite(v):
            raise InputError(f"{k} overflows float64 for {act.text!r} at N = {N}; rescale the activation")
    e_n = prof.entries([N])
    errs = {q: float(v) for q, v in prof.errors([N]).items()}
    wc = worst_case(act, N=N)
    e = float(ex["fro"][0])
    e_s, e_j = float(ex["jac_s"][0]), float(ex["jac"][0])
    cross = prof.crossover()
    mono = _monomial(act)
    if mono is not None and prof.method == "exact":  # c(N)·x^p: the very numbers of theory.moments (sapa exact)
        from theory.moments import exact_moments

        p, c = mono
        em = exact_moments(p, spec.name, N, spec.D, spec.d, rho=float(spec.rho), sigma=float(spec.sigma),
                           W=spec.W, sigma_x=spec.sigma_x)
        dlogc = float(sp.simplify(N_ * sp.diff(c, N_) / c).subs(N_, N)) if c.has(N_) else 0.0
        e = em.growth_exponent + (0.5 + dlogc)
        e_j = em.growth_exponent_jac + (0.5 + dlogc)
        cross = em.crossover_n
    return Audit(
        activation=act.text, normalize=act.normalize, mask=act.mask, model=spec.name, N=N, D=spec.D, d=spec.d,
        method=prof.method, error_bound=max(errs.values()), error_bounds=errs,
        expected_fro2=fro2, expected_jac_s_fro2=float(tot["jac_s"][0]), expected_jac_fro2=jac2,
        growth_exponent=e, growth_exponent_jac_s=e_s, growth_exponent_jac=e_j,
        sup_growth_exponent=sup, sup_growth_at=(sup_q, sup_n), asymptotic_exponent=float(eg["fro"][-1]),
        asymptotic_exponent_all=max(float(eg[q][-1]) for q in finite), crossover_n=cross,
        constant_vs_softmax=math.sqrt(fro2 / N), constant_jac_s_vs_softmax=math.sqrt(float(tot["jac_s"][0])) / (math.sqrt(N) / 2),
        matching_scale=math.sqrt(N / fro2) if fro2 > 0 else math.inf, matching_scale_exponent=0.5 - e,
        worst_case_exponent=wc["exponent"], worst_case=wc, exact_fro2=exact,
        m_off=float(e_n["fro_off"][0]), m_diag=float(e_n["fro_diag"][0]),
    )
