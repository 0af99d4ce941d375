"""σ̲(n) = max found of σ₁(∂f/∂X) over B_R^n, f(X) = φ(X W_Q W_Kᵀ Xᵀ/√d) X W_V, against n, per φ and ball, with U_φ(n).

One seeded head (W_Q, W_K, W_V entries N(0, 1/D), the same for every φ) and balls named by their largest logit
β = ‖W_Q W_Kᵀ‖₂R²/√d (so R = (β√d/‖W‖₂)^{1/2}). For each (ball, φ) the n grid is climbed in order and the winner
at the previous n, tiled, joins the starts (:func:`sapa.empirics.kernels.ball_ascent.maximise_sigma`). Every σ̲ is a
certified lower bound of Lip(f; B_R^n); U_φ(n) is the rigorous upper bound of :mod:`sapa.theory.lipschitz_ball`,
derived for softmax and s^p/√n only: an expression activation (``"expr:<φ>"``, ``"row:<ψ>"``,
:mod:`sapa.empirics.kernels.head_jacobian`) has σ̲ and no bound (None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from sapa.common.seeds import torch_gen_for
from sapa.empirics.kernels.ball_ascent import AscentConfig, maximise_sigma, tiled
from sapa.empirics.kernels.head_jacobian import Head, expr_of
from sapa.theory.lipschitz_ball import ball_bound

__all__ = ["BallConfig", "BallResult", "make_head", "radius_for", "run_ball", "fit_exponent"]


@dataclass(frozen=True)
class BallConfig:
    """The sweep: n grid, balls (by β), activations, head sizes, ascent budget, seed."""

    ns: tuple[int, ...] = (2, 4, 8, 11, 16, 22, 32, 45, 64)
    betas: tuple[float, ...] = (4.0, 1.0)
    activations: tuple[str, ...] = ("softmax", "poly1", "poly3")
    D: int = 8
    d: int = 8
    d_v: int = 8
    ascent: AscentConfig = field(default_factory=AscentConfig)
    seed: int = 0


def make_head(seed: int, D: int, d: int, d_v: int, activation: str) -> Head:
    """W = W_Q W_Kᵀ and W_V from the named stream (entries N(0, 1/D)); the same matrices for every activation."""
    g = torch_gen_for(int(seed), "lipschitz_ball", "weights", D, d, d_v)
    s = 1.0 / math.sqrt(D)
    WQ, WK = (torch.randn(D, d, generator=g, dtype=torch.float64) * s for _ in range(2))
    WV = torch.randn(D, d_v, generator=g, dtype=torch.float64) * s
    return Head(WQ @ WK.T, WV, d, activation)


def radius_for(h: Head, beta: float) -> float:
    """R with c‖W‖₂R² = β."""
    return math.sqrt(beta * math.sqrt(h.d) / float(torch.linalg.matrix_norm(h.W, 2)))


@dataclass(frozen=True)
class BallResult:
    """Rows {activation, beta, R, n, sigma_lower, bound, winner, residual}; v = ‖W_V‖₂, w = ‖W‖₂."""

    rows: list
    v: float
    w: float
    config: dict

    def series(self, activation: str, beta: float) -> dict:
        rs = sorted((r for r in self.rows if r["activation"] == activation and r["beta"] == beta),
                    key=lambda r: r["n"])
        return {k: np.array([r[k] for r in rs], dtype=np.float64) for k in ("n", "sigma_lower", "bound")}

    def to_json(self) -> dict:
        return {"rows": self.rows, "v": self.v, "w": self.w, "config": self.config}

    @classmethod
    def from_json(cls, data: dict) -> BallResult:
        return cls(list(data["rows"]), float(data["v"]), float(data["w"]), dict(data["config"]))


def run_ball(cfg: BallConfig) -> BallResult:
    """Every (β, φ, n) of ``cfg``: the ascent's certified σ̲ and U_φ(n)."""
    rows = []
    h0 = make_head(cfg.seed, cfg.D, cfg.d, cfg.d_v, "softmax")
    v = float(torch.linalg.matrix_norm(h0.W_V, 2))
    w = float(torch.linalg.matrix_norm(h0.W, 2))
    for beta in cfg.betas:
        R = radius_for(h0, beta)
        for act in cfg.activations:
            h = Head(h0.W, h0.W_V, h0.d, act)
            prev = None
            for n in cfg.ns:
                gen = torch_gen_for(int(cfg.seed), "lipschitz_ball", "ascent", act, float(beta), int(n))
                res = maximise_sigma(h, n, R, cfg.ascent, gen, extra=() if prev is None else (tiled(prev, n),))
                prev = res.X
                rows.append({"activation": act, "beta": float(beta), "R": R, "n": int(n),
                             "sigma_lower": res.lower,
                             "bound": ball_bound(act, n, beta, v) if expr_of(act) is None else None,
                             "winner": res.winner, "residual": res.residual})
    conf = {"ns": list(cfg.ns), "betas": list(cfg.betas), "activations": list(cfg.activations), "D": cfg.D,
            "d": cfg.d, "d_v": cfg.d_v, "seed": cfg.seed, "ascent": cfg.ascent.__dict__}
    return BallResult(rows, v, w, conf)


@dataclass(frozen=True)
class ExponentFit:
    """OLS slope of log σ on log n with its two-sided t interval at ``level`` (residual scatter, n − 2 dof)."""

    slope: float
    lo: float
    hi: float
    n_points: int
    level: float


def fit_exponent(n: np.ndarray, sigma: np.ndarray, level: float) -> ExponentFit:
    """Slope b of log σ = a + b log n, se from the residuals (s²/Σ(x − x̄)²), interval b ± t_{(1+level)/2, k−2}·se.

    The residuals are the scatter of the ascent's values about a power law (how far the series is from one n^b),
    not a sampling error: the interval says which exponents the series is consistent with. Needs ≥ 3 points.
    """
    from scipy import stats

    x, y = np.log(np.asarray(n, dtype=np.float64)), np.log(np.asarray(sigma, dtype=np.float64))
    if x.size < 3:
        raise ValueError(f"need at least 3 points, got {x.size}")
    xc = x - x.mean()
    b = float((xc * (y - y.mean())).sum() / (xc**2).sum())
    resid = y - y.mean() - b * xc
    se = math.sqrt(float((resid**2).sum()) / (x.size - 2) / float((xc**2).sum()))
    t = float(stats.t.ppf(0.5 + level / 2, x.size - 2))
    return ExponentFit(b, b - t * se, b + t * se, int(x.size), float(level))
