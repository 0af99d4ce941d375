"""Figure 3: where x^p/√N attention grows like √N — the local growth exponent over (N, D).

Corollaries 4.3 / 4.5 of arXiv 2410.18613 claim ‖x^p/√N‖_F grows like √N. Exactly
(``sapa.theory.moments``), E‖S^{∘p}‖²_F = N(N−1)·m_off + N·m_diag, so the RMS of the scaled norm,
√(E‖S^{∘p}‖²/N), has local growth exponent

    e(N) = d log √(M_p/N) / d log N = ½·N·m_off / ((N−1)·m_off + m_diag),

which is ½ ("√N growth") only for N ≫ N* = 1 + m_diag/m_off and ≈ 0 ("flat") below it. The
per-entry moments m_off, m_diag depend on (p, weight model, D, d) but not on N, so a row of the
map costs one exact evaluation. Weights W_Q, W_K ∈ R^{D×d} are i.i.d., tied (W_Q = W_K) or
ρ-correlated; e does not depend on the weight scale σ_w. The head width is d = 64 at every D
(ViT's; taking d = min(64, D) instead only bends the contours below D = 64).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.patheffects as pe
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from sapa.figures import style

MODELS = (("iid", "i.i.d. $W_Q, W_K$"), ("tied", "tied $W_Q = W_K$"), ("corr", r"correlated, $\rho = {rho:g}$"))
VIT = (("ViT-B", 196, 768), ("ViT-S", 196, 384))  # (name, N = 14² patches, D); both use heads of d = 64
CONTOURS = (0.05, 0.1, 0.45)


def regime_grid(p: int, model: str, Ns, Ds, d: int = 64, rho: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """e(N, D) = ½·N·m_off/((N−1)·m_off + m_diag) of √(E‖S^{∘p}‖²_F / N) on a grid, and N*(D).

    Args:
      p: power of x^p.
      model: "iid" | "tied" | "corr" (random weights, x_i ~ N(0, I_D)).
      Ns: (K,) sequence lengths (any positive numbers: e is smooth in N).
      Ds: (L,) integer model widths.
      d: head width (the same for every D; the ViT heads have d = 64)
      rho: weight correlation of "corr" (ignored otherwise).

    Returns:
      E: (L, K) exponents, row l for Ds[l] (equal to ``exact_moments(p, model, N, D, d,
      rho=rho).growth_exponent`` at integer N); Nstar: (L,) crossovers 1 + m_diag/m_off.
    """
    from sapa.theory.moments import exact_moments, local_growth_exponent

    Ns = np.asarray(Ns, dtype=np.float64)  # (K,)
    E = np.empty((len(Ds), Ns.size))  # (L, K)
    Nstar = np.empty(len(Ds))  # (L,)
    for i, D in enumerate(Ds):
        em = exact_moments(p, model, 2, int(D), int(d), rho=rho if model == "corr" else 0.0)
        E[i] = local_growth_exponent(Ns, em.m_off, em.m_diag)
        Nstar[i] = em.crossover_n
    return E, Nstar


def _label_positions(E: np.ndarray, Ns: np.ndarray, Ds: np.ndarray, levels, D_ref: float = 45.0) -> list:
    """(level, (N, D)) for contour labels: where each level crosses the row nearest D_ref (log distance).

    Keeps the labels in the lower part of the panel, away from the ViT annotations at D = 384, 768,
    and off the panel's edges (a level that only clips a corner stays unlabelled).
    """
    out = []
    rows = [int(i) for i in np.argsort(np.abs(np.log(Ds / D_ref)), kind="stable") if 1 <= i <= len(Ds) - 2]
    for lv in levels:
        for i in rows:
            s = np.sign(E[i] - lv)
            k = np.flatnonzero(s[:-1] * s[1:] < 0)
            k = k[(k >= 2) & (k <= len(Ns) - 4)]
            if k.size:
                out.append((lv, (float(Ns[k[0]]), float(Ds[i]))))
                break
    return out


def _vit_exponent(p: int, model: str, N: int, D: int, d: int, rho: float) -> float:
    from sapa.theory.moments import exact_moments

    return exact_moments(p, model, N, D, d, rho=rho if model == "corr" else 0.0).growth_exponent


def main(out_dir: str | Path = "results/figures", small: bool = False, *, d: int = 64, rho: float = 0.5) -> list[Path]:
    """Draw the 2 × 3 map (p = 1, 3 × iid, tied, ρ-correlated), assert the regimes, save PNG + PDF."""
    n_N, n_D = (61, 13) if small else (241, 49)
    Ns = np.geomspace(8, 65536, n_N)  # (K,)
    Ds = np.unique(np.round(np.geomspace(16, 1024, n_D)).astype(int))  # (L,)
    grids = {(p, m): regime_grid(p, m, Ns, Ds, d=d, rho=rho) for p in (1, 3) for m, _ in MODELS}
    vit = {(p, m, name): _vit_exponent(p, m, N, D, d, rho) for p in (1, 3) for m, _ in MODELS for name, N, D in VIT}

    # The claims, asserted before anything is drawn: i.i.d. weights reach the √N regime almost
    # at once (e ≥ 0.45 for N ≥ 16, every D), tied weights with p = 3 are flat at ViT-Base.
    for p in (1, 3):
        E, _ = grids[(p, "iid")]
        assert E[:, Ns >= 16].min() >= 0.45, f"iid p={p}: min exponent {E[:, Ns >= 16].min():.3f} < 0.45 for N ≥ 16"
    assert vit[(3, "tied", "ViT-B")] < 0.05, f"tied p=3 at ViT-Base: e = {vit[(3, 'tied', 'ViT-B')]:.4f} ≥ 0.05"

    outline = [pe.Stroke(linewidth=3.6, foreground="black"), pe.Normal()]
    with plt.rc_context({**style.RC, "axes.grid": False}):
        fig, axes = plt.subplots(2, 3, figsize=(13.0, 7.6), sharex=True, sharey=True)
        for r, p in enumerate((1, 3)):
            for c, (model, title) in enumerate(MODELS):
                ax = axes[r, c]
                E, Nstar = grids[(p, model)]
                mesh = ax.pcolormesh(Ns, Ds, E, cmap="cividis", vmin=0.0, vmax=0.5, shading="gouraud", rasterized=True)
                cs = ax.contour(Ns, Ds, E, levels=CONTOURS, colors=["white", "white", "black"], linewidths=0.8)
                pos = _label_positions(E, Ns, Ds, CONTOURS)
                if pos:
                    ax.clabel(cs, levels=[lv for lv, _ in pos], manual=[xy for _, xy in pos], fmt=lambda v: f"{v:g}",
                              fontsize=7.5, inline_spacing=2)
                inside = (Nstar >= Ns[0]) & (Nstar <= Ns[-1])
                if inside.any():
                    ax.plot(Nstar[inside], Ds[inside], color="white", lw=2.0, ls="--", path_effects=outline)
                else:
                    ax.text(0.97, 0.04, f"$N^* \\leq {Nstar.max():.1f}$ (left of the map)", transform=ax.transAxes,
                            ha="right", va="bottom", fontsize=8, color="black",
                            bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "none", "alpha": 0.85})
                for (name, N, D), mk in zip(VIT, ("*", "o")):
                    e = vit[(p, model, name)]
                    ax.plot(N, D, marker=mk, ms=11 if mk == "*" else 7, mfc="white", mec="black", mew=1.2, ls="none")
                    ax.annotate(f"{name}: {e:.3f}", (N, D), xytext=(8, 0), textcoords="offset points",
                                va="center", fontsize=8,
                                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85})
                ax.set_xscale("log", base=2)
                ax.set_yscale("log", base=2)
                ax.set_xlim(Ns[0], Ns[-1])
                ax.set_ylim(Ds[0], Ds[-1])
                xt = [8, 64, 512, 4096, 32768]
                ax.set_xticks(xt, [str(v) for v in xt])
                yt = [16, 32, 64, 128, 256, 512, 1024]
                ax.set_yticks(yt, [str(v) for v in yt])
                ax.minorticks_off()
                ax.set_title(f"$p = {p}$: " + title.replace("{rho:g}", f"{rho:g}"))
                if r == 1:
                    ax.set_xlabel("sequence length N (tokens)")
                if c == 0:
                    ax.set_ylabel("model width D")
        fig.subplots_adjust(left=0.06, right=0.86, bottom=0.13, top=0.9, wspace=0.08, hspace=0.2)
        cax = fig.add_axes((0.88, 0.17, 0.014, 0.69))
        cb = fig.colorbar(mesh, cax=cax, ticks=[0, 0.1, 0.2, 0.3, 0.4, 0.5])
        cb.ax.set_yticklabels(["0  flat", "0.1", "0.2", "0.3", "0.4", r"0.5  $\sqrt{N}$"])
        cb.set_label(r"local growth exponent  $e(N) = \mathrm{d}\log \mathrm{RMS}\,\|x^p/\sqrt{N}\|_F\; /\; \mathrm{d}\log N$")
        handles = [Line2D([], [], color="white", lw=2.0, ls="--", path_effects=outline,
                          label=r"crossover $N^* = 1 + m_{diag}/m_{off}$ ($e \approx 1/4$)"),
                   Line2D([], [], color="0.4", lw=0.8, label="contours e = " + ", ".join(f"{v:g}" for v in CONTOURS)),
                   Line2D([], [], marker="*", ms=11, mfc="white", mec="black", ls="none",
                          label="ViT-Base (N = 196, D = 768): its e"),
                   Line2D([], [], marker="o", ms=7, mfc="white", mec="black", ls="none",
                          label="ViT-Small (N = 196, D = 384): its e")]
        fig.legend(handles=handles, loc="lower center", ncol=4, frameon=False, bbox_to_anchor=(0.46, 0.0), fontsize=8.5)
        fig.suptitle(r"Does $x^p/\sqrt{N}$ attention grow like $\sqrt{N}$ (Cor 4.3, 4.5)? "
                     r"Exact local growth exponent of $\sqrt{E\|x^p/\sqrt{N}\|_F^2}$; "
                     f"head width $d = {d}$", fontsize=11, x=0.46)
        name = style.stem("regime_map", p=(1, 3), d=d, rho=rho, N="8-65536", D="16-1024", grid=f"{n_N}x{len(Ds)}")
        return style.save(fig, out_dir, name)


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(main(small="--small" in sys.argv))
