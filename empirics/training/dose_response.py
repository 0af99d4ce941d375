"""b = OLS slope of test accuracy on log10 ‖φ(S)‖_F over the doses c of x^p/c at one N and one learning rate.

The reviewers' question — "x³/1 has lower norms than x/16 yet trains worse: does the norm explain
accuracy?" — compares activations whose norms differ by construction. Within one family x^p/c **at one
learning rate**, the scale c moves the norm and nothing else, so the **dose** (a value of c at that lr,
seeds averaged) is the unit. (Taking each dose at its own best lr, as an earlier design did, lets the lr
move the norm too: on digits, x/64 at lr 0.01 ends with 10^0.60, x/32 at lr 0.001 with 10^−0.17.) The
study trains x/c and x³/c over a log grid of c at the task's smallest N (from 1 to beyond √N, the paper's
16 and √N among them) and softmax(S/τ) over a grid of temperatures, with the same seeds, minibatches and
learning-rate grid (:mod:`sapa.empirics.training.study_config`, arms ``x_dose``, ``x3_alpha`` / ``x3_dose``,
``softmax_tau``).

* :func:`dose_table` — per (family, lr, dose): the seeds' final log10 ‖φ(S)‖_F, log10 ‖∂φ(S)/∂X‖_F and test
  accuracy, and their means;
* :func:`dose_slope` — per (family, lr): the least-squares slope of accuracy on log10 norm over the doses (accuracy
  per decade of norm), its Student-t standard error on D − 2 degrees of freedom, the within-dose seed variance
  (what more seeds would shrink) and Spearman's ρ (descriptive);
* :func:`exact_spearman` — Spearman's ρ with its one-sided p-values from **all** n! pairings (n ≤ 9), or
  99 999 seeded random ones;
* :func:`matched_norm_contrast` — across families at matched norm and the same lr: each dose of one family against
  the other family's accuracy interpolated (in log10 norm) at the same norm and lr, inside the norms both reach.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["FAMILIES", "dose_table", "dose_slope", "DoseSlope", "exact_spearman", "Association",
           "matched_norm_contrast", "Contrast", "MAX_EXACT", "spearman_rho"]

MAX_EXACT = 9  # exact permutation p up to 9! = 362 880 pairings
N_MC = 99_999
# (family label, p, the grid arms that carry it: whichever of them the config trains)
FAMILIES = (("x/c", 1, ("x_dose", "x_alpha")), ("x³/c", 3, ("x3_dose", "x3_alpha")),
            ("softmax(S/τ)", 0, ("softmax_tau",)))


def dose_table(runs: pd.DataFrame, task: str, N: int | None = None) -> pd.DataFrame:
    """One row per (family, lr, dose) of ``task`` at its smallest N (or ``N``): every learning rate of the grid.

    Columns: family, p, arm, dose (c, or τ for softmax), lr, seeds, log10_attn_fro, log10_jac_x_fro, test_acc (seed
    means), and per-seed lists ``*_seeds``. A diverged member enters at chance accuracy and is left out of the norm
    means (its norm is infinite). Rows with no grid arm of a family are absent. A family's grid arms are one model at
    the same (c, lr, seed) — x³/c trained as ``x3_alpha`` on the grid and as ``x3_dose`` between its values (the
    second look) —, so their doses are pooled; a (c, lr, seed) two arms share counts once, as the first arm's.
    """
    r = runs[runs["task"] == task]
    if r.empty:
        return pd.DataFrame()
    N = int(r["N"].min()) if N is None else int(N)
    r = r[r["N"] == N]
    out = []
    for fam, p, arms in FAMILIES:
        present = [a for a in arms if (r["arm"] == a).any()]
        if not present:
            continue
        g = r[r["arm"].isin(present)].copy()
        g["_order"] = g["arm"].map({a: i for i, a in enumerate(present)})
        g = g.sort_values("_order", kind="stable").drop_duplicates(["lr", "alpha", "seed"]).drop(columns="_order")
        g.loc[g["diverged"].astype(bool), "test_acc"] = g.loc[g["diverged"].astype(bool), "chance_acc"]
        for (lr, dose), b in g.groupby(["lr", "alpha"], sort=True):
            b = b.sort_values("seed")
            ln = {q: np.log10(b[q].to_numpy(float)) for q in ("attn_fro", "jac_x_fro")}
            row = {"family": fam, "p": p, "arm": str(b["arm"].iloc[0]), "dose": float(dose), "lr": float(lr),
                   "seeds": int(len(b)),
                   "test_acc": float(b["test_acc"].mean()), "test_acc_seeds": b["test_acc"].round(6).tolist()}
            for q, v in ln.items():
                fin = v[np.isfinite(v)]
                row[f"log10_{q}"] = float(fin.mean()) if fin.size else math.nan
                row[f"log10_{q}_seeds"] = [round(float(x), 6) if np.isfinite(x) else None for x in v]
            out.append(row)
    return pd.DataFrame(out)


@dataclass(frozen=True)
class DoseSlope:
    """b = accuracy per decade of norm over D doses at one lr (OLS, dose means), its se on D − 2 df, the pooled
    within-dose seed variance of accuracy, the seeds per dose, Σ(x − x̄)² of the doses' log10 norms, Spearman's ρ."""

    lr: float
    b: float
    se: float
    df: int
    seed_var: float  # pooled within-dose variance of one seed's accuracy (nan with one seed)
    seeds: int  # seeds per dose (the smallest)
    sxx: float
    rho: float
    n: int

    @property
    def lack_of_fit_var(self) -> float:
        """The doses' scatter about the line that more seeds would not remove: residual variance − seed_var/seeds ≥ 0."""
        resid = self.se ** 2 * self.sxx
        return max(0.0, resid - (self.seed_var / self.seeds if math.isfinite(self.seed_var) else 0.0))

    def as_dict(self) -> dict:
        f = lambda v: None if not math.isfinite(v) else round(float(v), 6)  # noqa: E731
        return {"lr": self.lr, "b_per_decade": f(self.b), "se": f(self.se), "df": self.df, "seed_var": f(self.seed_var),
                "seeds": self.seeds, "sxx": f(self.sxx), "rho": f(self.rho), "n": self.n}


