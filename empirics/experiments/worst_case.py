"""Measured max over bounded X of ‖c·S^{∘p}‖_F, ‖∂(c·S^{∘p})/∂X‖_F and ‖·‖₂, S = XWXᵀ (arXiv 2410.18613, Thm 4.2–Cor 4.5).

The worst-case side of the growth claims, beside their typical (Gaussian) side. For each N
the maximum over the constraint set (``token``: ‖x_i‖ = r; ``fro``: ‖X‖_F = r√N) is sought
three ways, independently of the closed forms of ``sapa.theory.worst_case``:

* the closed-form witness (aligned / concentrated input), evaluated numerically;
* projected gradient ascent on the constraint set from seeded random starts and the witness
  (``sapa.empirics.kernels.lipschitz.maximise_jacobian_norm``);
* a random point of the set (the typical scale, for contrast).

Frobenius Jacobian norms are evaluated with the exact kernel of ``sapa.empirics.kernels.norms`` (never the
JVP sum the ascent uses); spectral norms by power iteration (``jvp``/``vjp``). Everything is
computed with c = 1: the maximiser does not depend on c, and max ‖c·φ‖ = c·max ‖φ‖.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from sapa.empirics.kernels.lipschitz import attention_map, maximise_jacobian_norm, spectral_norm
from sapa.empirics.kernels.norms import attention_norms
from sapa.common.seeds import rng_for, torch_gen_for
from sapa.empirics.montecarlo.stats import loglog_slope
from sapa.common.validate import InputError, choice, positive_int
from sapa.theory.families import power
from sapa.theory.worst_case import CONSTRAINTS, QUANTITIES, bracket, witness_input, witnesses

F64 = torch.float64
ASCENT_NORM = {"fro": "value", "jac_fro": "fro", "jac_spec": "spectral"}


@dataclass(frozen=True)
class WorstCaseConfig:
    """Sizes and search effort of one worst-case sweep."""

    Ns: tuple[int, ...] = (4, 8, 16, 32)
    D: int = 6
    r: float = 1.0            # token radius (token) / RMS token norm (fro: ‖X‖_F = r√N)
    steps: int = 30           # ascent steps per start
    restarts: int = 2         # seeded random starts (the witness is always a start too)
    seed: int = 0


def sample_w(D: int, seed: int) -> np.ndarray:
    """W = W_Q W_Kᵀ with W_Q, W_K ∈ R^{D×D} i.i.d. N(0, 1/D), seeded; (D, D)."""
    g = rng_for(seed, "worst_case", "witness")
    wq, wk = g.standard_normal((2, D, D)) / math.sqrt(D)
    return wq @ wk.T  # (D, D) @ (D, D)


def measure(X: torch.Tensor, W: torch.Tensor, p: int, quantity: str, seed: int = 0) -> float:
    """‖S^{∘p}‖_F, ‖∂S^{∘p}/∂X‖_F (exact kernel) or ‖∂S^{∘p}/∂X‖₂ (power iteration) at X; S = XWXᵀ."""
    act = power(p)
    if quantity == "jac_spec":
        return spectral_norm(attention_map(W, act), X, tol=1e-10, max_iter=3000, seed=seed).sigma
    res = attention_norms(X, W, act, device="cpu")
    return res.fro if quantity == "fro" else res.jac_fro


def _ascent_seed(seed: int, N: int) -> int:
    """The ascent's seed at length N: 62 bits of the named stream ``rng_for(seed, "worst_case", "ascent", N)``."""
    return int(rng_for(seed, "worst_case", "ascent", N).integers(2**62))


def _random_point(N: int, D: int, r: float, constraint: str, gen: torch.Generator) -> torch.Tensor:
    X = torch.randn(N, D, generator=gen, dtype=F64)
    if constraint == "token":
        return r * X / torch.linalg.vector_norm(X, dim=-1, keepdim=True)
    return r * math.sqrt(N) * X / torch.linalg.vector_norm(X)


