"""Where E φ(S)² or E φ'(S)² is infinite: non-integrable singularities of φ or ∂φ/∂x on the real line.

The logits S_ij have a density that is positive on the whole real line (off-diagonal: a Gaussian scale
mixture), so E g(S)² = ∞ as soon as g² is not integrable near one real point c. Such points are
found symbolically, never on a grid (a pole at 1/40 falls between the grid points of
:data:`sapa.theory.activation_audit.X_CHECK`): sympy's ``singularities`` of g in x over the reals (for a periodic
family, e.g. tan's π/2 + nπ, three members are checked), at each checked N, then at each point c the
one-sided limits of (x − c)·g(x)²: g² is integrable near c if both are 0 (|x|^(−2/3), log²|x|), and
not if either is non-zero or infinite (1/x, 1/|x|, tan). A limit sympy cannot take counts as not
integrable. Everything here runs under a time cap (:data:`SECONDS`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

__all__ = ["Singularity", "SECONDS", "nonintegrable", "undefined_part", "index_poles"]

SECONDS = 30.0
N_VALUES = (2, 196)  # the N at which points depending on N (1/(x² − N)) are checked
MAX_POINTS = 12


@dataclass(frozen=True)
class Singularity:
    """g² (g = φ or ∂φ/∂x) is not integrable near x = ``point`` (at N = ``n``)."""

    of: str        # "φ" or "∂φ/∂x"
    point: float
    text: str      # the point as sympy writes it
    n: float

    def describe(self) -> str:
        return f"{self.of}² is not integrable near x = {self.text} (N = {self.n:g})"


def nonintegrable(expr: sp.Expr, x: sp.Symbol, N: sp.Symbol, others: dict | None = None) -> tuple[Singularity, ...]:
    """The non-integrable singularities of ``expr`` and of ∂expr/∂x on the real line (``others``: values of other symbols)."""
    from sapa.common.deadline import deadline

    with deadline(SECONDS, f"looking for the singularities of {sp.sstr(expr)[:60]}"):
        found = []
        for of, g in (("φ", expr), ("∂φ/∂x", sp.diff(expr, x))):
            g = g.subs(others or {})
            for n in N_VALUES:
                gn = g.subs(N, n)
                for c in _points(gn, x):
                    if not _integrable(gn, x, c):
                        found.append(Singularity(of, float(c), sp.sstr(c), float(n)))
                        break
                if found and found[-1].of == of:
                    break
            if found:  # φ² not integrable: so is (∂φ/∂x)², as far as anyone reads the report
                break
        return tuple(found)


def _points(g: sp.Expr, x: sp.Symbol) -> list:
    """Real singular points of g (finite sets as they are; three members of each periodic family)."""
    from sympy.calculus.singularities import singularities

    try:
        s = singularities(g, x, sp.S.Reals)
    except (NotImplementedError, TypeError, ValueError, AttributeError):
        return []
    return [c for c in _members(s) if c.is_real is not False][:MAX_POINTS]


def _members(s: sp.Set) -> list:
    if isinstance(s, sp.FiniteSet):
        return [c for c in s if c.is_number]
    if isinstance(s, sp.Union):
        return [c for part in s.args for c in _members(part)]
    if isinstance(s, sp.ImageSet) and len(s.lamda.variables) == 1 and s.base_sets[0] == sp.S.Integers:
        return [s.lamda(k) for k in (0, 1, -1)]
    return []


def _integrable(g: sp.Expr, x: sp.Symbol, c: sp.Expr) -> bool:
    """Both one-sided limits of (x − c)·g² at c are 0."""
    for d in ("+", "-"):
        try:
            lim = sp.limit((x - c) * g**2, x, c, d)
        except (NotImplementedError, ValueError, TypeError, AttributeError, RecursionError):
            return False
        if lim != 0:
            return False
    return True


def undefined_part(expr: sp.Expr, x: sp.Symbol, N: sp.Symbol, others: dict | None = None) -> str | None:
    """Where, on a stretch of the real line of positive length, ``expr`` is undefined (sqrt(100 − x): x > 100); None if nowhere.

    From sympy's ``continuous_domain`` over the reals at each checked N; isolated points (poles) are
    :func:`nonintegrable`'s business. None also when sympy cannot tell (the grid checks still run).
    """
    from sympy.calculus.util import continuous_domain

    from sapa.common.deadline import deadline

    with deadline(SECONDS, f"finding the domain of {sp.sstr(expr)[:60]}"):
        g = expr.subs(others or {})
        for n in N_VALUES if N in g.free_symbols else N_VALUES[:1]:  # without N, one N says it all
            try:
                gap = sp.Complement(sp.S.Reals, continuous_domain(g.subs(N, n), x, sp.S.Reals))
                size = sp.sympify(gap.measure)
            except (NotImplementedError, TypeError, ValueError, AttributeError):
                continue
            if size.is_extended_positive:  # oo included
                return f"{sp.sstr(gap)} at N = {n}"
    return None


def index_poles(expr: sp.Expr, x: sp.Symbol, N: sp.Symbol, i: sp.Symbol, j: sp.Symbol) -> tuple[tuple[str, int], ...]:
    """The integer lengths or positions where φ has a pole: (("N", 1000),) for x/(N − 1000), (("i", 5),) for x/(i − 5).

    sympy's singularities of φ in N (at x = 1, i = 1, j = 2), in i and in j (at x = 1, N symbolic), kept when they
    are integers ≥ 1 (N ≥ 2): there φ(S_ij) is infinite for every logit, so E‖φ(S)‖²_F = ∞ at that N (for a
    position, at every N ≥ it). A pole between integers leaves every admissible φ finite and is not listed.
    """
    from sympy.calculus.singularities import singularities

    from sapa.common.deadline import deadline

    found = []
    with deadline(SECONDS, f"looking for poles of {sp.sstr(expr)[:60]} in N, i and j"):
        for var, at in ((N, {x: 1, i: 1, j: 2}), (i, {x: 1, j: 1}), (j, {x: 1, i: 1})):
            if var not in expr.free_symbols:
                continue
            g = expr.subs(at)
            try:
                pts = singularities(g, var, sp.S.Reals)
            except (NotImplementedError, TypeError, ValueError, AttributeError):
                continue
            low = 2 if var == N else 1
            for c in _members(pts)[:MAX_POINTS]:
                if c.is_integer and int(c) >= low:
                    found.append((str(var), int(c)))
    return tuple(sorted(set(found)))
