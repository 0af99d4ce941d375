"""Figure: worst case beside typical case of ‖x^p/√N‖_F and its Jacobian (arXiv 2410.18613, Cor 4.3 / 4.5).

For S = XWXᵀ and c = 1/√N, the largest norm over two input sets of equal energy: every token
on a sphere ‖x_i‖ = r (LayerNorm) and only ‖X‖_F = r√N. Shaded: the exact bracket
[witness value, upper bound] of ``sapa.theory.worst_case``; markers: the best input found by
gradient ascent (started from random points and the witnesses); grey: one random point of the
set. Under per-token bounds the worst case grows like √N for every p; with only the total
energy bounded x³/√N grows like N^{2.5} (the energy concentrates on one or two tokens).

Draws only: the data come from :func:`sapa.empirics.experiments.worst_case.run_worst_case` (a
:class:`~sapa.empirics.experiments.worst_case.WorstCaseResult`) or its stored JSON.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from sapa.common import figdata
from sapa.empirics.experiments.worst_case import WorstCaseResult
from sapa.figures import style
from sapa.theory.families import label_of

NAME = "worst_case"  # stored by ``sapa verify`` under RESULTS/data/NAME.json

QUANT_LABEL = {"fro": "‖φ(S)‖_F", "jac_fro": "‖∂φ(S)/∂X‖_F"}
CONSTRAINT_LABEL = {"token": "every token ‖x_i‖ = r", "fro": "only ‖X‖_F = r√N"}


def _result(res: WorstCaseResult | dict) -> WorstCaseResult:
    return res if isinstance(res, WorstCaseResult) else WorstCaseResult.from_json(res)


def check(res: WorstCaseResult | dict) -> None:
    """The figure's claim: witnesses attain the exact lower ends, nothing found exceeds the upper bounds."""
    from sapa.empirics.experiments.worst_case import summarise

    for p, df in _result(res).frames.items():
        for s in summarise(df, 0.5):
            assert s["witness_attains_lower"] and s["never_above_upper"], (p, s)


def _panel(ax, df, constraint: str, p: int, gamma: float = 0.5) -> None:
    from sapa.theory.worst_case import worst_case_exponent

    exps = []
    for i, q in enumerate(("fro", "jac_fro")):
        g = df[(df["constraint"] == constraint) & (df["quantity"] == q)].sort_values("N")
        N = g["N"].to_numpy(float)
        c = N ** (-gamma)
        st = style.series_style(i + 1)
        e = worst_case_exponent(p, q, constraint, gamma)
        ax.fill_between(N, g["lower"] * c, g["upper"] * c, color=st["color"], alpha=0.15, lw=0)
        ax.plot(N, g["best"] * c, color=st["color"], marker=st["marker"], linestyle=st["linestyle"],
                label=f"{QUANT_LABEL[q]}: worst input found (ascent)")
        exps.append(f"{QUANT_LABEL[q]} ∝ N^{e:g}")
        ax.plot(N, g["random_value"] * c, color="0.5", marker=st["marker"], linestyle=":", ms=4,
                label=f"{QUANT_LABEL[q]}: a random input")
    N = np.asarray(sorted(df["N"].unique()), float)
    ref = df[(df["constraint"] == constraint) & (df["quantity"] == "fro")].sort_values("N")["best"].to_numpy() * N**-gamma
    ax.plot(N, ref[0] * (N / N[0]) ** 0.5, color="0.3", lw=0.8, linestyle=(0, (1, 2)), label="∝ √N (the claim)")
    ax.text(0.03, 0.97, "exact worst case:\n" + "\n".join(exps), transform=ax.transAxes, va="top", fontsize=8,
            bbox={"boxstyle": "round", "fc": "white", "ec": "0.7"})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N (tokens)")
    ax.set_ylabel("norm with c = 1/√N")
    ax.set_title(f"{label_of(f'x^{p}/sqrt(N)' if p > 1 else 'x/sqrt(N)')}, {CONSTRAINT_LABEL[constraint]}")


def draw(res: WorstCaseResult | dict, out_dir: str | Path, file_stem: str) -> list[Path]:
    """Rows p, columns constraint set; legend below (from the result or its stored JSON)."""
    res = _result(res)
    ps = sorted(res.frames)
    with plt.rc_context(style.RC):
        fig, axes = plt.subplots(len(ps), 2, figsize=(11.0, 4.0 * len(ps) + 0.8), squeeze=False)
        for row, p in enumerate(ps):
            for col, constraint in enumerate(("token", "fro")):
                _panel(axes[row, col], res.frames[p], constraint, p)
        h, lab = axes[0, 0].get_legend_handles_labels()
        fig.legend(h, lab, loc="lower center", ncol=3, fontsize=8, frameon=True)
        cfg = res.config
        fig.suptitle(f"Worst case of x^p/√N attention over inputs of equal energy (W = W_Q W_Kᵀ, D = {cfg.D}, "
                     f"entries N(0, 1/D); r = {cfg.r:g});\nshaded: exact bracket [value at the witness input, upper bound]", fontsize=10.5)
        fig.tight_layout(rect=(0, 0.1, 1, 0.96))
        return style.save(fig, out_dir, file_stem)


def stored_stem(res: WorstCaseResult) -> str:
    """The file stem of the figure of ``res`` drawn by a ``sapa verify`` run."""
    cfg = res.config
    return style.stem(NAME, D=cfg.D, N=list(cfg.Ns), steps=cfg.steps, seed=cfg.seed)


def main(results: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Redraw the figure from RESULTS/data/worst_case.json (written by ``sapa verify``) into ``out_dir``."""
    data, file_stem = figdata.read(Path(results) / "data" / f"{NAME}.json")
    check(data)
    return draw(data, out_dir if out_dir is not None else Path(results) / "figures", file_stem)
