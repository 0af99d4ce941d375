"""Figure: CPU time of polynomial attention c·(QKᵀ)^{∘p}V against softmax's fused kernel (arXiv 2410.18613; the reviews ask for running times).

``STEM.png``: seconds per call (the run's clock, median of the rounds) against N, log-log, panels forward and
forward+backward × mask none and causal; softmax (``scaled_dot_product_attention``) in black, the polynomial's
naive, causal-blocked, compiled and linearised forms in colour, p = 3 thick and solid, p = 2 dashed, p = 1
dotted, with reference slopes ∝ N² and ∝ N. ``STEM_crossover.png``: the N from which the exact linearisation
φ_p(Q)(φ_p(K)ᵀV) (symmetric features, F = C(d+p−1, p)) beats the naive N² form, measured (forward) against the
flop-count prediction, per p and head dim d. ``STEM_model.png`` (when the run measured the machine's rates): each
form's measured ratio to softmax against the ratio the cost model (:mod:`sapa.empirics.timing.cost_model`) predicts,
with the line of agreement and a ±1.5× band.

Drawn from the dict :func:`sapa.empirics.timing.overhead.bench_overhead` returns, so ``sapa figures`` redraws
it from stored data.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from sapa.figures import style

METHOD_STYLE = {  # colour and marker per form (Okabe–Ito); softmax black
    "softmax": {"color": style.PALETTE[0], "marker": "o"},
    "naive": {"color": style.PALETTE[1], "marker": "s"},
    "causal_blocked": {"color": style.PALETTE[2], "marker": "v"},
    "compiled": {"color": style.PALETTE[5], "marker": "D"},
    "linearised": {"color": style.PALETTE[3], "marker": "^"},
}
P_STYLE = {3: {"linestyle": "-", "lw": 2.3, "alpha": 1.0, "ms": 5.5},
           2: {"linestyle": "--", "lw": 1.2, "alpha": 0.75, "ms": 3.5},
           1: {"linestyle": ":", "lw": 1.3, "alpha": 0.75, "ms": 3.5}}
REF_STYLE = {"color": "0.6", "lw": 3.0, "alpha": 0.35, "linestyle": "-"}
LABEL = {"softmax": "softmax (fused SDPA)", "naive": "naive c·(QKᵀ)^∘p V",
         "causal_blocked": "causal, blocks above the diagonal skipped", "compiled": "torch.compile(naive)",
         "linearised": "linearised φ(Q)(φ(K)ᵀV)"}


def _series(rows: list[dict], d: int, mask: str, pas: str, method: str, p) -> tuple[np.ndarray, np.ndarray]:
    pts = sorted((r["N"], r["seconds"]) for r in rows
                 if r["d"] == d and r["mask"] == mask and r["pass"] == pas and r["method"] == method
                 and r["p"] == p and r["seconds"] is not None)
    return np.array([n for n, _ in pts], float), np.array([t for _, t in pts], float)


def _p_style(p: int) -> dict:
    return P_STYLE.get(p, {"linestyle": "-.", "lw": 1.0, "alpha": 0.6, "ms": 3.0})


def _time_panels(res: dict) -> plt.Figure:
    g, rows, prov = res["grid"], res["rows"], res["provenance"]
    d, masks, passes = g["d"], list(g["masks"]), list(g["passes"])
    methods = [m for m in ("naive", "causal_blocked", "compiled", "linearised") if m in g["methods"]]
    ps = sorted(g["ps"])
    fig, axes = plt.subplots(len(passes), len(masks), figsize=(5.6 * len(masks), 4.4 * len(passes) + 1.2),
                             squeeze=False, sharex=True)
    for i, pas in enumerate(passes):
        for j, mask in enumerate(masks):
            ax = axes[i][j]
            xs, ts = _series(rows, d, mask, pas, "softmax", None)
            if len(xs):
                ax.plot(xs, ts, lw=2.0, ms=5, zorder=5, linestyle="-", **METHOD_STYLE["softmax"])
            for method in methods:
                for p in ps:
                    x, t = _series(rows, d, mask, pas, method, p)
                    if len(x):
                        ax.plot(x, t, **METHOD_STYLE[method], **_p_style(p))
            _reference_slopes(ax, xs, ts)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{'forward' if pas == 'fwd' else 'forward + backward'}, mask {mask}")
            if i == len(passes) - 1:
                ax.set_xlabel("sequence length N (tokens)")
            if j == 0:
                ax.set_ylabel(f"{prov.get('clock', 'wall')} {'CPU ' if prov.get('clock', 'wall') != 'wall' else ''}"
                              "seconds per call (median)")
    handles = [Line2D([], [], lw=2, **METHOD_STYLE["softmax"], label=LABEL["softmax"])]
    handles += [Line2D([], [], lw=2, **METHOD_STYLE[m], label=LABEL[m]) for m in methods]
    # every form the caption names is in the legend: one this run did not time says so (no line, no marker)
    handles += [Line2D([], [], lw=0, marker="", label=f"{LABEL[m]}: not timed in this run")
                for m in ("naive", "causal_blocked", "compiled", "linearised") if m not in methods]
    handles += [Line2D([], [], color="0.3", label=f"p = {p}" + (" (highlighted)" if p == 3 else ""),
                       **{k: v for k, v in _p_style(p).items() if k != "ms"}) for p in sorted(ps, reverse=True)]
    handles += [Line2D([], [], **REF_STYLE, label="reference slopes ∝ N², ∝ N")]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8.5, frameon=False, bbox_to_anchor=(0.5, 0.0))
    skipped = sum(1 for r in rows if r["d"] == d and r["seconds"] is None)
    fig.suptitle(f"One attention layer, batch 1, {g['heads']} head(s), d = d_v = {d}, {prov['dtype']}, "
                 f"{prov['device']} ({prov['threads']} thread{'s' if prov['threads'] != 1 else ''}), torch "
                 f"{prov['torch']}; median of {g['repeats']} rounds"
                 + (f"; {skipped} cells skipped (memory/time caps, see data)" if skipped else ""), fontsize=10)
    fig.tight_layout(rect=(0, 0.07 if len(passes) > 1 else 0.14, 1, 0.96))
    return fig


def _reference_slopes(ax, xs: np.ndarray, ts: np.ndarray) -> None:
    """Thin grey ∝ N² and ∝ N lines from a third of softmax's first time (below the data)."""
    if len(xs) < 2:
        return
    for k, word in ((2, "∝ N²"), (1, "∝ N")):
        y = ts[0] / 3 * (xs / xs[0]) ** k
        ax.plot(xs, y, **REF_STYLE, marker="", zorder=1)
        ax.annotate(word, (xs[-1], y[-1]), textcoords="offset points", xytext=(4, 0), fontsize=8, color="0.4",
                    va="center")


