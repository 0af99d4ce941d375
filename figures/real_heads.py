"""Figure: the 72 heads of a trained transformer (all-MiniLM-L6-v2) on the regime map of Cor 4.3 / 4.5.

Corollaries 4.3 / 4.5 of arXiv 2410.18613 claim ‖x^p/√N‖_F grows like √N. In every shared-X
Gaussian model, E‖S^{∘p}/√N‖²_F ∝ N − 1 + r with r = N* − 1 = m_diag/m_off, so the local exponent
is e(N) = ½N/(N − 2 + N*) whatever W and Σ: one map over (N, N*) holds every head. Left: each
head at the model's training length N = 128 (spread slightly sideways within its layer), at the
N* of its own W under the measured token covariance (filled) and under N(0, I) (grey);
ViT-like random-weight heads (D = 768, d = 64, N = 196) for reference. Right: the exponent
measured on the model's own hidden states (prefixes of real text, N = 8 … 256, 90% paired
bootstrap interval over texts) against N* of the matched Gaussian proxy (bias and mean
included), with the exact curve that a Gaussian head with that N* would follow.
A second figure (:func:`draw_protocols`) shows every head's exponent under each protocol of
``sapa.empirics.realmodel.real`` (special tokens in/out × re-encoded prefixes / one fixed-context pass) for
softmax, x/√N and x³/√N, with the O(√N) edge ½ + 0.05 and the fraction of heads consistent with it.
Data: :func:`sapa.empirics.realmodel.real.analyse` (optional extra ``real``).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from sapa.figures import style
from sapa.theory.families import label_of

CONTOURS = (0.05, 0.1, 0.45)
LAYER_COLORS = ["#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7"]
LAYER_MARKERS = ["o", "s", "^", "D", "v", "P"]
REF_MARKERS = {"iid": "*", "tied": "X", "corr": "h"}
REF_NAMES = {"iid": "i.i.d.", "tied": "tied", "corr": "ρ=0.5"}


def map_exponent(N, n_star):
    """e(N) = ½N/(N − 2 + N*): local exponent of √(E‖x^p/√N‖²) for crossover N* (any shared-X Gaussian model)."""
    N, n_star = np.asarray(N, float), np.asarray(n_star, float)
    return 0.5 * N / (N - 2.0 + n_star)


def _label_on_line(ax, x: float, y: float, text: str, color: str) -> None:
    """Text on a line of slope 1 in log-log axes, rotated to the line as drawn."""
    p0 = ax.transData.transform((x, y))  # call after the layout is final (subplots_adjust)
    p1 = ax.transData.transform((x * 2, y * 2))
    ang = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))
    ax.annotate(text, (x, y), xytext=(0, 3), textcoords="offset points", rotation=ang, rotation_mode="anchor",
                color=color, fontsize=7.5, ha="left", va="bottom")


def _check(res: dict) -> None:
    """Assertions made before drawing: closed form, exact and map formula agree; sanity of the data."""
    assert res["meta"]["softmax_norm_le_sqrt_n"], "‖softmax(S)‖_F > √N on some measured input"
    N_real = res["meta"]["config"]["N_real"]
    for h in res["heads"]:
        # p = 1, Σ = I: N* = 1 + ((tr W)² + 2‖W_s‖²)/‖W‖² in closed form, the same as sapa.theory.moments
        a, b = h["inv_n_star_p1_identity"], h["identity_p1_n_star"]
        assert abs(a - b) <= 1e-9 * b, f"head {h['layer']},{h['head']}: closed-form N* {a} ≠ exact {b}"
        for proxy in ("identity", "measured", "matched"):
            for p in (1, 3):
                e = h[f"{proxy}_p{p}_exponent_at_real"]
                e_map = float(map_exponent(N_real, h[f"{proxy}_p{p}_n_star"]))
                assert abs(e - e_map) < 1e-12, f"map formula disagrees with exact exponent ({e} vs {e_map})"


def draw(res: dict, out_dir: str | Path, file_stem: str | None = None) -> list[Path]:
    """Draw the 2 × 2 figure (p = 1, 3 × map, measured) from an ``analyse`` result; save PNG + PDF."""
    from sapa.empirics.realmodel.real import grid_slope, vit_references

    _check(res)
    heads = res["heads"]
    Ns_fit = res["Ns_real"]
    N_real = res["meta"]["config"]["N_real"]
    lo, hi = res["meta"]["config"]["real_range"]
    L = res["meta"]["layers"]
    refs = [r for r in vit_references(Ns_fit) if r["name"] == "ViT-B"]
    layer = np.array([h["layer"] for h in heads])
    hidx = np.array([h["head"] for h in heads])
    n_heads = int(hidx.max()) + 1

    Nmap = np.geomspace(4, 8192, 120)
    Smap = np.geomspace(1.0, 3e4, 140)  # up to the tied ViT-B head's N* ≈ 2·10⁴ (p = 3)
    E = map_exponent(Nmap[None, :], Smap[:, None])  # (S, N)
    labels = []  # contour labels, placed once the layout is final
    with plt.rc_context({**style.RC, "axes.grid": False}):
        fig, axes = plt.subplots(2, 2, figsize=(12.0, 8.6), gridspec_kw={"width_ratios": [1.0, 1.15]})
        for r, p in enumerate((1, 3)):
            # ---- left: the universal map e(N, N*) and the heads at N = N_real
            ax = axes[r, 0]
            mesh = ax.pcolormesh(Nmap, Smap, E, cmap="cividis", vmin=0, vmax=0.5, shading="gouraud", rasterized=True)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlim(Nmap[0], Nmap[-1])
            ax.set_ylim(Smap[0], Smap[-1])
            for e, col in zip(CONTOURS, ("white", "white", "black")):  # contour e: N* = N(1/(2e) − 1) + 2
                ax.plot(Nmap, Nmap * (0.5 / e - 1) + 2, color=col, lw=0.8)
                N0 = 2048 if e > 0.25 else 24
                labels.append((ax, N0, N0 * (0.5 / e - 1) + 2, f"e = {e:g}", col))
            ax.plot(Nmap, Nmap, color="white", lw=1.4, ls="--")
            labels.append((ax, 24, 24.0, "N = N*", "white"))
            ax.axvspan(lo, hi, color="white", alpha=0.12, lw=0)
            ax.axvline(lo, color="white", lw=0.6, alpha=0.7)
            ax.axvline(hi, color="white", lw=0.6, alpha=0.7)
            ax.text(math.sqrt(lo * hi), 1.12, "this model's lengths", color="white", ha="center", va="bottom", fontsize=8)
            jitter = 2.0 ** (0.45 * (hidx - (n_heads - 1) / 2) / (n_heads - 1) + 0.05 * (layer - (L - 1) / 2) - 0.1)
            xs = N_real * jitter
            ident = np.array([h[f"identity_p{p}_n_star"] for h in heads])
            meas = np.array([h[f"measured_p{p}_n_star"] for h in heads])
            ax.scatter(xs, ident, s=10, c="0.75", edgecolors="0.3", linewidths=0.3, zorder=3)
            for l in range(L):
                m = layer == l
                ax.scatter(xs[m], meas[m], s=26, c=LAYER_COLORS[l], marker=LAYER_MARKERS[l], edgecolors="black",
                           linewidths=0.5, zorder=4)
            for ref in refs:
                if ref["p"] != p:
                    continue
                ax.plot(ref["N"], ref["n_star"], marker=REF_MARKERS[ref["weights"]], ms=11, mfc="white",
                        mec="black", mew=1.1, ls="none", zorder=5)
                ax.annotate(f"ViT-B {REF_NAMES[ref['weights']]}", (ref["N"], ref["n_star"]), xytext=(8, 0),
                            textcoords="offset points", va="center", fontsize=7.5,
                            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
            xt = [4, 16, 64, 256, 1024, 4096]
            ax.set_xticks(xt, [str(v) for v in xt])
            ax.minorticks_off()
            yt = [1, 10, 100, 1000, 10000]
            ax.set_yticks(yt, [str(v) for v in yt])
            ax.set_ylabel(f"crossover $N^*$ ($p = {p}$)")
            ax.set_title(f"$p = {p}$: heads at $N = {N_real}$; filled: measured $\\Sigma$, grey: $\\Sigma = I$", loc="left")
            if r == 1:
                ax.set_xlabel("sequence length N (tokens)")

            # ---- right: measured exponent vs N* of the matched proxy, with the exact curve
            ax = axes[r, 1]
            xs2 = np.array([h[f"matched_p{p}_n_star"] for h in heads])
            ys = np.array([h[f"meas_p{p}_fro_slope"] for h in heads])
            ci = np.array([h[f"meas_p{p}_fro_ci"] for h in heads])
            ax.axhspan(0.45, 0.55, color="0.85", lw=0, zorder=0)
            ax.axhline(0.5, color="black", lw=0.8, ls=":", zorder=1)
            grid = np.geomspace(1.0, Smap[-1], 300)
            ax.plot(grid, [grid_slope(Ns_fit, g) for g in grid], color="black", lw=1.6, zorder=2)
            for l in range(L):
                m = layer == l
                ax.errorbar(xs2[m], ys[m], yerr=[ys[m] - ci[m, 0], ci[m, 1] - ys[m]], fmt="none", ecolor=LAYER_COLORS[l],
                            elinewidth=0.8, alpha=0.8, zorder=3)
                ax.scatter(xs2[m], ys[m], s=26, c=LAYER_COLORS[l], marker=LAYER_MARKERS[l], edgecolors="black",
                           linewidths=0.5, zorder=4)
            for ref in refs:
                if ref["p"] != p:
                    continue
                ax.plot(ref["n_star"], ref["grid_slope"], marker=REF_MARKERS[ref["weights"]], ms=11, mfc="white",
                        mec="black", mew=1.1, ls="none", zorder=5)
            ax.set_xscale("log")
            ax.set_xlim(1.0, Smap[-1])
            ymin = min(-0.05, float(ci[:, 0].min()) - 0.05)
            ymax = max(1.0, float(ci[:, 1].max()) + 0.05)
            ax.set_ylim(ymin, ymax)
            ax.set_xticks(yt, [str(v) for v in yt])
            ax.minorticks_off()
            ax.grid(True, alpha=0.3)
            word = "x" if p == 1 else "x^3"
            ax.set_ylabel(f"growth exponent of RMS $\\|{word}/\\sqrt{{N}}\\|_F$, N = {Ns_fit[0]}–{Ns_fit[-1]}")
            ax.set_title(f"$p = {p}$: measured on real hidden states vs exact Gaussian curve", loc="left")
            if r == 1:
                ax.set_xlabel(r"crossover $N^*$ of the matched Gaussian proxy  $x' \sim \mathcal{N}(0, E[(x+s)(x+s)^\top])$")

        fig.subplots_adjust(left=0.06, right=0.985, bottom=0.16, top=0.92, wspace=0.2, hspace=0.28)
        for args in labels:
            _label_on_line(*args)
        cax = fig.add_axes((0.06, 0.045, 0.36, 0.014))
        cb = fig.colorbar(mesh, cax=cax, orientation="horizontal", ticks=[0, 0.1, 0.2, 0.3, 0.4, 0.5])
        cb.ax.set_xticklabels(["0 flat", "0.1", "0.2", "0.3", "0.4", r"0.5 $\sqrt{N}$"], fontsize=8)
        cb.set_label(r"map: local exponent $e(N) = \frac{1}{2}N/(N-2+N^*)$", fontsize=8.5)
        handles = [Line2D([], [], marker=LAYER_MARKERS[l], color="none", mfc=LAYER_COLORS[l], mec="black", ms=6,
                          label=f"layer {l}") for l in range(L)]
        handles += [Line2D([], [], marker="o", color="none", mfc="0.75", mec="0.3", ms=4,
                           label=r"$N^*$ under $\mathcal{N}(0, I)$"),
                    Line2D([], [], color="0.45", lw=1.4, ls="--", label=r"$N = N^*$ ($e \approx 1/4$)")]
        handles += [Line2D([], [], marker=REF_MARKERS[m], color="none", mfc="white", mec="black", ms=9,
                           label=f"ViT-B-like, {lab} weights") for m, lab in (("iid", "i.i.d."), ("tied", "tied"),
                                                                              ("corr", r"$\rho$=0.5"))]
        handles += [Line2D([], [], color="black", lw=1.6, label="exact: Gaussian head with this $N^*$"),
                    Line2D([], [], color="0.6", lw=6, alpha=0.5, label=r"$0.5 \pm 0.05$ (Cor 4.3/4.5)")]
        leg = fig.legend(handles=handles, loc="lower left", ncol=4, bbox_to_anchor=(0.45, 0.0), fontsize=8, frameon=False)
        for t in leg.get_texts():
            t.set_color("black")
        fig.suptitle("all-MiniLM-L6-v2 (6 layers × 12 heads, D = 384, d = 32): do $x/\\sqrt{N}$ and $x^3/\\sqrt{N}$ "
                     "grow like $\\sqrt{N}$ at the model's own lengths?",
                     fontsize=10.5)
        cfg = res["meta"]["config"]
        name = file_stem or style.stem("real_heads_minilm", p=(1, 3), N=f"{Ns_fit[0]}-{Ns_fit[-1]}",
                                       texts=len(res["meta"]["passages"]), budget=cfg["name"])
        paths = style.save(fig, out_dir, name)
    if "fits" in res:
        paths += draw_protocols(res, out_dir, None if file_stem is None else file_stem + "_protocols")
    return paths


PROTOCOL_COLORS = {"prefix": "#0072B2", "prefix-content": "#56B4E9", "fixed": "#D55E00", "fixed-content": "#E69F00"}
ACT_TITLES = {a: label_of(a) + (" (baseline)" if a == "softmax" else "") for a in ("softmax", "x/sqrt(N)", "x^3/sqrt(N)")}


def draw_protocols(res: dict, out_dir: str | Path, file_stem: str | None = None, edge: float = 0.55) -> list[Path]:
    """Per-head exponent ± 90 % interval for each protocol (columns: softmax, x/√N, x³/√N); save PNG + PDF."""
    from sapa.empirics.realmodel.real import ACTIVATIONS, head_fits

    fits = [f for f in head_fits(res) if f.kind == "fro"]
    protocols = list(dict.fromkeys(f.protocol for f in fits))
    Ns_fit = res["Ns_real"]
    with plt.rc_context(style.RC):
        fig, axes = plt.subplots(1, 3, figsize=(12.0, 4.4), sharey=True)
        for ax, act in zip(axes, ACTIVATIONS):
            ax.axhspan(0.45, 0.55, color="0.88", lw=0, zorder=0)
            ax.axhline(edge, color="black", lw=0.9, ls="--", zorder=1)
            ax.axhline(0.5, color="black", lw=0.6, ls=":", zorder=1)
            for i, pr in enumerate(protocols):
                sel = sorted((f for f in fits if f.protocol == pr and f.activation == act), key=lambda f: f.slope)
                if not sel:
                    continue
                y = np.array([f.slope for f in sel])
                lo, hi = np.array([f.lo for f in sel]), np.array([f.hi for f in sel])
                x = i + np.linspace(-0.32, 0.32, len(sel))
                consistent = lo <= edge
                col = PROTOCOL_COLORS.get(pr, "0.4")
                ax.vlines(x, lo, hi, color=col, lw=0.8, alpha=0.7, zorder=2)
                ax.scatter(x[consistent], y[consistent], s=9, color=col, zorder=3)
                ax.scatter(x[~consistent], y[~consistent], s=9, facecolors="white", edgecolors=col, linewidths=0.7,
                           zorder=3)
                ax.text(i, 1.0, f"{consistent.mean():.0%}", transform=ax.get_xaxis_transform(), ha="center",
                        va="bottom", fontsize=8, color=col)
            ax.set_xticks(range(len(protocols)), [p.replace("-", "-\n") for p in protocols], fontsize=8)
            ax.set_xlim(-0.6, len(protocols) - 0.4)
            ax.set_title(ACT_TITLES.get(act, act), loc="left", pad=14)
            ax.grid(True, axis="y", alpha=0.3)
        axes[0].set_ylabel(f"growth exponent of RMS norm, N = {Ns_fit[0]}–{Ns_fit[-1]}")
        handles = [Line2D([], [], color="black", lw=0.9, ls="--", label=f"O(√N) edge {edge:g}"),
                   Line2D([], [], color="0.6", lw=6, alpha=0.5, label="two-sided 0.5 ± 0.05"),
                   Line2D([], [], marker="o", color="0.3", ls="none", ms=4, label="interval reaches the edge"),
                   Line2D([], [], marker="o", color="0.3", mfc="white", ls="none", ms=4,
                          label="wholly above the edge")]
        fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
        fig.suptitle("all-MiniLM-L6-v2, 72 heads: growth exponent per head under each protocol (percent: heads "
                     "consistent with O(√N))", fontsize=10)
        fig.subplots_adjust(left=0.07, right=0.99, bottom=0.2, top=0.83, wspace=0.08)
        cfg = res["meta"]["config"]
        name = file_stem or style.stem("real_heads_protocols", N=f"{Ns_fit[0]}-{Ns_fit[-1]}",
                                       texts=len(res["meta"]["passages"]), budget=cfg["name"])
        return style.save(fig, out_dir, name)


def draw_stored(results: str | Path, out_dir: str | Path) -> list[Path]:
    """Redraw from the newest analysis stored by ``sapa verify`` under ``results/real`` (nothing recomputed)."""
    import json

    stored = sorted(Path(results, "real").glob("real_heads_*.json"), key=lambda p: p.stat().st_mtime)
    if not stored:
        raise FileNotFoundError(f"no stored real-model analysis under {Path(results, 'real')}")
    from sapa.common.readfile import read_regular_text

    return draw(json.loads(read_regular_text(stored[-1], "stored real-model analysis")), out_dir)


def main(out_dir: str | Path = "results/figures", small: bool = False) -> list[Path]:
    """Analyse the model (cached beside ``out_dir`` in ``../real``) and draw; ``small``: 2 texts, N = 8, 16, 32."""
    from sapa.empirics.realmodel import real

    res = real.analyse(real.SMALL if small else real.QUICK, cache_dir=Path(out_dir).parent / "real")
    return draw(res.to_dict(), out_dir)  # a typed RealResult; draw reads its stored form


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(main(small="--small" in sys.argv))
