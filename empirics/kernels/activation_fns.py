"""φ, φ' = ∂φ/∂x (and log φ, (log φ)' for an exp-type row-normalised φ) as numpy functions of (x, N, i) from an audited φ.

What the exact kernels evaluate for an activation parsed by :func:`sapa.theory.activation_audit.parse_activation`: the
Monte Carlo of ``sapa audit`` (:mod:`sapa.empirics.experiments.activation_sampling`) and the norms of ``sapa norms --activation
EXPR`` (:mod:`sapa.empirics.kernels.expr_norms`). A softmax-like φ = exp(τx) row-normalised is evaluated through
log φ = τx, stably.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import sympy as sp
import torch

from sapa.common.validate import InputError
from sapa.theory.activation import LAMBDIFY_CACHE
from sapa.theory.activation_audit import Activation, x_

__all__ = ["activation_functions", "torch_activation"]


@dataclass(frozen=True)
class _Fns:
    f: object     # φ(x, N, i)
    fp: object    # ∂φ/∂x
    logf: object  # log φ (row-normalised exp-type φ), or None
    dlogf: object


def _np(expr: sp.Expr):
    from sapa.theory.activation_audit import _lam

    return _lam(expr)


def activation_functions(act: Activation) -> _Fns:
    """φ, φ' (and log φ, (log φ)' for exp-type row-normalised φ) as numpy functions of (x, N, i)."""
    return _functions(act.expr, act.normalize)


@functools.lru_cache(maxsize=LAMBDIFY_CACHE)
def _functions(expr: sp.Expr, normalize: str) -> _Fns:
    """:func:`activation_functions` of (φ, normalisation), once per process: the derivatives and the log form are
    sympy work (a compare or a sweep asks again for every N and chunk), and the functions are pure."""
    logf = dlogf = None
    if normalize == "row" and expr.has(sp.exp):
        L = sp.expand_log(sp.log(expr), force=True)
        if not L.has(sp.log) or all(a.has(sp.exp) is False for a in L.atoms(sp.log)):
            L = sp.simplify(L)
        if not L.has(sp.exp):  # e.g. exp(x/8) -> x/8: softmax evaluated stably
            logf, dlogf = _np(L), _np(sp.diff(L, x_))
    return _Fns(_np(expr), _np(sp.diff(expr, x_)), logf, dlogf)


@functools.lru_cache(maxsize=32)
def torch_activation(text: str, normalize: str = "none"):
    """φ(x, N, i, j) of ``text`` (:func:`sapa.theory.activation.parse_activation`) as a torch function of (S, N, i, j) tensors.
    ``normalize="row"``: a ψ valid only row-normalised (exp(x), softmax's) is accepted too.

    sympy's torch printer, with Max / Min over tensors and constants evaluated to floats; erfc as 1 − erf.
    An expression the printer cannot translate is one :class:`InputError`.
    """
    import sympy as sp

    from sapa.theory.activation import i_, j_, N_, parse_activation, x_

    try:
        act = parse_activation(text)
    except InputError:
        if normalize != "row":
            raise
        act = parse_activation(text, "row")  # e.g. exp(x): refused element-wise (it overflows), a softmax row-normalised
    expr = act.expr.replace(sp.erfc, lambda a: 1 - sp.erf(a)).evalf()

    def as_t(v):
        return v if torch.is_tensor(v) else torch.tensor(float(v))

    mods = [{"max": lambda *a: functools.reduce(torch.maximum, map(as_t, a)),
             "min": lambda *a: functools.reduce(torch.minimum, map(as_t, a))}, "torch"]
    try:
        f = sp.lambdify((x_, N_, i_, j_), expr, modules=mods)
        one = torch.tensor(1.0, dtype=torch.float64)
        probe = f(torch.linspace(-2, 2, 5, dtype=torch.float64), torch.tensor(4.0, dtype=torch.float64), one, one)
        as_t(probe)
    except Exception as exc:  # noqa: BLE001 - the printer's or torch's refusal, in one line
        raise InputError(f"activation {text!r} cannot be trained (no torch translation: {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:160]})") from None
    return f
