"""Figure 5: per-row attention norms under a causal mask (arXiv 2410.18613; reviewer point 4).

Row i of a causally masked attention matrix sees i tokens. Softmax rows all share the bound
‖P_i‖ ≤ 1 (row 1 is exactly 1); for c_i·x^p, E‖row_i‖² = c_i²[(i−1) m_off + m_diag] exactly. The
global 1/√N scale makes early rows tiny and late rows large (E-RMS ∝ √(i/N)); the per-row scale
1/√i (the effective length) makes every row's E-RMS ≈ √m_off, as uniform in i as softmax's bound.
Bottom: the scale fixed at a training length N_train and the sequence 8× shorter or longer.

Draws only: the data come from :func:`sapa.empirics.experiments.causal.run_causal_masking` (a
:class:`~sapa.empirics.experiments.causal.CausalResult`) or its stored JSON.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from sapa.common import figdata
from sapa.empirics.experiments.causal import PS, CausalResult, bin_scaled, exact_row_ms
from sapa.figures import style
from sapa.theory.families import FIXED, INV_SQRT_I, INV_SQRT_N, SOFTMAX

NAME = "causal_masking"  # stored by ``sapa verify`` under RESULTS/data/NAME.json


def _result(res: CausalResult | dict) -> CausalResult:
    return res if isinstance(res, CausalResult) else CausalResult.from_json(res)


def check(res: CausalResult | dict, tol: float = 0.1) -> None:
    """The figure's claim: Monte Carlo matches the exact row formula (bin z-scores, slope intervals); the
    global 1/√N profile rises like √i (exact log-slope in (0.4, 0.6)); the per-row 1/√i profile is flat
    (exact log-slope within ±tol)."""
    res = _result(res)
    for key, a in res.agree.items():
        assert a["agree"].all(), (key, a[~a["agree"]].to_dict("records"))
    for key, e in res.expo.items():
        e = e.set_index(["policy", "criterion"])
        g, r = e.loc[(INV_SQRT_N, "bound")], e.loc[(INV_SQRT_I, "bound")]
        assert 0.4 < g["exact_slope"] < 0.6, (key, g.to_dict())
        assert -tol < r["exact_slope"] < tol, (key, r.to_dict())
        for pol in (INV_SQRT_N, INV_SQRT_I):
            b = e.loc[(pol, "bound")]
            assert b["ci_lo"] <= b["exact_slope"] <= b["ci_hi"], (key, pol, b.to_dict())


def _profile_panel(ax, res: CausalResult, N: int) -> None:
    i = np.arange(1, N + 1, dtype=float)
    bins = res.bins[N]
    xm = np.array([(b["lo"] + b["hi"]) / 2 for b in bins])  # arithmetic mean row: exact for profiles linear in i
    soft = np.sqrt([bin_scaled(b, 1, "softmax", None).mean() for b in bins])
    k = 0
    ax.plot(xm, soft, ms=5, lw=1.4, **style.series_style(k), label="softmax(S/√d), MC (bin RMS)")
    ax.axhline(1.0, color="0.35", ls=(0, (1, 1)), lw=1.2, label="softmax row bound ‖P_i‖ ≤ 1")
    for pol, word in ((INV_SQRT_N, "global 1/√N"), (INV_SQRT_I, "per-row 1/√i")):
        for p in PS:
            k += 1
            st = style.series_style(k)
            unit = math.sqrt(res.m[p][0])  # √m_off
            ex = np.sqrt(exact_row_ms(p, res.model, N, res.D, res.d, pol)) / unit
            mc = np.sqrt([bin_scaled(b, p, pol, None).mean() for b in bins]) / unit
            xp = "x" if p == 1 else "x³" if p == 3 else f"x^{p}"
            ax.plot(i, ex, color=st["color"], ls=st["linestyle"], lw=1.5, label=f"{xp} · {word}: exact")
            ax.plot(xm, mc, color=st["color"], marker=st["marker"], ls="none", ms=5, mfc="white" if p == 1 else st["color"],
                    label=f"{xp} · {word}: MC")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("row index i (tokens visible to the query)")
    ax.set_ylabel("row RMS norm √E‖φ(S)_i‖²  (polynomials ÷ √m_off)")
    T = min(b["trials"] for b in bins)
    ax.set_title(f"N = {N}: per-row norms under a causal mask\n(MC: ≥ {T} trials per row bin)")


def _transfer_panel(ax, res: CausalResult, quantity: str) -> None:
    t = res.transfer
    t = t[t["quantity"] == quantity]
    names = {FIXED: "fixed c = 1/√N_train", INV_SQRT_N: "global dynamic 1/√N", INV_SQRT_I: "per-row 1/√i",
             SOFTMAX: "softmax(S/√d)"}
    if quantity == "last_row":
        names[INV_SQRT_N] = "global dynamic 1/√N (= 1/√i at row N)"
    for pol in (SOFTMAX, FIXED, INV_SQRT_N, INV_SQRT_I):
        g = t[t["policy"] == pol].sort_values("factor")
        st = style.series_style({SOFTMAX: 0, FIXED: 1, INV_SQRT_N: 3, INV_SQRT_I: 4}[pol])
        if pol == "softmax":
            ax.errorbar(g["factor"], g["mc_ratio"], yerr=[g["mc_ratio"] - g["mc_lo"], g["mc_hi"] - g["mc_ratio"]],
                        capsize=2, ms=5, lw=1.4, label=f"{names[pol]}: MC, 95% CI", **st)
            continue
        ax.plot(g["factor"], g["exact_ratio"], color=st["color"], ls=st["linestyle"], lw=1.5,
                label=f"{names[pol]}: exact")
        ax.errorbar(g["factor"], g["mc_ratio"], yerr=[g["mc_ratio"] - g["mc_lo"], g["mc_hi"] - g["mc_ratio"]],
                    color=st["color"], marker=st["marker"], ls="none", ms=5, mfc="white", capsize=2, elinewidth=0.8,
                    label=f"{names[pol]}: MC, 95% CI")
    ax.axhline(1.0, color="0.6", lw=0.8)
    ax.axvline(1.0, color="0.6", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("inference length / training length  N / N_train")
    what = "‖φ(S)‖_F" if quantity == "matrix" else "‖φ(S)_N‖ (newest token's row)"
    ax.set_ylabel(f"E-RMS {what} relative to N = N_train")
    p = res.transfer_p
    xp = "x³" if p == 3 else "x" if p == 1 else f"x^{p}"
    ax.set_title(f"Scale set at N_train = {res.N_train}, {xp}: "
                 + ("whole matrix" if quantity == "matrix" else "newest row"))


def draw(res: CausalResult | dict, out_dir: str | Path, file_stem: str) -> list[Path]:
    """2×2 panels: row profiles at the two N; train-length transfer (matrix, newest row); legends below each row
    (from the result or its stored JSON)."""
    res = _result(res)
    with plt.rc_context(style.RC):
        fig = plt.figure(figsize=(13.0, 12.5))
        gs = fig.add_gridspec(4, 2, height_ratios=[1, 0.2, 1, 0.13], hspace=0.42, wspace=0.25,
                              left=0.07, right=0.98, top=0.92, bottom=0.02)
        top = [fig.add_subplot(gs[0, k]) for k in range(2)]
        bot = [fig.add_subplot(gs[2, k]) for k in range(2)]
        for ax, N in zip(top, res.Ns[:2]):
            _profile_panel(ax, res, N)
        _transfer_panel(bot[0], res, "matrix")
        _transfer_panel(bot[1], res, "last_row")
        for row, src, ncol in ((1, top[0], 3), (3, bot[0], 4)):
            lax = fig.add_subplot(gs[row, :])
            lax.set_axis_off()
            h, lab = src.get_legend_handles_labels()
            if src is bot[0]:  # exact beside MC per policy, softmax last (errorbars come after lines by default)
                order = sorted(range(len(lab)), key=lambda k: (lab[k].startswith("softmax"), lab[k].split(":")[0],
                                                               "MC" in lab[k]))
                h, lab = [h[k] for k in order], [lab[k] for k in order]
            lax.legend(h, lab, loc="upper center", ncol=ncol, fontsize=8, frameon=True)
        m = res.m
        fig.suptitle(f"Causal masking, {res.model} shared-X model (d = {res.d}, D = {res.D}, σ_w² = 1/D): "
                     f"E‖c_i·(S^∘p)_i‖² = c_i²[(i−1)·m_off + m_diag], "
                     f"m_diag/m_off = {m[1][1] / m[1][0]:.3g} (p = 1), {m[3][1] / m[3][0]:.3g} (p = 3)", fontsize=10.5)
        return style.save(fig, out_dir, file_stem)


def stored_stem(res: CausalResult, budget: str) -> str:
    """The file stem of the figure of ``res`` drawn by a ``sapa verify`` run with this budget."""
    return style.stem(NAME, model=res.model, d=res.d, D=res.D, N=list(res.Ns), trials=list(res.trials),
                      Ntrain=res.N_train, budget=budget)


def main(results: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Redraw the figure from RESULTS/data/causal_masking.json (written by ``sapa verify``) into ``out_dir``."""
    data, file_stem = figdata.read(Path(results) / "data" / f"{NAME}.json")
    check(data)
    return draw(data, out_dir if out_dir is not None else Path(results) / "figures", file_stem)
