"""Windows of N where a local growth exponent exceeds its edge: every one, with its boundaries and peak.

A HOLDS_IN_REGIME verdict rests on a region of N, so the entry states the region: the rate of an attention
norm (arXiv 2410.18613, Cor 4.3 / 4.5, and the other papers' scale rules) is judged from a practical
minimum N (``sapa.rules.like_softmax.N_MIN`` = 16 unless a claim sets its own), and every window where the local
exponent e(N) = ½ d log E‖·‖²/d log N of the norm or a Jacobian exceeds ½ + TOL is reported — below the
minimum as well as above it. Boundaries are refined by bisection in log N on the profile's own exponents.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["exponent_windows", "windows_text"]

GRID_POINTS = 241          # log-spaced N per window search, 2 … 2²⁰ (12 points per octave)
BISECTIONS = 40            # halvings of a log-N bracket: boundaries to a relative 1e-13
N_LO, N_HI = 2.0, 2.0**20


def _max_exponent(prof, N: np.ndarray, qs: tuple[str, ...] | None = None) -> np.ndarray:
    """max over the quantities ``qs`` (default: the norm and both Jacobians) of the local exponents at N (NaN-safe)."""
    ex = prof.exponents(N)
    stack = np.vstack([np.where(np.isfinite(v), v, -np.inf) for q, v in ex.items() if qs is None or q in qs])
    return stack.max(axis=0)


def _edge_crossing(prof, lo: float, hi: float, edge: float, rising: bool, qs=None) -> float:
    """Bisect in log N for the crossing of ``edge`` between lo and hi (BISECTIONS halvings)."""
    a, b = math.log(lo), math.log(hi)
    for _ in range(BISECTIONS):
        m = 0.5 * (a + b)
        above = float(_max_exponent(prof, np.array([math.exp(m)]), qs)[0]) > edge
        if above == rising:
            b = m
        else:
            a = m
    return math.exp(0.5 * (a + b))


def exponent_windows(prof, edge: float, n_min: float, n_lo: float = N_LO, n_hi: float = N_HI,
                     per_quantity: bool = True) -> dict:
    """Every maximal N-window in [n_lo, n_hi] where max(local exponents) > edge, and the sup from ``n_min`` on.

    Returns ``{"edge", "n_min", "windows": [{"from", "to", "peak", "peak_at", "below_n_min"}], "sup_from_n_min",
    "sup_from_n_min_at", "sup_all", "asymptotic", "by_quantity"}`` (the same windows for the norm ``fro`` and the
    Jacobians ``jac_s``, ``jac`` w.r.t. S and X separately). A window open at a grid end has that end as its boundary
    (``"to": n_hi`` means "exceeds the edge up to the largest N examined").
    """
    prof = _Memo(prof)
    out = _windows(prof, edge, n_min, n_lo, n_hi, None)
    if per_quantity:
        out["by_quantity"] = {q: _windows(prof, edge, n_min, n_lo, n_hi, (q,))["windows"]
                              for q in ("fro", "jac_s", "jac")}
    return out


class _Memo:
    """``prof`` whose ``exponents(N)`` is computed once per distinct N: the window searches for the maximum and for
    each quantity evaluate the same grid and, where one quantity leads, the same bisection points (bit-identical)."""

    def __init__(self, prof):
        self._prof, self._seen = prof, {}

    def exponents(self, N) -> dict:
        N = np.atleast_1d(np.asarray(N, dtype=np.float64))
        key = N.tobytes()
        if key not in self._seen:
            self._seen[key] = self._prof.exponents(N)
        return self._seen[key]


def _windows(prof, edge: float, n_min: float, n_lo: float, n_hi: float, qs) -> dict:
    N = np.geomspace(n_lo, n_hi, GRID_POINTS)
    e = _max_exponent(prof, N, qs)
    above = e > edge
    windows = []
    k = 0
    while k < len(N):
        if not above[k]:
            k += 1
            continue
        j = k
        while j + 1 < len(N) and above[j + 1]:
            j += 1
        start = N[0] if k == 0 else _edge_crossing(prof, N[k - 1], N[k], edge, True, qs)
        end = N[-1] if j == len(N) - 1 else _edge_crossing(prof, N[j], N[j + 1], edge, False, qs)
        seg = slice(k, j + 1)
        p = int(np.argmax(e[seg])) + k
        windows.append({"from": float(start), "to": float(end), "peak": float(e[p]), "peak_at": float(N[p]),
                        "below_n_min": bool(end < n_min)})
        k = j + 1
    keep = N >= n_min
    sup_i = int(np.argmax(np.where(keep, e, -np.inf)))
    return {"edge": float(edge), "n_min": float(n_min), "windows": windows,
            "sup_from_n_min": float(e[sup_i]), "sup_from_n_min_at": float(N[sup_i]),
            "sup_all": float(e.max()), "asymptotic": float(e[-1])}


def windows_text(w: dict) -> str:
    """'exponent > 0.55 for N ≤ 7.3 (peak 0.61, below N_min = 16); N ≈ 450–1 650 (peak 0.60)' or 'never', over the
    examined range ``w["n_lo"]``…``w["n_hi"]`` (shown as ``w["n_hi_text"]``; default 2…2²⁰)."""
    n_lo, n_hi = w.get("n_lo", N_LO), w.get("n_hi", N_HI)
    if not w["windows"]:
        return f"local exponent never above {w['edge']:.2f} for N = {n_lo:g}…{w.get('n_hi_text', '2²⁰')}"
    parts = []
    for x in w["windows"]:
        span = (f"N ≤ {x['to']:.3g}" if x["from"] <= n_lo * (1 + 1e-9) else
                f"N ≥ {x['from']:.3g}" if x["to"] >= n_hi * (1 - 1e-9) else f"N ≈ {x['from']:.4g}–{x['to']:.4g}")
        parts.append(f"{span} (peak {x['peak']:.3f} at N = {x['peak_at']:.3g}"
                     + (f", below N_min = {w['n_min']:g})" if x["below_n_min"] else ")"))
    return f"local exponent > {w['edge']:.2f} for " + "; ".join(parts)
