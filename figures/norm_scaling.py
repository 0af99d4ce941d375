"""Figures 1 and 2: ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F against N, Monte Carlo beside exact theory.

arXiv 2410.18613, Thm 4.1 (softmax ≤ √N), Thm 4.2 / 4.4 (x, x³ grow like N) and Cor 4.3 / 4.5
(x/√N, x³/√N grow like √N), for the activations of the paper's experiments: softmax(S/√d),
x/√N, x³/√N, x/16 and x³. One panel per randomness model: the paper's independent A, B
(S = ABᵀ) and S = X W_Q W_Kᵀ Xᵀ with i.i.d., tied and ρ-correlated weights (σ_w = 1/√D).

Markers are Monte Carlo RMS norms √mean(‖·‖²) — the quantity exact theory predicts — with
intervals √(mean ± 2 SE) of the mean squared norm; lines are the exact √E‖·‖² of
``sapa.theory.moments`` times the coefficient c(N) (softmax has no exact curve). Grey lines are √N
(the softmax bound of Thm 4.1) and N; dotted verticals mark the crossover N* = 1 + m_diag/m_off
where the N² (off-diagonal) term of E‖S^{∘p}‖² overtakes the N (diagonal) term.

Agreement bound (:func:`check`). With T trials the RMS is √(mean of T i.i.d. squared norms);
by the delta method its relative standard error is CV/(2√T), CV = sd(‖·‖²)/mean(‖·‖²). CV is
estimated from the same trials, and for x³ at small N the squared norms are so heavy-tailed
(true CV 2–5 at N = 8) that the sample CV runs low and a few trials carry the mean; so T is
replaced by Kish's effective sample size T_eff = T/(1 + ĈV²) (≈ T for x, CV ≈ 0.1–0.4). A
point agrees when

    |RMS − exact| / exact ≤ k · ĈV / (2√T_eff),   k = t_{T−1}⁻¹(1 − α/(2K)),

Student t because CV is estimated, α = 0.01 family-wise over the K independent draws checked
(Bonferroni; x/√N and x/16, or x³/√N and x³, share draws and relative errors, so count once).
T = 32, K = 40 give k ≈ 4.1: about 1 % for x/√N at N = 128 and ≈ 70 % (nearly vacuous, as it
should be) for x³ at N = 8. In 3000 simulated 32–48-trial samples of x³ cells (iid and tied,
D = 16 and 64, N = 8–32) the per-point false-alarm rate was ≤ 0.13 %, against up to 1.7 %
with T in place of T_eff.
"""

from __future__ import annotations

import math
import tempfile
from functools import lru_cache
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator
from scipy.stats import t as _student

from sapa.empirics.montecarlo.stats import loglog_slope
from sapa.figures import style
from sapa.theory.families import CONST, INV_SQRT_D, INV_SQRT_N, Family, family

QUANTITIES = ("fro", "jac_fro")
ALPHA = 0.01  # family-wise level of the MC-vs-exact agreement check


# The paper's activation rows, in legend order (theory/families.py: label, degree, scale rule); softmax on S/√d.
SERIES: tuple[Family, ...] = tuple(family(i) for i in ("softmax", "x_sqrtN", "x3_sqrtN", "x_16", "x3"))


def series_name(f: Family) -> str:
    """The legend text of a series: the family's one label (softmax: on the logits S/√d)."""
    return f.label + " on S/√d" if f.kernel == "softmax" else f.label


def sweep_columns(f: Family) -> tuple[str, int, str, float | None]:
    """(activation, p, scale_policy, c) of a family's cells in a sweep summary: softmax on S/√d (τ = 1/√d), c·x^p
    under its rule, a constant coefficient (x/16, x³) as the sweep's "const" with that c."""
    if f.kernel == "softmax":
        return "softmax", 0, INV_SQRT_D, None
    if f.const is not None:
        return "poly", f.p, CONST, f.const
    return "poly", f.p, f.rule, None


