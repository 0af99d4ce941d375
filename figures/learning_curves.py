"""Figure 14: learning curves per N, steps to leave the floor against N, mechanism solved fraction against N (issue 21).

Drawn only from the ledger's learning statistics (:mod:`empirics.training.learning_analysis` cells, as stored in
``evidence.learning_curves`` / the mechanism entry's ``evidence.cells``); nothing here decides a verdict.

(a) ``<stem>_curves``: median validation accuracy against steps (log x), one panel per (task, N), one line
    per arm, the floor dotted grey;
(b) ``<stem>_exit``: the Kaplan–Meier median steps to leave the floor against N (log–log), one line per
    (task, arm); a cell whose median lies beyond the cap is drawn at the cap with an open marker;
(c) ``<stem>_solved`` (mechanism cells only): solved fraction against N, one panel per task.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from figures import style
from figures.training_vs_n import LABELS, _style

__all__ = ["draw"]


def _label(arm: str) -> str:
    return "φ" if arm == "expr" else LABELS.get(arm, arm)


def _st(arm: str) -> dict:
    return _style(arm) if arm != "expr" else {"color": style.PALETTE[2], "marker": "D", "linestyle": "-"}


def draw(cells: list[dict], out_dir: str | Path, stem: str = "learning", solved: bool = False) -> list[Path]:
    """Draw (a), (b) and, with ``solved``, (c) from learning-statistics cells; return the written paths."""
    if not cells:
        return []
    with plt.rc_context(style.RC):
        return _draw(cells, out_dir, stem, solved)


def _draw(cells: list[dict], out_dir, stem: str, solved: bool) -> list[Path]:
    paths: list[Path] = []
    keys = sorted({(c["task"], c["N"]) for c in cells})
    ncol = min(4, len(keys))
    nrow = -(-len(keys) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.6 * nrow), squeeze=False)
    for ax, (task, N) in zip(axes.flat, keys):
        for c in (c for c in cells if c["task"] == task and c["N"] == N):
            xs = [max(t, 1) for t, _ in c["curve"]]
            ax.plot(xs, [v for _, v in c["curve"]], label=_label(c["arm"]), ms=3, **_st(c["arm"]))
            ax.axhline(c["floor"], color="0.6", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_title(f"{task}, N = {N}", fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel("validation accuracy")
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    paths += style.save(fig, out_dir, f"{stem}_curves")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    for task, arm in dict.fromkeys((c["task"], c["arm"]) for c in cells):
        cs = sorted((c for c in cells if c["task"] == task and c["arm"] == arm), key=lambda c: c["N"])
        Ns = [c["N"] for c in cs]
        med = [c["exits"]["median"] if c["exits"]["median"] is not None else c["exits"]["cap"] for c in cs]
        st = _st(arm)
        ax.plot(Ns, med, label=f"{task} {_label(arm)}", **st)
        cens = [(n, m) for n, m, c in zip(Ns, med, cs) if c["exits"]["median"] is None]
        if cens:
            ax.plot(*zip(*cens), ls="none", marker="o", mfc="white", mec=st["color"], ms=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N")
    ax.set_ylabel("median steps to leave the floor")
    ax.legend(fontsize=6, ncol=2)
    paths += style.save(fig, out_dir, f"{stem}_exit")
    plt.close(fig)

    if solved:
        tasks = sorted({c["task"] for c in cells})
        fig, axes = plt.subplots(1, len(tasks), figsize=(3.0 * len(tasks), 2.6), squeeze=False)
        for ax, task in zip(axes.flat, tasks):
            for arm in dict.fromkeys(c["arm"] for c in cells if c["task"] == task):
                cs = sorted((c for c in cells if c["task"] == task and c["arm"] == arm), key=lambda c: c["N"])
                ax.plot([c["N"] for c in cs], [c["solved_fraction"] for c in cs], label=_label(arm), **_st(arm))
            ax.set_xscale("log", base=2)
            ax.set_ylim(-0.05, 1.05)
            ax.set_title(task, fontsize=9)
            ax.set_xlabel("N")
        axes.flat[0].set_ylabel("solved fraction (acc ≥ 0.9)")
        axes.flat[0].legend(fontsize=7)
        paths += style.save(fig, out_dir, f"{stem}_solved")
        plt.close(fig)
    return paths