def worst_case_growth(
    p: int,
    cfg: WorstCaseConfig = WorstCaseConfig(),
    *,
    constraints: Sequence[str] = CONSTRAINTS,
    quantities: Sequence[str] = QUANTITIES,
    W: np.ndarray | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """One row per (constraint, quantity, N): exact bracket, witness, ascent, random point, best found (c = 1)."""
    p = positive_int("p", p)
    for c in constraints:
        choice("constraint", c, CONSTRAINTS)
    for q in quantities:
        choice("quantity", q, QUANTITIES)
    Ns = [positive_int("N", n) for n in cfg.Ns]
    if len(set(Ns)) < 2:
        raise InputError("worst-case growth needs at least two distinct N")
    D = positive_int("D", cfg.D)
    Wn = sample_w(D, cfg.seed) if W is None else np.asarray(W, float)
    Wt = torch.as_tensor(Wn, dtype=F64)
    rows = []
    jobs = [(c, q, N) for c in constraints for q in quantities for N in Ns]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc=f"worst case p={p}", unit="cell")
    for c, q, N in jobs:
        gen = torch_gen_for(cfg.seed, "worst_case", N)
        b = bracket(p, q, c, N, Wn, cfg.r)
        wits = {name: torch.as_tensor(witness_input(V, n), dtype=F64) for name, (V, n) in witnesses(c, N, Wn, cfg.r).items()}
        f = attention_map(Wt, power(p))
        radius = cfg.r if c == "token" else cfg.r * math.sqrt(N)  # ‖x_i‖ = r, or ‖X‖_F = r√N
        asc = maximise_jacobian_norm(f, N, D, radius, norm=ASCENT_NORM[q], constraint=c, steps=cfg.steps,
                                     restarts=cfg.restarts, seed=_ascent_seed(cfg.seed, N), inits=list(wits.values()))
        wit = measure(wits[b.witness], Wt, p, q, cfg.seed)  # the closed-form lower end, evaluated numerically
        best_asc = measure(asc.X, Wt, p, q, cfg.seed)  # re-measured by the independent route
        rand = measure(_random_point(N, D, cfg.r, c, gen), Wt, p, q, cfg.seed)
        best = max(wit, best_asc)
        rows.append({
            "p": p, "constraint": c, "quantity": q, "N": N, "D": D, "r": cfg.r,
            "lower": b.lower, "upper": b.upper, "witness": b.witness, "witness_value": wit,
            "ascent_value": best_asc, "random_value": rand, "best": best,
            "best_over_upper": best / b.upper,
            "ascent_gain_over_witness": best_asc / wit - 1 if wit > 0 else math.inf,
        })
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    return pd.DataFrame(rows)


def bracket_slope_range(N: Sequence[float], lower: Sequence[float], upper: Sequence[float]) -> tuple[float, float]:
    """The range of OLS slopes of log y on log N over all y with lower ≤ y ≤ upper pointwise.

    The slope is Σ_k w_k log y_k with w_k = (x_k − x̄)/Σ(x − x̄)², x = log N: its extremes take
    y_k = upper where w_k > 0 and lower where w_k < 0 (and the reverse).
    """
    x = np.log(np.asarray(N, float))
    w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    lo, up = np.log(np.asarray(lower, float)), np.log(np.asarray(upper, float))
    return float(np.where(w > 0, lo, up) @ w), float(np.where(w > 0, up, lo) @ w)


