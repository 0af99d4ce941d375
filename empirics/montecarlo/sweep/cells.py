"""The grid of a sweep: canonical, de-duplicated cells, their sampling keys, ids and trial counts.

Randomness: trial t of a cell draws from ``SeedSequence(seed, spawn_key=sha256(sampling key)
+ (t,))``; the sampling key holds the randomness model and (N, D, d) but not the activation
or mask, so activations at equal (model, N, D, d) see the same X, W (paired comparisons).

A cell's activation is its columns ``(activation, p, scale_policy, c)`` (:mod:`.config`): a kernel kind
(:func:`resolve_activation` gives the exact kernels' family, row scale and mask) or a table family / expression
(:func:`cell_expression` gives the parsed φ, whose norms :mod:`.run` computes with the expression kernels).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import torch

from sapa.common.validate import InputError
from sapa.empirics.montecarlo.samplers import RandomnessModel
from sapa.common.seeds import stable_hash
from sapa.theory.families import PER_ROW, row_factors, scale_factor
from sapa.empirics.montecarlo.sweep.config import Act, SweepConfig, expression, is_kernel, label

SCHEMA = 1  # bump when the meaning of stored rows changes (invalidates part files)
KEY_COLS = ("weight_model", "rho", "x_model", "mean_norm", "activation", "p", "scale_policy", "c", "mask", "N", "D", "d", "dtype")


@dataclass(frozen=True)
class Cell:
    """One point of the grid; all trials of a cell share it."""

    weight_model: str
    rho: float  # iid: 0, tied: 1, corr: ρ, paper: 0
    x_model: str
    mean_norm: float
    activation: str
    p: int
    scale_policy: str
    c: float | None
    mask: str
    N: int
    D: int
    d: int
    dtype: str

    def key(self) -> dict:
        """The cell as a plain dict (column values of its rows)."""
        return asdict(self)

    def act(self) -> Act:
        """The activation's stored columns ``(activation, p, scale_policy, c)``."""
        return (self.activation, self.p, self.scale_policy, self.c)

    def label(self) -> str:
        """The rows' ``label``: ``x^3/sqrt(N)``, ``softmax``, ``ReLU(x)/N``, an expression's text."""
        return label(self.act())


def cells(config: SweepConfig) -> list[Cell]:
    """Canonical, de-duplicated cells in a fixed order (N innermost).

    Canonicalisation: ρ is 0 for iid/paper and 1 for tied; the paper model (A, B ∈ R^{N×d})
    has no X, so its input model is "iso", its mean 0 and its D is set to d; a per-row scale
    (``inv_sqrt_i``, c_i = 1/√i) implies the causal mask, and so does a family defined only under it;
    ``d = "D"`` becomes D.
    """
    out: dict[Cell, None] = {}
    for wm in config.weight_model:
        for rho in config.rho if wm == "corr" else (None,):
            for xm in config.x_model:
                for mu in config.mean_norm:
                    for mask in config.mask:
                        for D in config.D:
                            for d_ in config.d:
                                d = D if d_ == "D" else int(d_)
                                for a in config.activations:
                                    for N in config.N:
                                        cell = _canonical(config, wm, rho, xm, mu, mask, D, d, a, N)
                                        if cell is not None:
                                            out.setdefault(cell, None)
    return list(out)


def _canonical(config, wm, rho, xm, mu, mask, D, d, a: Act, N) -> Cell | None:
    kind, p, scale, c = a
    rho = {"iid": 0.0, "tied": 1.0, "paper": 0.0}.get(wm, rho)
    if scale in PER_ROW:
        mask = "causal"
    elif not is_kernel(kind):
        masks = expression(kind)[2]
        mask = mask if mask in masks else masks[0]
    if wm == "paper":
        xm, mu, D = "iso", 0.0, d
    if xm == "spiked" and config.spikes > D:
        raise InputError(f"spikes={config.spikes} exceeds D={D}")
    return Cell(wm, float(rho), xm, float(mu), kind, p, scale, c, mask, N, D, d, config.dtype)


def model_config(config: SweepConfig, cell: Cell) -> RandomnessModel:
    """The sampler's :class:`RandomnessModel` for ``cell``."""
    return RandomnessModel(
        weights=cell.weight_model,
        rho=cell.rho,
        sigma_w=config.sigma_w,
        sigma_ab=config.sigma_ab,
        inputs=cell.x_model,
        sigma_x=config.sigma_x,
        aniso_alpha=config.aniso_alpha,
        spikes=config.spikes,
        spike_strength=config.spike_strength,
        mean_norm=cell.mean_norm,
    )


def sampling_key(config: SweepConfig, cell: Cell) -> dict:
    """What a cell's random draws depend on (besides the seed): model, N, D, d — not φ or the mask."""
    m = model_config(config, cell)
    return {"sampling": SCHEMA, "N": cell.N, "D": cell.D, "d": cell.d, **asdict(m)}


def cell_id(config: SweepConfig, cell: Cell) -> str:
    """Name of the cell's part file: hash of everything its stored numbers depend on.

    A cell computed from an expression also hashes that expression and its normalisation (a table family's row
    could be edited under the same id); kernel cells hash exactly what they always did.
    """
    key = {
        "schema": SCHEMA,
        "cell": cell.key(),
        "sampling": sampling_key(config, cell),
        "seed": config.seed,
        "trials": cell_trials(config, cell),
        "with_rows": config.with_rows,
    }
    if not is_kernel(cell.activation):
        key["phi"] = list(expression(cell.activation)[:2])
    return stable_hash(key)[:24]