def dose_slope(doses: pd.DataFrame, norm: str = "log10_attn_fro") -> DoseSlope:
    """The OLS slope of ``test_acc`` on ``norm`` over the rows of one (family, lr) of :func:`dose_table`.

    se = √(Σ r² / (D − 2) / Σ(x − x̄)²) with the residuals r of the dose means (their seed noise and the doses'
    scatter about the line together); rows with a non-finite norm are left out; fewer than 3 doses or a constant norm
    give nan.

    >>> t = pd.DataFrame({"lr": 0.1, "log10_attn_fro": [0.0, 1.0, 2.0], "test_acc": [0.5, 0.6, 0.7],
    ...                   "test_acc_seeds": [[0.5, 0.5]] * 3})
    >>> round(dose_slope(t).b, 12), dose_slope(t).se, dose_slope(t).df
    (0.1, 0.0, 1)
    """
    x = doses[norm].to_numpy(float)
    ok = np.isfinite(x)
    d = doses[ok]
    x, y = x[ok], d["test_acc"].to_numpy(float)
    lr = float(doses["lr"].iloc[0]) if len(doses) else math.nan
    seeds = [np.asarray(s, float) for s in d["test_acc_seeds"]] if "test_acc_seeds" in d else []
    k = min((s.size for s in seeds), default=1)
    sv = float(np.mean([s.var(ddof=1) for s in seeds])) if seeds and k > 1 else math.nan
    n = int(x.size)
    if n < 3 or np.ptp(x) == 0:
        return DoseSlope(lr, math.nan, math.nan, max(n - 2, 0), sv, k, math.nan, math.nan, n)
    xc = x - x.mean()
    sxx = float(xc @ xc)
    b = float(xc @ (y - y.mean())) / sxx
    r = y - y.mean() - b * xc
    se = math.sqrt(float(r @ r) / (n - 2) / sxx)
    return DoseSlope(lr, b, se, n - 2, sv, k, sxx, spearman_rho(x, y), n)  # ρ alone: its n! pairings go unused


@dataclass(frozen=True)
class Association:
    """Spearman ρ(x, y) over n units with exact (or Monte Carlo) one-sided permutation p-values."""

    rho: float
    p_less: float  # P(ρ* ≤ ρ) over pairings: small when ρ is significantly negative
    p_greater: float
    n: int
    exact: bool

    def as_dict(self) -> dict:
        f = lambda v: None if not math.isfinite(v) else round(float(v), 6)  # noqa: E731
        return {"rho": f(self.rho), "p_less": f(self.p_less), "p_greater": f(self.p_greater), "n": self.n,
                "exact": self.exact}


