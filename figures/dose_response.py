"""Figure: test accuracy against the final attention norm over the doses of x/c, x³/c and softmax(S/τ).

Drawn only from the dose tables ``norm-vs-accuracy`` stores (``OUT/data/dose_response.json``;
:func:`empirics.training.dose_response.dose_table`): one panel per (norm, task), one curve per family through
its doses in the order of c (τ for softmax), each dose labelled; the reviewers' pair — x³/1 and x/16 — ringed.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from figures import style

__all__ = ["stored_data", "draw"]

NORMS = (("log10_attn_fro", "log10 ‖φ(S)‖_F"), ("log10_jac_x_fro", "log10 ‖∂φ(S)/∂X‖_F"))
STYLE = {"x/c": {"color": style.PALETTE[0], "marker": "o"}, "x³/c": {"color": style.PALETTE[1], "marker": "s"},
         "softmax(S/τ)": {"color": "0.55", "marker": "^"}}  # grey: PALETTE[0] is black
PAIR = (("x³/c", 1.0), ("x/c", 16.0))  # the reviewers' x³/1 against x/16


def stored_data(tables: dict) -> dict:
    """{task: [dose rows]}: what ``sapa verify`` stores so that ``sapa figures`` redraws the figure."""
    return {task: t.to_dict(orient="records") for task, t in tables.items()}


def draw(tables: dict, out_dir: str | Path, stem: str = "dose_response") -> list[Path]:
    """Accuracy against log10 norm per (norm, task) from {task: [dose rows]}; the written paths (none without rows)."""
    if not tables:
        return []
    with plt.rc_context(style.RC):
        tasks = list(tables)
        fig, axes = plt.subplots(len(NORMS), len(tasks), figsize=(4.2 * len(tasks), 3.4 * len(NORMS)), squeeze=False)
        for j, task in enumerate(tasks):
            rows = tables[task]
            for i, (q, label) in enumerate(NORMS):
                ax = axes[i, j]
                for fam, st in STYLE.items():
                    pts = sorted((r for r in rows if r["family"] == fam and r.get(q) is not None), key=lambda r: r["dose"])
                    if not pts:
                        continue
                    xs, ys = [r[q] for r in pts], [r["test_acc"] for r in pts]
                    ax.plot(xs, ys, label=fam, lw=1.2, ms=4, **st)
                    for r in pts:
                        ax.annotate(f"{r['dose']:g}", (r[q], r["test_acc"]), fontsize=6, xytext=(3, 2),
                                    textcoords="offset points", color=st["color"])
                        if (fam, r["dose"]) in PAIR:
                            ax.plot(r[q], r["test_acc"], "o", ms=11, mfc="none", mec="#8b0000", mew=1.2)
                ax.set_xlabel(label)
                ax.set_ylabel("test accuracy (seed mean)")
                ax.set_title(f"{task}: the doses c (τ) labelled", fontsize=9)
        axes[0, 0].legend(fontsize=7, title="ringed: x³/1, x/16", title_fontsize=7)
        fig.tight_layout()  # titles clear the row above's axis labels
        paths = style.save(fig, out_dir, stem)
        plt.close(fig)
    return paths
