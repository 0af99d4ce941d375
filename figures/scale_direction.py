"""Figure 4: which way should the scale of x^p move as N shrinks? (arXiv 2410.18613, Figure 1, L240–245)

The paper says the scale should decrease as N decreases; the reviewer notes 1/√N increases. In the paper's
notation (x/16, x^p/√N) the scale is the divisor α of x^p/α, and that is what the ledger's HOLDS reads
(``sapa.claims.fig1_scale_direction``). The figure shows α(N) = 1/c(N), the divisor that makes the
E-RMS norm of x^p/α match softmax — its typical norm E‖softmax(S/√d)‖_F (Monte Carlo) or its bound √N
(Theorem 4.1) — normalised to N = 256, beside the paper's α = √N. The shaded region is the paper's
direction (α falls as N falls) and every curve lies in it: α_bound ∝ N^{+1/2}, α_typical ∝ N^{+1} in the
i.i.d. model; the reviewer's coefficient c = 1/α = 1/√N (stars, labelled with c) rises as N falls.

Draws only: the data come from :func:`sapa.empirics.experiments.scale_direction.run_scale_direction` (a
:class:`~sapa.empirics.experiments.scale_direction.ScaleDirectionResult`) or its stored JSON.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from sapa.common import figdata
from sapa.empirics.experiments.scale_direction import PS, REVIEWER_NS, ScaleDirectionResult
from sapa.figures import style

N_REF = 256  # curves are normalised to their value here (the largest N of the paper's Figure 1)
NAME = "scale_direction"  # stored by ``sapa verify`` under RESULTS/data/NAME.json


def _result(res: ScaleDirectionResult | dict) -> ScaleDirectionResult:
    return res if isinstance(res, ScaleDirectionResult) else ScaleDirectionResult.from_json(res)


def check(res: ScaleDirectionResult | dict) -> None:
    """The figure's claim: every matching c(N) increases as N decreases (typical: CI below 0; bound: exact
    slope below 0, and the Monte Carlo interval holds it); in the i.i.d. model the bound-matching exponent
    is −½ ± 0.01 and the typical-matching one below −0.9."""
    fits = res.fits if isinstance(res, ScaleDirectionResult) else res["fits"]
    for (m, p), f in fits.items():
        f = f.set_index("criterion")
        assert f.loc["typical", "ci_hi"] < 0, (m, p, f.loc["typical"].to_dict())
        assert f.loc["bound", "slope"] < 0, (m, p, f.loc["bound"].to_dict())
        assert f.loc["bound_mc", "ci_lo"] <= f.loc["bound", "slope"] <= f.loc["bound_mc", "ci_hi"], (m, p)
        if m == "iid":
            assert abs(f.loc["bound", "slope"] + 0.5) < 0.01, (p, f.loc["bound", "slope"])
            assert f.loc["typical", "ci_hi"] < -0.9, (p, f.loc["typical"].to_dict())


def _norm_at_ref(t, col: str) -> np.ndarray:
    ref = t.loc[t["N"] == N_REF, col]
    return t[col].to_numpy() / float(ref.iloc[0])


SHADE_LABEL = "paper's direction: α falls as N falls (α/α(256) < 1 below N = 256, > 1 above)"


def alpha_at_ref(t, col: str) -> np.ndarray:
    """α(N)/α(256) of the matching divisor α = 1/c (the ledger's HOLDS reading) from the coefficient column ``col``."""
    return 1.0 / _norm_at_ref(t, col)


def ylim_of(curves) -> tuple[float, float]:
    """y-limits that hold every curve (a factor 2 of margin)."""
    v = np.concatenate([np.asarray(c, float) for c in curves])
    v = v[np.isfinite(v) & (v > 0)]
    return 0.5 * float(v.min()), 2.0 * float(v.max())


def shaded_boxes(Ns, lo_y: float, hi_y: float) -> list[tuple[float, float, float, float]]:
    """The region "α falls as N falls" relative to N = 256: (x0, x1, y0, y1) boxes, below-left and above-right."""
    Ns = np.asarray(Ns, float)
    return [(Ns.min() / 1.3, N_REF, lo_y, 1.0), (N_REF, Ns.max() * 1.3, 1.0, hi_y)]


def in_shaded(N, ratio) -> np.ndarray:
    """True where (N, α/α(256)) lies in the shaded region (the reference point N = 256 itself counts)."""
    N, r = np.asarray(N, float), np.asarray(ratio, float)
    return ((N <= N_REF) & (r <= 1.0 + 1e-12)) | ((N >= N_REF) & (r >= 1.0 - 1e-12))


def figure(res: ScaleDirectionResult | dict) -> plt.Figure:
    """The figure (not saved): softmax's norm against N; the divisor α(N)/α(256) for p = 1 and p = 3."""
    res = _result(res)
    with plt.rc_context(style.RC):
        return _figure(res)


def draw(res: ScaleDirectionResult | dict, out_dir: str | Path, file_stem: str) -> list[Path]:
    """Three panels: softmax's norm against N; α(N)/α(256) for p = 1 and p = 3 (from the result or its stored JSON)."""
    res = _result(res)
    with plt.rc_context(style.RC):
        return style.save(_figure(res), out_dir, file_stem)


def _figure(res: ScaleDirectionResult) -> plt.Figure:
    """Draw the three panels (inside the caller's style context)."""
    Ns = np.asarray(res.Ns, float)
    fig, axes = plt.subplots(1, 3, figsize=(14.5, 6.2))
    ax = axes[0]
    for k, m in enumerate(res.models):
        t = res.tables[(m, PS[0])]
        st = style.series_style(k + 1)
        ax.errorbar(t["N"], t["softmax_mean"], yerr=1.96 * t["softmax_se"], capsize=2, ms=5, lw=1.4,
                    label=f"E‖softmax(S/√d)‖_F, {m} W (MC, 95% CI)", **st)
    ax.plot(Ns, np.sqrt(Ns), color="0.3", ls=":", lw=1.2, label="bound √N (Thm 4.1)")
    ax.axhline(math.sqrt(math.e), color="0.5", ls="--", lw=1.0, label="√e ≈ 1.65")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("sequence length N (tokens)")
    ax.set_ylabel("Frobenius norm (dimensionless)")
    ax.set_title("(a) softmax: typical norm vs bound")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7.5)

    for ax, p in zip(axes[1:], PS):
        sup = {1: "", 2: "²", 3: "³", 4: "⁴", 5: "⁵"}.get(p, f"^{p}")
        word = f"x{sup}/α"
        norm = "‖S/α‖_F" if p == 1 else f"‖S∘{sup}/α‖_F"
        k, drawn = 0, []
        for m in res.models:
            t, f = res.tables[(m, p)], res.fits[(m, p)].set_index("criterion")
            for col, crit, name in (("c_typical", "typical", "typical-norm criterion"),
                                    ("c_bound", "bound", "bound-√N criterion")):
                st = style.series_style(k + 1)
                k += 1
                lo, hi = -f.loc[crit, "ci_hi"], -f.loc[crit, "ci_lo"]  # α = 1/c: the exponent changes sign
                ci = " (exact)" if crit == "bound" else f", CI [{lo:.3f}, {hi:.3f}]"
                alpha = alpha_at_ref(t, col)
                drawn.append(alpha)
                ax.plot(t["N"], alpha, ms=4.5, lw=1.4, **st,
                        label=f"{name}, {m} W: α ∝ N^β, β = {-f.loc[crit, 'slope']:+.3f}{ci}")
        ax.plot(Ns, np.sqrt(Ns / N_REF), color="black", lw=2.2, ls="-", marker="", alpha=0.35,
                label="the paper's α = √N (β = +0.5)")
        rv = np.array(REVIEWER_NS, float)
        ax.plot(rv, np.sqrt(rv / N_REF), "k*", ms=10, mec="white", zorder=5,
                label="reviewer's coefficient c = 1/√N = 1/α at N = 256, 64, 16, 8 (c shown)")
        for n in REVIEWER_NS:
            ax.annotate(f"c = {1 / math.sqrt(n):.3g}", (n, math.sqrt(n / N_REF)), textcoords="offset points",
                        xytext=(5, -10), fontsize=7)
        ax.axhline(1.0, color="0.6", lw=0.8)
        lo_y, hi_y = ylim_of(drawn)
        for x0, x1, y0, y1 in shaded_boxes(Ns, lo_y, hi_y):
            ax.fill_between([x0, x1], y0, y1, color="0.85", alpha=0.6, lw=0,
                            label=SHADE_LABEL if x1 <= N_REF else None)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlim(Ns.min() / 1.3, Ns.max() * 1.3)
        ax.set_ylim(lo_y, hi_y)
        ax.set_xlabel("sequence length N (tokens)")
        ax.set_ylabel("matching divisor α(N) / α(256)  (α = 1/c)")
        ax.set_title(f"({'b' if p == 1 else 'c'}) {word}: E-RMS {norm} = softmax reference")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7.5)
    fig.suptitle(f"Scale direction (paper Fig. 1): the matching divisor α(N) of x^p/α falls as N falls, the "
                 f"paper's direction (its coefficient c = 1/α rises) — d = {res.d}, D = {res.D}, σ_w² = 1/D; "
                 f"exponents with {round(100 * res.level)}% bootstrap CIs", fontsize=10)
    fig.tight_layout()
    return fig


def stored_stem(res: ScaleDirectionResult, budget: str) -> str:
    """The file stem of the figure of ``res`` drawn by a ``sapa verify`` run with this budget."""
    return style.stem(NAME, d=res.d, D=res.D, N=f"{res.Ns[0]}-{res.Ns[-1]}", trials=res.trials, budget=budget)


def main(results: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Redraw the figure from RESULTS/data/scale_direction.json (written by ``sapa verify``) into ``out_dir``."""
    data, file_stem = figdata.read(Path(results) / "data" / f"{NAME}.json")
    check(data)
    return draw(data, out_dir if out_dir is not None else Path(results) / "figures", file_stem)
