"""s_i ∈ (lo_i, hi_i], s = a + b·(log2 N − x̄) + σ·ε: the slowdown's trend over N from interval-censored exits, by likelihood.

An exit is read on an evaluation grid — the first evaluation at which a run's accuracy reached the
threshold — so the step at which it got there is known only to lie in (t_{k−1}, t_k]; a run that never
reached it lies in (cap, ∞): **interval-censored** and **right-censored** data, never exact values and
never ties. A paired seed's log2 slowdown s = log2(t_arm/t_softmax) then lies in
(log2 a_lo − log2 s_hi, log2 a_hi − log2 s_lo] (:func:`paired_log2_intervals`).

:func:`interval_trend` fits the normal linear model s = a + b·(x − x̄) + σ·ε, x = log2 N, ε ~ N(0, 1),
to those intervals by maximum likelihood (each observation contributes log P(lo < s ≤ hi) =
log(Φ((hi − μ)/σ) − Φ((lo − μ)/σ)); ``scipy.stats.CensoredData.interval_censored`` holds each cell's
data, and ``scipy.stats.norm.fit`` gives each cell's own censored-data mean for display). The change over
the studied range is Δ = b·(log2 N_max − log2 N_min). Questions about Δ are tests against a margin m,
read from the **profile likelihood**: the likelihood ratio Λ(m) = 2(ℓ̂ − max_{a,σ} ℓ(a, m/L, σ)) is turned
into t(m) = sign(Δ̂ − m)·√(df·(exp(Λ/n) − 1)), df = n − 2, and p(Δ ≤ m) = T_df.sf(t), p(Δ ≥ m) = T_df.cdf(t).
Without censoring this t is exactly the least-squares t statistic of the slope (Λ = n·log(1 + t²/df) in a
normal linear model, df = n − 2), so the test is exact there; with censoring it is the likelihood's extension of it (the
rules' calibrations measure the error rates on synthetic exits with the real spread, grid and cap).

Also: :func:`holm` (step-down adjusted p-values: family-wise error per ledger entry), :func:`design_power`
(the power of the design to see a change Δ₁ at a level, censoring ignored) and :func:`seeds_for_power`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import optimize, special, stats

from sapa.common.validate import InputError

__all__ = ["exit_interval", "paired_log2_intervals", "IntervalTrend", "interval_trend", "holm", "design_power",
           "seeds_for_power", "smallest_count", "SIGMA_FLOOR", "B_BOUND"]

SIGMA_FLOOR = 0.02  # σ ≥ 0.02 (log2): intervals that all contain one line would otherwise send σ → 0
B_BOUND = 40.0  # |b| ≤ 40 per doubling of N: keeps a fit whose largest cell is all right-censored finite


def exit_interval(steps: Sequence[int], acc: Sequence[float | None], threshold: float) -> tuple[float, float]:
    """(lo, hi] of the step at which accuracy first reached ``threshold`` on the grid ``steps`` (steps[0] = 0).

    (t_{k−1}, t_k] for the first evaluation k > 0 at or above it (lo ≥ 1: a step count), (cap, ∞) when no
    evaluation reached it (a None — not evaluated, the run had stopped — counts as not reached).

    >>> exit_interval([0, 8, 16, 32], [0.1, 0.2, 0.6, 0.9], 0.5), exit_interval([0, 8, 16], [0.1, 0.2, None], 0.5)
    ((8.0, 16.0), (16.0, inf))
    """
    for k in range(1, len(steps)):
        a = acc[k]
        if a is not None and math.isfinite(a) and a >= threshold:
            return float(max(steps[k - 1], 1)), float(steps[k])
    return float(steps[-1]), math.inf


def paired_log2_intervals(arm: Sequence[tuple[float, float]], soft: Sequence[tuple[float, float]]) -> np.ndarray:
    """(R, 2) bounds of s = log2(t_arm/t_softmax) per paired seed: (log2 a_lo − log2 s_hi, log2 a_hi − log2 s_lo).

    A right-censored arm gives hi = ∞; a right-censored softmax gives lo = −∞ (its seed still bounds s above).

    >>> paired_log2_intervals([(16, 32), (64, float("inf"))], [(8, 16), (8, 16)]).tolist()
    [[0.0, 2.0], [2.0, inf]]
    """
    a, s = np.asarray(arm, float).reshape(-1, 2), np.asarray(soft, float).reshape(-1, 2)
    if a.shape != s.shape:
        raise InputError(f"need one softmax interval per arm interval, got {a.shape[0]} and {s.shape[0]}")
    with np.errstate(divide="ignore"):
        lo = np.log2(a[:, 0]) - np.log2(s[:, 1])
        hi = np.log2(a[:, 1]) - np.log2(s[:, 0])
    return np.column_stack([lo, hi])


_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _log_prob(lo: np.ndarray, hi: np.ndarray, mu: np.ndarray, sigma: float,
              grad: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log P(lo < μ + σε ≤ hi) per observation, accurate in both tails (lo == hi: the log density).

    ``grad``: also ∂/∂μ and ∂/∂log σ per observation: −(φ(z_h) − φ(z_l))/(σP) and −(z_h φ(z_h) − z_l φ(z_l))/P,
    each φ/P formed as exp(log φ − log P) so that neither underflows in a tail.
    """
    zl, zh = (lo - mu) / sigma, (hi - mu) / sigma
    upper = zl > 0  # both ends in the upper tail: use Φ(−zl) − Φ(−zh)
    a, b = np.where(upper, -zh, zl), np.where(upper, -zl, zh)  # log(Φ(b) − Φ(a)), a < b
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lb, la = special.log_ndtr(b), special.log_ndtr(a)
        out = lb + np.log1p(-np.exp(la - lb))
        exact = hi - lo <= 1e-12
        z = np.where(exact, zl, 0.0)
        out = np.where(exact, -0.5 * z * z - _LOG_SQRT_2PI - math.log(sigma), out)
        if not grad:
            return out
        rh = np.where(np.isfinite(zh), np.exp(-0.5 * zh * zh - _LOG_SQRT_2PI - out), 0.0)  # φ(z_h)/P
        rl = np.where(np.isfinite(zl), np.exp(-0.5 * zl * zl - _LOG_SQRT_2PI - out), 0.0)
        zh_rh = np.where(np.isfinite(zh), zh * rh, 0.0)
        zl_rl = np.where(np.isfinite(zl), zl * rl, 0.0)
        dmu = np.where(exact, z / sigma, -(rh - rl) / sigma)
        dls = np.where(exact, z * z - 1.0, -(zh_rh - zl_rl))
    return out, dmu, dls


