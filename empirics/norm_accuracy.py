"""ρ_S(final attention norm, final test accuracy) across runs, with stratified bootstrap intervals (arXiv 2410.18613, issue #8).

The paper's thesis, "softmax works because it regularizes the norm of the attention matrix",
predicts that across activations a lower ‖φ(S)‖_F (or ‖∂φ(S)/∂X‖_F) at the end of training
goes with a better test accuracy: Spearman ρ < 0. Pure functions over the table of final runs
written by :func:`empirics.training.run_experiment` (one row per run: task, arm,
weight_decay, seed, diverged, test_acc, attn_fro, jac_fro, ...):

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

from empirics.samplers import seed_sequence
from theory.validate import InputError, positive_int, unit_interval

__all__ = ["RankCorrelation", "spearman_ci", "paired_contrast", "arm_summary", "analyse", "LEVEL", "N_BOOT",
           "NORMS"]

LEVEL = 0.95  # reported interval level
N_BOOT = 4000  # bootstrap resamples
NORMS = ("attn_fro", "jac_fro")  # ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F, mean over layers and heads, end of training
BIG = 1e9  # a paired log10-norm difference with one diverged run (±∞) enters the bootstrap as ±BIG


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
            n_boot: int = N_BOOT, seed: int = 0, contrast: tuple[str, str] = ("x3", "x_16")) -> dict:
    """Per task and norm: Spearman ρ(norm, accuracy) pooled, within weight decay (stratified), per weight
    decay, and within weight decay over finite runs only; the paired contrast; per-arm summaries.

    ``family_level`` adds intervals ``ci@<family_level>`` from the same replicates. Default:
    1 − (1 − level)/k, Bonferroni over the k = T·|NORMS|·2 within-weight-decay intervals (all runs,
    finite runs) and T contrasts that a verdict reads for T tasks.
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
    return out
