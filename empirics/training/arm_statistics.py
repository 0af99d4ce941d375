"""ρ̄ = mean_s ρ_S(mean_r log10‖φ‖_{a,s,r}, mean_r acc_{a,s,r}) across arms a: exact permutation p, arm bootstrap.

The reviewers' framing of the paper's thesis ("softmax works because it keeps the attention
norm from growing") assumes that across activations a lower ‖φ(S)‖_F (or ‖∂φ(S)/∂X‖_F) at the
end of training goes with a better test accuracy: Spearman ρ < 0. Pure functions over a table
of final runs (one row per run: task, arm, a stratum column, seed, diverged, test_acc, norms, ...).

**The ledger reads the training study** (:func:`study_arm_level`): every arm at its best
learning rate (:mod:`empirics.training.study_analysis`), the strata are the (task, N) cells, the norms the
study's ``attn_fro`` and ``jac_x_fro``, the reviewer's pair x³ against x/α*. The weight-decay
strata described below were those of the earlier single-N experiment; the functions take the
stratum column as a parameter and the run-level descriptive functions still read that older table.

**The unit of inference is the activation arm**: runs of one arm share its
activation, so their norms cluster by arm; the two weight-decay strata of a replicate share its
initial weights and minibatches (paired). Hence, per task:

* :func:`arm_association` — average the seeds within each (arm, stratum) (log10 norm, accuracy),
  take Spearman's ρ across arms within each stratum and average over strata (ρ̄); an **exact
  permutation test** permutes the arm labels of the accuracies *jointly in every stratum*
  (``scipy.stats.permutation_test``, ``permutation_type="pairings"``, all A! orders for A ≤ 8
  arms; one-sided p for ρ̄ < 0 and for ρ̄ > 0), and a **cluster bootstrap** resamples arms
  (``scipy.stats.bootstrap`` over arm indices, percentile interval);
* :func:`seed_contrast` — the reviewer's pair (x³ against x/16): per replicate, the difference
  averaged over the paired strata (one number per seed, the independent unit); exact sign-flip
  permutation p (``permutation_type="samples"``) and a Student-t interval;
* :func:`arm_level` — both, for every task and norm of a final table.

The run-level functions below (:func:`spearman_ci`, :func:`paired_contrast`) treat runs as
independent; they are kept as *descriptive* statistics (the figure shows them) and are not the
basis of any verdict:

* :func:`spearman_ci` — ρ (``scipy.stats.spearmanr``) with a seeded percentile-bootstrap
  interval from ``scipy.stats.bootstrap``; with strata (the weight decay), the statistic is the
  run-weighted mean of the within-stratum ρ's and runs are resampled within each stratum
  (the strata's index arrays are the independent samples of ``scipy.stats.bootstrap``), so a
  difference between weight decays cannot create the association;
* :func:`paired_contrast` — the reviewer's pair (x³ against x/16): median paired difference
  (pairs share initial weights and minibatches: same weight decay and replicate) of log10
  norm and of accuracy, percentile-bootstrap interval;
* :func:`arm_summary`, :func:`analyse` — everything a verdict needs, per task.

Diverged runs carry norm = inf and accuracy = chance: they rank as the largest norms and the
worst accuracies. :func:`analyse` reports every correlation also over the finite runs only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from common.seeds import seed_sequence
from common.validate import InputError, positive_int, unit_interval

__all__ = ["RankCorrelation", "spearman_ci", "paired_contrast", "arm_summary", "analyse", "LEVEL", "N_BOOT",
           "NORMS", "ArmAssociation", "SeedContrast", "arm_association", "arm_cube", "seed_contrast", "arm_level",
           "MAX_EXACT_ARMS", "study_arm_level", "STUDY_NORMS", "STUDY_CONTRAST"]

LEVEL = 0.95  # reported interval level
N_BOOT = 4000  # bootstrap resamples
NORMS = ("attn_fro", "jac_fro")  # ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F, mean over layers and heads, end of training
BIG = 1e9  # a paired log10-norm difference with one diverged run (±∞) enters the bootstrap as ±BIG
MAX_EXACT_ARMS = 8  # up to 8! = 40 320 orders the permutation test enumerates every one (exact p)
N_PERM_MC = 9999  # permutations drawn (Monte Carlo p) beyond MAX_EXACT_ARMS arms


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman ρ of (x, y), pooled or as the n-weighted mean of within-stratum ρ's, with a bootstrap interval."""

    rho: float  # point estimate (nan when undefined: a constant x or y in every stratum)
    lo: float  # percentile-bootstrap interval at ``level``
    hi: float
    level: float
    n: int  # runs
    n_boot: int
    strata: dict = field(default_factory=dict)  # stratum -> {"n", "rho"}
    boot: np.ndarray = field(default=None, repr=False, compare=False)  # (n_boot,) replicates of the statistic

    def interval(self, level: float) -> tuple[float, float]:
        """Percentile interval of the same bootstrap replicates at another ``level``."""
        level = unit_interval("level", level, 0.0, 1.0)
        a = (1 - level) / 2
        lo, hi = np.percentile(self.boot, [100 * a, 100 * (1 - a)])
        return float(lo), float(hi)

    def as_dict(self, extra_levels: Sequence[float] = ()) -> dict:
        """Plain-JSON form (rounded), with intervals at ``extra_levels`` as ``ci@<level>``."""
        out = {"rho": _r(self.rho), "ci": [_r(self.lo), _r(self.hi)], "level": self.level, "n": self.n,
               "n_boot": self.n_boot, "strata": {str(k): {"n": v["n"], "rho": _r(v["rho"])} for k, v in self.strata.items()}}
        for lv in extra_levels:
            out[f"ci@{lv:g}"] = [_r(v) for v in self.interval(lv)]
        return out