@dataclass(frozen=True)
class IntervalTrend:
    """The fitted trend of interval-censored slowdowns over N and its tests against margins.

    ``cell_mean``: each cell's own censored-data MLE mean (``scipy.stats.norm.fit`` on its CensoredData; None
    where the cell has no finite upper bound); ``fitted``: the line at each cell; ``p_greater[m]`` /
    ``p_less[m]``: the one-sided profile-likelihood p-values of Δ ≤ m and Δ ≥ m (small p: evidence that Δ > m,
    or < m).
    """

    N: tuple[int, ...]
    n: tuple[int, ...]  # observations per cell
    censored: tuple[int, ...]  # right-censored observations per cell (hi = ∞)
    cell_mean: tuple[float | None, ...]
    fitted: tuple[float, ...]
    delta: float  # Δ̂ = b̂·L over the studied range, L = log2(N_max/N_min)
    se: float  # Wald standard error of Δ̂ (observed information), for display and power
    sigma: float  # σ̂ (log2), the per-seed spread
    df: int  # observations − 2
    p_greater: dict
    p_less: dict
    data: tuple = ()  # per cell the (R_k, 2) intervals the fit read (lists), for refits and the record
    resolution: float = math.nan  # w/√12, w the median width of the finite intervals: the spread the grid can resolve

    @property
    def sigma_for_power(self) -> float:
        """max(σ̂, w/√12): where every seed lies inside one grid interval σ̂ runs to its floor, though the true spread
        may be up to the interval's own (a uniform over width w has sd w/√12, Sheppard's correction); power and seeds
        are read at the larger, never at a spread the grid cannot see."""
        if not math.isfinite(self.resolution):
            return self.sigma
        return max(self.sigma, self.resolution) if math.isfinite(self.sigma) else self.sigma

    def as_dict(self) -> dict:
        r = lambda v: None if v is None or not math.isfinite(v) else round(float(v), 6)  # noqa: E731
        return {"N": list(self.N), "n": list(self.n), "censored": list(self.censored),
                "cell_mean": [r(v) for v in self.cell_mean], "fitted": [r(v) for v in self.fitted],
                "delta": r(self.delta), "se": r(self.se), "sigma": r(self.sigma), "resolution": r(self.resolution),
                "df": self.df,
                "p_greater": {str(k): r(v) for k, v in self.p_greater.items()},
                "p_less": {str(k): r(v) for k, v in self.p_less.items()},
                "intervals": [[[r(a) if math.isfinite(a) else ("inf" if a > 0 else "-inf") for a in iv] for iv in cell]
                              for cell in self.data]}

    def shifted(self, add: float, margins: Sequence[float] | None = None) -> "IntervalTrend":
        """The same data with a linear rise of ``add`` over the N range added to both ends of every interval, refitted
        (a negative control: a slowdown that grows by ``add`` doublings more; infinite ends stay infinite)."""
        xs = np.log2(np.array(self.N, float))
        L = float(xs[-1] - xs[0]) if len(xs) > 1 else 1.0
        cells = [np.asarray(c, float) + add * (x - xs[0]) / L for c, x in zip(self.data, xs)]
        return interval_trend(self.N, cells, tuple(self.p_greater) if margins is None else margins, cell_means=False)