def _curve(f: Family, N) -> np.ndarray:
    """c(N) of c·x^p under the family's rule, over real N; (K,)."""
    return f.coefficient(np.asarray(N, dtype=np.float64))


# (weight_model, panel title); corr's ρ is filled in by `draw`
PANELS = (
    ("paper", "paper: A, B independent, S = ABᵀ"),
    ("iid", "i.i.d. weights, S = X W_Q W_Kᵀ Xᵀ"),
    ("tied", "tied weights W_Q = W_K"),
    ("corr", "correlated weights, ρ = {rho:g}"),
)

YLABEL = {"fro": "‖φ(S)‖_F  (RMS over trials)", "jac_fro": "‖∂φ(S)/∂X‖_F  (RMS over trials)"}
TITLE = {"fro": "Attention-matrix norm ‖φ(S)‖_F", "jac_fro": "Jacobian norm ‖∂φ(S)/∂X‖_F"}
FILE = {"fro": "norm_vs_n", "jac_fro": "jac_norm_vs_n"}


# --------------------------------------------------------------------------- exact curves


def exact_sq(p: int, model: str, Ns, D: int, d: int, quantity: str = "fro", *, rho: float = 0.5,
             sigma: float | None = None) -> np.ndarray:
    """E‖S^{∘p}‖²_F (or E‖∂S^{∘p}/∂X‖²_F) for c = 1, vectorised over N: N(N−1)·m_off + N·m_diag.

    Args:
      p: power.
      model: "paper" | "iid" | "tied" | "corr".
      Ns: (K,) sequence lengths (floats allowed, for dense curves).
      D, d: token and head widths (D unused for "paper").
      quantity: "fro" or "jac_fro" (Jacobian w.r.t. X; w.r.t. (A, B) for "paper").
      rho: weight correlation of "corr".
      sigma: weight std (default 1/√D; the paper model's entry std defaults to 1).

    Returns:
      (K,) float array; equals ``exact_moments(p, model, N, ...).expected_fro2`` at integer N.
    """
    from sapa.theory.moments import exact_moments

    if sigma is None:
        sigma = 1.0 if model == "paper" else 1 / math.sqrt(D)
    em = exact_moments(p, model, 2, None if model == "paper" else D, d,
                       rho=rho if model == "corr" else 0.0, sigma=sigma)
    off, diag = (em.m_off, em.m_diag) if quantity == "fro" else (em.j_off, em.j_diag)
    off, diag = float(off), float(diag)
    N = np.asarray(Ns, dtype=np.float64)
    k = 1.0 if quantity == "fro" else float(p * p)
    if model == "paper":  # all N² entries alike
        return k * N * N * off
    return k * (N * (N - 1) * off + N * diag)


def crossover(p: int, model: str, D: int, d: int, quantity: str = "fro", *, rho: float = 0.5) -> float:
    """N* = 1 + m_diag/m_off (or 1 + j_diag/j_off); NaN for the paper model (no N-linear term)."""
    from sapa.theory.moments import exact_moments

    if model == "paper":
        return math.nan
    em = exact_moments(p, model, 2, D, d, rho=rho if model == "corr" else 0.0)
    return em.crossover_n if quantity == "fro" else em.crossover_n_jac


# --------------------------------------------------------------------------- selecting


def _rows(summary: pd.DataFrame, s: Family, model: str, D: int, d: int, quantity: str, rho: float) -> pd.DataFrame:
    """Summary rows of one series in one panel, sorted by N (float64 preferred; plain cells only)."""
    kind, p, policy, c = sweep_columns(s)
    m = (summary["quantity"] == quantity) & (summary["weight_model"] == model) & (summary["d"] == d)
    m &= summary["D"] == (d if model == "paper" else D)
    m &= (summary["activation"] == kind) & (summary["scale_policy"] == policy)
    if kind == "poly":
        m &= summary["p"] == p
    if c is not None:
        m &= np.isclose(summary["c"].astype(float), c)
    for col, val in (("row", -1), ("mask", "none"), ("x_model", "iso"), ("mean_norm", 0.0)):
        if col in summary.columns:
            m &= summary[col] == val
    if model == "corr":
        m &= np.isclose(summary["rho"].astype(float), rho)
    g = summary[m]
    if "dtype" in g.columns and g["dtype"].nunique() > 1:
        g = g[g["dtype"] == ("float64" if (g["dtype"] == "float64").any() else g["dtype"].iloc[0])]
    return g.sort_values("N")


