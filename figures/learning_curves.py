"""Figure 14: learning curves per N, steps to leave the floor against N, mechanism solved fraction against N.

Drawn only from the ledger's learning statistics (:mod:`sapa.empirics.training.learning_analysis` cells, as stored in
``evidence.learning_curves`` / the mechanism entry's ``evidence.cells``); nothing here decides a verdict.

(a) ``<stem>_curves``: median validation accuracy against steps (log x), one panel per (task, N), one line
    per arm, the floor dotted grey;
(b) ``<stem>_exit``: the Kaplan–Meier median steps to leave the floor against N (log–log), one line per
    (task, arm); a cell whose median lies beyond the cap is drawn at the cap with an open marker;
(c) ``<stem>_solved`` (mechanism cells only): solved fraction against N, one panel per task; a (task, N) cell
    softmax does not solve (no verdict) is shaded; a finding's panel (never judged) says so in its title;
(d) ``<stem>_slowdown`` (with trends): per (task, arm) the paired log2 slowdown against N — each seed's
    interval (exits are known to a grid step; a stem ending in ▲: beyond the cap, its lower bound at the stem's
    foot) and the fitted maximum-likelihood line.
Mechanism cells read steps to accuracy 0.5 (``half``) where the study's read steps to leave the floor (``exits``).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from sapa.figures import style
from sapa.figures.training_vs_n import LABELS, _style

__all__ = ["draw"]

CENSORED_STEM = 0.6  # log2 units: the stem of a seed beyond the cap, above its lower bound


def _label(arm: str) -> str:
    return "φ" if arm == "expr" else LABELS.get(arm, arm)


def _st(arm: str) -> dict:
    return _style(arm) if arm != "expr" else {"color": style.PALETTE[2], "marker": "D", "linestyle": "-"}


RISING = 0.01  # a curve whose last evaluation is this much above the one before is still rising at the cap


def undecided_note(cells: list[dict], budget: str | None = None) -> str | None:
    """The line the figures carry on their face when the runs cannot decide or need care (None otherwise): a quick or
    tiny ``budget`` (a smoke test: nothing here is a finding), else a curve still rising at its last evaluation (the
    step cap) or a cell whose median exit is censored (its median is a lower bound; the ledger's interval-censored
    fits read such runs as censored, not as the cap)."""
    smoke = budget in ("quick", "tiny")
    why = [f"{budget} budget"] if smoke else []
    rising = sum(1 for c in cells if len(c["curve"]) >= 2 and c["curve"][-1][1] - c["curve"][-2][1] > RISING)
    if rising:
        why.append(f"{rising} of {len(cells)} curves still rising at the step cap")
    censored = sum(1 for c in cells if _exits(c)["median"] is None)
    if censored:
        why.append(f"{censored} of {len(cells)} cells never left the floor (censored)")
    if not why:
        return None
    if smoke:
        return ("; ".join(why)).capitalize() + ": this budget cannot decide — the order of the arms here is not a finding"
    return (("; ".join(why)).capitalize() + ": a censored median is a lower bound (beyond the cap); the verdicts read "
            "these runs as interval-censored")


def budget_note(budget: str | None) -> str | None:
    """The slowdown panels' line: only a smoke-test budget (their fits already treat censored runs as censored)."""
    if budget in ("quick", "tiny"):
        return f"{budget.capitalize()} budget: a smoke test — this budget cannot decide; the fits here are not findings"
    return None


def _mark(fig, note: str | None) -> None:
    """``note`` in a box along the figure's bottom edge (nothing when None)."""
    if note:
        fig.text(0.5, 0.005, note, ha="center", va="bottom", fontsize=7, color="#8b0000", wrap=True,
                 bbox={"boxstyle": "round,pad=0.3", "fc": "#fff3f3", "ec": "#8b0000", "lw": 0.8})
        fig.subplots_adjust(bottom=max(fig.subplotpars.bottom, 0.2))


def draw(cells: list[dict], out_dir: str | Path, stem: str = "learning", solved: bool = False,
         budget: str | None = None, trends: dict | None = None) -> list[Path]:
    """Draw (a), (b), with ``solved`` (c) and with ``trends`` ({"task/arm": IntervalTrend.as_dict()}) (d) from
    learning-statistics cells; return the written paths.

    Each figure carries :func:`undecided_note` on its face when the runs cannot decide."""
    if not cells:
        return []
    with plt.rc_context(style.RC):
        note = undecided_note(cells, budget)
        paths = _draw(cells, out_dir, stem, solved, note)
        if trends:
            paths += _draw_slowdown(trends, out_dir, stem, budget_note(budget))
        return paths


def _exits(c: dict) -> dict:
    """The exit summary a cell is drawn with: steps to accuracy 0.5 (mechanism cells), else to leave the floor."""
    return c.get("half") or c["exits"]


def stored_data(cells: list[dict], solved: bool, budget: str | None, trends: dict | None = None) -> dict:
    """What ``sapa verify`` stores (OUT/data/STEM.json) so that ``sapa figures`` redraws the same figures."""
    return {"cells": cells, "solved": bool(solved), "budget": budget, "trends": trends or {}}