def _cell_mean(iv: np.ndarray) -> float | None:
    """A cell's censored-data MLE mean (scipy.stats.norm.fit), None without a finite upper bound or a fit."""
    if not np.isfinite(iv[:, 1]).any():
        return None
    try:
        with np.errstate(all="ignore"):
            loc, _ = stats.norm.fit(stats.CensoredData.interval_censored(low=iv[:, 0], high=iv[:, 1]))
    except (ValueError, RuntimeError, FloatingPointError):
        return None
    return float(loc) if math.isfinite(loc) else None


def _fit(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, b_fixed: float | None = None) -> tuple[np.ndarray, float]:
    """(θ̂ = (a, b, log σ), max log-likelihood); with ``b_fixed`` the profile over (a, log σ)."""
    mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2, np.where(np.isfinite(lo), lo, hi))
    mid = np.where(np.isfinite(mid), mid, 0.0)
    b0 = float(np.polyfit(x, mid, 1)[0]) if np.ptp(x) > 0 else 0.0
    b0 = float(np.clip(b0, -B_BOUND, B_BOUND))
    a0 = float(np.mean(mid - b0 * x))
    s0 = max(float(np.std(mid - b0 * x)), 0.3)

    def nll(th: np.ndarray) -> tuple[float, np.ndarray]:
        a, b, ls = (th[0], b_fixed, th[1]) if b_fixed is not None else th
        lp, dmu, dls = _log_prob(lo, hi, a + b * x, math.exp(ls), grad=True)
        v = -float(lp.sum())
        if not math.isfinite(v):
            return 1e300, np.zeros_like(th)
        g = -np.array([dmu.sum(), (x * dmu).sum(), dls.sum()])
        return v, (g if b_fixed is None else g[[0, 2]])

    lsb = (math.log(SIGMA_FLOOR), math.log(1e3))
    if b_fixed is None:
        th0, bounds = np.array([a0, b0, math.log(s0)]), [(None, None), (-B_BOUND, B_BOUND), lsb]
    else:
        th0, bounds = np.array([float(np.mean(mid - b_fixed * x)), math.log(s0)]), [(None, None), lsb]
    best = None
    for start in (th0, th0 + np.r_[0.5, np.zeros(len(th0) - 1)]):  # two starts: a flat likelihood misleads one
        res = optimize.minimize(nll, start, jac=True, method="L-BFGS-B", bounds=bounds)
        if best is None or res.fun < best.fun:
            best = res
    th = best.x if b_fixed is None else np.array([best.x[0], b_fixed, best.x[1]])
    return th, -float(best.fun)