def _sigma(model: str, D: int, sigma_w: float | None, sigma_ab: float) -> float:
    return sigma_ab if model == "paper" else (sigma_w if sigma_w is not None else 1 / math.sqrt(D))


# --------------------------------------------------------------------------- the claim


def check(summary: pd.DataFrame, D: int, d: int, quantity: str = "fro", *, rho: float = 0.5,
          sigma_w: float | None = None, sigma_ab: float = 1.0, alpha: float = ALPHA) -> dict:
    """MC RMS slopes (paper, iid) and per-point MC-vs-exact agreement (see the module docstring).

    Returns:
      {"slopes": {(model, series name): (mc slope, exact slope on the same grid)},
       "points": DataFrame (model, series, p, N, n, rms, exact, rel_err, cv, n_eff, se_rel, tol, ok),
       "k": k, "K": K}; se_rel = ĈV/(2√T_eff) and tol = k·se_rel.
    """
    slopes, recs = {}, []
    for model, _ in PANELS:
        sig = _sigma(model, D, sigma_w, sigma_ab)
        for s in SERIES[1:]:
            g = _rows(summary, s, model, D, d, quantity, rho)
            if g.empty:
                continue
            N = g["N"].to_numpy(float)
            exact = np.sqrt(exact_sq(s.p, model, N, D, d, quantity, rho=rho, sigma=sig)) * _curve(s, N)
            rms = np.sqrt(g["mean_sq"].to_numpy(float))
            cv = (g["std_sq"] / g["mean_sq"]).to_numpy(float)
            n = g["n"].to_numpy(float)
            if len(N) >= 2:
                # RMS exponents: half the log-log slope of the mean squared norm
                slopes[(model, series_name(s))] = (0.5 * loglog_slope(N, rms**2), 0.5 * loglog_slope(N, exact**2))
            for i in range(len(N)):
                recs.append({"model": model, "series": series_name(s), "p": s.p, "N": int(N[i]), "n": int(n[i]), "rms": rms[i],
                             "exact": exact[i], "rel_err": rms[i] / exact[i] - 1, "cv": cv[i],
                             "n_eff": n[i] / (1 + cv[i] ** 2),
                             "se_rel": cv[i] * math.sqrt(1 + cv[i] ** 2) / (2 * math.sqrt(n[i]))})
    pts = pd.DataFrame(recs)
    K = int(pts[["model", "p", "N"]].drop_duplicates().shape[0]) if len(pts) else 1  # independent draws
    k = float(_student.ppf(1 - alpha / (2 * K), df=max(int(pts["n"].min()) - 1, 1))) if len(pts) else math.nan
    if len(pts):
        pts["tol"] = k * pts["se_rel"]
        pts["ok"] = pts["rel_err"].abs() <= pts["tol"]
    return {"slopes": slopes, "points": pts, "k": k, "K": K}


def assert_claim(result: dict, quantity: str) -> None:
    """Paper and iid: x/√N RMS slope within 0.1 of ½, unscaled x³ within 0.1 of 1; MC agrees with exact."""
    want = {family("x_sqrtN").label: 0.5, family("x3").label: 1.0}
    seen = 0
    for model in ("paper", "iid"):
        for name, target in want.items():
            if (model, name) in result["slopes"]:
                mc, _ = result["slopes"][(model, name)]
                seen += 1
                assert abs(mc - target) <= 0.1, f"{quantity} {model} {name}: MC RMS slope {mc:.3f}, want {target} ± 0.1"
    assert seen, "no paper/iid series of x/√N or x³ in the results"
    pts = result["points"]
    bad = pts[~pts["ok"]]
    assert bad.empty, f"{quantity}: MC RMS disagrees with exact √E‖·‖² beyond k = {result['k']:.2f} SE:\n{bad}"