def draw_stored(data: dict, out_dir: str | Path, stem: str) -> list[Path]:
    """:func:`draw` from :func:`stored_data`'s dict."""
    return draw(data["cells"], out_dir, stem=stem, solved=data["solved"], budget=data["budget"],
                trends=data.get("trends"))


def _draw(cells: list[dict], out_dir, stem: str, solved: bool, note: str | None = None) -> list[Path]:
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
    _mark(fig, note)
    paths += style.save(fig, out_dir, f"{stem}_curves")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    for task, arm in dict.fromkeys((c["task"], c["arm"]) for c in cells):
        cs = sorted((c for c in cells if c["task"] == task and c["arm"] == arm), key=lambda c: c["N"])
        Ns = [c["N"] for c in cs]
        med = [_exits(c)["median"] if _exits(c)["median"] is not None else _exits(c)["cap"] for c in cs]
        st = _st(arm)
        ax.plot(Ns, med, label=f"{task} {_label(arm)}", **st)
        cens = [(n, m) for n, m, c in zip(Ns, med, cs) if _exits(c)["median"] is None]
        if cens:
            ax.plot(*zip(*cens), ls="none", marker="o", mfc="white", mec=st["color"], ms=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N")
    ax.set_ylabel("median steps to accuracy 0.5" if "half" in cells[0] else "median steps to leave the floor")
    ax.legend(fontsize=6, ncol=2)
    _mark(fig, note)
    paths += style.save(fig, out_dir, f"{stem}_exit")
    plt.close(fig)

    if solved:
        tasks = sorted({c["task"] for c in cells})
        fig, axes = plt.subplots(1, len(tasks), figsize=(3.0 * len(tasks), 2.6), squeeze=False)
        for ax, task in zip(axes.flat, tasks):
            for arm in dict.fromkeys(c["arm"] for c in cells if c["task"] == task):
                cs = sorted((c for c in cells if c["task"] == task and c["arm"] == arm), key=lambda c: c["N"])
                ax.plot([c["N"] for c in cs], [c["solved_fraction"] for c in cs], label=_label(arm), **_st(arm))
            finding = any(c["task"] == task and c.get("role") == "finding" for c in cells)
            for c in cells:  # a probe cell softmax does not solve: no verdict (a finding is never judged: unshaded)
                if c["task"] == task and c["arm"] == "softmax" and c.get("decidable") is False and not finding:
                    ax.axvspan(c["N"] / 2 ** 0.3, c["N"] * 2 ** 0.3, color="0.85", zorder=0)
            ax.set_xscale("log", base=2)
            ax.set_ylim(-0.05, 1.05)
            ax.set_title(f"{task} (finding, not judged)" if finding else task, fontsize=9)
            ax.set_xlabel("N")
        axes.flat[0].set_ylabel("solved fraction (acc ≥ 0.9)\nshaded: softmax < 90 %, no verdict")
        axes.flat[0].legend(fontsize=7)
        _mark(fig, note)
        paths += style.save(fig, out_dir, f"{stem}_solved")
        plt.close(fig)
    return paths


def _draw_slowdown(trends: dict, out_dir, stem: str, note: str | None) -> list[Path]:
    """(d): per (task, arm) each paired seed's log2-slowdown interval against N, and the fitted line."""
    keys = list(trends)
    ncol = min(3, len(keys))
    nrow = -(-len(keys) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.3 * ncol, 2.7 * nrow), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        t = trends[key]
        task, arm = key.split("/", 1)
        st = _st(arm)
        censored = False
        for N, cell in zip(t["N"], t.get("intervals", [])):
            for j, (lo, hi) in enumerate(cell):
                x = N * 2 ** (0.25 * (j / max(len(cell) - 1, 1) - 0.5))  # spread the seeds around N
                lo_v = -4.0 if lo in ("-inf", None) else float(lo)
                if hi in ("inf", None):  # beyond the cap: a stem from the lower bound ending in an up-triangle, drawn
                    # as data so the axis includes it (an annotation arrow is clipped off a panel it overflows)
                    ax.plot([x, x], [lo_v, lo_v + CENSORED_STEM], color=st["color"], lw=0.8, alpha=0.6)
                    ax.plot([x], [lo_v + CENSORED_STEM], ls="none", marker="^", ms=3.5, color=st["color"],
                            label=None if censored else "beyond the cap (lower bound)")
                    censored = True
                else:
                    ax.plot([x, x], [lo_v, float(hi)], color=st["color"], lw=0.8, alpha=0.6)
        if t.get("delta") is not None:
            ax.plot(t["N"], t["fitted"], color="k", lw=1.2, label=f"fit: Δ = {t['delta']:+.2f}")
        ax.axhline(0, color="0.6", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(t["N"], [str(n) for n in t["N"]])
        ax.set_title(f"{task}, {_label(arm)}", fontsize=9)
        ax.set_xlabel("N")
        ax.set_ylabel("log2 slowdown vs softmax")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.tight_layout()  # titles clear the row above's axis labels
    _mark(fig, note)
    paths = style.save(fig, out_dir, f"{stem}_slowdown")
    plt.close(fig)
    return paths