def _wald_se(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, th: np.ndarray) -> float:
    """√[I(θ̂)⁻¹]_bb from a central-difference Hessian of the log-likelihood (nan when singular)."""
    def ll(t):
        return float(_log_prob(lo, hi, t[0] + t[1] * x, math.exp(t[2])).sum())

    h, H = 1e-4, np.zeros((3, 3))
    for i in range(3):
        for j in range(i, 3):
            ei, ej = np.eye(3)[i] * h, np.eye(3)[j] * h
            H[i, j] = H[j, i] = (ll(th + ei + ej) - ll(th + ei - ej) - ll(th - ei + ej) + ll(th - ei - ej)) / (4 * h * h)
    try:
        cov = np.linalg.inv(-H)
    except np.linalg.LinAlgError:
        return math.nan
    return math.sqrt(cov[1, 1]) if cov[1, 1] > 0 else math.nan


def interval_trend(Ns: Sequence[int], cells: Sequence[np.ndarray], margins: Sequence[float] = (0.0, 1.0),
                   cell_means: bool = True) -> IntervalTrend:
    """Fit s = a + b(x − x̄) + σε (x = log2 N) to per-cell (R_k, 2) interval arrays; test Δ against ``margins``.

    ``cell_means``: also each cell's own scipy.stats.norm.fit mean (display only; calibrations skip it).
    Observations with no information (lo = −∞ and hi = ∞) are dropped. Needs ≥ 2 cells with observations and
    ≥ 3 observations (df ≥ 1), else Δ and every p are nan.
    """
    if len(Ns) != len(cells):
        raise InputError(f"need one interval array per N, got {len(Ns)} N and {len(cells)} arrays")
    keep = []
    for N, iv in sorted(zip(Ns, cells), key=lambda c: c[0]):
        iv = np.asarray(iv, float).reshape(-1, 2)
        if np.isnan(iv).any() or (iv[:, 0] > iv[:, 1]).any():
            raise InputError("each interval needs lo ≤ hi (no NaN)")
        iv = iv[np.isfinite(iv[:, 0]) | np.isfinite(iv[:, 1])]
        if len(iv):
            keep.append((int(N), iv))
    if len({N for N, _ in keep}) != len(keep) or any(N < 1 for N, _ in keep):
        raise InputError("N values must be distinct positive integers")
    Nk = tuple(N for N, _ in keep)
    n = tuple(len(iv) for _, iv in keep)
    cens = tuple(int(np.isinf(iv[:, 1]).sum()) for _, iv in keep)
    means = tuple(_cell_mean(iv) if cell_means else None for _, iv in keep)
    nan = math.nan
    df = int(sum(n)) - 2  # two parameters of the mean (σ is not one: Λ = n·log(1 + t²/(n − 2)))
    if len(keep) < 2 or df < 1:
        return IntervalTrend(Nk, n, cens, means, tuple(nan for _ in Nk), nan, nan, nan, max(df, 0),
                             {float(m): nan for m in margins}, {float(m): nan for m in margins},
                             tuple(iv.tolist() for _, iv in keep))
    xs = np.log2(np.array(Nk, float))
    L = float(xs[-1] - xs[0])
    x = np.concatenate([np.full(len(iv), v) for v, (_, iv) in zip(xs - xs.mean(), keep)])
    lo = np.concatenate([iv[:, 0] for _, iv in keep])
    hi = np.concatenate([iv[:, 1] for _, iv in keep])
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # L-BFGS-B's 3×3 BLAS calls: threads only contend (10× slower on a shared machine)
        th, ll = _fit(x, lo, hi)
        delta = float(th[1]) * L
        pg, pl = {}, {}
        for m in margins:
            _, llp = _fit(x, lo, hi, b_fixed=float(m) / L)
            t = math.copysign(math.sqrt(df * math.expm1(max(0.0, 2 * (ll - llp)) / len(x))), delta - float(m))
            pg[float(m)], pl[float(m)] = float(stats.t.sf(t, df)), float(stats.t.cdf(t, df))
        se = _wald_se(x, lo, hi, th) * L
    fitted = tuple(float(th[0] + th[1] * v) for v in xs - xs.mean())
    finite = np.isfinite(lo) & np.isfinite(hi)
    res = float(np.median(hi[finite] - lo[finite])) / math.sqrt(12) if finite.any() else math.nan
    return IntervalTrend(Nk, n, cens, means, fitted, delta, se, math.exp(th[2]), df, pg, pl,
                         tuple(iv.tolist() for _, iv in keep), res)


