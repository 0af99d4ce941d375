"""E‖(XWXᵀ)^p‖²_F for the matrix-power reading of x^p (arXiv 2410.18613, Thm 4.2 / 4.4 read as S^p).

The paper's x^p is element-wise in its experiments; read as a matrix power,
φ(S) = S^p = X W (G W)^{p-1} Xᵀ (G = XᵀX) and, for rows x_i ~ N(0, I_D),
E‖S^p‖²_F is an exact polynomial in N whose coefficients are traces of words in W, Wᵀ
(Isserlis/Wick over the 4p vector slots; exact for p ≤ :data:`P_MAX_MATRIX_POWER_EXACT`,
leading order N^{2p}‖W^p‖²_F beyond). ‖S^p/√N‖_F then grows like N^{p-½}, not √N.
The element-wise moments are in :mod:`sapa.theory.moments`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy as sp

from sapa.common.validate import InputError, finite_matrix, positive_int
from sapa.theory.gaussian import EXACT_MAX_DIM, to_exact
from sapa.theory.moments import N_, _sym, _to_float, _validate_p

__all__ = ["P_MAX_MATRIX_POWER_EXACT", "MatrixPowerGrowth", "matrix_power_growth", "matrix_power_symbolic"]

# Wick enumeration of E‖(XWXᵀ)^p‖²: (4p-1)!! pairings, 10395 at p = 3, 2027025 at p = 4.
P_MAX_MATRIX_POWER_EXACT = 3


def _canonical_word(word: str) -> str:
    """Canonical representative of tr(word) under rotation and transposition (W ↔ T, reversed)."""
    tw = "".join("T" if c == "W" else "W" for c in reversed(word))
    n = len(word)
    return max(max(w[i:] + w[:i] for i in range(n)) for w in (word, tw))  # 'W' > 'T': W-first


def _matchings(slots: tuple):
    if not slots:
        yield ()
        return
    a = slots[0]
    for i in range(1, len(slots)):
        rest = slots[1:i] + slots[i + 1 :]
        for m in _matchings(rest):
            yield ((a, slots[i]),) + m


@lru_cache(maxsize=None)
def _matrix_power_terms(p: int) -> tuple:
    """E‖(XWXᵀ)^p‖²_F = Σ count·N^c·tr(word(W)), as ((c, word, count), ...), by Wick.

    ‖S^p‖² = tr(S^p (Sᵀ)^p) = Σ_{a_0..a_{2p-1}} Π_k x_{a_k}ᵀ W_k x_{a_{k+1}} (cyclic), W_k = W for
    k < p, Wᵀ after. Isserlis over the 4p vector slots: each pairing contracts indices into
    closed words (a product of traces) and forces the paired tokens equal, leaving N^c free
    token sums, c = number of connected position classes. Exact polynomial in N.
    """
    n = 2 * p
    mats = ["W"] * p + ["T"] * p
    pos = [k if s == 0 else (k + 1) % n for k in range(n) for s in (0, 1)]  # slot 2k = L_k, 2k+1 = R_k
    counts: dict = {}
    for match in _matchings(tuple(range(2 * n))):
        partner = {}
        for a, b in match:
            partner[a], partner[b] = b, a
        parent = list(range(n))

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for a, b in match:
            ra, rb = find(pos[a]), find(pos[b])
            if ra != rb:
                parent[ra] = rb
        c = len({find(x) for x in range(n)})
        seen = [False] * (2 * n)
        words = []
        for start in range(2 * n):
            if seen[start]:
                continue
            w, s = [], start
            while True:
                seen[s] = True
                k, side = divmod(s, 2)
                if side == 0:  # L_k → R_k reads W_k
                    w.append(mats[k])
                    s2 = 2 * k + 1
                else:  # R_k → L_k reads W_kᵀ
                    w.append("T" if mats[k] == "W" else "W")
                    s2 = 2 * k
                seen[s2] = True
                s = partner[s2]
                if s == start:
                    break
            words.append(_canonical_word("".join(w)))
        key = (c, tuple(sorted(words)))
        counts[key] = counts.get(key, 0) + 1
    return tuple((c, ws, cnt) for (c, ws), cnt in sorted(counts.items()))


def _word_symbol(word: str) -> sp.Symbol:
    return sp.Symbol("tr(" + " ".join("W" if ch == "W" else "Wt" for ch in word) + ")", real=True)


def matrix_power_symbolic(p) -> sp.Expr:
    """E‖(XWXᵀ)^p‖²_F, x_i ~ N(0, I_D), as an exact polynomial in N and traces tr(words in W, Wᵀ) (p ≤ 3).

    >>> matrix_power_symbolic(1)
    N**2*tr(W Wt) + N*tr(W W) + N*tr(W)**2
    """
    p = positive_int("p", p)
    if p > P_MAX_MATRIX_POWER_EXACT:
        raise InputError(f"exact matrix-power moments need p ≤ {P_MAX_MATRIX_POWER_EXACT} ((4p-1)!! Wick pairings), got {p}")
    return _symbolic(p)


@lru_cache(maxsize=None)
def _symbolic(p: int) -> sp.Expr:
    """:func:`matrix_power_symbolic` of a validated p, expanded once per process (p ≤ 3: three entries)."""
    expr = 0
    for c, words, cnt in _matrix_power_terms(p):
        term = cnt * N_**c
        for w in words:
            term = term * _word_symbol(w)
        expr = expr + term
    return sp.expand(expr)


@lru_cache(maxsize=None)
def _symbolic_text(p: int) -> str:
    """The printed Wick polynomial of :func:`matrix_power_growth`'s formula (sympy's printer: once per p)."""
    return str(matrix_power_symbolic(p))


@dataclass(frozen=True)
class MatrixPowerGrowth:
    """E‖(XWXᵀ)^p‖²_F for the matrix-power reading of x^p, and its growth in N."""

    p: int
    D: int
    exact: bool  # True: `poly` is the exact polynomial in N; False: leading order only
    poly: object  # sympy polynomial in N (exact for p ≤ 3), else the leading term
    leading_coeff: object  # ‖W^p‖²_F: E‖S^p‖² = leading_coeff·N^{2p} + O(N^{2p-1})
    N: int | None
    expected_fro2: float | None  # value of `poly` at N
    growth_exponent: float | None  # d log √(E‖S^p‖²/N) / d log N at N (from `poly`)
    asymptotic_exponent: float  # p - ½: ‖S^p/√N‖ grows like N^{p-½}, not √N
    formula: str


def matrix_power_growth(p, W, N=None) -> MatrixPowerGrowth:
    """E‖(XWXᵀ)^p‖²_F = Σ_c N^c·(trace polynomial in W) (exact, p ≤ 3) ~ N^{2p}‖W^p‖²_F.

    S^p = X W (GW)^{p-1} Xᵀ with G = XᵀX ≈ N·I_D for N ≫ D, hence the leading term
    N^{2p} tr(W^p (W^p)ᵀ); lower powers of N carry larger trace invariants (e.g. p = 1:
    N²‖W‖²_F + N(tr(W²) + tr(W)²)), so the leading order is reached only for N ≫ D-ish.

    Args:
      p: matrix power, 1 ≤ p ≤ P_MAX (exact polynomial for p ≤ 3, leading order beyond).
      W: (D, D) weight matrix (exact arithmetic for int/sympy or D ≤ 32).
      N: optional sequence length at which to evaluate.
    """
    p = _validate_p(p)
    if isinstance(W, sp.MatrixBase):
        Wa = to_exact(W)
    else:
        Wa = finite_matrix("W", W, (None, None))
        if np.issubdtype(np.asarray(W).dtype, np.integer) or Wa.shape[0] <= EXACT_MAX_DIM:
            Wa = to_exact(np.asarray(W))
    if Wa.shape[0] != Wa.shape[1]:
        raise InputError(f"W must be square (D, D), got shape {Wa.shape}")
    D = Wa.shape[0]
    N = None if N is None else positive_int("N", N)
    exact = Wa.dtype == object
    mm = (lambda X, Y: X.dot(Y)) if exact else (lambda X, Y: X @ Y)
    Wp = Wa
    for _ in range(p - 1):
        Wp = mm(Wp, Wa)
    lead = _sym(sum(x * x for x in Wp.ravel())) if exact else float(np.sum(Wp * Wp))
    if p <= P_MAX_MATRIX_POWER_EXACT:
        products: dict = {"W": Wa, "T": Wa.T}

        def mat(word):  # the product of the word's letters, from its cached prefix: (D, D)
            if word not in products:
                products[word] = mm(mat(word[:-1]), products[word[-1]])
            return products[word]

        traces: dict = {}

        def tr(word):  # tr(M_u M_v) = Σ_ij (M_u)_ij (M_v)_ji for word = uv: no product of the halves is formed
            if word not in traces:
                if len(word) == 1:
                    H = np.diagonal(Wa)  # (D,)
                else:
                    k = (len(word) + 1) // 2
                    H = mat(word[:k]) * mat(word[k:]).T  # (D, D) element-wise
                traces[word] = _sym(sum(H.ravel())) if exact else float(np.sum(H))
            return traces[word]

        poly = 0
        for c, words, cnt in _matrix_power_terms(p):
            term = cnt * N_**c
            for w in words:
                term = term * tr(w)
            poly = poly + term
        poly = sp.expand(poly)
        formula = f"exact Wick polynomial: E‖(XWXᵀ)^{p}‖² = " + _symbolic_text(p)
    else:
        poly = lead * N_ ** (2 * p)
        formula = f"LEADING ORDER ONLY: E‖(XWXᵀ)^{p}‖² ≈ N^{2 * p}·‖W^{p}‖²_F (G = XᵀX ≈ N I_D, N ≫ D)"
    val = gexp = None
    if N is not None:
        f = poly.subs(N_, N)
        val = _to_float(f)
        fp = sp.diff(poly, N_).subs(N_, N)
        gexp = _to_float(sp.Rational(1, 2) * (N * fp / f - 1)) if f != 0 else math.nan
    return MatrixPowerGrowth(
        p=p,
        D=D,
        exact=p <= P_MAX_MATRIX_POWER_EXACT,
        poly=poly,
        leading_coeff=lead,
        N=N,
        expected_fro2=val,
        growth_exponent=gexp,
        asymptotic_exponent=p - 0.5,
        formula=formula,
    )
