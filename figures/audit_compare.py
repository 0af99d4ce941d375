"""Figure: local growth exponent and constant vs N for six attention activations, iid and tied weights.

arXiv 2410.18613's x/√N and x³/√N beside softmax and the other papers' scale rules: ReLU/N
(Wortsman et al. 2023), sigmoid(x − log N) (Ramapuram et al. 2024) and the row-normalised degree-4
polynomial (Kacham et al., PolySketchFormer). Logits are scaled by 1/√d (x/8 at d = 64) as all four
papers do. Closed forms / quadrature (:mod:`sapa.theory.activation_audit`) give smooth curves; softmax and the
normalised polynomial have none and are Monte Carlo points with exact kernels (:mod:`sapa.empirics.experiments.activation_sampling`).
Left: e(N) = ½ d log E‖φ‖²_F / d log N (softmax's bound: ½). Right: E-RMS ‖φ‖_F / √N (softmax's
bound: 1).

Draws only: the data come from :func:`sapa.empirics.experiments.activation_sampling.run_audit_compare` (an
:class:`~sapa.empirics.experiments.activation_sampling.AuditCompareResult`) or its stored JSON.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from sapa.common import figdata
from sapa.empirics.experiments.activation_sampling import ACTIVATIONS, MODELS, AuditCompareResult
from sapa.figures import style
from sapa.theory.families import family

NAME = "audit_compare"  # stored by ``sapa verify`` under RESULTS/data/NAME.json


def _result(res: AuditCompareResult | dict) -> AuditCompareResult:
    return res if isinstance(res, AuditCompareResult) else AuditCompareResult.from_json(res)


def check(res: AuditCompareResult | dict) -> None:
    """The figure's claims: x³/√N sits ≥ 100× above softmax's bound; sigmoid and ReLU/N stay below it (N ≥ 64); every
    exact exponent of x/√N and x³/√N is ≤ ½ (+1e-9); softmax's constant is ≤ 1 (Thm 4.1)."""
    c = _result(res).curves
    for m in MODELS:
        assert np.min(c[(family("x3_sqrtN").label, m)].constant) > 100, m
        relu = c[(family("relu_N").label, m)]
        assert np.max(relu.constant[relu.N >= 64]) < 1, m  # tied: the diagonal (S_ii ≈ d) dominates below
        assert np.max(c[(family("softmax").label, m)].constant) <= 1 + 1e-12, m
        for lab in (family("x_sqrtN").label, family("x3_sqrtN").label):
            assert np.max(c[(lab, m)].exponent) <= 0.5 + 1e-9, (lab, m)


def draw(res: AuditCompareResult | dict, out_dir: str | Path, file_stem: str) -> list[Path]:
    """Two rows (iid, tied) × two panels (exponent, constant) (from the result or its stored JSON)."""
    res = _result(res)
    with plt.rc_context(style.RC):
        fig, axes = plt.subplots(2, 2, figsize=(12, 8.5), sharex=True)
        for r, m in enumerate(MODELS):
            for k, (label, _, _) in enumerate(ACTIVATIONS):
                cv = res.curves[(label, m)]
                st = style.series_style(k)
                mc = cv.method == "monte_carlo"
                xe = cv.N if cv.exponent_N is None else cv.exponent_N
                kw = {"color": st["color"], "marker": st["marker"], "ms": 4, "lw": 1.3,
                      "linestyle": "none" if mc else st["linestyle"]}
                axes[r, 0].plot(xe, cv.exponent, label=f"{label} ({'MC' if mc else cv.method})", **kw)
                axes[r, 1].plot(cv.N, cv.constant, label=label, **kw)
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
        fig.suptitle(f"Attention activations under shared X (D = {res.D}, d = {res.d}), σ_w² = 1/D; logits S/√d "
                     "(x/8) for softmax and the other papers' rules, S for x^p/√N; "
                     f"MC: {res.trials} draws per N, exact kernels", fontsize=10)
        fig.tight_layout()
        paths = style.save(fig, out_dir, file_stem)
        plt.close(fig)
    return paths


def stored_stem(res: AuditCompareResult) -> str:
    """The file stem of the figure of ``res`` drawn by a ``sapa verify`` run."""
    return style.stem(NAME, D=res.D, d=res.d, trials=res.trials, seed=res.seed)


def main(results: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Redraw the figure from RESULTS/data/audit_compare.json (written by ``sapa verify``) into ``out_dir``."""
    data, file_stem = figdata.read(Path(results) / "data" / f"{NAME}.json")
    check(data)
    return draw(data, out_dir if out_dir is not None else Path(results) / "figures", file_stem)