def holm(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values: p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)); nan stays nan.

    Rejecting every p̃ ≤ α keeps the family-wise error ≤ α over the m tests, under any dependence.

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p, float)
    ok = np.nonzero(np.isfinite(p))[0]
    out = np.full(p.shape, np.nan)
    order = ok[np.argsort(p[ok], kind="stable")]
    m, run = len(order), 0.0
    for j, i in enumerate(order):
        run = max(run, min(1.0, (m - j) * p[i]))
        out[i] = run
    return [float(v) for v in out]


def design_power(n: Sequence[int], Ns: Sequence[int], sigma: float, delta1: float, alpha: float) -> float:
    """P(the one-sided level-α test rejects Δ ≤ 0 | true Δ = δ₁): Student t with σ, the cells' n, censoring ignored.

    se(Δ̂) = σ·L/√(Σ n_k (x_k − x̄_w)²), x = log2 N, x̄_w the n-weighted mean; power = 1 − T_{df, δ₁/se}(t_{1−α, df}),
    df = Σn − 2 (the noncentral t).
    """
    n, x = np.asarray(n, float), np.log2(np.asarray(Ns, float))
    df = int(n.sum()) - 2
    if len(x) < 2 or df < 1 or not sigma > 0:
        return math.nan
    L = float(x.max() - x.min())
    se = sigma * L / math.sqrt(float((n * (x - (n * x).sum() / n.sum()) ** 2).sum()))
    return float(stats.nct.sf(stats.t.ppf(1 - alpha, df), df, delta1 / se))


def smallest_count(ok: Callable[[int], bool], most: int) -> int | None:
    """The smallest r in 1 … ``most`` with ok(r), for ``ok`` monotone in r (False … False, True … True); None when
    ok(most) is False. A doubling search from 1, then bisection.

    >>> smallest_count(lambda r: r * r >= 50, 1000)
    8
    """
    hi = 1
    while not ok(hi):
        if hi >= most:
            return None
        hi = min(2 * hi, most)
    lo = max(1, hi // 2)  # ok(lo) is False unless lo == hi (every r below hi that the search tried failed)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def seeds_for_power(Ns: Sequence[int], sigma: float, delta1: float, alpha: float, target: float = 0.8,
                    most: int = 100_000) -> int | None:
    """The smallest equal seeds per cell at which :func:`design_power` reaches ``target`` (None beyond ``most``):
    power rises with the seeds (:func:`smallest_count`)."""
    return smallest_count(lambda r: design_power([r] * len(Ns), Ns, sigma, delta1, alpha) >= target, most)
