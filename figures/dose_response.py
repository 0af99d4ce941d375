"""Figure: test accuracy against the final attention norm over the doses of x/c, x³/c and softmax(S/τ), per lr.

Drawn only from the dose tables ``norm-vs-accuracy`` stores (``OUT/data/dose_response.json``;
:func:`sapa.empirics.training.dose_response.dose_table`): one panel per (norm, task), one curve per (family, learning
rate) through its grid's doses in the order of c (τ for softmax) — colour and marker the family, line style the lr —
the doses labelled on the smallest lr's curve; the doses of the second look (``look`` 2, between the grid's) as hollow
markers off the curve; the reviewers' pair — x³/1 and x/16 at the same lr — ringed.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from sapa.figures import style

__all__ = ["stored_data", "draw"]

NORMS = (("log10_attn_fro", "log10 ‖φ(S)‖_F"), ("log10_jac_x_fro", "log10 ‖∂φ(S)/∂X‖_F"))
STYLE = {"x/c": {"color": style.PALETTE[0], "marker": "o"}, "x³/c": {"color": style.PALETTE[1], "marker": "s"},
         "softmax(S/τ)": {"color": "0.55", "marker": "^"}}  # grey: PALETTE[0] is black
PAIR = (("x³/c", 1.0), ("x/c", 16.0))  # the reviewers' x³/1 against x/16
LINES = ("-", "--", ":", "-.")  # the learning rates of the grid, smallest first


def stored_data(tables: dict) -> dict:
    """{task: [dose rows]}: what ``sapa verify`` stores so that ``sapa figures`` redraws the figure."""
    return {task: t.to_dict(orient="records") for task, t in tables.items()}


def draw(tables: dict, out_dir: str | Path, stem: str = "dose_response") -> list[Path]:
    """Accuracy against log10 norm per (norm, task) from {task: [dose rows]}; the written paths (none without rows)."""
    if not tables:
        return []
    with plt.rc_context(style.RC):
        tasks = list(tables)
        lrs = sorted({r["lr"] for rows in tables.values() for r in rows if r.get("lr") is not None})  # one style each
        fig, axes = plt.subplots(len(NORMS), len(tasks), figsize=(4.2 * len(tasks), 3.4 * len(NORMS)), squeeze=False)
        for j, task in enumerate(tasks):
            rows = tables[task]
            for i, (q, label) in enumerate(NORMS):
                ax = axes[i, j]
                for fam, st in STYLE.items():
                    first = min((r["lr"] for r in rows if r["family"] == fam and r.get("lr") is not None), default=None)
                    for k, lr in enumerate(lrs or [None]):
                        pts = sorted((r for r in rows if r["family"] == fam and r.get(q) is not None
                                      and r.get("lr") == lr), key=lambda r: r["dose"])
                        later = [r for r in pts if r.get("look", 1) == 2]
                        pts = [r for r in pts if r.get("look", 1) != 2]
                        if later:
                            ax.plot([r[q] for r in later], [r["test_acc"] for r in later], ls="none", ms=3.5,
                                    mfc="none", mew=0.8, alpha=0.8, **st)
                        if not pts:
                            continue
                        xs, ys = [r[q] for r in pts], [r["test_acc"] for r in pts]
                        ax.plot(xs, ys, label=fam if lr is None else f"{fam}, lr {lr:g}", lw=1.1, ms=3.5,
                                ls=LINES[k % len(LINES)], **st)
                        for r in pts:
                            if lr == first:  # the doses labelled once per family: on its smallest lr
                                ax.annotate(f"{r['dose']:g}", (r[q], r["test_acc"]), fontsize=6, xytext=(3, 2),
                                            textcoords="offset points", color=st["color"])
                            if (fam, r["dose"]) in PAIR:
                                ax.plot(r[q], r["test_acc"], "o", ms=10, mfc="none", mec="#8b0000", mew=1.1)
                ax.set_xlabel(label)
                ax.set_ylabel("test accuracy (seed mean)")
                ax.set_title(f"{task}: the doses c (τ) labelled", fontsize=9)
        handles = {}
        for ax in axes.flat:  # every (family, lr) once, whichever panel drew it
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
        labels = list(handles)
        second = any(r.get("look", 1) == 2 for rows in tables.values() for r in rows)
        fig.tight_layout(rect=(0, 0.09, 1, 1))  # titles clear the row above's axis labels; the legend below
        fig.legend([handles[k] for k in labels], labels, loc="lower center", ncol=min(3, max(1, len(labels))),
                   fontsize=7, title="family, learning rate — ringed: x³/1 and x/16 at the same lr"
                   + ("; hollow: the second look's doses, between the grid's" if second else ""), title_fontsize=7,
                   frameon=False)
        paths = style.save(fig, out_dir, stem)
        plt.close(fig)
    return paths