def _rho(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Pearson correlation of rank vectors along the last axis (Spearman's ρ with average ranks for ties)."""
    a = rx - rx.mean(-1, keepdims=True)
    b = ry - ry.mean(-1, keepdims=True)
    den = np.sqrt((a * a).sum(-1) * (b * b).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(-1) / den


@functools.lru_cache(maxsize=MAX_EXACT + 1)
def _pairings(n: int) -> np.ndarray:
    """(n!, n) int8: every ordering of n items (built once per n; 9! rows are 3.3 MB)."""
    out = np.array(list(itertools.permutations(range(n))), dtype=np.int8)
    out.setflags(write=False)
    return out


def _ranked(x, y) -> tuple[np.ndarray, np.ndarray, float] | None:
    """(ranks of x, ranks of y, ρ_S) over the finite pairs, or None when fewer than 3 remain or one is constant."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    return rx, ry, float(_rho(rx, ry))


def spearman_rho(x, y) -> float:
    """ρ_S(x, y) = Pearson correlation of the average ranks, over the finite pairs (nan as in :func:`exact_spearman`).

    >>> spearman_rho([1, 2, 3, 4], [1, 3, 2, 4])
    0.8
    """
    got = _ranked(x, y)
    return math.nan if got is None else got[2]


def exact_spearman(x, y, seed: int = 0) -> Association:
    """ρ_S(x, y) and its permutation p-values: every pairing when n ≤ MAX_EXACT, else N_MC seeded random ones.

    p counts the observed pairing itself (p ≥ 1/n!). Non-finite pairs are dropped; fewer than 3 left, or a constant
    variable, gives nan.

    >>> a = exact_spearman([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
    >>> a.rho, a.p_greater, a.p_less
    (1.0, 0.008333333333333333, 1.0)
    """
    got = _ranked(x, y)
    if got is None:
        x, y = np.asarray(x, float), np.asarray(y, float)
        return Association(math.nan, math.nan, math.nan, int(np.sum(np.isfinite(x) & np.isfinite(y))), False)
    rx, ry, rho = got
    n = int(rx.size)
    exact = n <= MAX_EXACT
    if exact:
        a, b = rx - rx.mean(), ry - ry.mean()
        null = a[_pairings(n)] @ b / math.sqrt(float(a @ a) * float(b @ b))  # (n!,) ρ of every pairing
    else:
        rng = np.random.default_rng(seed)
        null = _rho(np.array([rng.permutation(rx) for _ in range(N_MC)]), ry)
        null = np.append(null, rho)  # the observed pairing is one of the draws
    eps = 1e-12
    return Association(rho, float((null <= rho + eps).mean()), float((null >= rho - eps).mean()), n, exact)


@dataclass(frozen=True)
class Contrast:
    """Across families at matched norm: d_k = acc(other, dose k) − acc(reference, at dose k's norm), k in the overlap."""

    diffs: tuple[float, ...]
    norms: tuple[float, ...]  # log10 norm of each compared dose
    mean: float
    p_less: float  # exact Wilcoxon signed-rank: small when the other family is less accurate at matched norm
    p_greater: float
    n: int

    def as_dict(self) -> dict:
        f = lambda v: None if not math.isfinite(v) else round(float(v), 6)  # noqa: E731
        return {"diffs": [f(v) for v in self.diffs], "log10_norms": [f(v) for v in self.norms], "mean": f(self.mean),
                "p_less": f(self.p_less), "p_greater": f(self.p_greater), "n": self.n}


def matched_norm_contrast(tab: pd.DataFrame, ref: str = "x/c", other: str = "x³/c",
                          norm: str = "log10_attn_fro") -> Contrast:
    """``other``'s accuracy minus ``ref``'s at the same norm and lr, per (lr, dose) of ``other`` inside ``ref``'s
    norm range at that lr.

    ``ref``'s accuracy at a norm is the linear interpolation in log10 norm between its two doses (at the same lr)
    that bracket it. Exact signed-rank p-values (scipy.stats.wilcoxon, method "exact") over every compared
    (lr, dose); fewer than 2 gives nan. A table without an ``lr`` column is one stratum.
    """
    d, xs = [], []
    for _, g in tab.groupby("lr", sort=True) if "lr" in tab else [(None, tab)]:
        a = g[g["family"] == ref].sort_values(norm)
        b = g[g["family"] == other].sort_values("dose")
        xa, ya = a[norm].to_numpy(float), a["test_acc"].to_numpy(float)
        keep = np.isfinite(xa)
        xa, ya = xa[keep], ya[keep]
        if xa.size < 2:
            continue
        inside = b[(b[norm] >= xa.min()) & (b[norm] <= xa.max())]
        xb = inside[norm].to_numpy(float)
        d += list(inside["test_acc"].to_numpy(float) - np.interp(xb, xa, ya))
        xs += list(xb)
    d = np.asarray(d, float)
    if d.size < 2 or not np.any(d != 0):
        return Contrast(tuple(float(v) for v in d), tuple(xs), float(d.mean()) if d.size else math.nan, math.nan,
                        math.nan, int(d.size))
    lo = stats.wilcoxon(d, alternative="less", method="exact", zero_method="zsplit").pvalue
    hi = stats.wilcoxon(d, alternative="greater", method="exact", zero_method="zsplit").pvalue
    return Contrast(tuple(float(v) for v in d), tuple(float(v) for v in xs), float(d.mean()), float(lo), float(hi),
                    int(d.size))
