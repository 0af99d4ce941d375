"""The audit of activations with a column index j (relative-position logits): the flat result of one audit.

Numbers from :mod:`sapa.theory.relpos` (exact for polynomials in x with any position-dependent coefficients,
quadrature otherwise), the verdict from the calibrated rule ``audit-like-softmax`` as for every other
element-wise activation; the sup of the local exponent is over N = 2…:data:`sapa.theory.relpos.N_MAX`.
"""

from __future__ import annotations

import math

import numpy as np

from sapa.theory.relpos import N_GRID_J, N_MAX, relpos_profile, relpos_worst_case

__all__ = ["relpos_result", "RANGE_N_J"]

RANGE_N_J = (16, 64, 196, 1024, 4096)


def relpos_result(act, spec, N: int, n_min: float | None = None) -> dict:
    """The keys of ``sapa audit --json`` (plus ``_worst_case``, ``_verdict``, ``_verdict_evidence``, ``_windows`` for the caller).

    The rate is judged as without j (:func:`sapa.api.audit._verdict_exact`): the sup of the local exponent over the
    secants with both ends at N ≥ ``n_min`` (default :data:`sapa.rules.like_softmax.N_MIN`); every window of secants above
    ½ + TOL is reported, those below ``n_min`` as context only.
    """
    from sapa.common.validate import InputError
    from sapa.rules.like_softmax import A, N_MIN, TOL, LikeSoftmaxEvidence, decide

    n_min = N_MIN if n_min is None else float(n_min)
    if N > N_MAX:
        raise InputError(f"audits with a column index j run up to N = {N_MAX} (sums over positions), got N = {N}")
    prof = relpos_profile(act, spec, N)
    memo: dict = {}

    def totals(n):
        if n not in memo:
            memo[n] = prof.totals(n)
        return memo[n]

    tot = totals(N)
    errs = prof.errors(N)
    ex = prof.exponents(N)
    # sup of the exponent: secant slopes between neighbours of a doubling grid 2…N_MAX (with N and the range)
    grid = sorted(set(N_GRID_J) | {N} | set(RANGE_N_J))
    slopes, secants, (sup_q, sup_n, sup) = _secants(grid, totals)
    win = secant_windows(secants, A + TOL, n_min)
    judged = win["sup_from_n_min"]
    asym = slopes.get(("fro", grid[-1]), math.nan)
    fro2 = tot["fro"]
    err = max(errs.values())
    ratio = math.sqrt(fro2 / N)
    w = 0.5 * err
    ev = LikeSoftmaxEvidence(judged - w, judged + w, asym, ratio * (1 - w), ratio * (1 + w), prof.method == "exact")
    rng_n = [n for n in RANGE_N_J if n <= N_MAX]
    wc = relpos_worst_case(act, N=N)
    return {
        "method": prof.method,
        "position": "relative (through i − j)" if prof.relative else "absolute (i and j separately)",
        "error_bound": err, "error_bounds": errs,
        "error_bound_kind": ("none: exact moments, sums over positions in float64" if prof.method == "exact" else
                             "relative, a posteriori, at N: |rule − rule of half the order| in the laws of v and S_11, "
                             "plus the last change on doubling the Hermite order in z; largest of the three"),
        "expected_fro2": fro2, "expected_jac_s_fro2": tot["jac_s"], "expected_jac_fro2": tot["jac"],
        "growth_exponent": ex["fro"], "growth_exponent_jac_s": ex["jac_s"], "growth_exponent_jac": ex["jac"],
        "sup_growth_exponent": sup, "sup_growth_at": {"quantity": sup_q, "n": sup_n},
        "sup_range_n": [2, N_MAX], "sup_kind": "largest secant exponent between neighbouring N of a doubling grid",
        "asymptotic_exponent": asym, "asymptotic_at_n": [grid[-2], grid[-1]],
        "crossover_n": None, "m_off": math.nan, "m_diag": math.nan,
        "constant_vs_softmax": ratio, "constant_jac_s_vs_softmax": math.sqrt(tot["jac_s"]) / (math.sqrt(N) / 2),
        "matching_scale": math.sqrt(N / fro2) if fro2 > 0 else math.inf,
        "matching_scale_exponent": 0.5 - ex["fro"],
        "range": [{"n": int(n), "expected_fro2": float(totals(n)["fro"]),
                   "growth_exponent": slopes.get(("fro", n), math.nan),
                   "constant_vs_softmax": math.sqrt(float(totals(n)["fro"]) / n)} for n in rng_n],
        "range_exponent_kind": "secant exponent from the previous grid point",
        "_worst_case": {"exponent": wc["exponent"], "exponent_is_exact": wc["exponent_is_exact"], "fro": wc,
                        "jac_s": None, "jac": None},
        "_verdict": decide(ev), "_verdict_evidence": ev.__dict__, "_windows": win,
    }


def _secants(grid, totals) -> tuple[dict, list, tuple]:
    """({(quantity, hi): secant exponent}, [(lo, hi, largest over the norm and both Jacobians)], (quantity, N, sup))
    between neighbours of ``grid``; ``totals(n)`` gives the expected squared norms at n."""
    sup_q, sup_n, sup = "fro", float(grid[0]), -math.inf
    slopes, secants = {}, []
    for lo, hi in zip(grid[:-1], grid[1:]):
        tl, th = totals(lo), totals(hi)
        top = -math.inf
        for q in ("fro", "jac_s", "jac"):
            if tl[q] > 0 and th[q] > 0:
                e = 0.5 * math.log(th[q] / tl[q]) / math.log(hi / lo)
                slopes[(q, hi)] = e
                top = max(top, e)
                if e > sup:
                    sup_q, sup_n, sup = q, math.sqrt(lo * hi), e
        secants.append((lo, hi, top))
    return slopes, secants, (sup_q, sup_n, sup)


def secant_windows(secants, edge: float, n_min: float) -> dict:
    """Windows of :func:`sapa.regime.exponent_windows`'s shape from secant exponents ``(lo, hi, e)`` of a grid.

    A window is a run of neighbouring secants with e > ``edge``, from the first's ``lo`` to the last's ``hi``
    (``below_n_min`` when it ends at or below ``n_min``); the judged sup is over secants with ``lo ≥ n_min``
    (NaN when there is none). Also ``n_lo``, ``n_hi``: the grid's ends.
    """
    windows, run = [], []
    for s in list(secants) + [(math.nan, math.nan, -math.inf)]:
        if s[2] > edge:
            run.append(s)
            continue
        if run:
            p = max(run, key=lambda r: r[2])
            windows.append({"from": float(run[0][0]), "to": float(run[-1][1]), "peak": float(p[2]),
                            "peak_at": math.sqrt(p[0] * p[1]), "below_n_min": bool(run[-1][1] <= n_min)})
            run = []
    judged = [s for s in secants if s[0] >= n_min and math.isfinite(s[2])]
    top = max(judged, key=lambda r: r[2]) if judged else None
    finite = [s[2] for s in secants if math.isfinite(s[2])]
    return {"edge": float(edge), "n_min": float(n_min), "windows": windows,
            "sup_from_n_min": float(top[2]) if top else math.nan,
            "sup_from_n_min_at": math.sqrt(top[0] * top[1]) if top else math.nan,
            "sup_all": max(finite) if finite else math.nan, "asymptotic": float(secants[-1][2]) if secants else math.nan,
            "n_lo": float(secants[0][0]) if secants else math.nan, "n_hi": float(secants[-1][1]) if secants else math.nan}


_ = np  # numpy arrays appear in the profile's results