def resolve_activation(cell: Cell):
    """``(family, row_scale (N,) | None, mask)`` realising a kernel cell's scale policy (a family resolved at N:
    :func:`sapa.empirics.kernels.norms.kernel_family` of the cell's kind, p and coefficient). InputError for a
    cell computed from an expression (:func:`cell_expression`)."""
    from sapa.empirics.kernels.norms import kernel_family

    if not is_kernel(cell.activation):
        raise InputError(f"{cell.label()} has no exact kernel: its cells are computed from cell_expression(cell)")
    N, d = cell.N, cell.d
    if cell.scale_policy in PER_ROW:
        row_scale = torch.from_numpy(row_factors(cell.scale_policy, N))  # (N,) c_i, e.g. 1/√i
        return kernel_family(kind=cell.activation, p=max(cell.p, 1), scale=1.0), row_scale, "causal"
    scale = scale_factor(cell.scale_policy, N, c=cell.c, d=d)
    return kernel_family(kind=cell.activation, p=max(cell.p, 1), scale=scale), None, cell.mask


def cell_expression(cell: Cell):
    """The parsed φ(x, N, i, j) of a family or expression cell (:func:`sapa.theory.activation.parse_activation`,
    with the row's normalisation and the cell's mask); None for a kernel cell."""
    e = expression(cell.activation)
    if e is None:
        return None
    from sapa.theory.activation import parse_activation

    return parse_activation(e[0], e[1], cell.mask)


EXPR_WORDS = 16  # (N, N) float64 arrays an expression cell holds per trial (S, φ, φ', their products, Gram matrices)


def expr_trials_per_batch(N: int, T: int, *, budget_bytes: float = 3 * 2**30) -> int:
    """Trials an expression cell evaluates at once: ≈ EXPR_WORDS (N, N) float64 arrays per trial within budget."""
    return int(max(1, min(T, budget_bytes // (EXPR_WORDS * 8 * N * N))))


def trials_per_batch(N: int, D: int, T: int, *, itemsize: int = 8, budget_bytes: float = 3 * 2**30) -> int:
    """Trials sampled and passed to the kernel at once: ≈ 12 (N, D) words per trial within budget.

    Per trial the sweep holds X in float64 and in the compute dtype and the kernel holds
    X, X Wᵀ, X W (+ margin); the kernel's own row-chunk buffers (≈ 64 MB each, a few of
    them) are reserved out of the budget first.
    """
    per_trial = (2 * 8 + 10 * itemsize) * N * D + 8 * D * D * 4
    free = max(budget_bytes - 768 * 2**20, per_trial)
    return int(max(1, min(T, free // per_trial)))


def cell_trials(config: SweepConfig, cell: Cell) -> int:
    """Trials of a cell, fixed in advance: ``config.trials``, or for heavy-tailed cells T(N) = design_trials(N).

    Heavy-tailed cells are c·x^p with p ≥ 2 (squared norms are degree-4p Gaussian polynomials);
    with ``tail_trials_max > 0`` they get min(tail_trials_max, ⌈trials·max(N)/N⌉) trials
    (:func:`sapa.empirics.montecarlo.stats.design_trials`): equal precision of log mean(‖·‖²) at every N.
    """
    if config.tail_trials_max <= 0 or cell.activation != "poly" or cell.p < 2:
        return config.trials
    from sapa.empirics.montecarlo.stats import design_trials

    return design_trials(cell.N, config.N, base=config.trials, cap=max(config.trials, config.tail_trials_max))


def _cell_cost(cell: Cell, trials: int) -> float:
    return float(trials) * cell.N * cell.N * cell.D


def _big(n: int) -> str:
    """An integer for a message: as is up to 12 digits, else ``~1e<digits>`` (10**200 stays one short line)."""
    return str(n) if n < 10**12 else f"~1e{len(str(n)) - 1}"


def _gib(nbytes: int) -> str:
    """``nbytes`` in GiB, 3 significant digits, for any size (a float cannot hold 10**400)."""
    return f"{nbytes / 2**30:.3g}" if nbytes < 2**1000 else _big(nbytes // 2**30)


def check_memory(config: SweepConfig, all_cells: Sequence[Cell]) -> None:
    """InputError if one trial of the largest cell does not fit in ``memory_gib`` (names N, D)."""
    if not all_cells:
        return
    big = max(all_cells, key=lambda c: c.N * c.D + c.D * c.D)
    itemsize = 4 if config.dtype == "float32" else 8
    need = (2 * 8 + 10 * itemsize) * big.N * big.D + 8 * big.D * big.D * 4  # as in trials_per_batch
    for c in all_cells:  # an expression cell also holds EXPR_WORDS (N, N) arrays per trial (expr_trials_per_batch)
        if not is_kernel(c.activation):
            n = (2 * 8 + 10 * itemsize) * c.N * c.D + 8 * c.D * c.D * 4 + EXPR_WORDS * 8 * c.N * c.N
            if n > need:
                big, need = c, n
    if need > config.memory_gib * 2**30:
        raise InputError(
            f"cell N={_big(big.N)}, D={_big(big.D)} needs ≈{_gib(need)} GiB for one trial, more than "
            f"memory_gib={config.memory_gib:g}; raise memory_gib or shrink N, D"
        )
