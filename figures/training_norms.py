"""Figure 8: attention norms during training and final accuracy against final norm (arXiv 2410.18613, Figs. 2–3; issue #8).

(a) The paper's Figures 2–3 in miniature: ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F (exact, float64, mean over
    layers and heads of the probe-batch average) and test accuracy against the training step,
    per activation: median over seeds, band = min–max over seeds; solid with weight decay,
    dashed without; one row per task.
(b) Final test accuracy against final norm (log x), one marker per run: colour and marker by
    activation, filled with weight decay, open without; diverged runs sit past the right edge
    (norm ∞, accuracy at chance). Titles give the within-weight-decay Spearman ρ and its interval.

``draw(res, out_dir, stem)`` works from stored data (``res`` from :func:`compute`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker  # noqa: F401
import numpy as np
import pandas as pd

from figures import style

QUANT = {"attn_fro": "‖φ(S)‖_F", "jac_fro": "‖∂φ(S)/∂X‖_F", "test_acc": "test accuracy"}
TASK_TITLE = {"digits": "digits (TinyViT, N = 16)", "text": "text (causal char LM, N = 64)"}
ARM_ORDER = ("softmax", "x_sqrtN", "x3_sqrtN", "x_16", "x3", "x3_sqrti")


def compute(results: dict, analysis: dict | None = None) -> dict:
    """The figure's data from :func:`empirics.training.run_experiment`'s result: curves, final table, analysis."""
    from empirics.norm_accuracy import analyse
    from empirics.tiny_models import ARMS

    hist, final = results["history"], results["final"]
    heads = hist[hist["layer"] >= 0].groupby(["task", "arm", "weight_decay", "seed", "step", "quantity"],
                                               sort=False)["value"].mean().reset_index()  # mean over layers, heads
    runs = hist[hist["layer"] == -1][["task", "arm", "weight_decay", "seed", "step", "quantity", "value"]]
    per_run = pd.concat([heads, runs], ignore_index=True)
    curves = per_run.groupby(["task", "arm", "weight_decay", "step", "quantity"], sort=False)["value"].agg(
        median="median", lo="min", hi="max", n="size").reset_index()
    return {"curves": curves, "final": final.copy(), "analysis": analysis if analysis is not None else analyse(final),
            "labels": {a: ARMS[a].label for a in ARMS}, "config": results.get("provenance", {}).get("config", {})}


def _arm_style(arm: str) -> dict:
    return style.series_style(ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER))


def _curves_panel(ax, res: dict, task: str, q: str) -> None:
    c = res["curves"]
    c = c[(c["task"] == task) & (c["quantity"] == q)]
    for arm in [a for a in ARM_ORDER if a in set(c["arm"])]:
        st = _arm_style(arm)
        for wd, g in c[c["arm"] == arm].groupby("weight_decay", sort=True):
            g = g.sort_values("step")
            ls = "-" if wd > 0 else "--"
            ax.plot(g["step"], g["median"], color=st["color"], marker=st["marker"], ls=ls, lw=1.4, ms=3.5,
                    mfc=st["color"] if wd > 0 else "white", label=f"{res['labels'][arm]}, wd {wd:g}")
            ax.fill_between(g["step"], g["lo"], g["hi"], color=st["color"], alpha=0.10, lw=0)
    if q != "test_acc":
        ax.set_yscale("log")
    elif len(c):  # zoom on the part of training where arms differ (not on the first steps from chance)
        late = c[c["step"] >= c["step"].max() / 4]
        lo, hi = float(late["lo"].min()), float(late["hi"].max())
        ax.set_ylim(lo - 0.15 * (hi - lo + 1e-9), hi + 0.1 * (hi - lo + 1e-9))
    ax.set_xlabel("training step")
    ax.set_ylabel(QUANT[q] + ("  (mean over layers, heads)" if q != "test_acc" else ""))
    ax.set_title(f"{TASK_TITLE.get(task, task)}: {QUANT[q]}")


def _fmt_ci(d: dict, key: str = "ci") -> str:
    """``[lo, hi]`` with 2 decimals, 3 where a bound would print as ±0.00 (its sign decides a verdict)."""
    lo, hi = d[key]

    def f(v):
        if v is None:
            return "nan"
        return f"{v:+.3f}" if round(v, 2) == 0 and v != 0 else f"{v:+.2f}"

    return f"[{f(lo)}, {f(hi)}]"


def _scatter_panel(ax, res: dict, task: str, q: str) -> None:
    f = res["final"]
    f = f[f["task"] == task]
    finite = f[np.isfinite(f[q])]
    xmax = float(finite[q].max()) if len(finite) else 1.0
    xmin = float(finite[q].min()) if len(finite) else 0.1
    x_div = xmax * 3.0  # where diverged runs (norm ∞) are drawn
    for arm in [a for a in ARM_ORDER if a in set(f["arm"])]:
        st = _arm_style(arm)
        for wd, g in f[f["arm"] == arm].groupby("weight_decay", sort=True):
            ok = g[np.isfinite(g[q])]
            filled = wd > 0
            ax.plot(ok[q], ok["test_acc"], ls="none", marker=st["marker"], color=st["color"], ms=7, mew=1.3,
                    mfc=st["color"] if filled else "white", alpha=0.9, label=f"{res['labels'][arm]}, wd {wd:g}")
            bad = g[~np.isfinite(g[q])]
            if len(bad):
                jitter = np.linspace(0.9, 1.1, len(bad))
                ax.plot(x_div * jitter, bad["test_acc"], ls="none", marker=st["marker"], color=st["color"], ms=7,
                        mew=1.3, mfc=st["color"] if filled else "white", alpha=0.9)
    if (~np.isfinite(f[q])).any():
        ax.axvline(x_div / 1.6, color="0.5", lw=0.8, ls=":")
        ax.text(x_div, ax.get_ylim()[1], "diverged\n(norm ∞)", ha="center", va="top", fontsize=8, color="0.3")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # minor labels collide on short ranges
    ax.set_xlim(xmin / 1.6, x_div * 1.6 if (~np.isfinite(f[q])).any() else xmax * 1.6)
    ax.set_xlabel(f"final {QUANT[q]} (mean over layers, heads; log)")
    ax.set_ylabel("final test accuracy")
    an = res["analysis"]
    cor = an["tasks"][task]["correlations"][q]
    s, p = cor["stratified"], cor["pooled"]
    pct = lambda v: f"{100 * v:.3g}%"  # noqa: E731
    arm = an.get("arm_level", {}).get(task, {}).get("association", {}).get(q)
    if arm is not None and arm["rho"] is not None:  # the inference: arms are the units (runs are not independent)
        line2 = (f"arm-level ρ̄ = {arm['rho']:+.2f}, exact p(<0) = {arm['p_less']:.3g}, "
                 f"p(>0) = {arm['p_greater']:.3g}, "
                 f"{pct(arm['level'])} arms [{arm['ci'][0]:+.2f}, {arm['ci'][1]:+.2f}]")
    else:
        line2 = f"within-wd ρ = {s['rho']:+.2f}; {pct(an['level'])}: {_fmt_ci(s)}"
    line3 = f"runs (descriptive): within-wd ρ = {s['rho']:+.2f}, pooled ρ = {p['rho']:+.2f} {_fmt_ci(p)}"
    fs = cor.get("finite_stratified")
    if fs is not None and fs["n"] != s["n"]:
        line3 += f"; finite runs only {fs['rho']:+.2f} {_fmt_ci(fs)}"
    ax.set_title(f"{TASK_TITLE.get(task, task)}: accuracy vs {QUANT[q]}\n{line2}\n{line3}", fontsize=9.5)


def _legend_row(fig, gs_row, src_axes) -> None:
    lax = fig.add_subplot(gs_row)
    lax.set_axis_off()
    seen, hs, ls = set(), [], []
    for ax in src_axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in seen:
                seen.add(lab)
                hs.append(h)
                ls.append(lab)
    lax.legend(hs, ls, loc="upper center", ncol=6, fontsize=8, frameon=True)


def draw(res: dict, out_dir: str | Path, file_stem: str) -> list[Path]:
    """Save (a) ``<stem>_curves`` and (b) ``<stem>_acc_vs_norm`` (PNG + PDF each); return the four paths."""
    tasks = [t for t in ("digits", "text") if t in set(res["final"]["task"])]
    cfg = res.get("config") or {}
    note = (f"training float32, norms exact in float64 on a fixed probe batch; seeds per arm: {cfg.get('seeds', '?')}; "
            f"budget {cfg.get('name', '?')}")
    paths = []
    with plt.rc_context(style.RC):
        fig = plt.figure(figsize=(15.0, 4.3 * len(tasks) + 1.0))
        gs = fig.add_gridspec(len(tasks) + 1, 3, height_ratios=[1] * len(tasks) + [0.13], hspace=0.42, wspace=0.28,
                              left=0.06, right=0.99, top=0.91, bottom=0.01)
        axes = []
        for i, task in enumerate(tasks):
            for j, q in enumerate(("attn_fro", "jac_fro", "test_acc")):
                ax = fig.add_subplot(gs[i, j])
                _curves_panel(ax, res, task, q)
                axes.append(ax)
        _legend_row(fig, gs[len(tasks), :], axes)
        fig.suptitle("Attention norms during training (median over seeds, band = min–max; solid: weight decay 0.05, "
                     f"dashed: none)\n{note}", fontsize=10.5)
        paths += style.save(fig, out_dir, f"{file_stem}_curves")

        fig = plt.figure(figsize=(13.0, 5.2 * len(tasks) + 1.6))
        gs = fig.add_gridspec(len(tasks) + 1, 2, height_ratios=[1] * len(tasks) + [0.09], hspace=0.55, wspace=0.22,
                              left=0.07, right=0.98, top=0.86, bottom=0.01)
        axes = []
        for i, task in enumerate(tasks):
            for j, q in enumerate(("attn_fro", "jac_fro")):
                ax = fig.add_subplot(gs[i, j])
                _scatter_panel(ax, res, task, q)
                axes.append(ax)
        _legend_row(fig, gs[len(tasks), :], axes)
        fig.suptitle("Does a lower final attention norm predict a better final test accuracy? (the thesis: ρ < 0)\n"
                     f"one marker per run; filled: weight decay 0.05, open: none; {note}", fontsize=10.5)
        paths += style.save(fig, out_dir, f"{file_stem}_acc_vs_norm")
    return paths


def file_stem(cfg: dict) -> str:
    """``training_norms_budget<name>_seeds<k>_steps<digits>-<text>_seed<s>``."""
    return style.stem("training_norms", budget=cfg.get("name", "x"), seeds=cfg.get("seeds", 0),
                      steps=[cfg.get("digits", {}).get("steps", 0), cfg.get("text", {}).get("steps", 0)],
                      seed=cfg.get("seed", 0))


def main(out_dir: str | Path = "results/figures", small: bool = False, train_dir: str | Path | None = None) -> list[Path]:
    """Run (or resume) the experiment (``small``: a few steps), analyse, assert the figure's data, save."""
    import tempfile

    from empirics.training import TINY, run_experiment

    with tempfile.TemporaryDirectory() as tmp:
        results = run_experiment(TINY if small else "quick", train_dir or tmp, workers=1, progress=False)
    res = compute(results)
    assert set(res["curves"]["quantity"]) >= {"attn_fro", "jac_fro", "test_acc"}, "missing curves"
    return draw(res, out_dir, file_stem(res["config"]))


if __name__ == "__main__":  # pragma: no cover
    print(main())
