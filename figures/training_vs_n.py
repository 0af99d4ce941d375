"""Figure 13: test accuracy against N per arm at its best learning rate, softmax as reference (arXiv 2410.18613 §5).

Drawn only from a stored training study (``sapa.empirics.training.train_study.StudyResult`` or its parquet files via
``load_study``); the learning-rate selection and the per-cell medians are the ledger's own
(:mod:`sapa.empirics.training.study_analysis`), nothing here decides a verdict.

(a) ``<stem>_acc``: per task, test accuracy against N (log2), one line per arm at its best lr: median over
    seeds, bars = [min, max] over seeds (a distribution-free interval for the median, 75 % at 3 seeds);
    softmax thick and black; the task's floor (text: the bigram predictor's accuracy) dotted grey when
    given; below, the share of the arm's whole lr grid that diverged, against N.
(b) ``<stem>_norms``: ‖φ(S)‖_F over training steps (log y), one panel per (task, N), one line per arm at its
    best lr (median over seeds).
(c) ``<stem>_lr``: validation accuracy (median over seeds) against the learning rate, one panel per (task, N),
    one line per arm; the selected lr is marked by a filled marker.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sapa.empirics.training.study_config import ARMS
from sapa.figures import style

ARM_ORDER = tuple(ARMS)  # the families table's order of the training arms
LABELS = {k: a.label for k, a in ARMS.items()}  # the one display name of each arm (sapa.empirics.training.study_config)
TASKS = ("digits", "text")


def _style(arm: str) -> dict:
    """Softmax thick black; the other arms cycle the 7 non-black colours with shifted markers and line styles."""
    if arm == "softmax":
        return {"color": style.PALETTE[0], "marker": style.MARKERS[0], "linestyle": "-", "lw": 2.6}
    k = ARM_ORDER.index(arm) - 1 if arm in ARM_ORDER else len(ARM_ORDER)
    n = len(style.PALETTE) - 1
    return {"color": style.PALETTE[1 + k % n], "marker": style.MARKERS[(k + 1) % len(style.MARKERS)],
            "linestyle": style.LINESTYLES[(k + 1) % len(style.LINESTYLES)]}


def _arms(frame: pd.DataFrame) -> list[str]:
    present = set(frame["arm"])
    return [a for a in ARM_ORDER if a in present] + sorted(present - set(ARM_ORDER))


def file_stem(config: dict) -> str:
    """``training_vs_n_budget<name>_seeds<k>_seed<s>``."""
    cfg = config or {}
    return style.stem("training_vs_n", budget=cfg.get("name", cfg.get("budget", "x")), seeds=cfg.get("seeds", 0),
                      seed=cfg.get("seed", 0))


MIN_SEEDS = 3  # fewer seeds per cell: a min–max bar is no interval for the median worth ranking arms by
CANNOT_DECIDE = ("{why}: this run cannot decide the claim — the order of the arms here is not a finding "
                 "(curves may still be rising at the step cap); read the ledger's verdict")


def undecided_note(study) -> str | None:
    """The line a figure of ``study`` carries on its face when its budget cannot decide (None: a full, powered
    study): a quick or tiny budget, or fewer than :data:`MIN_SEEDS` seeds per cell."""
    cfg = study.config or {}
    budget = str(cfg.get("name", cfg.get("budget", "")))
    seeds = int(cfg.get("seeds", 0) or 0)
    why = [f"{budget} budget"] if budget in ("quick", "tiny") else []
    if 0 < seeds < MIN_SEEDS:
        why.append(f"{seeds} seed{'s' if seeds != 1 else ''} per cell (underpowered)")
    return CANNOT_DECIDE.format(why=", ".join(why).capitalize()) if why else None


def _mark(fig, note: str | None) -> None:
    """Write ``note`` on the figure's face, in a box along its bottom edge (nothing when None)."""
    if note:
        fig.text(0.5, 0.005, note, ha="center", va="bottom", fontsize=9, color="#8b0000", wrap=True,
                 bbox={"boxstyle": "round,pad=0.3", "fc": "#fff3f3", "ec": "#8b0000", "lw": 0.8})
        fig.subplots_adjust(bottom=max(fig.subplotpars.bottom, 0.14))