def _r(v: float, nd: int = 4) -> float | None:
    return None if v is None or not math.isfinite(v) else round(float(v), nd)


def _rho_rows(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Spearman ρ along the last axis of (..., n) arrays: Pearson correlation of ``scipy.stats.rankdata`` ranks.

    The definition ``scipy.stats.spearmanr`` computes, vectorised over bootstrap resamples without
    its p-values (tests check equality). A resample with a constant x or y has no defined ρ; it
    counts as "no association" (0).
    """
    rx = stats.rankdata(xs, axis=-1)
    ry = stats.rankdata(ys, axis=-1)
    rx = rx - rx.mean(axis=-1, keepdims=True)
    ry = ry - ry.mean(axis=-1, keepdims=True)
    num = (rx * ry).sum(axis=-1)
    den = np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def spearman_ci(x, y, strata=None, *, level: float = LEVEL, n_boot: int = N_BOOT,
                seed: int | np.random.SeedSequence = 0) -> RankCorrelation:
    """Spearman ρ(x, y) with a percentile-bootstrap interval over runs; within strata if given.

    Args:
      x, y: (n,) values (±inf allowed: they rank at the ends; no NaN).
      strata: (n,) labels; None pools every run. With strata the statistic is
        Σ_s n_s ρ_s / Σ_s n_s over strata whose ρ_s is defined, and each resample draws n_s runs
        with replacement inside every stratum s.
      level: interval level; n_boot: resamples; seed: for ``np.random.default_rng``.
    """
    x = np.asarray(x, dtype=float).ravel()  # (n,)
    y = np.asarray(y, dtype=float).ravel()
    level = unit_interval("level", level, 0.0, 1.0)
    n_boot = positive_int("n_boot", n_boot)
    if x.shape != y.shape or x.size < 3:
        raise InputError(f"x and y need the same length ≥ 3, got {x.size} and {y.size}")
    if np.isnan(x).any() or np.isnan(y).any():
        raise InputError("x and y must not contain NaN")
    labels = np.zeros(x.size, dtype=int) if strata is None else np.asarray(strata)
    if labels.shape != x.shape:
        raise InputError(f"strata must have length {x.size}, got shape {labels.shape}")
    groups = [(g, np.flatnonzero(labels == g)) for g in pd.unique(labels)]
    if any(len(ix) < 2 for _, ix in groups):
        raise InputError("every stratum needs at least 2 runs")
    per = {}
    for g, ix in groups:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.ConstantInputWarning)
            r = float(stats.spearmanr(x[ix], y[ix]).statistic)
        per[g.item() if hasattr(g, "item") else g] = {"n": int(len(ix)), "rho": r}
    ok = [(v["n"], v["rho"]) for v in per.values() if math.isfinite(v["rho"])]
    rho = sum(n * r for n, r in ok) / sum(n for n, _ in ok) if ok else math.nan
    xs, ys = [x[ix] for _, ix in groups], [y[ix] for _, ix in groups]
    weights = np.array([len(ix) for _, ix in groups], dtype=float)

    def statistic(*idx, axis=-1):  # idx[s]: (..., n_s) resampled positions inside stratum s
        rs = np.stack([_rho_rows(xs[s][i], ys[s][i]) for s, i in enumerate(idx)], axis=-1)  # (..., S)
        return rs @ weights / weights.sum()

    data = tuple(np.arange(len(ix)) for _, ix in groups)
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap(data, statistic, n_resamples=n_boot, vectorized=True, paired=False,
                              confidence_level=level, method="percentile", rng=rng)
    boot = np.asarray(res.bootstrap_distribution, dtype=float)
    return RankCorrelation(rho=float(rho), lo=float(res.confidence_interval.low), hi=float(res.confidence_interval.high),
                           level=level, n=int(x.size), n_boot=n_boot, strata=per, boot=boot)


def paired_contrast(final: pd.DataFrame, task: str, arm_a: str = "x3", arm_b: str = "x_16", *,
                    level: float = LEVEL, family_level: float | None = None, n_boot: int = N_BOOT,
                    seed: int = 0) -> dict:
    """Median paired difference (arm_a − arm_b) of log10 norms and test accuracy, with bootstrap intervals.

    Pairs are runs of the same task, weight decay and replicate (the same initial weights and
    minibatches). log10(∞) − log10(∞) (both diverged) counts as 0. The interval is the
    percentile bootstrap of the median over pairs (``scipy.stats.bootstrap``); with
    ``family_level`` also the percentile interval of the same replicates at that level.

    Returns:
      {"pairs", "arms", "<q>": {"median_diff", "ci", "ci@<family_level>", "a_median", "b_median",
      "diffs"}} for q in test_acc, log10_attn_fro, log10_jac_fro, log10_attn_fro_init,
      log10_jac_fro_init (±inf as the strings "inf" / "-inf").
    """
    f = final[final["task"] == task]
    a = f[f["arm"] == arm_a].set_index(["weight_decay", "seed"])
    b = f[f["arm"] == arm_b].set_index(["weight_decay", "seed"])
    common = a.index.intersection(b.index)
    out: dict = {"task": task, "arms": [arm_a, arm_b], "pairs": int(len(common)), "level": level}
    if len(common) < 2:
        return out
    a, b = a.loc[common], b.loc[common]
    ss = seed_sequence(seed, {"contrast": task, "a": arm_a, "b": arm_b})
    for k, q in enumerate(("test_acc", "attn_fro", "jac_fro", "attn_fro_init", "jac_fro_init")):
        va, vb = a[q].to_numpy(float), b[q].to_numpy(float)
        name = q
        if q != "test_acc":
            with np.errstate(divide="ignore"):
                va, vb = np.log10(va), np.log10(vb)
            name = f"log10_{q}"
        with np.errstate(invalid="ignore"):
            d = va - vb
        d = np.where(np.isnan(d), 0.0, d)  # ∞ − ∞: both diverged, equal
        d = np.clip(d, -BIG, BIG)  # one diverged: ±BIG, so percentiles never interpolate ∞ − ∞
        if np.all(d == d[0]):  # a constant sample: every interval is that value
            lo = hi = flo = fhi = float(d[0])
        else:
            with warnings.catch_warnings(), np.errstate(invalid="ignore"):
                warnings.simplefilter("ignore", stats.DegenerateDataWarning)
                res = stats.bootstrap((d,), np.median, n_resamples=n_boot, confidence_level=level, method="percentile",
                                      rng=np.random.default_rng(ss.spawn(5)[k]))
            lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
            if family_level is not None:
                a_ = (1 - family_level) / 2
                flo, fhi = np.percentile(res.bootstrap_distribution, [100 * a_, 100 * (1 - a_)])
        out[name] = {"median_diff": _num(np.median(d)), "ci": [_num(lo), _num(hi)], "a_median": _num(np.median(va)),
                     "b_median": _num(np.median(vb)), "diffs": [_num(v) for v in d]}
        if family_level is not None:
            out[name][f"ci@{family_level:g}"] = [_num(flo), _num(fhi)]
    return out


def _num(v: float) -> float | str:
    """A JSON-safe rounded number: ±inf (and ±BIG) as the strings "inf" / "-inf"."""
    v = float(v)
    if math.isinf(v) or abs(v) >= BIG:
        return "inf" if v > 0 else "-inf"
    return round(v, 5)


def contrast_reproduced(c: dict, key: str = "ci") -> bool:
    """The review's observation with both intervals (``key``) excluding 0: arm_a has a lower final attention
    norm (log10 difference interval < 0) and a lower final test accuracy (difference interval < 0)."""
    if "test_acc" not in c:
        return False
    hi_norm, hi_acc = c["log10_attn_fro"][key][1], c["test_acc"][key][1]
    return _lt0(hi_norm) and _lt0(hi_acc)


def _lt0(v) -> bool:
    return v == "-inf" or (isinstance(v, (int, float)) and v < 0)


def arm_summary(final: pd.DataFrame) -> list[dict]:
    """Per (task, arm, weight decay): runs, diverged, and median / range over seeds of accuracy and norms."""
    rows = []
    for (task, arm, wd), g in final.groupby(["task", "arm", "weight_decay"], sort=False):
        row = {"task": task, "arm": arm, "label": g["label"].iloc[0] if "label" in g else arm,
               "weight_decay": float(wd), "runs": int(len(g)), "diverged": int(g["diverged"].sum())}
        for q in ("test_acc", "test_loss", "attn_fro", "jac_fro", "attn_fro_init", "jac_fro_init", "w_fro"):
            v = g[q].to_numpy(float)
            row[q] = {"median": _num(np.median(v)), "range": [_num(v.min()), _num(v.max())]}
        rows.append(row)
    return rows


def analyse(final: pd.DataFrame, *, level: float = LEVEL, family_level: float | None = None,
            n_boot: int = N_BOOT, seed: int = 0, contrast: tuple[str, str] = ("x3", "x_16"),
            arm_interval_level: float = 0.98, contrast_interval_level: float = LEVEL) -> dict:
    """Arm-level inference (``"arm_level"``, :func:`arm_level`: the basis of any verdict) and, per task, the
    run-level descriptive statistics: Spearman ρ(norm, accuracy) pooled, within weight decay (stratified),
    per weight decay, and within weight decay over finite runs only; the run-paired contrast; per-arm summaries.

    ``family_level`` adds run-level intervals ``ci@<family_level>`` from the same replicates. Default:
    1 − (1 − level)/k over the k = T·|NORMS|·2 within-weight-decay intervals and T contrasts (descriptive:
    runs are not independent). ``arm_interval_level`` / ``contrast_interval_level``: levels of the arm-bootstrap
    and replicate t intervals (the rule module's, :mod:`sapa.rules.association`).
    """
    tasks = list(pd.unique(final["task"]))
    if family_level is None:
        family_level = 1 - (1 - level) / (len(tasks) * (2 * len(NORMS) + 1))
    out: dict = {"level": level, "family_level": round(family_level, 6), "family_key": f"ci@{family_level:g}",
                 "n_boot": n_boot, "seed": seed, "norms": list(NORMS), "tasks": {}}
    for task in tasks:
        f = final[final["task"] == task].reset_index(drop=True)
        fin = f[~f["diverged"].astype(bool) & np.isfinite(f["attn_fro"]) & np.isfinite(f["jac_fro"])]
        t: dict = {"n_runs": int(len(f)), "n_diverged": int(f["diverged"].sum()), "correlations": {}}
        for q in NORMS:
            key = lambda kind: seed_sequence(seed, {"task": task, "norm": q, "kind": kind})  # noqa: E731
            c = {"pooled": spearman_ci(f[q], f["test_acc"], level=level, n_boot=n_boot, seed=key("pooled")),
                 "stratified": spearman_ci(f[q], f["test_acc"], f["weight_decay"], level=level, n_boot=n_boot,
                                           seed=key("stratified"))}
            for wd, g in f.groupby("weight_decay", sort=True):
                c[f"wd={wd:g}"] = spearman_ci(g[q], g["test_acc"], level=level, n_boot=n_boot, seed=key(f"wd{wd:g}"))
            if len(fin) == len(f):  # nothing diverged: the same runs, the same interval
                c["finite_stratified"] = c["stratified"]
            elif len(fin) >= 3 and fin.groupby("weight_decay").size().min() >= 2:
                c["finite_stratified"] = spearman_ci(fin[q], fin["test_acc"], fin["weight_decay"], level=level,
                                                     n_boot=n_boot, seed=key("finite"))
            t["correlations"][q] = {k: v.as_dict(extra_levels=(family_level,)) for k, v in c.items()}
        t["contrast"] = paired_contrast(f, task, *contrast, level=level, family_level=family_level, n_boot=n_boot,
                                        seed=seed)
        t["contrast"]["reproduced"] = contrast_reproduced(t["contrast"])
        t["contrast"]["reproduced_family"] = contrast_reproduced(t["contrast"], f"ci@{family_level:g}")
        t["arms"] = arm_summary(f)
        out["tasks"][task] = t
    out["arm_level"] = arm_level(final, level=arm_interval_level, contrast_level=contrast_interval_level,
                                 n_boot=n_boot, seed=seed, contrast=contrast)
    return out


# --------------------------------------------------------------------------- arm-level inference


@dataclass(frozen=True)
class ArmAssociation:
    """ρ̄ = mean_s ρ_S(norm_{s,a}, acc_{s,a}) over arms a, its exact permutation p-values and arm-bootstrap interval."""

    rho: float  # ρ̄ (nan when undefined: a constant norm or accuracy across arms in every stratum)
    p_less: float  # one-sided permutation p for ρ̄ < 0 (a lower norm goes with a higher accuracy)
    p_greater: float  # one-sided permutation p for ρ̄ > 0
    lo: float  # percentile interval of ρ̄ over arm resamples at ``level``
    hi: float
    level: float
    n_arms: int
    n_perm: int  # permutations in the null distribution (A! when exact)
    exact: bool
    n_boot: int
    strata: tuple = ()  # per stratum: ρ_S across arms
    arms: tuple = ()  # arm names, in the order of the mean arrays
    norm_means: tuple = ()  # (S, A) per-stratum arm means of log10 norm (inf: an arm with a diverged run)
    acc_means: tuple = ()  # (S, A) per-stratum arm means of accuracy

    def as_dict(self) -> dict:
        """Plain-JSON form (rounded; ±inf as strings)."""
        return {"rho": _r(self.rho), "p_less": _r(self.p_less, 6), "p_greater": _r(self.p_greater, 6),
                "ci": [_r(self.lo), _r(self.hi)], "level": self.level, "n_arms": self.n_arms, "n_perm": self.n_perm,
                "exact": self.exact, "n_boot": self.n_boot, "rho_per_stratum": [_r(v) for v in self.strata],
                "arms": list(self.arms),
                "log10_norm_means": [[_num(v) for v in row] for row in self.norm_means],
                "acc_means": [[_num(v) for v in row] for row in self.acc_means]}


def _stratified_rho(nm: np.ndarray, am: np.ndarray, i_norm, i_acc) -> np.ndarray:
    """mean_s ρ_S(nm[s, i_norm], am[s, i_acc]) along the last axis (index arrays broadcast, shape (..., A'))."""
    return np.mean([_rho_rows(nm[s][i_norm], am[s][i_acc]) for s in range(nm.shape[0])], axis=0)


def arm_association(norm_means, acc_means, *, level: float = LEVEL, n_boot: int = N_BOOT,
                    seed: int | np.random.SeedSequence | np.random.Generator = 0, arms: Sequence[str] = ()
                    ) -> ArmAssociation:
    """ρ̄ across arms from per-stratum arm means, exact permutation p (arm labels permuted jointly), arm bootstrap.

    Args:
      norm_means, acc_means: (S, A) arm means per stratum (S weight decays, A arms; the norm on any
        monotone scale, e.g. mean log10; +inf allowed: it ranks last; no NaN).
      level: two-sided level of the percentile interval; n_boot: arm resamples.
      seed: for the bootstrap (and the Monte Carlo permutations beyond MAX_EXACT_ARMS arms).
    """
    nm = np.atleast_2d(np.asarray(norm_means, dtype=float))  # (S, A)
    am = np.atleast_2d(np.asarray(acc_means, dtype=float))
    level = unit_interval("level", level, 0.0, 1.0)
    n_boot = positive_int("n_boot", n_boot)
    if nm.shape != am.shape or nm.shape[1] < 3:
        raise InputError(f"norm and accuracy means need the same shape (strata, arms ≥ 3), got {nm.shape}, {am.shape}")
    if np.isnan(nm).any() or np.isnan(am).any():
        raise InputError("arm means must not contain NaN")
    S, A = nm.shape
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    ident = np.arange(A)
    per = tuple(float(_rho_rows(nm[s], am[s])) if _defined(nm[s], am[s]) else math.nan for s in range(S))
    ok = [r for r in per if math.isfinite(r)]
    if not ok:
        return ArmAssociation(rho=math.nan, p_less=math.nan, p_greater=math.nan, lo=math.nan, hi=math.nan, level=level,
                              n_arms=A, n_perm=0, exact=False, n_boot=n_boot, strata=per, arms=tuple(arms),
                              norm_means=tuple(map(tuple, nm)), acc_means=tuple(map(tuple, am)))
    exact = A <= MAX_EXACT_ARMS
    n_res = math.inf if exact else N_PERM_MC

    def perm_stat(i, axis=-1):  # i: (..., A) a permutation of the accuracies' arm labels, the same in every stratum
        return _stratified_rho(nm, am, ident, i)

    p = {}
    for alt in ("less", "greater"):
        res = stats.permutation_test((ident,), perm_stat, permutation_type="pairings", vectorized=True,
                                     n_resamples=n_res, alternative=alt, rng=rng)
        p[alt] = float(res.pvalue)
    rho = float(res.statistic)
    n_perm = int(res.null_distribution.size)

    def boot_stat(i, axis=-1):  # i: (..., A) arms drawn with replacement (each keeps its strata: pairing)
        return _stratified_rho(nm, am, i, i)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        b = stats.bootstrap((ident,), boot_stat, n_resamples=n_boot, vectorized=True, confidence_level=level,
                            method="percentile", rng=rng)
    return ArmAssociation(rho=rho, p_less=p["less"], p_greater=p["greater"], lo=float(b.confidence_interval.low),
                          hi=float(b.confidence_interval.high), level=level, n_arms=A, n_perm=n_perm, exact=exact,
                          n_boot=n_boot, strata=per, arms=tuple(arms), norm_means=tuple(map(tuple, nm)),
                          acc_means=tuple(map(tuple, am)))


def _defined(x: np.ndarray, y: np.ndarray) -> bool:
    """ρ_S(x, y) is defined: neither is constant."""
    return bool(np.unique(x).size > 1 and np.unique(y).size > 1)


def arm_cube(final: pd.DataFrame, task: str, q: str, arms: Sequence[str] | None = None, stratum: str = "weight_decay"
             ) -> tuple[np.ndarray, list[str], list[float], list[int]]:
    """(A, S, R) array of quantity ``q`` (log10 for norms) per arm, stratum and replicate (NaN: no run).

    ``stratum``: the column of the paired strata (weight decay in the old experiment; N in the study).
    Returns (cube, arms, strata, replicates); arms in table order unless given.
    """
    f = final[final["task"] == task]
    arms = list(pd.unique(f["arm"])) if arms is None else list(arms)
    wds = sorted(float(w) for w in pd.unique(f[stratum]))
    reps = sorted(int(r) for r in pd.unique(f["seed"]))
    cube = np.full((len(arms), len(wds), len(reps)), np.nan)
    v = f[q].to_numpy(float)
    if q != "test_acc" and q != "train_acc":
        with np.errstate(divide="ignore"):
            v = np.log10(v)
    ai = {a: k for k, a in enumerate(arms)}
    for (a, w, r), val in zip(zip(f["arm"], f[stratum].astype(float), f["seed"].astype(int)), v):
        if a in ai:
            cube[ai[a], wds.index(w), reps.index(r)] = val
    return cube, arms, wds, reps


def _seed_means(cube: np.ndarray) -> np.ndarray:
    """(S, A) means over replicates of an (A, S, R) cube (missing runs skipped; +inf stays +inf)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(cube, axis=2).T


@dataclass(frozen=True)
class SeedContrast:
    """mean_r d_r, d_r = mean_s (q_a − q_b)_{s,r}: the pair's difference with the replicate as the unit."""

    mean: float
    p_less: float  # exact sign-flip p for mean < 0
    p_greater: float
    lo: float  # Student-t interval at ``level`` over replicates
    hi: float
    level: float
    n: int  # replicates with both arms in every stratum
    diffs: tuple = ()

    def as_dict(self) -> dict:
        """Plain-JSON form (rounded; ±inf as strings, undefined as None)."""
        j = lambda v: None if math.isnan(v) else _num(v)  # noqa: E731
        return {"mean": j(self.mean), "p_less": _r(self.p_less, 6), "p_greater": _r(self.p_greater, 6),
                "ci": [j(self.lo), j(self.hi)], "level": self.level, "n": self.n, "diffs": [j(v) for v in self.diffs]}


def paired_seed_test(d, *, level: float = LEVEL) -> SeedContrast:
    """Exact sign-flip test of mean(d) (all 2^n sign vectors, ``scipy.stats.permutation_test``) and its t interval."""
    d = np.asarray(d, dtype=float).ravel()
    level = unit_interval("level", level, 0.0, 1.0)
    n = int(d.size)
    if n < 2 or not np.isfinite(d).all():
        return SeedContrast(mean=float(np.mean(d)) if n else math.nan, p_less=math.nan, p_greater=math.nan,
                            lo=math.nan, hi=math.nan, level=level, n=n, diffs=tuple(d))
    p = {}
    for alt in ("less", "greater"):
        res = stats.permutation_test((d,), np.mean, permutation_type="samples", vectorized=True, n_resamples=math.inf,
                                     alternative=alt)
        p[alt] = float(res.pvalue)
    m, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(n))
    if se > 0:
        lo, hi = stats.t.interval(level, n - 1, loc=m, scale=se)
    else:
        lo = hi = m
    return SeedContrast(mean=m, p_less=p["less"], p_greater=p["greater"], lo=float(lo), hi=float(hi), level=level,
                        n=n, diffs=tuple(d))


def seed_contrast(final: pd.DataFrame, task: str, arm_a: str = "x3", arm_b: str = "x_16", q: str = "test_acc", *,
                  level: float = LEVEL, stratum: str = "weight_decay") -> SeedContrast:
    """mean_r d_r, d_r = mean_s (q_a − q_b)_{s,r} (log10 for norms): the pair, tested with the replicate as the unit.

    With N as the stratum (the study) the strata are independent models, so d_r averages independent paired
    differences: still one symmetric-under-the-null number per replicate, as the sign-flip test needs.
    """
    cube, arms, _, _ = arm_cube(final, task, q, arms=[arm_a, arm_b], stratum=stratum)
    with np.errstate(invalid="ignore"):
        d = cube[0] - cube[1]  # (S, R); ∞ − ∞ (both diverged) is nan: equal
    d = np.where(np.isnan(d) & np.isinf(cube[0]) & np.isinf(cube[1]), 0.0, d)
    keep = ~np.isnan(d).any(axis=0)  # replicates with the pair in every stratum
    return paired_seed_test(d[:, keep].mean(axis=0), level=level)


def arm_level(final: pd.DataFrame, *, level: float = LEVEL, contrast_level: float = LEVEL, n_boot: int = N_BOOT,
              seed: int = 0, contrast: tuple[str, str] = ("x3", "x_16"), stratum: str = "weight_decay",
              norms: Sequence[str] = NORMS) -> dict:
    """Per task: arm-level ρ̄ for every norm against test accuracy, and the pair's replicate-level contrasts.

    Returns {task: {"n_arms", "n_strata", "n_replicates", "association": {q: ArmAssociation.as_dict()},
    "contrast": {"test_acc" | "log10_attn_fro" | "log10_attn_fro_init" | …: SeedContrast.as_dict()}}}.
    """
    out: dict = {}
    for task in pd.unique(final["task"]):
        acc, arms, wds, reps = arm_cube(final, task, "test_acc", stratum=stratum)
        t: dict = {"n_arms": len(arms), "n_strata": len(wds), "n_replicates": len(reps), "association": {},
                   "contrast": {}, "strata": wds, "stratum": stratum}
        for q in norms:
            nrm, _, _, _ = arm_cube(final, task, q, arms=arms, stratum=stratum)
            rng = np.random.default_rng(seed_sequence(seed, {"arm-level": str(task), "norm": q}))
            t["association"][q] = arm_association(_seed_means(nrm), _seed_means(acc), level=level, n_boot=n_boot,
                                                  seed=rng, arms=arms).as_dict()
        if set(contrast) <= set(arms):
            for q in ("test_acc", *norms, *(f"{n}_init" for n in norms)):
                name = q if q == "test_acc" else f"log10_{q}"
                t["contrast"][name] = seed_contrast(final, task, *contrast, q=q, level=contrast_level,
                                                    stratum=stratum).as_dict()
            t["contrast"]["arms"] = list(contrast)
        out[str(task)] = t
    return out


STUDY_NORMS = ("attn_fro", "jac_x_fro")  # the study's ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F columns
STUDY_CONTRAST = ("x3", "x_alpha")  # the reviewer's pair in the study: x³ against x/α* (the paper's x/16 style)


def study_arm_level(runs: pd.DataFrame, *, level: float = LEVEL, contrast_level: float = LEVEL, n_boot: int = N_BOOT,
                    seed: int = 0, contrast: tuple[str, str] = STUDY_CONTRAST) -> dict:
    """:func:`arm_level` on the training study: every arm at its best lr, the (task, N) cells as the strata.

    Args:
      runs: the study's runs table (``empirics.training.train_study``; only ``in_study`` rows count, diverged
        members at chance accuracy and norm ∞). Per task, only arms trained at every N of the task enter
        (a stratum must hold every arm for the joint permutation of arm labels).
    Returns the :func:`arm_level` dict, keyed by task; each block also lists ``"Ns"`` and the arms left out.
    """
    from empirics.training.study_analysis import at_best

    b = at_best(runs)
    keep, left_out = [], {}
    for task, f in b.groupby("task", sort=False):
        Ns = set(f["N"])
        full = [a for a in pd.unique(f["arm"]) if set(f[f["arm"] == a]["N"]) == Ns]
        left_out[str(task)] = sorted(set(f["arm"]) - set(full))
        keep.append(f[f["arm"].isin(full)])
    b = pd.concat(keep, ignore_index=True) if keep else b
    out = arm_level(b, level=level, contrast_level=contrast_level, n_boot=n_boot, seed=seed, contrast=contrast,
                    stratum="N", norms=STUDY_NORMS)
    for task, t in out.items():
        t["Ns"] = [int(v) for v in t["strata"]]
        t["arms_left_out"] = left_out.get(task, [])
    return out


def bigram_accuracy(train_ids, test_x, test_y) -> float:
    """Test accuracy of argmax_b count(a → b) on the training text: the "bigram plateau" of a next-character model.

    Args:
      train_ids: (n,) character ids of the training text; test_x, test_y: (M, N) inputs and next characters.
    A character never seen as a predecessor predicts the most frequent character.
    """
    tr = np.asarray(train_ids, dtype=np.int64).ravel()
    x = np.asarray(test_x, dtype=np.int64).ravel()
    y = np.asarray(test_y, dtype=np.int64).ravel()
    if tr.size < 2 or x.size == 0 or x.shape != y.shape:
        raise InputError("bigram_accuracy needs ≥ 2 training ids and test inputs/targets of one shape")
    V = int(max(tr.max(), x.max(), y.max())) + 1
    counts = np.zeros((V, V), dtype=np.int64)
    np.add.at(counts, (tr[:-1], tr[1:]), 1)
    pred = counts.argmax(axis=1)  # (V,)
    seen = counts.sum(axis=1) > 0
    pred = np.where(seen, pred, np.bincount(tr, minlength=V).argmax())
    return float((pred[x] == y).mean())