# --------------------------------------------------------------------------- drawing


def draw(summary_df: pd.DataFrame, D: int, d: int, quantity: str = "fro", *, rho: float = 0.5,
         sigma_w: float | None = None, sigma_ab: float = 1.0, n_dense: int = 200) -> plt.Figure:
    """The figure from a stored summary (``sapa.empirics.montecarlo.sweep.summarise`` output); nothing is sampled.

    Args:
      summary_df: per-cell summary with columns weight_model, rho, activation, p, scale_policy,
        c, N, D, d, quantity, row, n, mean_sq, se_sq (and mask, x_model, mean_norm, dtype).
      D, d: widths to draw (paper-model rows are those with D = d).
      quantity: "fro" (Figure 1) or "jac_fro" (Figure 2).
      rho: the correlated model's ρ.
      sigma_w, sigma_ab: weight std used by the sweep (None: 1/√D) and the paper model's entry std.
      n_dense: points of the exact curves.
    """
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be one of {QUANTITIES}, got {quantity!r}")
    panels = [(m, t) for m, t in PANELS if any(not _rows(summary_df, s, m, D, d, quantity, rho).empty for s in SERIES)]
    if not panels:
        raise ValueError(f"no rows for D={D}, d={d}, quantity={quantity!r} in the summary")
    sel = pd.concat([_rows(summary_df, s, m, D, d, quantity, rho) for m, _ in panels for s in SERIES])
    lo, hi = sel["N"].min() / 1.25, sel["N"].max() * 1.25
    dense = np.geomspace(lo, hi, n_dense)
    ncol = 2 if len(panels) > 1 else 1
    nrow = math.ceil(len(panels) / ncol)
    trials = int(sel["n"].max())
    with plt.rc_context(style.RC):
        fig, axes = plt.subplots(nrow, ncol, figsize=(4.6 * ncol + 0.6, 3.7 * nrow + 1.3), sharex=True, sharey=True,
                                 squeeze=False)
        for ax in axes.ravel()[len(panels):]:
            ax.set_visible(False)
        for ax, (model, title) in zip(axes.ravel(), panels):
            sig = _sigma(model, D, sigma_w, sigma_ab)
            ax.plot(dense, np.sqrt(dense), color="0.55", lw=1.0, zorder=1)
            ax.plot(dense, dense, color="0.55", lw=1.0, ls="--", zorder=1)
            for i, s in enumerate(SERIES):
                st = style.series_style(i)
                g = _rows(summary_df, s, model, D, d, quantity, rho)
                if s.kernel == "poly":
                    e = np.sqrt(exact_sq(s.p, model, dense, D, d, quantity, rho=rho, sigma=sig)) * _curve(s, dense)
                    ax.plot(dense, e, color=st["color"], ls=st["linestyle"], lw=1.4, zorder=2)
                if g.empty:
                    continue
                N = g["N"].to_numpy(float)
                msq, se = g["mean_sq"].to_numpy(float), g["se_sq"].fillna(0).to_numpy(float)
                rms = np.sqrt(msq)
                lo_b = np.sqrt(np.clip(msq - 2 * se, msq * 1e-4, None))
                hi_b = np.sqrt(msq + 2 * se)
                ax.errorbar(N, rms, yerr=[rms - lo_b, hi_b - rms], fmt=st["marker"], color=st["color"], ms=5,
                            mfc="white" if i % 2 else st["color"], mew=1.2, elinewidth=1.0, capsize=2, zorder=3)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(lo, hi)
            ticks = [n for n in 2 ** np.arange(0, 20) if lo <= n <= hi]
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_major_formatter(FixedFormatter([str(int(n)) for n in ticks]))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_title(title.replace("{rho:g}", f"{rho:g}")
                         + (" (w.r.t. A, B)" if model == "paper" and quantity == "jac_fro" else ""))
            if model != "paper":
                ymin, ymax = ax.get_ylim()
                for p, i in ((1, 1), (3, 2)):
                    ns = crossover(p, model, D, d, quantity, rho=rho)
                    if lo < ns < hi:
                        col = style.series_style(i)["color"]
                        ax.axvline(ns, color=col, ls=":", lw=1.3, zorder=1)
                        ax.annotate(f"N*ₚ₌{str(p).translate(style.SUBSCRIPT)} = {ns:.0f}", (ns, 0.57), xycoords=("data", "axes fraction"),
                                    xytext=(4, 0) if ns < hi / 1.6 else (-4, 0), textcoords="offset points",
                                    rotation=90, va="center", ha="left" if ns < hi / 1.6 else "right",
                                    fontsize=8, color=col,
                                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85})
        for ax in axes[-1, :]:
            ax.set_xlabel("sequence length N (tokens)")
        for ax in axes[:, 0]:
            ax.set_ylabel(YLABEL[quantity])
        handles = []
        for i, s in enumerate(SERIES):
            st = style.series_style(i)
            kw = dict(color=st["color"], marker=st["marker"], mfc="white" if i % 2 else st["color"], mew=1.2, ms=5)
            if s.kernel == "poly":
                handles.append(Line2D([], [], ls=st["linestyle"], lw=1.4, label=series_name(s), **kw))
            else:
                handles.append(Line2D([], [], ls="none", label=series_name(s) + " (MC only)", **kw))
        sqrt_label = "√N (softmax bound, Thm 4.1)" if quantity == "fro" else "√N (reference, slope ½)"
        refs = [Line2D([], [], color="0.55", lw=1.0, label=sqrt_label),
                Line2D([], [], color="0.55", lw=1.0, ls="--", label="N (reference, slope 1)"),
                Line2D([], [], color="0.3", lw=1.3, ls=":",
                       label="crossover N* of xᵖ: N² term overtakes N term")]
        bottom = 0.065 if nrow > 1 else 0.16
        fig.legend(handles=handles, loc="upper center", ncol=5, frameon=False, bbox_to_anchor=(0.5, bottom),
                   fontsize=8.5, handlelength=3.0, columnspacing=1.2,
                   title="markers: Monte Carlo RMS ± 2 SE;  lines: exact √(E‖·‖²)", title_fontsize=8.5)
        fig.legend(handles=refs, loc="upper center", ncol=3, frameon=False, bbox_to_anchor=(0.5, bottom - 0.045),
                   fontsize=8.5, handlelength=3.0, columnspacing=1.2)
        sig_txt = "σ_w = 1/√D" if sigma_w is None else f"σ_w = {sigma_w:g}"
        fig.suptitle(f"{TITLE[quantity]} against sequence length: {trials} trials per point\n"
                     f"D = {D}, d = {d}, {sig_txt}; paper model: entries of A, B ~ N(0, {sigma_ab:g}²)",
                     fontsize=10.5)
        fig.tight_layout(rect=(0, bottom + 0.005, 1, 1))
    return fig