def _accuracy_figure(study, out_dir: Path, stem: str, floors: dict | None = None) -> list[Path]:
    from sapa.empirics.training.study_analysis import accuracy_table, best_lr, divergence_counts

    best = best_lr(study.runs)
    tab = accuracy_table(study.runs, best)
    div = divergence_counts(study.runs, best)
    tasks = [t for t in TASKS if t in set(tab["task"])] + sorted(set(tab["task"]) - set(TASKS))
    fig, axes = plt.subplots(2, len(tasks), figsize=(6.2 * len(tasks), 7.6), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1.3], "hspace": 0.12})
    for j, task in enumerate(tasks):
        ax, axd = axes[0, j], axes[1, j]
        t, d = tab[tab["task"] == task], div[div["task"] == task]
        for arm in _arms(t):
            st = _style(arm)
            g = t[t["arm"] == arm].sort_values("N")
            ax.errorbar(g["N"], g["median"], yerr=[g["median"] - g["lo"], g["hi"] - g["median"]], color=st["color"],
                        marker=st["marker"], ls=st["linestyle"], lw=st.get("lw", 1.4), ms=5, capsize=3,
                        label=LABELS.get(arm, arm), zorder=3 if arm == "softmax" else 2)
            h = d[d["arm"] == arm].sort_values("N")
            axd.plot(h["N"], h["grid_diverged"] / h["grid_runs"], color=st["color"], marker=st["marker"],
                     ls=st["linestyle"], lw=st.get("lw", 1.2), ms=4)
        fl = sorted((int(n), float(v)) for n, v in ((floors or {}).get(task) or {}).items() if v is not None)
        if fl:
            ax.plot([n for n, _ in fl], [v for _, v in fl], color="0.55", ls=":", lw=1.6, marker="_", ms=10,
                    label="bigram predictor (floor)" if task == "text" else "floor", zorder=1)
        for a in (ax, axd):
            a.set_xscale("log", base=2)
            a.set_xticks(sorted(set(t["N"])))
            a.set_xticklabels([str(n) for n in sorted(set(t["N"]))])
        seeds = int(t["seeds"].max()) if len(t) else 0
        ax.set_title(f"{task}: test accuracy at each arm's best lr ({seeds} seeds)")
        ax.set_ylabel("test accuracy")
        axd.set_ylabel("diverged share\nof the lr grid")
        axd.set_ylim(-0.05, 1.05)
        axd.set_xlabel("N (tokens: patches / context)")
        ax.legend(ncol=2, fontsize=8, loc="best")
    fig.suptitle("Does accuracy relative to softmax hold up as N grows? (x^p/√N: the paper's scale)\n"
                 "median over seeds, bars = min–max over seeds; below: diverged share of each arm's lr grid",
                 fontsize=11)
    note = undecided_note(study)
    if note and len(div) and not (div["grid_diverged"] > 0).any():
        note += "; no run diverged, so the divergence panel cannot rank the arms"
    _mark(fig, note)
    return style.save(fig, out_dir, f"{stem}_acc")


def _best_history(study, quantity: str) -> pd.DataFrame:
    """History rows of ``quantity`` for the members at each arm's best lr (in-study α only)."""
    from sapa.empirics.training.study_analysis import at_best

    b = at_best(study.runs)
    keys = b[["task", "N", "arm", "lr", "seed"] + (["alpha"] if "alpha" in b else [])].copy()
    h = study.history[study.history["quantity"] == quantity]
    if "alpha" in keys:
        keys["alpha"] = keys["alpha"].fillna(-1.0)
        h = h.assign(alpha=h["alpha"].fillna(-1.0))
    h = h.merge(keys, on=list(keys.columns), how="inner")
    v = h["value"].to_numpy(float)
    return h.assign(value=np.where(np.isfinite(v), v, np.nan))  # a diverged member's ∞ leaves the median undefined


def _panels(study) -> list[tuple[str, int]]:
    r = study.runs[study.runs["in_study"].astype(bool)]
    tasks = [t for t in TASKS if t in set(r["task"])] + sorted(set(r["task"]) - set(TASKS))
    return [(t, int(N)) for t in tasks for N in sorted(set(r[r["task"] == t]["N"]))]


def _grid(n: int) -> tuple[int, int]:
    cols = min(n, 4)
    return (n + cols - 1) // cols, cols


