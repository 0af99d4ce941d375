"""Figure: certified local Lipschitz constant σ₁(∂F/∂X) of whole multi-head attention layers against N.

Left: every layer of all-MiniLM-L6-v2 on its own hidden states (a text prefix of N tokens); right: random
layers of ViT-Base size (D = 768, 12 heads, d = 64). Solid: the Lanczos lower bound of σ₁; dashed: the
certified upper bound (:mod:`empirics.kernels.spectral`); dotted grey: a √N slope for reference (the rate that
Castin, Ablin & Peyré, ICML 2024, state for their bound). The published bound itself is not drawn (see
:data:`empirics.experiments.layer_lipschitz.PUBLISHED_BOUND`).

Draws only: the data come from :func:`empirics.experiments.layer_lipschitz.run_layer_lipschitz` or its stored JSON.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from common import figdata
from empirics.experiments.layer_lipschitz import LayerLipschitzResult
from figures import style

NAME = "layer_lipschitz"  # stored by ``sapa verify`` under RESULTS/data/NAME.json
MODELS = ("all-MiniLM-L6-v2", "ViT-B random")


def _result(res) -> LayerLipschitzResult:
    return res if isinstance(res, LayerLipschitzResult) else LayerLipschitzResult.from_json(res)


def check(res) -> None:
    """The figure's claims: every bracket is ordered (0 < lower ≤ upper ≤ ‖J‖_F)."""
    for r in _result(res).rows:
        assert 0 < r["sigma_lower"] <= r["sigma_upper"] * (1 + 1e-12), r
        assert r["sigma_upper"] <= r["jac_fro"] * (1 + 1e-9), r


def draw(res, out_dir: str | Path, file_stem: str) -> list[Path]:
    """Two panels (MiniLM layers, random ViT-B layers): lower and certified upper bound of σ₁ against N."""
    res = _result(res)
    with plt.rc_context(style.RC):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
        for ax, model in zip(axes, MODELS):
            layers = sorted({r["layer"] for r in res.rows if r["model"] == model})
            for k, l in enumerate(layers):
                s = res.series(model, l)
                st = style.series_style(k)
                lab = f"layer {l}" if model != "ViT-B random" else f"seed {l}"
                ax.plot(s["N"], s["sigma_lower"], color=st["color"], marker=st["marker"], lw=1.4, label=f"{lab}: lower")
                ax.plot(s["N"], s["sigma_upper"], color=st["color"], ls="--", lw=1.0, alpha=0.8)
            if layers:
                s = res.series(model, layers[0])
                ref = s["sigma_lower"][0] * np.sqrt(s["N"] / s["N"][0])
                ax.plot(s["N"], ref, color="0.5", ls=":", lw=1.2, label="∝ √N (reference)")
            else:
                ax.text(0.5, 0.5, "not measured (model not installed)", ha="center", transform=ax.transAxes)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length N (tokens)")
            ax.set_title(model + " — solid: lower, dashed: certified upper bound")
            ax.legend(fontsize=7, loc="best")
        axes[0].set_ylabel("σ₁(∂F/∂X), whole layer with W_O")
        fig.suptitle(f"Local Lipschitz constant of multi-head attention layers (Lanczos ≤ {res.max_steps} steps, "
                     f"seed {res.seed}); the published bound is not drawn: its statement was not available", fontsize=9)
        fig.tight_layout()
        paths = style.save(fig, out_dir, file_stem)
        plt.close(fig)
    return paths


def stored_stem(res) -> str:
    """The file stem of the figure of ``res`` drawn by a ``sapa verify`` run."""
    res = _result(res)
    return style.stem(NAME, steps=res.max_steps, seed=res.seed)


def main(results: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Redraw the figure from RESULTS/data/layer_lipschitz.json (written by ``sapa verify``) into ``out_dir``."""
    data, file_stem = figdata.read(Path(results) / "data" / f"{NAME}.json")
    check(data)
    return draw(data, out_dir if out_dir is not None else Path(results) / "figures", file_stem)
