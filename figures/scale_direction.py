"""Figure 4: which way should the scale c of c·x^p move as N shrinks? (arXiv 2410.18613, Figure 1, L240–245)

The paper says the scale should decrease as N decreases; the reviewer notes 1/√N increases. The
figure shows c(N) that makes the E-RMS norm of c·x^p match softmax — (a) its typical norm
E‖softmax(S/√d)‖_F (Monte Carlo) or (b) its bound √N (Theorem 4.1) — normalised to N = 256,
beside 1/√N. Every curve rises as N falls: c_b ∝ N^{−1/2} (exactly 1/√N's direction), c_a ∝ N^{−1}
in the i.i.d. model (softmax's typical norm is nearly flat, ≈ √e).

Draws only: the data come from :func:`empirics.experiments.scale_direction.run_scale_direction` (a
:class:`~empirics.experiments.scale_direction.ScaleDirectionResult`) or its stored JSON.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from common import figdata
from empirics.experiments.scale_direction import PS, REVIEWER_NS, ScaleDirectionResult
from figures import style

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


def draw(res: ScaleDirectionResult | dict, out_dir: str | Path, file_stem: str) -> list[Path]:
    """Three panels: softmax's norm against N; c(N)/c(256) for p = 1 and p = 3 (from the result or its stored JSON)."""
    res = _result(res)
    Ns = np.asarray(res.Ns, float)
    with plt.rc_context(style.RC):
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
            word = f"c·x{sup}"
            norm = "‖c·S‖_F" if p == 1 else f"‖c·S∘{sup}‖_F"
            k = 0
            for m in res.models:
                t, f = res.tables[(m, p)], res.fits[(m, p)].set_index("criterion")
                for col, crit, name in (("c_typical", "typical", "(a) typical"), ("c_bound", "bound", "(b) bound √N")):
                    st = style.series_style(k + 1)
                    k += 1
                    lo, hi = f.loc[crit, "ci_lo"], f.loc[crit, "ci_hi"]
                    ci = " (exact)" if crit == "bound" else f", CI [{lo:.3f}, {hi:.3f}]"
                    c_ref = float(t.loc[t["N"] == N_REF, col].iloc[0])
                    ax.plot(t["N"], _norm_at_ref(t, col), ms=4.5, lw=1.4, **st,
                            label=f"{name}, {m} W: c ∝ N^b, b = {f.loc[crit, 'slope']:.3f}{ci}; c(256) = {c_ref:.2g}")
            inv = 1 / np.sqrt(Ns)
            ax.plot(Ns, inv / (1 / math.sqrt(N_REF)), color="black", lw=2.2, ls="-", marker="", alpha=0.35,
                    label="1/√N (b = −0.5)")
            rv = np.array(REVIEWER_NS, float)
            ax.plot(rv, np.sqrt(N_REF / rv), "k*", ms=10, mec="white", zorder=5,
                    label="reviewer: 1/√N at N = 256, 64, 16, 8")
            for n in REVIEWER_NS:
                ax.annotate(f"{1 / math.sqrt(n):.3g}", (n, math.sqrt(N_REF / n)), textcoords="offset points",
                            xytext=(5, 4), fontsize=7)
            ax.axhline(1.0, color="0.6", lw=0.8)
            ax.fill_between([Ns.min() / 1.3, N_REF], 1e-3, 1.0, color="0.85", alpha=0.6, lw=0,
                            label="paper's direction (c falls as N falls)")
            ax.fill_between([N_REF, Ns.max() * 1.3], 1.0, 1e3, color="0.85", alpha=0.6, lw=0)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlim(Ns.min() / 1.3, Ns.max() * 1.3)
            top = max(float(np.nanmax(_norm_at_ref(res.tables[(m, p)], "c_typical"))) for m in res.models)
            ax.set_ylim(max(1e-3, 0.5 * min(float(np.nanmin(_norm_at_ref(res.tables[(m, p)], "c_typical")))
                                           for m in res.models)), 2.5 * top)
            ax.set_xlabel("sequence length N (tokens)")
            ax.set_ylabel("matching coefficient c(N) / c(256)")
            ax.set_title(f"({'b' if p == 1 else 'c'}) {word}: E-RMS {norm} = softmax reference")
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7.5)
        fig.suptitle(f"Scale direction (paper Fig. 1): every matching c(N) rises as N falls — d = {res.d}, "
                     f"D = {res.D}, σ_w² = 1/D; exponents with {round(100 * res.level)}% bootstrap CIs",
                     fontsize=10)
        fig.tight_layout()
        return style.save(fig, out_dir, file_stem)


def stored_stem(res: ScaleDirectionResult, budget: str) -> str:
    """The file stem of the figure of ``res`` drawn by a ``sapa verify`` run with this budget."""
    return style.stem(NAME, d=res.d, D=res.D, N=f"{res.Ns[0]}-{res.Ns[-1]}", trials=res.trials, budget=budget)


def main(results: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Redraw the figure from RESULTS/data/scale_direction.json (written by ``sapa verify``) into ``out_dir``."""
    data, file_stem = figdata.read(Path(results) / "data" / f"{NAME}.json")
    check(data)
    return draw(data, out_dir if out_dir is not None else Path(results) / "figures", file_stem)
