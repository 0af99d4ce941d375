"""Figure: σ₁(∂f/∂X) against n on log axes — adversarial on the token ball per φ with U_φ(n), and on real states.

Panels 1–3 (softmax, x/√N, x³/√N): for each ball (β = ‖W‖₂R²/√d) the ascent's certified lower bounds of
sup_{B_R^n} σ₁ (markers, solid) and sapa's proven upper bound U_φ(n) of :mod:`sapa.theory.lipschitz_ball` (dashed,
same colour): the true Lipschitz constant lies between them. Panel 4: the certified σ₁ lower bounds of every
all-MiniLM-L6-v2 layer on its own hidden states (:mod:`sapa.empirics.realmodel.layer_lipschitz`), with n^{1/4} (the
rate reported on real inputs) and √n guides. Draws only: data from the ledger entry ``lipschitz-on-a-ball``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from sapa.common import figdata
from sapa.empirics.experiments.lipschitz_ball import BallResult
from sapa.empirics.realmodel.layer_lipschitz import LayerLipschitzResult
from sapa.figures import style
from sapa.theory.families import family

NAME = "lipschitz_ball"  # stored by ``sapa verify`` under RESULTS/data/NAME.json
TITLES = {"softmax": family("softmax").label + " (row-wise)", "poly1": family("x_sqrtN").label,
          "poly3": family("x3_sqrtN").label}


def _parts(data: dict) -> tuple[BallResult, LayerLipschitzResult]:
    return BallResult.from_json(data["ball"]), LayerLipschitzResult.from_json(data["real"])


def check(data: dict) -> None:
    """The figure's claims: every adversarial lower bound lies below its proven bound; real brackets are ordered."""
    ball, real = _parts(data)
    for r in ball.rows:
        assert 0 < r["sigma_lower"] <= r["bound"], r
    for r in real.rows:
        assert 0 < r["sigma_lower"] <= r["sigma_upper"] * (1 + 1e-12), r
    for x in (data.get("family") or {}).get("over_bound", []):
        assert 0 < x <= 1, x  # the half-attention family's certified lower bounds lie below the proven bound too


def _guide(ax, n: np.ndarray, y0: float, a: float, label: str, ls: str) -> None:
    ax.plot(n, y0 * (n / n[0]) ** a, color="0.5", ls=ls, lw=1.0, label=label)


def draw(data: dict, out_dir: str | Path, file_stem: str) -> list[Path]:
    """Four panels as in the module docstring."""
    ball, real = _parts(data)
    acts = [a for a in TITLES if any(r["activation"] == a for r in ball.rows)]
    betas = sorted({r["beta"] for r in ball.rows}, reverse=True)
    with plt.rc_context(style.RC):
        fig, axes = plt.subplots(1, len(acts) + 1, figsize=(4.2 * (len(acts) + 1), 4.6))
        for ax, act in zip(axes, acts):
            for k, b in enumerate(betas):
                s, st = ball.series(act, b), style.series_style(k)
                R = next(r["R"] for r in ball.rows if r["beta"] == b)
                ax.plot(s["n"], s["sigma_lower"], color=st["color"], marker=st["marker"], lw=1.4,
                        label=f"β = {b:g} (R = {R:.2f}): adversarial")
                ax.plot(s["n"], s["bound"], color=st["color"], ls="--", lw=1.0, label=f"β = {b:g}: sapa's bound")
            fam = data.get("family")
            if act == "softmax" and fam:
                ax.plot(fam["n"], fam["sigma_lower"], color="k", marker="x", lw=1.2,
                        label=f"β = {betas[0]:g}: half-attention family (n ≤ 1 + e^{fam['a_max']:.2f})")
            s = ball.series(act, betas[0])
            _guide(ax, s["n"], s["sigma_lower"][0] * 0.6, 0.5, "∝ √n", ":")
            ax.set_title(TITLES[act])
        ax = axes[-1]
        layers = sorted({r["layer"] for r in real.rows if r["model"] == "all-MiniLM-L6-v2"})
        for k, l in enumerate(layers):
            s, st = real.series("all-MiniLM-L6-v2", l), style.series_style(k)
            ax.plot(s["N"], s["sigma_lower"], color=st["color"], marker=st["marker"], lw=1.2, label=f"layer {l}")
        if layers:
            s = real.series("all-MiniLM-L6-v2", layers[0])
            _guide(ax, s["N"], float(np.median([real.series("all-MiniLM-L6-v2", l)["sigma_lower"][0]
                                                  for l in layers])), 0.25, "∝ n^¼ (reported, real inputs)", "-.")
            _guide(ax, s["N"], float(s["sigma_lower"][0]) * 0.5, 0.5, "∝ √n", ":")
        else:
            ax.text(0.5, 0.5, "not measured (model not installed)", ha="center", transform=ax.transAxes)
        ax.set_title("real states: all-MiniLM-L6-v2 (lower bounds)")
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length n (tokens)")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6.5, loc="best")
        axes[0].set_ylabel("σ₁(∂f/∂X)")
        c = ball.config
        fig.suptitle(f"Lipschitz constant on the token ball ‖x_i‖ ≤ R: one head, D = d = {c['D']}, seed {c['seed']}, "
                     f"{c['ascent']['restarts']} restarts × {c['ascent']['steps']} steps; real: whole layers with W_O",
                     fontsize=9)
        fig.tight_layout()
        paths = style.save(fig, out_dir, file_stem)
        plt.close(fig)
    return paths


def stored_stem(data: dict) -> str:
    """The file stem of the figure drawn by a ``sapa verify`` run."""
    ball, _ = _parts(data)
    c = ball.config
    return style.stem(NAME, D=c["D"], steps=c["ascent"]["steps"], nmax=max(c["ns"]), seed=c["seed"])


def main(results: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Redraw the figure from RESULTS/data/lipschitz_ball.json (written by ``sapa verify``) into ``out_dir``."""
    data, file_stem = figdata.read(Path(results) / "data" / f"{NAME}.json")
    check(data)
    return draw(data, out_dir if out_dir is not None else Path(results) / "figures", file_stem)