P_MARKER = {1: "o", 2: "s", 3: "D"}


def _crossover_panels(res: dict) -> plt.Figure:
    table, g = res["crossover"], res["grid"]
    masks = [m for m in g["crossover_masks"] if any(c["mask"] == m for c in table)] or ["none"]
    ds = sorted({c["d"] for c in table})
    ps = sorted({c["p"] for c in table})
    Ns = g["Ns"]
    fig, axes = plt.subplots(1, len(masks), figsize=(max(8.5, 6.4 * len(masks)), 6.2), squeeze=False)
    for ax, mask in zip(axes[0], masks):
        ax.axhspan(Ns[0], Ns[-1], color="0.92", lw=0, zorder=0)
        for k, p in enumerate(ps):
            color = style.PALETTE[(k + 1) % len(style.PALETTE)]
            marker = P_MARKER.get(p, style.MARKERS[k % len(style.MARKERS)])
            cs = sorted((c for c in table if c["p"] == p and c["mask"] == mask), key=lambda c: c["d"])
            off = 2 ** ((k - (len(ps) - 1) / 2) * 0.12)  # horizontal offset per p, so markers do not hide each other
            x = np.array([c["d"] * off for c in cs], float)
            ax.plot(x, [c["flop_crossover_N"] for c in cs], color=color, linestyle="--", lw=1.2, marker=marker,
                    mfc="white", ms=7, zorder=3)
            got = [(xi, c["measured_crossover_N"]) for xi, c in zip(x, cs) if c["measured_status"] == "crossed"]
            if got:
                ax.plot(*zip(*got), color=color, linestyle="-", lw=1.2, marker=marker, ms=8, zorder=4)
            for xi, c in zip(x, cs):
                status = c["measured_status"]
                if status.startswith("none") or status == "below grid":
                    up = status.startswith("none")
                    y = (max(c["N_measured"]) if c["N_measured"] else Ns[-1]) if up else Ns[0]
                    ax.plot([xi], [y], color=color, marker=marker, ms=8, linestyle="", zorder=4)
                    ax.annotate("", (xi, y * (1.9 if up else 1 / 1.9)), xytext=(xi, y),
                                arrowprops={"arrowstyle": "-|>", "color": color, "lw": 1.4}, zorder=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(ds, [str(v) for v in ds])
        ax.set_xlim(min(ds) / 1.5, max(ds) * 1.5)
        ax.set_xlabel("head dim d (= d_v)")
        ax.set_ylabel("crossover N (linearised faster beyond it)")
        ax.set_title(f"linearised vs naive, forward, mask {mask}")
    handles = [Line2D([], [], color=style.PALETTE[(k + 1) % len(style.PALETTE)], marker=P_MARKER.get(p, "o"),
                      lw=1.2, label=f"p = {p}") for k, p in enumerate(ps)]
    handles += [Line2D([], [], color="0.3", marker="o", mfc="white", linestyle="--", label="flop count (hollow)"),
                Line2D([], [], color="0.3", marker="o", linestyle="-", label="measured (filled)"),
                Line2D([], [], color="0.3", marker=r"$\uparrow$", ms=10, linestyle="",
                       label="↑ not crossed up to the largest N timed"),
                Line2D([], [], color="0.3", marker=r"$\downarrow$", ms=10, linestyle="",
                       label="↓ crossed below the grid"),
                Line2D([], [], color="0.92", lw=8, label=f"timed N range {Ns[0]}–{Ns[-1]}")]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.0))
    fig.suptitle("Exact linearisation φ_p(Q)(φ_p(K)ᵀV), symmetric features F = C(d+p−1, p), against the N² form:\n"
                 f"where it becomes faster — measured ({res['provenance']['dtype']}, "
                 f"{res['provenance']['device']}) vs flop count", fontsize=10)
    fig.tight_layout(rect=(0, 0.13, 1, 0.93))
    return fig


