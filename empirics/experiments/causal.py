"""Causal masking: per-row attention norms against the row index i (arXiv 2410.18613; reviewer point 4).

Under a causal mask row i (1-based) of S = X W Xᵀ sees the i entries S_i1 … S_ii: i − 1
off-diagonal ones and the diagonal. The off-diagonal entries are exchangeable and so are the
diagonal ones (:mod:`sapa.theory.moments`), so for φ = c_i·x^p applied to row i

    E‖φ(S)_i‖² = c_i² [(i − 1)·m_off + m_diag],   m_off = E S_12^{2p},  m_diag = E S_11^{2p}.

Scale policies (``scale_policy``, the rule codes of :mod:`sapa.theory.families`):

``INV_SQRT_N``  global c = 1/√N: E‖row_i‖² = ((i−1) m_off + m_diag)/N, tiny early rows, ≈ m_off at i = N;
``inv_sqrt_i``  dynamic per-row c_i = 1/√i (the effective length): ((i−1) m_off + m_diag)/i → m_off,
                rows of equal expected size (within ±TOL in log-slope from i ≥ 1 − r + |1−r|/(2 TOL),
                r = m_diag/m_off), as softmax's rows all share the bound ‖P_i‖ ≤ 1;
``inv_i``       c_i = 1/i: E‖row_i‖² → m_off/i, the shape of softmax's typical row norm (≈ √(e/i) for large i);
``fixed``       c = 1/√N_train, fixed at a training length;
``const``       c = 1;
``softmax``     P_i = softmax(S_i/√d) over j ≤ i: ‖P_1‖ = 1 exactly, ‖P_i‖ ≤ 1 (Monte Carlo only).

Monte Carlo draws use the norm-only kernel :func:`sapa.empirics.experiments.scale_direction.row_norms2`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from sapa.theory.families import CONST, FIXED, INV_I, INV_SQRT_I, INV_SQRT_N, SOFTMAX, row_factors
from sapa.common.seeds import rng_for
from sapa.empirics.experiments.scale_direction import row_norms2, sample_factors, trials_per_n
from sapa.empirics.montecarlo.stats import local_slopes, ols_slopes
from sapa.common.validate import InputError, choice, positive_int

__all__ = [
    "POLICIES",
    "TOL",
    "row_coefficients",
    "row_moments",
    "exact_row_ms",
    "exact_row_profile",
    "row_samples",
    "row_profiles",
    "row_bins",
    "bin_samples",
    "bin_scaled",
    "binned_agreement",
    "profile_exponents",
    "regime_start",
    "exact_matrix_ms",
    "train_length_transfer",
    "masked_matrix_exponent",
    "masked_matrix_sup_exponent",
    "crossover_n",
    "PS",
    "CausalResult",
    "run_causal_masking",
    "causal_agreement",
]

POLICIES = (SOFTMAX, INV_SQRT_N, INV_SQRT_I, INV_I, FIXED, CONST)
TOL = 0.1  # "uniform in i": the log-log slope of the row profile within ±0.1 of 0


def row_coefficients(N: int, scale_policy: str, N_train: int | None = None) -> np.ndarray:
    """c_i, i = 1..N, of a polynomial scale policy: 1/√N, 1/√i, 1/i, 1/√N_train or 1. Returns (N,)."""
    scale_policy = choice("scale_policy", scale_policy, POLICIES[1:])
    return row_factors(scale_policy, N, c=1.0, N_train=N_train)  # "const" here is c = 1


def row_moments(p: int, model: str, D: int, d: int) -> tuple[float, float]:
    """(m_off, m_diag) = (E S_12^{2p}, E S_11^{2p}) as floats (σ_w² = 1/D; paper model σ_ab = 1)."""
    from sapa.theory.moments import exact_moments

    sigma = 1.0 if model == "paper" else 1.0 / math.sqrt(D)
    e = exact_moments(p, model, 2, D, d, sigma=sigma)
    return float(e.m_off), float(e.m_diag)


def crossover_n(p: int, model: str, D: int, d: int) -> float:
    """N* = 1 + m_diag/m_off: the length above which the off-diagonal mass N(N−1)·m_off outweighs the diagonal N·m_diag."""
    m_off, m_diag = row_moments(p, model, D, d)
    return 1 + m_diag / m_off


def exact_row_ms(p: int, model: str, N: int, D: int, d: int, scale_policy: str, N_train: int | None = None) -> np.ndarray:
    """E‖(c_i S^{∘p})_i‖², i = 1..N, under a causal mask: c_i²[(i − 1) m_off + m_diag]. Returns (N,).

    >>> exact_row_ms(1, "iid", 3, 2, 1, "const").round(12).tolist()  # σ_w = 1/√D: m_off = 4σ⁴ = 1, m_diag = 2
    [2.0, 3.0, 4.0]
    """
    m_off, m_diag = row_moments(p, model, D, d)
    i = np.arange(1, positive_int("N", N) + 1, dtype=np.float64)
    return row_coefficients(N, scale_policy, N_train) ** 2 * ((i - 1) * m_off + m_diag)


def exact_row_profile(N: int, p: int, model: str = "iid", D: int = 64, d: int = 64, scale_policy: str = INV_SQRT_N,
                      N_train: int | None = None) -> pd.DataFrame:
    """Rows i = 1..N with c_i, exact E‖row_i‖² and its root (E-RMS), and the local log-slope in i."""
    ms = exact_row_ms(p, model, N, D, d, scale_policy, N_train)
    i = np.arange(1, N + 1, dtype=np.float64)
    rms = np.sqrt(ms)
    local = np.array([math.nan, *local_slopes(i, rms)])  # (N,) NaN, then the slope between rows i−1 and i
    return pd.DataFrame({"i": i.astype(int), "p": p, "model": model, "scale_policy": scale_policy,
                         "c": row_coefficients(N, scale_policy, N_train), "exact_ms": ms, "exact_rms": rms,
                         "local_slope": local})


def regime_start(r: float, tol: float = TOL) -> int:
    """First row from which the 1/√i profile √(((i−1) + r)/i) has |log-slope| ≤ tol: ⌈1 − r + |1 − r|/(2 tol)⌉.

    The slope is ½(1 − r)/(i − 1 + r) (r = m_diag/m_off), so rows are of equal size only for i ≫ |1 − r|.
    """
    return max(1, math.ceil(1 - r + abs(1 - r) / (2 * tol) - 1e-9))


def exact_matrix_ms(p: int, model: str, N: int, D: int, d: int, scale_policy: str, N_train: int | None = None) -> float:
    """E‖φ(S)‖²_F under a causal mask: Σ_i c_i²[(i−1) m_off + m_diag] (e.g. (N − H_N) m_off + H_N m_diag for 1/√i)."""
    return float(exact_row_ms(p, model, N, D, d, scale_policy, N_train).sum())


# --------------------------------------------------------------------------- Monte Carlo


def row_samples(N: int, model: str = "iid", D: int = 64, d: int = 64, trials: int = 64, seed: int = 0,
                ps: Sequence[int] = (1, 3), *, reps: int = 1) -> dict:
    """Causal per-row squared norms, unit coefficient: {"softmax": (T, N), p: (T, N)} numpy float64.

    Softmax is softmax(S_i/√d) over j ≤ i; the polynomial rows are Σ_{j≤i} S_ij^{2p} (multiply by
    c_i² for a scale policy). With ``reps`` > 1 each trial (one draw of the weights) carries ``reps``
    independent token sequences and reports their mean: still one i.i.d. value per trial, with less
    variance and skew (tokens cost O(N·D), weights O(D²d)). Draws are a pure function of
    (seed, model, N, D, d, trials, reps).
    """
    N, D, d, T, reps = (positive_int(n, v) for n, v in (("N", N), ("D", D), ("d", d), ("trials", trials), ("reps", reps)))
    key = {"study": "causal", "model": model, "N": N, "D": D, "d": d} | ({"reps": reps} if reps > 1 else {})
    L, R = sample_factors(model, N * reps, D, d, T, seed, key)  # (T, reps·N, ·)
    L, R = L.reshape(T * reps, N, L.shape[-1]), R.reshape(T * reps, N, R.shape[-1])  # sequences share W
    r2 = row_norms2(L, R, tau=1.0 / math.sqrt(d), ps=ps, mask="causal")
    return {k: v.reshape(T, reps, N).mean(1).numpy() for k, v in r2.items()}


def _scaled(samples: dict, p: int | None, scale_policy: str, N_train: int | None) -> np.ndarray:
    """(T, N) squared row norms of one policy (softmax ignores p)."""
    if scale_policy == "softmax":
        return samples["softmax"]
    sq = samples[int(p)]
    return sq * row_coefficients(sq.shape[1], scale_policy, N_train) ** 2


def row_profiles(N: int, p: int, model: str = "iid", D: int = 64, d: int = 64, scale_policy: str = INV_SQRT_N,
                 trials: int = 64, seed: int = 0, *, N_train: int | None = None, samples: dict | None = None) -> pd.DataFrame:
    """Per row i = 1..N: Monte Carlo mean and se of ‖φ(S)_i‖² over trials, its root (E-RMS), mean ‖φ(S)_i‖,
    and (polynomials) the exact E‖φ(S)_i‖² with z = (mean − exact)/se.

    Columns: i, p, model, scale_policy, trials, mc_ms, mc_se, mc_rms, mc_mean_norm, exact_ms, exact_rms, z.
    Pass ``samples`` (from :func:`row_samples`) to reuse draws.
    """
    scale_policy = choice("scale_policy", scale_policy, POLICIES)
    if samples is None:
        samples = row_samples(N, model, D, d, trials, seed, ps=(p,))
    sq = _scaled(samples, p, scale_policy, N_train)  # (T, N)
    T = sq.shape[0]
    ms, se = sq.mean(0), sq.std(0, ddof=1) / math.sqrt(T)
    df = pd.DataFrame({"i": np.arange(1, N + 1), "p": p if scale_policy != "softmax" else 0, "model": model,
                       "scale_policy": scale_policy, "trials": T, "mc_ms": ms, "mc_se": se, "mc_rms": np.sqrt(ms),
                       "mc_mean_norm": np.sqrt(sq).mean(0)})
    if scale_policy == "softmax":
        df["exact_ms"] = np.where(df["i"] == 1, 1.0, np.nan)  # row 1 sees one entry: P_11 = 1 exactly
    else:
        df["exact_ms"] = exact_row_ms(p, model, N, D, d, scale_policy, N_train)
    df["exact_rms"] = np.sqrt(df["exact_ms"])
    with np.errstate(divide="ignore", invalid="ignore"):
        df["z"] = (df["mc_ms"] - df["exact_ms"]) / df["mc_se"]
    return df


def row_bins(N: int) -> list[tuple[int, int]]:
    """Geometric row bins (1-based, inclusive): [1, 1], [2, 2], [3, 4], [5, 8], …, [N/2 + 1, N]."""
    out, lo = [(1, 1)], 2
    while lo <= N:
        hi = min(N, 2 * (lo - 1))
        out.append((lo, hi))
        lo = hi + 1
    return out


def bin_samples(N: int, model: str = "iid", D: int = 64, d: int = 64, trials: int = 16, seed: int = 0,
                ps: Sequence[int] = (1, 3), *, max_trials: int = 1024, early_tokens: int = 256) -> list[dict]:
    """Causal row norms by geometric row bin, each bin drawn at length hi with about equal cost per bin.

    A causal row i depends only on tokens 1..i, so rows lo..hi have the same law in a length-hi draw as
    in a length-N one. Bin [lo, hi] gets T = clip(trials·(N/hi)², trials, max_trials) trials: the early,
    most heavy-tailed rows (few entries) get many more trials than one length-N draw could afford. Bins
    whose T is capped share one draw (at the largest such hi, L), in which each trial carries
    reps = ⌈early_tokens/L⌉ token sequences per weight draw (:func:`row_samples`): sampling W costs
    O(T·D²d) whatever N, so extra sequences are the cheap way to tame the heavy tails of S^{∘p} there.
    ``draw`` names the draw; a bootstrap must resample the bins of one draw jointly.

    Returns one dict per bin: {"lo", "hi", "N", "trials", "reps", "draw", "softmax": (T, hi−lo+1),
    p: (T, hi−lo+1)}, unit coefficient (squared row norms; per-trial means over the reps).
    """
    N = positive_int("N", N)
    bins = row_bins(N)
    T = [int(min(max(max_trials, trials), max(trials, round(trials * (N / hi) ** 2)))) for _, hi in bins]
    groups: dict[int, list[int]] = {}  # draw length -> bin indices
    cap = max(T)
    top_capped = max((hi for (_, hi), t in zip(bins, T) if t == cap), default=None)
    for k, ((lo, hi), t) in enumerate(zip(bins, T)):
        groups.setdefault(top_capped if t == cap else hi, []).append(k)
    out: list[dict] = [{} for _ in bins]
    for length, ks in groups.items():
        reps = max(1, math.ceil(early_tokens / length)) if T[ks[0]] == cap and cap > trials else 1
        smp = row_samples(length, model, D, d, T[ks[0]], seed, ps, reps=reps)
        for k in ks:
            lo, hi = bins[k]
            out[k] = {"lo": lo, "hi": hi, "N": N, "trials": T[k], "reps": reps, "draw": length,
                      **{key: v[:, lo - 1:hi] for key, v in smp.items()}}
    return out


def bin_scaled(b: dict, p: int, scale_policy: str, N_train: int | None) -> np.ndarray:
    """(T, rows) squared norms of bin ``b`` under a policy whose length is the profiled N (not the draw's)."""
    if scale_policy == "softmax":
        return b["softmax"]
    c = row_coefficients(b["N"], scale_policy, N_train)[b["lo"] - 1:b["hi"]]
    return b[int(p)] * c**2


def binned_agreement(bsamples: list[dict], p: int, model: str, D: int, d: int, scale_policy: str = "const",
                     N_train: int | None = None, family_level: float = 0.01) -> pd.DataFrame:
    """Monte Carlo vs exact per row bin (from :func:`bin_samples`): per trial the bin mean of ‖row_i‖², then a
    t-statistic across trials against the exact bin mean. Rows of one trial share X and W: trials are the units.

    Columns: i_lo, i_hi, trials, mc_mean, se, exact, z, t_crit (two-sided, Bonferroni over the bins at
    ``family_level``), agree (|z| ≤ t_crit).
    """
    N = bsamples[0]["N"]
    ex = exact_row_ms(p, model, N, D, d, scale_policy, N_train)
    rows = []
    for b in bsamples:
        v = bin_scaled(b, p, scale_policy, N_train).mean(1)  # (T,)
        T = v.size
        crit = float(stats.t.ppf(1 - family_level / (2 * len(bsamples)), T - 1))
        m, se, e = float(v.mean()), float(v.std(ddof=1) / math.sqrt(T)), float(ex[b["lo"] - 1:b["hi"]].mean())
        z = (m - e) / se
        rows.append({"i_lo": b["lo"], "i_hi": b["hi"], "trials": T, "mc_mean": m, "se": se, "exact": e, "z": z,
                     "t_crit": crit, "agree": bool(abs(z) <= crit)})
    return pd.DataFrame(rows)


def profile_exponents(bsamples: list[dict], p: int, model: str, D: int, d: int,
                      policies: Sequence[str] = (INV_SQRT_N, INV_SQRT_I), *, N_train: int | None = None,
                      level: float = 0.99, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Log-log slope β of the causal row profile in i, with percentile-bootstrap CIs.

    The profile is ½ log of the mean of ‖φ(S)_i‖² over each geometric row bin (from :func:`bin_samples`)
    against the log of the bin's geometric-mean row √(lo·hi); the exact slope is the same statistic of the
    exact E‖φ(S)_i‖². Criteria per polynomial policy: ``bound`` — against softmax's row bound 1 (β of
    the polynomial profile itself); ``typical`` — against softmax's Monte Carlo profile (β of the ratio;
    same draws within a bin, resampled jointly). Also softmax's own profile (``typical``) and its bound
    (``bound``: β = 0, every row's bound is 1). The bootstrap resamples trials within each draw.

    Returns rows: policy, criterion, slope, ci_lo, ci_hi, exact_slope (NaN where none), last_over_first
    (the criterion's profile at the last bin over row 1), level, N, p, min_trials.
    """
    N = bsamples[0]["N"]
    if len(bsamples) < 2:
        raise InputError(f"need N ≥ 2 rows for a profile exponent, got N={N}")
    x = np.log([math.sqrt(b["lo"] * b["hi"]) for b in bsamples])  # (K,)
    ols = lambda Y: ols_slopes(x, Y)  # noqa: E731  row-wise slopes of (B, K)
    rng = rng_for(seed, "causal", p, N)
    draws = {b["draw"]: b["trials"] for b in bsamples}
    # bootstrap resampling as multinomial counts (B, T): resampled mean = counts @ v / T (one BLAS call)
    by_draw = {L: rng.multinomial(T, np.full(T, 1.0 / T), size=n_boot).astype(np.float64) / T
               for L, T in sorted(draws.items())}
    wts = [by_draw[b["draw"]] for b in bsamples]  # bins of one draw are resampled jointly
    a = (1 - level) / 2

    def half_log(policy: str) -> tuple[np.ndarray, np.ndarray]:
        v = [bin_scaled(b, p, policy, N_train).mean(1) for b in bsamples]  # K arrays (T_k,)
        pt = 0.5 * np.log([u.mean() for u in v])  # (K,)
        bt = 0.5 * np.log(np.stack([w @ u for u, w in zip(v, wts)], axis=1))  # (B, T_k) @ (T_k,) -> (B, K)
        return pt, bt

    def ci(bt: np.ndarray) -> tuple[float, float]:
        lo, hi = np.quantile(ols(bt), [a, 1 - a])
        return float(lo), float(hi)

    s_pt, s_bt = half_log("softmax")
    rows = [{"policy": "softmax", "criterion": "typical", "slope": float(ols(s_pt[None])[0]),
             **dict(zip(("ci_lo", "ci_hi"), ci(s_bt))), "exact_slope": math.nan,
             "last_over_first": float(np.exp(s_pt[-1] - s_pt[0]))},
            {"policy": "softmax", "criterion": "bound", "slope": 0.0, "ci_lo": 0.0, "ci_hi": 0.0, "exact_slope": 0.0,
             "last_over_first": 1.0}]
    for pol in policies:
        q_pt, q_bt = half_log(pol)
        ex_rows = exact_row_ms(p, model, N, D, d, pol, N_train)
        ex = 0.5 * np.log([ex_rows[b["lo"] - 1:b["hi"]].mean() for b in bsamples])
        for crit, pt, bt, ext in (("bound", q_pt, q_bt, ex), ("typical", q_pt - s_pt, q_bt - s_bt, ex - s_pt)):
            lo, hi = ci(bt)
            rows.append({"policy": pol, "criterion": crit, "slope": float(ols(pt[None])[0]), "ci_lo": lo,
                         "ci_hi": hi, "exact_slope": float(ols(ext[None])[0]),
                         "last_over_first": float(np.exp(pt[-1] - pt[0]))})
    df = pd.DataFrame(rows)
    df["level"], df["N"], df["p"], df["min_trials"] = level, N, p, min(b["trials"] for b in bsamples)
    return df


# --------------------------------------------------------------------------- inference length


def train_length_transfer(N_train: int = 256, p: int = 3, model: str = "iid", D: int = 64, d: int = 64,
                          factors: Sequence[float] = (1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8), trials: int = 4,
                          seed: int = 0, *, max_trials: int = 1024) -> pd.DataFrame:
    """Causal attention at lengths N = f·N_train with the scale chosen at N_train: E-RMS norms relative to N_train.

    Policies: ``fixed`` (c = 1/√N_train at every N), global 1/√N (re-scaled to the current N),
    ``inv_sqrt_i`` (per row), and ``softmax``. Quantities: ``matrix`` (√E‖φ(S)‖²_F) and ``last_row``
    (√E‖φ(S)_N‖², the row of the newest token in generation). Polynomial ratios are exact; the Monte
    Carlo ones (causal draws, trials per N by :func:`trials_per_n`, ⌈256/N⌉ token sequences per weight draw)
    divide by the exact value at N_train
    for polynomials (each point then checks the exact curve on its own) and by the Monte Carlo value at
    N_train for softmax.

    Returns rows: N, factor, policy, quantity, exact_ratio (NaN for softmax), mc_ratio, mc_lo, mc_hi
    (95% delta-method interval), trials.
    """
    N_train = positive_int("N_train", N_train)
    Ns = sorted({max(1, int(round(f * N_train))) for f in factors})
    if N_train not in Ns:
        raise InputError("factors must include 1 (the training length itself)")
    Tn = trials_per_n(Ns, trials, max_trials)
    # short sequences: several token sequences per weight draw (reps), which tames the tails cheaply
    draws = {N: row_samples(N, model, D, d, Tn[N], seed, ps=(p,), reps=max(1, math.ceil(256 / N))) for N in Ns}
    pols = (FIXED, INV_SQRT_N, INV_SQRT_I, SOFTMAX)
    stat: dict = {}
    for N, smp in draws.items():
        for pol in pols:
            sq = _scaled(smp, p, pol, N_train)  # (T, N)
            for q, v in (("matrix", sq.sum(1)), ("last_row", sq[:, -1])):
                ex = math.nan if pol == "softmax" else (
                    exact_matrix_ms(p, model, N, D, d, pol, N_train) if q == "matrix"
                    else float(exact_row_ms(p, model, N, D, d, pol, N_train)[-1]))
                stat[(N, pol, q)] = (float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)), ex, v.size)
    rows = []
    for (N, pol, q), (m, se, ex, T) in stat.items():
        m0, se0, ex0, _ = stat[(N_train, pol, q)]
        if pol == "softmax":  # no exact value: relative to the Monte Carlo value at N_train
            ratio = math.sqrt(m / m0)
            # delta method on ½ log(m/m0), the two lengths independent: var = ¼(se²/m² + se0²/m0²) (0 at N_train)
            sd = 0.0 if N == N_train else 0.5 * math.sqrt((se / m) ** 2 + (se0 / m0) ** 2)
        else:  # relative to the exact value at N_train: each point is an independent check of the exact curve
            ratio = math.sqrt(m / ex0)
            sd = 0.5 * se / m
        rows.append({"N": N, "factor": N / N_train, "policy": pol, "quantity": q,
                     "exact_ratio": math.sqrt(ex / ex0) if pol != "softmax" else math.nan, "mc_ratio": ratio,
                     "mc_lo": ratio * math.exp(-1.96 * sd), "mc_hi": ratio * math.exp(1.96 * sd), "trials": T})
    return pd.DataFrame(rows).sort_values(["policy", "quantity", "N"], ignore_index=True)



def masked_matrix_exponent(p: int, model: str, Ns: Sequence[int], D: int, d: int) -> float:
    """Exponent of E-RMS ‖x^p/√N‖_F under a causal mask over ``Ns``: OLS of ½ log(c²[N(N−1)/2·m_off + N·m_diag]) on log N.

    >>> round(masked_matrix_exponent(1, "paper", [2**10, 2**14, 2**18], 4, 4), 2)  # the N² term dominates: √N
    0.5
    """
    m_off, m_diag = row_moments(p, model, D, d)
    y = [0.5 * math.log((n * (n - 1) / 2 * m_off + n * m_diag) / n) for n in Ns]  # (K,) ½ log E‖·‖², c = 1/√N
    return float(ols_slopes(np.log(np.asarray(Ns, dtype=np.float64)), np.asarray(y)[None])[0])


def masked_matrix_sup_exponent(p: int, model: str, D: int, d: int) -> float:
    """sup over N of the local exponent of E-RMS ‖x^p/√N‖_F under a causal mask: ½ if 2r ≥ 1, else 1/(1 + 2r).

    r = m_diag/m_off; the masked matrix has half the off-diagonal entries, so r → 2r.
    """
    m_off, m_diag = row_moments(p, model, D, d)
    r2 = 2 * m_diag / m_off
    return 0.5 if r2 >= 1 else 1 / (1 + r2)


# --------------------------------------------------------------------------- the experiment


PS = (1, 3)  # the degrees of the causal-masking check


@dataclass(frozen=True)
class CausalResult:
    """Binned causal draws, Monte Carlo-vs-exact agreement, row-profile exponents and the train-length transfer.

    ``bins[N]``: :func:`bin_samples`; ``agree[(N, p)]``: :func:`binned_agreement` (unit scale);
    ``expo[(N, p)]``: :func:`profile_exponents`; ``transfer``: :func:`train_length_transfer` at N_train
    for degree ``transfer_p``; ``m[p]`` = (m_off, m_diag) (:func:`row_moments`).
    """

    Ns: tuple[int, ...]
    trials: tuple[int, ...]
    model: str
    D: int
    d: int
    seed: int
    N_train: int
    transfer_p: int
    bins: dict  # {N: [bin dict]}
    agree: dict  # {(N, p): DataFrame}
    expo: dict  # {(N, p): DataFrame}
    transfer: pd.DataFrame
    m: dict  # {p: (m_off, m_diag)}

    def to_json(self) -> dict:
        """A mapping of plain values, arrays and DataFrames that ``sapa.common.figdata`` stores as JSON."""
        return {"Ns": list(self.Ns), "trials": list(self.trials), "model": self.model, "D": self.D, "d": self.d,
                "seed": self.seed, "bins": dict(self.bins), "agree": dict(self.agree), "expo": dict(self.expo),
                "transfer": self.transfer, "N_train": self.N_train, "transfer_p": self.transfer_p, "m": dict(self.m)}

    @classmethod
    def from_json(cls, data: dict) -> CausalResult:
        """The result :meth:`to_json` stored."""
        return cls(Ns=tuple(int(n) for n in data["Ns"]), trials=tuple(int(t) for t in data["trials"]),
                   model=str(data["model"]), D=int(data["D"]), d=int(data["d"]), seed=int(data["seed"]),
                   N_train=int(data["N_train"]), transfer_p=int(data["transfer_p"]), bins=dict(data["bins"]),
                   agree=dict(data["agree"]), expo=dict(data["expo"]), transfer=data["transfer"],
                   m={int(p): tuple(float(v) for v in mm) for p, mm in data["m"].items()})


def run_causal_masking(Ns: Sequence[int] = (256, 1024), trials: Sequence[int] = (16, 8), model: str = "iid",
                       D: int = 64, d: int = 64, seed: int = 0, max_trials: int = 1024, N_train: int = 256,
                       transfer_trials: int = 4, transfer_max_trials: int = 256, transfer_p: int = 3,
                       n_boot: int = 1000, policies: Sequence[str] = (INV_SQRT_N, INV_SQRT_I),
                       level: float = 0.99) -> CausalResult:
    """Per N one binned draw (:func:`bin_samples`); per p its agreement with the exact rows and profile exponents;
    then the train-length transfer at ``N_train``."""
    bins, agree, expo = {}, {}, {}
    for N, T in zip(Ns, trials):
        bins[N] = bin_samples(N, model, D, d, T, seed, PS, max_trials=max_trials)
        for p in PS:
            agree[(N, p)] = binned_agreement(bins[N], p, model, D, d, "const")
            expo[(N, p)] = profile_exponents(bins[N], p, model, D, d, policies=policies, n_boot=n_boot, level=level,
                                             seed=seed)
    transfer = train_length_transfer(N_train, transfer_p, model, D, d, trials=transfer_trials, seed=seed,
                                     max_trials=transfer_max_trials)
    return CausalResult(Ns=tuple(Ns), trials=tuple(trials), model=model, D=D, d=d, seed=seed, N_train=N_train,
                        transfer_p=transfer_p, bins=bins, agree=agree, expo=expo, transfer=transfer,
                        m={p: row_moments(p, model, D, d) for p in PS})


def causal_agreement(res: CausalResult, policies: Sequence[str] = (INV_SQRT_N, INV_SQRT_I)) -> dict:
    """Monte Carlo vs exact per (N, p) of a run, keyed ``N{N}/p{p}``: every row bin's t-test (``res.agree``) and, per
    policy, the bootstrap interval of the ``bound`` profile slope holding the exact slope. ``agree`` when all hold."""
    out = {}
    for (N, p), a in res.agree.items():
        e = res.expo[(N, p)].set_index(["policy", "criterion"])
        slopes_ok = {pol: bool(e.loc[(pol, "bound"), "ci_lo"] <= e.loc[(pol, "bound"), "exact_slope"]
                               <= e.loc[(pol, "bound"), "ci_hi"]) for pol in policies}
        out[f"N{N}/p{p}"] = {"agree": bool(a["agree"].all()) and all(slopes_ok.values()),
                             "bins": len(a), "max_abs_z": round(float(a["z"].abs().max()), 3),
                             "t_crit": round(float(a["t_crit"].min()), 3),
                             "trials_per_bin": [int(t) for t in a["trials"]],
                             "slope_interval_holds_exact": slopes_ok}
    return out