# --------------------------------------------------------------------------- main


def tiny_config(small: bool):
    """The sweep ``main`` runs when given no results: D = 64, d = 16, the paper's five rows."""
    from sapa.empirics.montecarlo.sweep import config_from_dict

    raw = {
        "name": "figure-norm-scaling-small" if small else "figure-norm-scaling",
        "seed": 0,
        "trials": 32 if small else 64,
        "N": [8, 16, 32, 64, 128] if small else [8, 16, 32, 64, 128, 256, 512],
        "D": [64],
        "d": [16],
        "weight_model": ["paper", "iid", "tied", "corr"],
        "rho": [0.5],
        "activation": [
            {"kind": "softmax"},
            {"kind": "poly", "p": [1, 3], "scale": INV_SQRT_N},
            {"kind": "poly", "p": 1, "scale": CONST, "c": 0.0625},
            {"kind": "poly", "p": 3, "scale": CONST, "c": 1.0},
        ],
    }
    return config_from_dict(raw)


@lru_cache(maxsize=2)
def _tiny_sweep(small: bool) -> tuple[pd.DataFrame, dict]:
    """Run :func:`tiny_config` in a temporary directory (once per process: Figures 1 and 2 share it)."""
    from sapa.empirics.montecarlo.sweep import run_sweep

    cfg = tiny_config(small)
    with tempfile.TemporaryDirectory() as tmp:
        df = run_sweep(cfg, tmp, progress=False)
    return df, cfg.as_dict()


