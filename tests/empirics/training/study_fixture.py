"""A synthetic training study with exactly the schema of ``sapa.empirics.training.train_study`` (runs, history, config, provenance).

Used by the tests of empirics/training/study_analysis.py, sapa/claims/scale_keeps_training_stable.py, sapa/claims/norm_vs_accuracy.py
and figures/training_vs_n.py. Accuracies follow a known model, so tests can assert what the analysis must find:

  acc(task, N, arm, lr, r) = base[task] − CURV·(log10 lr − log10 lr_opt[arm])² + gap(task, arm, N) + u[task, N, r] + ε,

u the replicate effect shared by every arm and lr at (task, N) (paired design), ε ~ N(0, noise²) per member.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

ARMS = {  # arm: (p, scale)
    "softmax": (0, "softmax"), "x_sqrtN": (1, "inv_sqrt_n"), "x3_sqrtN": (3, "inv_sqrt_n"), "x_alpha": (1, "alpha"),
    "x3_alpha": (3, "alpha"), "x": (1, "none"), "x3": (3, "none"), "x_N": (1, "inv_n"), "x3_N": (3, "inv_n"),
    "x3_sqrti": (3, "inv_sqrt_i"),
}
TASKS = {"digits": (16, 64), "text": (32, 64, 128)}
LRS = (1e-3, 3e-3, 1e-2)
CURV = 0.05
BASE = {"digits": 0.9, "text": 0.45}
CHANCE = {"digits": 0.1, "text": 1 / 64}
QUANTITIES = ("train_loss", "val_loss", "val_acc", "attn_fro", "jac_s_fro", "jac_x_fro", "grad_norm")


@dataclass(frozen=True)
class SyntheticStudy:
    """Duck-typed ``sapa.empirics.training.train_study.StudyResult``."""

    runs: pd.DataFrame
    history: pd.DataFrame
    config: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)


def _no_gap(task: str, arm: str, N: int) -> float:
    return 0.0


def make_study(*, tasks: dict | None = None, arms: tuple | None = None, lrs: tuple = LRS, seeds: int = 3,
               gap: Callable[[str, str, int], float] = _no_gap, noise: float = 0.005, seed_sd: float = 0.01,
               diverge: Callable[[str, str, int, float, int], bool] | None = None, lr_opt: dict | None = None,
               alphas: tuple = (4.0, 16.0), steps: int = 20, seed: int = 0, history: bool = True,
               norm: Callable[[str, str, int], float] | None = None) -> SyntheticStudy:
    """A synthetic study; ``gap(task, arm, N)`` shifts the arm's accuracy, ``diverge(task, arm, N, lr, r)`` flags members.

    ``lr_opt``: {arm: lr at which the arm peaks} (default 3e-3 for every arm); ``norm(task, arm, N)``: the final
    ‖φ(S)‖_F before a ±10 % jitter (default √N·(1 + p)). The α arms are also trained at
    a second α at the smallest N (rows with ``in_study`` False, accuracy lowered by 0.2).
    """
    tasks = TASKS if tasks is None else tasks
    rng = np.random.default_rng(seed)
    rows, hist = [], []
    lr_opt = lr_opt or {}
    for task, Ns in tasks.items():
        task_arms = [a for a in (arms or ARMS) if task == "text" or a != "x3_sqrti"]
        for N in Ns:
            u = seed_sd * rng.standard_normal(seeds)  # replicate effect: shared by arms and lrs (paired)
            for arm in task_arms:
                p, scale = ARMS[arm]
                alist = alphas if (scale == "alpha" and N == min(Ns)) else ((alphas[0],) if scale == "alpha" else
                                                                           (math.nan,))
                for alpha in alist:
                    in_study = not (scale == "alpha" and alpha != alphas[0])
                    for lr in lrs:
                        for r in range(seeds):
                            opt = lr_opt.get(arm, 3e-3)
                            acc = (BASE[task] - CURV * (math.log10(lr) - math.log10(opt)) ** 2 + gap(task, arm, N)
                                   + u[r] + noise * rng.standard_normal() - (0.0 if in_study else 0.2))
                            val = acc + noise * rng.standard_normal()
                            div = bool(diverge(task, arm, N, lr, r)) if diverge else False
                            ch = CHANCE[task]
                            n0 = norm(task, arm, N) if norm else math.sqrt(N) * (1 + p)
                            norm_ = float(n0 * (1 + 0.1 * rng.random()))
                            rows.append({
                                "task": task, "N": N, "arm": arm, "p": p, "scale": scale, "alpha": alpha, "lr": lr,
                                "seed": r, "in_study": in_study, "steps": steps, "diverged": div,
                                "diverged_step": steps // 2 if div else -1, "loss_start": 2.3, "chance_acc": ch,
                                "val_acc_final": ch if div else val, "val_loss_final": math.inf if div else 1 - val,
                                "val_acc_best": ch if div else val, "val_loss_best": math.inf if div else 1 - val,
                                "best_step": steps, "test_acc": ch if div else acc,
                                "test_loss": math.inf if div else 1 - acc, "test_acc_at_best_val": ch if div else acc,
                                "attn_fro": math.inf if div else norm_, "jac_s_fro": math.inf if div else 2 * norm_,
                                "jac_x_fro": math.inf if div else 3 * norm_, "attn_fro_init": norm_,
                                "jac_s_fro_init": 2 * norm_, "jac_x_fro_init": 3 * norm_, "grad_norm_max": 1.0,
                                "grad_norm_final": 0.5, "cpu_s": 0.01})
                            if history and in_study:
                                for step in (0, steps // 2, steps):
                                    frac = step / steps
                                    for q in QUANTITIES:
                                        v = {"attn_fro": norm_ * (1 + frac), "jac_s_fro": 2 * norm_ * (1 + frac),
                                             "jac_x_fro": 3 * norm_ * (1 + frac), "val_acc": ch + frac * (acc - ch),
                                             "grad_norm": 1.0 - 0.5 * frac}.get(q, 2.3 - frac)
                                        if div and step == steps:
                                            v = math.inf if q != "val_acc" else ch
                                        hist.append((task, N, arm, alpha, lr, r, step, q, float(v)))
    runs = pd.DataFrame(rows)
    h = pd.DataFrame(hist, columns=["task", "N", "arm", "alpha", "lr", "seed", "step", "quantity", "value"])
    config = {"name": "synthetic", "tasks": {t: {"Ns": list(Ns)} for t, Ns in tasks.items()}, "seeds": seeds,
              "lrs": list(lrs), "seed": seed}
    prov = {"alpha_star": {t: {"1": alphas[0], "3": alphas[0]} for t in tasks}, "wall_s": 1.0,
            "members_trained_now": len(runs), "numerics": {}}
    return SyntheticStudy(runs=runs, history=h, config=config, provenance=prov)