def summarise(df: pd.DataFrame, gamma: float, rtol: float = 1e-9) -> list[dict]:
    """Per (constraint, quantity): exact exponent, fitted slope of the best found, bracket checks; c = N^{−γ}."""
    from sapa.theory.worst_case import worst_case_exponent

    out = []
    for (c, q), g in df.groupby(["constraint", "quantity"], sort=False):
        g = g.sort_values("N")
        N = g["N"].to_numpy(float)
        scale = N ** (-gamma)
        best, lo, up = g["best"].to_numpy() * scale, g["lower"].to_numpy() * scale, g["upper"].to_numpy() * scale
        rand = g["random_value"].to_numpy() * scale
        p = int(g["p"].iloc[0])
        out.append({
            "constraint": c, "quantity": q, "N": [int(n) for n in N],
            "exact_exponent": worst_case_exponent(p, q, c, gamma),
            "measured_slope": loglog_slope(N, best),
            "bracket_slope_range": list(bracket_slope_range(N, lo, up)),
            "random_point_slope": loglog_slope(N, rand),
            "witness_attains_lower": bool(np.allclose(g["witness_value"], g["lower"], rtol=1e-8, atol=0)),
            "never_above_upper": bool(np.all(g["best"].to_numpy() <= g["upper"].to_numpy() * (1 + rtol))),
            "best_over_upper_min": float(g["best_over_upper"].min()),
            "ascent_gain_over_witness_max": float(g["ascent_gain_over_witness"].max()),
        })
    return out


# --------------------------------------------------------------------------- the experiment


@dataclass(frozen=True)
class WorstCaseResult:
    """Worst-case frames per degree p (c = 1, :func:`worst_case_growth`) and the sweep that made them.

    ``frames[p]`` has one row per (constraint, quantity, N); ``config`` is the :class:`WorstCaseConfig`.
    """

    frames: dict  # {p: DataFrame}
    config: WorstCaseConfig

    def config_dict(self) -> dict:
        """The sweep as plain values: Ns, D, steps, restarts, seed, r."""
        c = self.config
        return {"Ns": list(c.Ns), "D": c.D, "steps": c.steps, "restarts": c.restarts, "seed": c.seed, "r": c.r}

    def to_json(self) -> dict:
        """A mapping of plain values and DataFrames that ``sapa.common.figdata`` stores as JSON."""
        return {"frames": dict(self.frames), "config": self.config_dict()}

    @classmethod
    def from_json(cls, data: dict) -> WorstCaseResult:
        """The result :meth:`to_json` stored."""
        c = data["config"]
        cfg = WorstCaseConfig(Ns=tuple(int(n) for n in c["Ns"]), D=int(c["D"]), r=float(c["r"]),
                              steps=int(c["steps"]), restarts=int(c["restarts"]), seed=int(c["seed"]))
        return cls(frames={int(p): df for p, df in data["frames"].items()}, config=cfg)


def run_worst_case(ps: Sequence[int] = (1, 3), Ns: Sequence[int] = (4, 8, 16, 32), D: int = 6, steps: int = 15,
                   restarts: int = 1, seed: int = 0, workers: int = 1, executor=None) -> WorstCaseResult:
    """Worst case of ‖S^{∘p}‖_F, ‖∂S^{∘p}/∂X‖_F and ‖·‖₂ over both input sets, per p (c = 1).

    ``workers`` > 1 runs the (p, constraint, quantity) parts in that many processes (``sapa.common.pool``), or
    ``executor`` (any ``concurrent.futures.Executor``, kept open) runs them: every (constraint, quantity, N)
    row is seeded by itself, so the frames are the same rows in the same order.
    """
    cfg = WorstCaseConfig(Ns=tuple(Ns), D=D, steps=steps, restarts=restarts, seed=seed)
    qs = ("fro", "jac_fro", "jac_spec")
    if positive_int("workers", workers) == 1 and executor is None:
        return WorstCaseResult(frames={p: worst_case_growth(p, cfg, quantities=qs) for p in ps}, config=cfg)
    import contextlib

    from sapa.common.pool import stopping_pool

    parts = [(p, c, q) for p in ps for c in CONSTRAINTS for q in qs]
    with contextlib.nullcontext(executor) if executor is not None else stopping_pool(min(workers, len(parts))) as ex:
        futures = [ex.submit(worst_case_growth, p, cfg, constraints=(c,), quantities=(q,)) for p, c, q in parts]
        done = [f.result() for f in futures]
    frames = {p: pd.concat([df for (pp, _, _), df in zip(parts, done) if pp == p], ignore_index=True) for p in ps}
    return WorstCaseResult(frames=frames, config=cfg)