def draw(res: dict, out_dir: str | Path, stem: str) -> list[Path]:
    """Both figures from :func:`sapa.empirics.timing.overhead.bench_overhead`'s dict: STEM (times) and STEM_crossover; PNG + PDF."""
    with plt.rc_context(style.RC):
        paths = style.save(_time_panels(res), out_dir, stem)
        if res.get("crossover"):
            paths += style.save(_crossover_panels(res), out_dir, f"{stem}_crossover")
        if res.get("cost_rates"):
            paths += style.save(_model_panel(res), out_dir, f"{stem}_model")
    return paths


def _model_panel(res: dict) -> plt.Figure:
    """Measured ratio to softmax against the cost model's, per timed form and cell at the main d."""
    from sapa.empirics.timing.cost_model import Rates, predicted_ratio

    g, rates = res["grid"], Rates(**res["cost_rates"])
    soft = {(r["mask"], r["pass"], r["N"]): r["seconds"] for r in res["rows"] if r["d"] == g["d"]
            and r["method"] == "softmax" and r["seconds"]}
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    lo, hi = np.inf, 0.0
    for r in res["rows"]:
        s = soft.get((r["mask"], r["pass"], r["N"]))
        if r["d"] != g["d"] or r["method"] in ("softmax", "compiled") or not r["seconds"] or not s:
            continue
        x = predicted_ratio(r["method"], r["N"], g["d"], r["p"], r["mask"] == "causal", r["pass"], rates,
                            g.get("block", 128))
        y = r["seconds"] / s
        lo, hi = min(lo, x, y), max(hi, x, y)
        ax.plot([x], [y], linestyle="", mfc="white" if r["pass"] == "fwd" else None,
                ms=4 + 1.5 * (r["p"] or 1), **METHOD_STYLE[r["method"]])
    if hi > 0:
        grid = np.geomspace(lo / 1.5, hi * 1.5, 50)
        ax.fill_between(grid, grid / 1.5, grid * 1.5, color="0.92", lw=0, zorder=0)
        ax.plot(grid, grid, color="0.5", lw=1, zorder=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted ratio to softmax (cost model: flops, element-wise work, N×N bytes)")
    ax.set_ylabel("measured ratio to softmax (median of the rounds)")
    methods = sorted({r["method"] for r in res["rows"] if r["method"] not in ("softmax", "compiled")})
    handles = [Line2D([], [], linestyle="", **METHOD_STYLE[m], label=LABEL[m]) for m in methods]
    handles += [Line2D([], [], linestyle="", marker="o", mfc="white", color="0.3", label="forward (hollow)"),
                Line2D([], [], linestyle="", marker="o", color="0.3", label="forward + backward (filled)"),
                Line2D([], [], color="0.5", lw=1, label="agreement"),
                Line2D([], [], color="0.92", lw=8, label="within 1.5× of the prediction")]
    ax.legend(handles=handles, fontsize=8, frameon=False, loc="upper left")
    ax.set_title("Where the cost model and the measurement agree (marker size: p)", fontsize=10)
    fig.tight_layout()
    return fig


def main(out_dir: str | Path = "results/figures", small: bool = False) -> list[Path]:
    """Benchmark (``small``: a tiny grid in seconds, else the quick one) and draw."""
    from sapa.empirics.timing.overhead import QUICK, OverheadGrid, bench_overhead

    grid = (OverheadGrid(Ns=(32, 64, 128), d=16, repeats=1, methods=("naive", "linearised"), crossover_ds=(8, 16),
                         crossover_masks=("none",), time_cap_s=0.5, block_s=0.005) if small else QUICK)
    res = bench_overhead(grid=grid, threads=1 if small else None)
    g = res["grid"]
    stem = style.stem("overhead", d=g["d"], N=f"{g['Ns'][0]}-{g['Ns'][-1]}", threads=res["provenance"]["threads"],
                      dtype="float32")
    return draw(res, out_dir, stem)


if __name__ == "__main__":  # pragma: no cover
    for path in main():
        print(path)