def _norms_figure(study, out_dir: Path, stem: str) -> list[Path]:
    h = _best_history(study, "attn_fro")
    panels = _panels(study)
    rows, cols = _grid(len(panels))
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.5 * rows), squeeze=False)
    for ax, (task, N) in zip(axes.flat, panels):
        g = h[(h["task"] == task) & (h["N"] == N)]
        for arm in _arms(g):
            st = _style(arm)
            c = g[g["arm"] == arm].groupby("step")["value"].median()
            ax.plot(c.index, c.to_numpy(), color=st["color"], marker=st["marker"], ls=st["linestyle"],
                    lw=st.get("lw", 1.3), ms=3, label=LABELS.get(arm, arm))
        ax.set_yscale("log")
        ax.set_title(f"{task}, N = {N}")
        ax.set_xlabel("training step")
        ax.set_ylabel("‖φ(S)‖_F (mean over layers, heads)")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    if panels:
        axes.flat[0].legend(fontsize=7, ncol=2)
    fig.suptitle("Attention norm during training at each arm's best lr (median over seeds; exact float64 kernels, "
                 "fixed probe batch)", fontsize=11)
    fig.tight_layout()
    _mark(fig, undecided_note(study))
    return style.save(fig, out_dir, f"{stem}_norms")


def _lr_figure(study, out_dir: Path, stem: str) -> list[Path]:
    from sapa.empirics.training.study_analysis import best_lr, lr_sensitivity

    s = lr_sensitivity(study.runs)
    best = best_lr(study.runs)
    panels = _panels(study)
    rows, cols = _grid(len(panels))
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.5 * rows), squeeze=False)
    for ax, (task, N) in zip(axes.flat, panels):
        g = s[(s["task"] == task) & (s["N"] == N)]
        for arm in _arms(g):
            st = _style(arm)
            a = g[g["arm"] == arm].sort_values("lr")
            ax.plot(a["lr"], a["val_median"], color=st["color"], marker=st["marker"], ls=st["linestyle"],
                    lw=st.get("lw", 1.3), ms=4, mfc="white", label=LABELS.get(arm, arm))
            b = best[(best["task"] == task) & (best["N"] == N) & (best["arm"] == arm)]
            ax.plot(b["lr"], b["val_median"], color=st["color"], marker=st["marker"], ls="none", ms=6)
        ax.set_xscale("log")
        ax.set_title(f"{task}, N = {N}")
        ax.set_xlabel("learning rate")
        ax.set_ylabel("validation accuracy (median over seeds)")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    if panels:
        axes.flat[0].legend(fontsize=7, ncol=2)
    fig.suptitle("Learning-rate sensitivity per arm (filled: the selected lr; diverged members count at chance)",
                 fontsize=11)
    fig.tight_layout()
    _mark(fig, undecided_note(study))
    return style.save(fig, out_dir, f"{stem}_lr")


def draw(study, out_dir: str | Path, file_stem_: str | None = None, floors: dict | None = None) -> list[Path]:
    """Save (a) ``<stem>_acc``, (b) ``<stem>_norms`` and (c) ``<stem>_lr`` (PNG + PDF each) from a stored study.

    ``study``: anything with ``runs``, ``history`` and ``config`` in the schema of ``sapa.empirics.training.train_study``;
    ``floors``: {task: {N: accuracy}} drawn as the task's floor in (a) (text: the bigram predictor).
    """
    out_dir = Path(out_dir)
    stem = file_stem_ or file_stem(study.config)
    with plt.rc_context(style.RC):
        return (_accuracy_figure(study, out_dir, stem, floors) + _norms_figure(study, out_dir, stem)
                + _lr_figure(study, out_dir, stem))


def main(out_dir: str | Path = "results/figures", small: bool = False, train_dir: str | Path = "results/train"
         ) -> list[Path]:
    """Redraw from the study stored in ``train_dir`` (``small``: the lead's TINY budget trained into it first)."""
    from sapa.empirics.training import train_study

    if small:
        study = train_study.run_study("tiny", Path(train_dir))
    else:
        study = train_study.load_study(Path(train_dir))
    assert len(study.runs) and {"softmax"} <= set(study.runs["arm"]), "the study has no softmax runs"
    return draw(study, out_dir)


if __name__ == "__main__":  # pragma: no cover
    print(main())
