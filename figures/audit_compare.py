"""Figure: local growth exponent and constant vs N for six attention activations, iid and tied weights.

arXiv 2410.18613's x/√N and x³/√N beside softmax and the other papers' scale rules: ReLU/N
(Wortsman et al. 2023), sigmoid(x − log N) (Ramapuram et al. 2024) and the row-normalised degree-4
polynomial (Kacham et al., PolySketchFormer). Logits are scaled by 1/√d (x/8 at d = 64) as all four
papers do. Closed forms / quadrature (:mod:`theory.audit`) give smooth curves; softmax and the
normalised polynomial have none and are Monte Carlo points with exact kernels (:mod:`empirics.audit`).
Left: e(N) = ½ d log E‖φ‖²_F / d log N (softmax's bound: ½). Right: E-RMS ‖φ‖_F / √N (softmax's
bound: 1).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from figures import style

# (label, expression, normalize)
ACTIVATIONS = (
    ("softmax(x/8)", "exp(x/8)", "row"),
    ("x/√N", "x/sqrt(N)", "none"),
    ("x³/√N", "x**3/sqrt(N)", "none"),
    ("ReLU(x/8)/N", "Max(x/8, 0)/N", "none"),
    ("sigmoid(x/8 − log N)", "1/(1 + exp(-(x/8 - log(N))))", "none"),
    ("normalised (x/8)⁴", "(x/8)**4", "row"),
)
MODELS = ("iid", "tied")


def compute(D: int = 64, d: int = 64, Ns=(8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384), mc_Ns=(32, 64, 128, 256),
            trials: int = 48, seed: int = 0) -> dict:
    """Curves {(label, model): {"N", "exponent", "constant", "method"}} (MC: means at mc_Ns, exponents between neighbours)."""
    from empirics.audit import sample_norms
    from theory.audit import model_spec, parse_activation, profile

    curves = {}
    for label, text, norm in ACTIVATIONS:
        act = parse_activation(text, norm)
        for m in MODELS:
            spec = model_spec(m, D, d)
            if norm == "none":
                prof = profile(act, spec)
                N = np.asarray(Ns, dtype=np.float64)
                tot = prof.totals(N)["fro"]
                ex = prof.exponents(N)["fro"]
                curves[(label, m)] = {"N": N, "exponent": ex, "constant": np.sqrt(tot / N), "method": prof.method}
            else:
                N = np.asarray(mc_Ns, dtype=np.float64)
                means = np.array([sample_norms(act, spec, int(n), trials, seed=seed, key=("figure",)).fro2.mean()
                                  for n in mc_Ns])
                mid = np.sqrt(N[1:] * N[:-1])
                ex = 0.5 * np.diff(np.log(means)) / np.diff(np.log(N))
                curves[(label, m)] = {"N": N, "exponent_N": mid, "exponent": ex, "constant": np.sqrt(means / N),
                                      "method": "monte_carlo"}
    return {"curves": curves, "D": D, "d": d, "trials": trials, "seed": seed}


def check(res: dict) -> None:
    """The figure's claims: x³/√N sits ≥ 100× above softmax's bound; sigmoid and ReLU/N stay below it (N ≥ 64); every
    exact exponent of x/√N and x³/√N is ≤ ½ (+1e-9); softmax's constant is ≤ 1 (Thm 4.1)."""
    c = res["curves"]
    for m in MODELS:
        assert np.min(c[("x³/√N", m)]["constant"]) > 100, m
        relu = c[("ReLU(x/8)/N", m)]
        assert np.max(relu["constant"][relu["N"] >= 64]) < 1, m  # tied: the diagonal (S_ii ≈ d) dominates below
        assert np.max(c[("softmax(x/8)", m)]["constant"]) <= 1 + 1e-12, m
        for lab in ("x/√N", "x³/√N"):
            assert np.max(c[(lab, m)]["exponent"]) <= 0.5 + 1e-9, (lab, m)


def draw(res: dict, out_dir: str | Path, file_stem: str) -> list[Path]:
    """Two rows (iid, tied) × two panels (exponent, constant)."""
    with plt.rc_context(style.RC):
        fig, axes = plt.subplots(2, 2, figsize=(12, 8.5), sharex=True)
        for r, m in enumerate(MODELS):
            for k, (label, _, _) in enumerate(ACTIVATIONS):
                cv = res["curves"][(label, m)]
                st = style.series_style(k)
                mc = cv["method"] == "monte_carlo"
                xe = cv.get("exponent_N", cv["N"])
                kw = {"color": st["color"], "marker": st["marker"], "ms": 4, "lw": 1.3,
                      "linestyle": "none" if mc else st["linestyle"]}
                axes[r, 0].plot(xe, cv["exponent"], label=f"{label} ({'MC' if mc else cv['method']})", **kw)
                axes[r, 1].plot(cv["N"], cv["constant"], label=label, **kw)
            axes[r, 0].axhline(0.5, color="0.4", ls=":", lw=1)
            axes[r, 1].axhline(1.0, color="0.4", ls=":", lw=1)
            axes[r, 0].set_ylabel(f"{m} W_Q, W_K\nlocal exponent ½ dlog E‖φ‖²/dlog N")
            axes[r, 1].set_ylabel("E-RMS ‖φ‖_F / √N (softmax's bound = 1)")
            axes[r, 1].set_yscale("log")
            for ax in axes[r]:
                ax.set_xscale("log", base=2)
        for ax in axes[1]:
            ax.set_xlabel("sequence length N (tokens)")
        axes[0, 0].set_title("(a) growth exponent (softmax bound: ½, dotted)")
        axes[0, 1].set_title("(b) constant against softmax's √N")
        axes[0, 0].legend(fontsize=7.5, loc="best")
        fig.suptitle(f"Attention activations under shared X (D = {res['D']}, d = {res['d']}), σ_w² = 1/D; "
                     f"MC: {res['trials']} draws per N, exact kernels", fontsize=10)
        fig.tight_layout()
        paths = style.save(fig, out_dir, file_stem)
        plt.close(fig)
    return paths


def main(out_dir: str | Path = "results/figures", small: bool = False) -> list[Path]:
    """Compute, check and draw (``small``: fewer N, 8 Monte Carlo draws)."""
    kw = {"Ns": (8, 32, 128, 512), "mc_Ns": (16, 32, 64), "trials": 8} if small else {}
    res = compute(**kw)
    check(res)
    stem = style.stem("audit_compare", D=res["D"], d=res["d"], trials=res["trials"], seed=res["seed"])
    return draw(res, out_dir, stem)

