"""Run budgets for ``sapa verify``: how much sampling each claim check may spend."""

from __future__ import annotations

from dataclasses import dataclass

from sapa.common.validate import InputError


@dataclass(frozen=True)
class Budget:
    """How hard every claim check works; ``quick`` must finish in minutes on 2 cores."""

    name: str
    seed: int = 0
    random_rows: int = 2_000          # random simplex / logit rows per check
    Ns: tuple[int, ...] = (2, 4, 16, 64, 256)  # attention sizes for matrix-level checks
    mc_trials: int = 200               # Monte Carlo trials per cell (moment checks)
    sweep: str = "quick"               # name of the default sweep config
    worst_Ns: tuple[int, ...] = (4, 8, 16, 32)  # worst-case search (sapa.empirics.experiments.worst_case): sizes,
    worst_steps: int = 15              # gradient-ascent steps per start,
    worst_restarts: int = 1            # seeded random starts beside the closed-form witnesses


QUICK = Budget(name="quick")
FULL = Budget(name="full", random_rows=50_000, Ns=(2, 4, 16, 64, 256, 1024, 4096), mc_trials=2_000, sweep="full",
              worst_Ns=(4, 8, 16, 32, 64), worst_steps=60, worst_restarts=3)


def budget_named(name: str, seed: int = 0) -> Budget:
    """Return the budget called ``name`` (quick | full) with ``seed``."""
    table = {"quick": QUICK, "full": FULL}
    if name not in table:
        raise InputError(f"unknown budget {name!r}; choose quick or full")
    from dataclasses import replace

    return replace(table[name], seed=int(seed))
