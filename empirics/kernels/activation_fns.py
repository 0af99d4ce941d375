"""φ, φ' = ∂φ/∂x (and log φ, (log φ)' for an exp-type row-normalised φ) as numpy functions of (x, N, i) from an audited φ.

What the exact kernels evaluate for an activation parsed by :func:`sapa.theory.activation_audit.parse_activation`: the
Monte Carlo of ``sapa audit`` (:mod:`sapa.empirics.experiments.activation_sampling`) and the norms of ``sapa norms --activation
EXPR`` (:mod:`sapa.empirics.kernels.expr_norms`). A softmax-like φ = exp(τx) row-normalised is evaluated through
log φ = τx, stably.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from sapa.theory.activation_audit import Activation, x_

__all__ = ["activation_functions"]


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
    logf = dlogf = None
    if act.normalize == "row" and act.expr.has(sp.exp):
        L = sp.expand_log(sp.log(act.expr), force=True)
        if not L.has(sp.log) or all(a.has(sp.exp) is False for a in L.atoms(sp.log)):
            L = sp.simplify(L)
        if not L.has(sp.exp):  # e.g. exp(x/8) -> x/8: softmax evaluated stably
            logf, dlogf = _np(L), _np(sp.diff(L, x_))
    return _Fns(_np(act.expr), _np(sp.diff(act.expr, x_)), logf, dlogf)