def _load(results: str | Path) -> tuple[pd.DataFrame, dict]:
    from sapa.empirics.montecarlo.sweep import read_metadata

    path = Path(results) / "results.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"no sweep results at {path}")
    from sapa.common.integrity import CorruptResult, read_parquet_verified
    from sapa.common.validate import InputError

    try:
        df = read_parquet_verified(path)  # bounded, and its content checksum verified (the sweep seals it)
    except CorruptResult as exc:
        raise InputError(f"sweep results: {' '.join(str(exc).split())}; rerun `sapa sweep` to rebuild it") from None
    return df, read_metadata(path).get("config", {})


def main(out_dir: str | Path = "results/figures", results: str | Path | None = None, small: bool = False,
         quantity: str = "fro") -> list[Path]:
    """Draw Figure 1 (``quantity="fro"``) or 2 (``"jac_fro"``) per (D, d) of a sweep; assert the claim; save.

    Args:
      out_dir: where PNG + PDF go (file names carry quantity, D, d, ρ, trials and N range).
      results: a sweep directory holding ``results.parquet``; None runs :func:`tiny_config`
        into a temporary directory (small: N ≤ 128, 32 trials, ~10 s on one core).
      small: smaller self-run sweep.
      quantity: "fro" or "jac_fro".
    """
    from sapa.empirics.montecarlo.sweep import summarise

    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be one of {QUANTITIES}, got {quantity!r}")
    if results is None:
        df, conf = _tiny_sweep(bool(small))
    else:
        df, conf = _load(results)
    summ = summarise(df[df["quantity"] == quantity])
    sigma_w, sigma_ab = conf.get("sigma_w"), float(conf.get("sigma_ab", 1.0))
    rhos = sorted(summ.loc[summ["weight_model"] == "corr", "rho"].unique())
    rho = 0.5 if (not rhos or any(np.isclose(rhos, 0.5))) else float(rhos[0])
    non_paper = summ[summ["weight_model"] != "paper"]
    pairs = sorted({(int(a), int(b)) for a, b in zip(non_paper["D"], non_paper["d"])}) or \
        sorted({(int(b), int(b)) for b in summ["d"]})
    paths: list[Path] = []
    for D, d in pairs:
        # The claim, asserted before anything is saved.
        assert_claim(check(summ, D, d, quantity, rho=rho, sigma_w=sigma_w, sigma_ab=sigma_ab), quantity)
        fig = draw(summ, D, d, quantity, rho=rho, sigma_w=sigma_w, sigma_ab=sigma_ab)
        sel = summ[(summ["d"] == d) & ((summ["D"] == D) | (summ["weight_model"] == "paper"))]
        name = style.stem(FILE[quantity], D=D, d=d, rho=rho, trials=int(sel["n"].max()),
                          N=f"{int(sel['N'].min())}-{int(sel['N'].max())}")
        paths += style.save(fig, out_dir, name)
    return paths


if __name__ == "__main__":  # pragma: no cover
    import sys

    q = sys.argv[1] if len(sys.argv) > 1 else "fro"
    print(main(quantity=q, small="--small" in sys.argv))
