"""Figure: the scorecard of ``sapa compare`` — a row per activation (softmax first), a column per axis, coloured by verdict.

Green HOLDS, light green HOLDS_LOOSE / HOLDS_IN_REGIME, grey UNDETERMINED, red FAILS, white no rule (a finding),
hatched not computed; each cell shows its value and interval. What to look at: the red cells; ratios are to
softmax. Draws only, from plain data: the JSON object of :meth:`sapa.api.compare.Scorecard.to_dict` (this module
imports nothing of sapa.api: the layer contract).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt

from sapa.figures import style

NAME = "compare_scorecard"
COLOURS = {"HOLDS": "#7fc97f", "HOLDS_LOOSE": "#c7e9c0", "HOLDS_IN_REGIME": "#c7e9c0", "UNDETERMINED": "#d9d9d9",
           "FAILS": "#f08080", None: "#ffffff"}
WORDS = {"size": "‖φ‖_F / √N", "growth": "growth exponent", "worst_case": "worst-case exponent",
         "lipschitz": "Lipschitz exponent (β = 4)", "time": "time ÷ SDPA", "train": "log₂ steps ÷ softmax"}


def check(d: dict) -> None:
    """The data's shape: one cell per (row, axis), softmax first."""
    if not d.get("rows") or d["rows"][0].get("id") != "softmax":
        raise ValueError("a scorecard's first row must be softmax, the reference")
    if len(d.get("cells", ())) != len(d["rows"]) or not all(set(c) == set(d.get("axes", ())) for c in d["cells"]):
        raise ValueError("a scorecard needs one cell per (row, axis)")


def _text(c: dict) -> str:
    v = c.get("value")
    if v is None:
        return "not computed"
    iv = c.get("interval")
    fmt = (lambda x: "—" if x is None or not math.isfinite(x) else f"{x:.3g}")
    return fmt(v) + ("" if not iv else f"\n[{fmt(iv[0])}, {fmt(iv[1])}]")


def draw(d: dict, out_dir: str | Path, file_stem: str) -> list[Path]:
    """The grid, saved as PNG and PDF under ``out_dir``."""
    check(d)
    axes, rows = d["axes"], d["rows"]
    with plt.rc_context(style.RC):
        fig, ax = plt.subplots(figsize=(1.9 * len(axes) + 1.6, 0.62 * len(rows) + 1.0))
        for i, cells in enumerate(d["cells"]):
            for j, a in enumerate(axes):
                c = cells[a]
                missing = c.get("value") is None
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=COLOURS.get(c.get("verdict"), "#ffffff"),
                                           edgecolor="#808080", hatch="///" if missing else None, linewidth=0.6))
                ax.text(j + 0.5, i + 0.5, _text(c), ha="center", va="center", fontsize=7)
        ax.set_xlim(0, len(axes))
        ax.set_ylim(len(rows), 0)
        ax.set_xticks([j + 0.5 for j in range(len(axes))], [WORDS.get(a, a) for a in axes], fontsize=7)
        ax.xaxis.tick_top()
        ax.set_yticks([i + 0.5 for i in range(len(rows))], [style.unicode_math(r["label"]) for r in rows],
                      fontsize=8)
        ax.tick_params(length=0)
        ax.grid(False)  # the style's grid would cross the cells
        for s in ax.spines.values():
            s.set_visible(False)
        ax.set_title(f"activations against softmax ({d.get('budget', '')} budget): green holds, red fails, "
                     "grey undecided, white: no rule applies, hatched: not computed", fontsize=8, pad=24)
        paths = style.save(fig, out_dir, file_stem)
        plt.close(fig)
    return paths


def main(d: dict, out_dir: str | Path) -> list[Path]:
    """Draw ``d`` (a scorecard's JSON object) into ``out_dir`` as compare_scorecard_<budget>.png/.pdf."""
    return draw(d, out_dir, style.stem(NAME, budget=d.get("budget", "")))
