"""Monte Carlo sweeps of ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F against N (arXiv 2410.18613, Thm 4.1–Cor 4.5).

A TOML file (:func:`load_config`) fixes grids over N, D, d, weight model, ρ, mask, input
model and a list of activations (softmax with temperature τ, or ``c·x^p`` with a scale
policy); :func:`cells` expands it into canonical, de-duplicated cells; :func:`run_cell` is a
pure function of ``(config, cell)`` returning tidy rows (cell keys, trial, quantity, value);
:func:`run_sweep` runs the cells (serially, or through any executor with ``submit``),
writes each finished cell atomically as ``OUT/cells/<cell_id>.parquet``, skips finished cells
on a rerun, and assembles ``OUT/results.parquet`` atomically with provenance in the file
metadata.

Scale policies (the coefficient ``c`` of ``c·x^p``, or the softmax temperature τ):
``inv_sqrt_n`` c = 1/√N (the paper); ``const`` a given c (the paper's x/16, x³/1 rows);
``inv_sqrt_d`` c = 1/√d (softmax's default τ); ``dynamic_causal`` row scale c_i = 1/√i
under the causal mask (row i sees i tokens).

Randomness: trial t of a cell draws from ``SeedSequence(seed, spawn_key=sha256(sampling key)
+ (t,))``; the sampling key holds the randomness model and (N, D, d) but not the activation
or mask, so activations at equal (model, N, D, d) see the same X, W (paired comparisons).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import math
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from empirics.atomic import atomic_write, atomic_write_json
from empirics.integrity import seal_table, warn_recompute
from empirics.samplers import (
    INPUT_MODELS,
    WEIGHT_MODELS,
    ModelConfig,
    make_population,
    sample_paper_ab,
    sample_trials,
    seed_sequence,
    stable_hash,
    trial_generator,
    trial_generators,
)
from empirics.stats import QUANTILES, classify_regime, fit_exponent
from theory.validate import InputError, choice, positive_float, positive_int, unit_interval

SCHEMA = 1  # bump when the meaning of stored rows changes (invalidates part files)
ACTIVATIONS = ("softmax", "poly")
POLICIES = ("inv_sqrt_n", "const", "inv_sqrt_d", "dynamic_causal")
SOFTMAX_POLICIES = ("inv_sqrt_d", "const")
MASKS = ("none", "causal")
DTYPES = ("float64", "float32")
QUANTITIES = ("fro", "jac_fro", "max_abs")
KEY_COLS = ("weight_model", "rho", "x_model", "mean_norm", "activation", "p", "scale_policy", "c", "mask", "N", "D", "d", "dtype")


# --------------------------------------------------------------------------- config


@dataclass(frozen=True)
class ActivationSpec:
    """One activation: ``softmax(τ S)`` (p = 0) or ``c·S^p`` with ``c`` set by ``scale``."""

    kind: str  # "softmax" | "poly"
    p: int = 0  # degree; 0 for softmax
    scale: str = "inv_sqrt_d"  # policy, see module docstring
    c: float | None = None  # the constant of the "const" policy

    def label(self) -> str:
        """Readable name: ``softmax``, ``x^3/sqrt(N)``, ``0.0625*x^1``, ``x^1/sqrt(i)``."""
        if self.kind == "softmax":
            return "softmax" if self.scale == "inv_sqrt_d" else f"softmax(tau={self.c:g})"
        if self.scale == "const":
            return f"{self.c:g}*x^{self.p}"
        return f"x^{self.p}/" + {"inv_sqrt_n": "sqrt(N)", "inv_sqrt_d": "sqrt(d)", "dynamic_causal": "sqrt(i)"}[self.scale]


@dataclass(frozen=True)
class SweepConfig:
    """A Monte Carlo sweep: grids (tuples) and per-sweep settings."""

    N: tuple[int, ...]  # tokens
    D: tuple[int, ...]  # model width
    activations: tuple[ActivationSpec, ...]
    d: tuple[int | str, ...] = ("D",)  # head width; "D" means d = D
    weight_model: tuple[str, ...] = ("iid",)  # paper | iid | tied | corr
    rho: tuple[float, ...] = (0.5,)  # corr only
    mask: tuple[str, ...] = ("none",)
    x_model: tuple[str, ...] = ("iso",)  # iso | aniso | spiked
    mean_norm: tuple[float, ...] = (0.0,)  # shared mean token norm
    trials: int = 32
    seed: int = 0
    dtype: str = "float64"
    device: str = "cpu"
    with_rows: bool = False  # also store per-row norms (quantity "row_fro")
    sigma_w: float | None = None  # weight std; None -> 1/√D
    sigma_ab: float = 1.0  # paper model entry std
    sigma_x: float = 1.0
    aniso_alpha: float = 1.0
    spikes: int = 4
    spike_strength: float = 10.0
    memory_gib: float = 3.0  # working-set budget used to pick trials per batch (one trial must fit)
    tail_trials_max: int = 0  # > 0: heavy-tailed cells (poly, p ≥ 2) get design_trials(N) ≤ this (see cell_trials)
    threads: int = 1  # torch intra-op threads while a cell runs (0: leave torch's setting)
    name: str = ""

    def as_dict(self) -> dict:
        """Plain-JSON form; ``config_from_dict(as_dict())`` round-trips."""
        out = asdict(self)
        out.pop("activations")
        out["activation"] = [_activation_entry(a) for a in self.activations]
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in out.items()}

    def hash(self) -> str:
        """sha256 of the canonical JSON of :meth:`as_dict`."""
        return stable_hash(self.as_dict())


def _activation_entry(a: ActivationSpec) -> dict:
    """The TOML table of one activation (``p`` only for poly, ``c`` only for const)."""
    e: dict = {"kind": a.kind, "scale": a.scale}
    if a.kind == "poly":
        e["p"] = a.p
    if a.c is not None:
        e["c"] = a.c
    return e


_GRID = {"N", "D", "d", "weight_model", "rho", "mask", "x_model", "mean_norm"}
_SCALARS = {f.name for f in fields(SweepConfig)} - _GRID - {"activations"}
_ACT_KEYS = {"kind", "p", "scale", "c"}


def _as_list(name: str, v: object) -> list:
    if isinstance(v, (list, tuple)):
        if not v:
            raise InputError(f"config key {name!r} must not be an empty list")
        return list(v)
    return [v]


def _str(name: str, v: object, options: tuple[str, ...]) -> str:
    if not isinstance(v, str):
        raise InputError(f"{name} must be a string (one of {', '.join(options)}), got {v!r}")
    return choice(name, v, options)


def _nonneg_int(name: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputError(f"{name} must be a non-negative integer, got {v!r}")
    return v


def _nonneg_float(name: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(f"{name} must be a finite number ≥ 0, got {v!r}")
    return float(v)


def _device(v: object) -> str:
    """A device string torch parses as ``cpu`` or ``cuda[:k]`` (availability is checked where cells run)."""
    try:
        ok = isinstance(v, str) and torch.device(v).type in ("cpu", "cuda")
    except (RuntimeError, ValueError):
        ok = False
    if not ok:
        raise InputError(f"device must be 'cpu' or 'cuda[:k]', got {v!r}")
    return v


def _parse_activation(i: int, entry: object) -> list[ActivationSpec]:
    where = f"activation[{i}]"
    if not isinstance(entry, dict):
        raise InputError(f"{where} must be a table with keys {sorted(_ACT_KEYS)}, got {entry!r}")
    for key in entry:
        if key not in _ACT_KEYS:
            raise InputError(f"unknown config key {where}.{key!r} (allowed: {', '.join(sorted(_ACT_KEYS))})")
    if "kind" not in entry:
        raise InputError(f"{where} needs 'kind' (softmax or poly)")
    kind = _str(f"{where}.kind", entry["kind"], ACTIVATIONS)
    c = entry.get("c")
    if c is not None:
        c = positive_float(f"{where}.c", c)
    if kind == "softmax":
        if "p" in entry:
            raise InputError(f"{where}.p is not used by softmax; remove it")
        policies = [_str(f"{where}.scale", s, SOFTMAX_POLICIES) for s in _as_list(f"{where}.scale", entry.get("scale", "inv_sqrt_d"))]
        degrees = [0]
    else:
        policies = [_str(f"{where}.scale", s, POLICIES) for s in _as_list(f"{where}.scale", entry.get("scale", "inv_sqrt_n"))]
        if "p" not in entry:
            raise InputError(f"{where} (poly) needs 'p'")
        degrees = [positive_int(f"{where}.p", p) for p in _as_list(f"{where}.p", entry["p"])]
    if "const" in policies and c is None:
        raise InputError(f"{where}: scale 'const' needs 'c'")
    if c is not None and "const" not in policies:
        raise InputError(f"{where}.c is only used with scale 'const'")
    return [
        ActivationSpec(kind=kind, p=p, scale=s, c=(c if s == "const" else None)) for p in degrees for s in policies
    ]


def config_from_dict(raw: dict) -> SweepConfig:
    """Validate a parsed TOML table into a :class:`SweepConfig`; unknown keys raise InputError naming them."""
    if not isinstance(raw, dict):
        raise InputError("config must be a table")
    allowed = _GRID | _SCALARS | {"activation"}
    for key in raw:
        if key not in allowed:
            raise InputError(f"unknown config key {key!r} (allowed: {', '.join(sorted(allowed))})")
    for key in ("N", "D", "activation"):
        if key not in raw:
            raise InputError(f"config is missing required key {key!r}")
    kw: dict = {}
    kw["N"] = tuple(positive_int(f"N[{i}]", v) for i, v in enumerate(_as_list("N", raw["N"])))
    kw["D"] = tuple(positive_int(f"D[{i}]", v) for i, v in enumerate(_as_list("D", raw["D"])))
    if "d" in raw:
        kw["d"] = tuple(v if v == "D" else positive_int(f"d[{i}]", v) for i, v in enumerate(_as_list("d", raw["d"])))
    if "weight_model" in raw:
        kw["weight_model"] = tuple(_str(f"weight_model[{i}]", v, WEIGHT_MODELS) for i, v in enumerate(_as_list("weight_model", raw["weight_model"])))
    if "rho" in raw:
        kw["rho"] = tuple(unit_interval(f"rho[{i}]", v) for i, v in enumerate(_as_list("rho", raw["rho"])))
    if "mask" in raw:
        kw["mask"] = tuple(_str(f"mask[{i}]", v, MASKS) for i, v in enumerate(_as_list("mask", raw["mask"])))
    if "x_model" in raw:
        kw["x_model"] = tuple(_str(f"x_model[{i}]", v, INPUT_MODELS) for i, v in enumerate(_as_list("x_model", raw["x_model"])))
    if "mean_norm" in raw:
        kw["mean_norm"] = tuple(_nonneg_float(f"mean_norm[{i}]", v) for i, v in enumerate(_as_list("mean_norm", raw["mean_norm"])))
    acts = raw["activation"]
    if not isinstance(acts, list) or not acts:
        raise InputError("activation must be a non-empty array of tables ([[activation]])")
    kw["activations"] = tuple(dict.fromkeys(a for i, e in enumerate(acts) for a in _parse_activation(i, e)))
    checks = {
        "trials": positive_int,
        "seed": _nonneg_int,
        "spikes": positive_int,
        "sigma_ab": positive_float,
        "sigma_x": positive_float,
        "spike_strength": positive_float,
        "aniso_alpha": _nonneg_float,
        "memory_gib": positive_float,
        "threads": _nonneg_int,
        "tail_trials_max": _nonneg_int,
    }
    for key, check in checks.items():
        if key in raw:
            kw[key] = check(key, raw[key])
    if raw.get("sigma_w") is not None:  # None (dicts only): the default 1/√D
        kw["sigma_w"] = positive_float("sigma_w", raw["sigma_w"])
    if "dtype" in raw:
        kw["dtype"] = _str("dtype", raw["dtype"], DTYPES)
    if "device" in raw:
        kw["device"] = _device(raw["device"])
    if "with_rows" in raw:
        if not isinstance(raw["with_rows"], bool):
            raise InputError(f"with_rows must be true or false, got {raw['with_rows']!r}")
        kw["with_rows"] = raw["with_rows"]
    if "name" in raw:
        if not isinstance(raw["name"], str):
            raise InputError(f"name must be a string, got {raw['name']!r}")
        kw["name"] = raw["name"]
    return SweepConfig(**kw)


def load_config(path: str | Path) -> SweepConfig:
    """Read a TOML sweep config (see ``empirics/configs/quick.toml``)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"config file not found: {path}")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: invalid TOML ({exc})") from None
    return config_from_dict(raw)


def builtin_config(name: str) -> Path:
    """Path of a bundled config: ``quick`` or ``full``."""
    if name not in ("quick", "full"):
        raise InputError(f"no config file {name!r} and no built-in config of that name (built-ins: quick, full)")
    return Path(__file__).with_name("configs") / f"{name}.toml"


# --------------------------------------------------------------------------- cells


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

    def spec(self) -> ActivationSpec:
        return ActivationSpec(self.activation, self.p, self.scale_policy, self.c)


def cells(config: SweepConfig) -> list[Cell]:
    """Canonical, de-duplicated cells in a fixed order (N innermost).

    Canonicalisation: ρ is 0 for iid/paper and 1 for tied; the paper model (A, B ∈ R^{N×d})
    has no X, so its input model is "iso", its mean 0 and its D is set to d; ``dynamic_causal``
    implies the causal mask; ``d = "D"`` becomes D.
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


def _canonical(config, wm, rho, xm, mu, mask, D, d, a: ActivationSpec, N) -> Cell | None:
    rho = {"iid": 0.0, "tied": 1.0, "paper": 0.0}.get(wm, rho)
    if a.scale == "dynamic_causal":
        mask = "causal"
    if wm == "paper":
        xm, mu, D = "iso", 0.0, d
    if xm == "spiked" and config.spikes > D:
        raise InputError(f"spikes={config.spikes} exceeds D={D}")
    return Cell(wm, float(rho), xm, float(mu), a.kind, a.p, a.scale, a.c, mask, N, D, d, config.dtype)


def model_config(config: SweepConfig, cell: Cell) -> ModelConfig:
    """The sampler's :class:`ModelConfig` for ``cell``."""
    return ModelConfig(
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
    """Name of the cell's part file: hash of everything its stored numbers depend on."""
    return stable_hash(
        {
            "schema": SCHEMA,
            "cell": cell.key(),
            "sampling": sampling_key(config, cell),
            "seed": config.seed,
            "trials": cell_trials(config, cell),
            "with_rows": config.with_rows,
        }
    )[:24]


def resolve_activation(cell: Cell):
    """``(Activation, row_scale (N,) | None, mask)`` realising the cell's scale policy."""
    from empirics.norms import Activation

    N, d = cell.N, cell.d
    if cell.scale_policy == "dynamic_causal":
        row_scale = torch.arange(1, N + 1, dtype=torch.float64).rsqrt()  # (N,) c_i = 1/√i
        return Activation(kind=cell.activation, p=max(cell.p, 1), scale=1.0), row_scale, "causal"
    scale = {"inv_sqrt_n": 1 / math.sqrt(N), "inv_sqrt_d": 1 / math.sqrt(d), "const": cell.c}[cell.scale_policy]
    return Activation(kind=cell.activation, p=max(cell.p, 1), scale=float(scale)), None, cell.mask


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
    (:func:`empirics.stats.design_trials`): equal precision of log mean(‖·‖²) at every N.
    """
    if config.tail_trials_max <= 0 or cell.activation != "poly" or cell.p < 2:
        return config.trials
    from empirics.stats import design_trials

    return design_trials(cell.N, config.N, base=config.trials, cap=max(config.trials, config.tail_trials_max))


def _cell_cost(cell: Cell, trials: int) -> float:
    return float(trials) * cell.N * cell.N * cell.D


# --------------------------------------------------------------------------- one cell


def _to_np(v) -> np.ndarray:
    if isinstance(v, torch.Tensor):
        return v.detach().to("cpu", torch.float64).numpy()
    return np.asarray(v, dtype=np.float64)


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``torch.set_num_threads(n)`` (n = 0: unchanged), then restore.

    One thread per cell is the default: on 2 cores, intra-op parallelism of the many
    medium-sized batched ops here was 2–4× *slower* than one thread (and much worse when
    other processes compete); parallelism comes from running cells in worker processes.
    """
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n:
            torch.set_num_threads(before)


def run_cell(config: SweepConfig, cell: Cell) -> pd.DataFrame:
    """Tidy rows (cell keys, trial, quantity, row, value) of one cell: a pure function of its arguments."""
    with torch_threads(config.threads):
        return _run_cell(config, cell)


def _run_cell(config: SweepConfig, cell: Cell) -> pd.DataFrame:
    from empirics import norms

    dtype = getattr(torch, config.dtype)
    model = model_config(config, cell)
    skey = sampling_key(config, cell)
    act, row_scale, mask = resolve_activation(cell)
    N, D, d, T = cell.N, cell.D, cell.d, cell_trials(config, cell)
    itemsize = torch.empty((), dtype=dtype).element_size()
    batch = trials_per_batch(N, D, T, itemsize=itemsize, budget_bytes=config.memory_gib * 2**30)
    opts = {"chunk": None, "device": config.device, "dtype": dtype, "with_rows": config.with_rows}
    per_q: dict[str, list[np.ndarray]] = {q: [] for q in QUANTITIES}
    rows: list[np.ndarray] = []
    if cell.weight_model == "paper":
        for t in range(T):
            A, B = sample_paper_ab(model, 1, N, d, [trial_generator(config.seed, skey, t)])  # (1, N, d) each
            r = norms.paper_model_norms(A[0], B[0], act, mask, row_scale, **opts)
            for q in QUANTITIES:
                per_q[q].append(_to_np(getattr(r, q)).reshape(1))
            if config.with_rows:
                rows.append(_to_np(r.row_fro).reshape(1, N))
    else:
        pop = None
        if model.inputs != "iso" or model.mean_norm > 0:
            pop = make_population(model, D, trial_generator(config.seed, model.population_key(D)))
        for start in range(0, T, batch):
            idx = range(start, min(T, start + batch))
            X, W = sample_trials(model, N, D, d, len(idx), trial_generators(config.seed, skey, idx), population=pop)
            out = norms.attention_norms_batched(X, W, act, mask, row_scale, **opts)  # X (t, N, D), W (t, D, D)
            for q in QUANTITIES:
                per_q[q].append(_to_np(out[q]).reshape(len(idx)))
            if config.with_rows:
                rows.append(_to_np(out["row_fro"]).reshape(len(idx), N))
    quantity = np.repeat(np.array(QUANTITIES, dtype=object), T)  # (3T,)
    trial = np.tile(np.arange(T), len(QUANTITIES))
    row = np.full(len(quantity), -1)
    value = np.concatenate([np.concatenate(per_q[q]) for q in QUANTITIES])
    if config.with_rows:
        R = np.concatenate(rows)  # (T, N)
        quantity = np.concatenate([quantity, np.full(T * N, "row_fro", dtype=object)])
        trial = np.concatenate([trial, np.repeat(np.arange(T), N)])
        row = np.concatenate([row, np.tile(np.arange(N), T)])
        value = np.concatenate([value, R.ravel()])
    return _frame(cell, quantity, trial, row, value)


def _frame(cell: Cell, quantity: np.ndarray, trial: np.ndarray, row: np.ndarray, value: np.ndarray) -> pd.DataFrame:
    """Long-form rows: the cell's keys repeated, then label, trial, quantity, row, value."""
    n = len(value)
    k = cell.key()
    cols = {}
    for name in KEY_COLS:
        v = k[name]
        if name in ("rho", "mean_norm", "c"):
            cols[name] = np.full(n, np.nan if v is None else float(v), dtype=np.float64)
        elif name in ("p", "N", "D", "d"):
            cols[name] = np.full(n, int(v), dtype=np.int64)
        else:
            cols[name] = np.full(n, v, dtype=object)
    cols["label"] = np.full(n, cell.spec().label(), dtype=object)
    cols["trial"] = trial.astype(np.int64)
    cols["quantity"] = quantity.astype(object)
    cols["row"] = row.astype(np.int64)
    cols["value"] = value.astype(np.float64)
    return pd.DataFrame(cols)


# --------------------------------------------------------------------------- the sweep


def provenance(config: SweepConfig) -> dict:
    """Config, its hash, seed, dtype, device and package versions (deterministic: no clock)."""
    import importlib.metadata as md
    import platform

    import pyarrow
    import scipy

    try:
        sapa_version = md.version("sapa")
    except md.PackageNotFoundError:
        sapa_version = "unknown"
    device = config.device
    if device.startswith("cuda") and torch.cuda.is_available():
        device = f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return {
        "config_hash": config.hash(),
        "config": config.as_dict(),
        "seed": config.seed,
        "dtype": config.dtype,
        "device": device,
        "schema": SCHEMA,
        "versions": {
            "sapa": sapa_version,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "torch": torch.__version__,
            "pandas": pd.__version__,
            "pyarrow": pyarrow.__version__,
        },
    }


def _write_parquet(path: Path, df: pd.DataFrame, meta: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"sapa": json.dumps(meta, sort_keys=True).encode()})
    table = seal_table(table)  # content checksum, verified when the file is read back
    atomic_write(path, lambda tmp: pq.write_table(table, tmp))


def read_metadata(path: str | Path) -> dict:
    """The ``sapa`` provenance dict stored in a Parquet file written by this module."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta.get(b"sapa", b"{}"))


def _part_done(path: Path, cid: str) -> bool:
    """True if ``path`` is a finished part file of cell ``cid`` (absent, damaged or foreign: False)."""
    if not path.is_file():
        return False
    try:
        ours = read_metadata(path).get("cell_id") == cid
    except Exception:  # not Parquet, truncated, not ours: recompute the cell
        return False
    return ours and _part_intact(path)


def _part_intact(path: Path) -> bool:
    """True if the part file's content matches its checksum; else warn (one line) so that it is recomputed."""
    from empirics.integrity import CorruptResult, read_parquet_verified

    try:
        read_parquet_verified(path)
    except CorruptResult as exc:
        warn_recompute(exc)
        return False
    except Exception:  # unreadable beyond its footer: recompute the cell
        return False
    return True


def _read_part(path: Path) -> pd.DataFrame:
    """A finished part file, checksum verified; a file damaged since the start of this run is an error naming it."""
    from empirics.integrity import CorruptResult, read_parquet_verified

    try:
        return read_parquet_verified(path)
    except CorruptResult as exc:
        raise InputError(f"{exc}; run the sweep again to recompute it") from None


def _submit_all(executor, config: SweepConfig, pending: list[Cell]) -> dict:
    """``{future: cell}``: dask tasks via :func:`empirics.distributed.submit_cells`, else ``executor.submit``."""
    if _is_dask(executor):
        from empirics.distributed import submit_cells

        return submit_cells(executor, config, pending)
    return {executor.submit(run_cell, config, c): c for c in pending}


def _is_dask(executor) -> bool:
    from empirics.distributed import is_dask_client  # imports no dask

    return is_dask_client(executor)


def _as_completed(futures: list, executor=None):
    """Futures in the order they finish: concurrent.futures, dask (``distributed.as_completed``), else as given."""
    if _is_dask(executor):
        from empirics.distributed import as_completed

        return as_completed(futures, executor)
    if all(isinstance(f, cf.Future) for f in futures):
        return cf.as_completed(futures)
    return iter(futures)


def _result(fut, cell: Cell, executor) -> pd.DataFrame:
    if _is_dask(executor):
        from empirics.distributed import cell_result

        return cell_result(fut, cell)
    return fut.result()


STALE_TMP_S = 600.0  # a temporary part file this old was left by a killed process


def _remove_stale_tmp(parts: Path) -> None:
    """Delete temporary part files (``.<name>.*.tmp.parquet``) left by a process killed mid-write.

    Only files untouched for :data:`STALE_TMP_S` go, so a concurrent writer is never hit.
    Readers never see them anyway: part files are found by exact name.
    """
    import time

    if not parts.is_dir():
        return
    now = time.time()
    for tmp in parts.glob(".*.tmp.parquet"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > STALE_TMP_S:
                tmp.unlink()


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
    if need > config.memory_gib * 2**30:
        raise InputError(
            f"cell N={_big(big.N)}, D={_big(big.D)} needs ≈{_gib(need)} GiB for one trial, more than "
            f"memory_gib={config.memory_gib:g}; raise memory_gib or shrink N, D"
        )


def _progress_bar(total: float, initial: float, n_cells: int, n_done: int, progress: bool | str):
    from empirics.progress import progress_bar

    bar = progress_bar(total, initial, desc="sweep", progress=progress,
                       bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}] {postfix}")
    bar.set_postfix_str(f"cells {n_done}/{n_cells}")
    return bar


def run_sweep(
    config: SweepConfig | str | Path,
    out_dir: str | Path,
    *,
    progress: bool | str = True,
    executor=None,
    order: Sequence[Cell] | None = None,
) -> pd.DataFrame:
    """Run (or resume) a sweep into ``out_dir``; return the assembled tidy DataFrame.

    Args:
      config: a :class:`SweepConfig` or the path of a TOML config.
      out_dir: ``cells/<cell_id>.parquet`` per finished cell, then ``results.parquet`` and
        ``provenance.json``.
      progress: ``True`` shows a tqdm bar (ETA, cost-weighted) on stderr if it is a TTY, else periodic lines;
        ``"force"`` always; ``False`` never.
      executor: ``None`` runs cells serially here; otherwise anything with
        ``submit(fn, *args) -> future`` (``concurrent.futures``) gets ``submit(run_cell, config,
        cell)``, and a ``dask.distributed.Client`` gets one task per cell
        (:func:`empirics.distributed.submit_cells`); part files are written here as results
        arrive, in completion order.
      order: run the pending cells in this order (a permutation of ``cells(config)``);
        numbers do not depend on it.
    """
    if not isinstance(config, SweepConfig):
        config = load_config(config)
    out = Path(out_dir)
    parts = out / "cells"
    all_cells = cells(config)
    ids = {c: cell_id(config, c) for c in all_cells}
    if order is not None:
        if sorted(str(ids.get(c)) for c in order) != sorted(ids.values()):
            raise InputError("order must be a permutation of cells(config)")
        run_order = list(order)
    else:
        run_order = all_cells
    check_memory(config, all_cells)
    prov = provenance(config)
    try:
        parts.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the results directory {parts}: {exc.strerror or exc}") from None
    _remove_stale_tmp(parts)
    done = {c for c in all_cells if _part_done(parts / f"{ids[c]}.parquet", ids[c])}
    pending = [c for c in run_order if c not in done]
    cost = {c: _cell_cost(c, cell_trials(config, c)) for c in all_cells}
    bar = _progress_bar(sum(cost.values()), sum(cost[c] for c in done), len(all_cells), len(done), progress)
    if _is_dask(executor) and pending:
        from empirics.distributed import describe

        bar.set_description_str(f"sweep ({describe(executor)})", refresh=False)
    n_done = len(done)

    def finish(cell: Cell, df: pd.DataFrame) -> None:
        nonlocal n_done
        meta = {"cell_id": ids[cell], "cell": cell.key(), **{k: prov[k] for k in ("config_hash", "seed", "dtype", "device", "schema", "versions")}}
        _write_parquet(parts / f"{ids[cell]}.parquet", df, meta)
        n_done += 1
        bar.set_postfix_str(f"cells {n_done}/{len(all_cells)}", refresh=False)
        bar.update(cost[cell])

    try:
        if executor is None:
            for cell in pending:
                finish(cell, run_cell(config, cell))
        else:
            futures = _submit_all(executor, config, pending)
            try:
                for fut in _as_completed(list(futures), executor):  # stream: store each cell as it finishes
                    cell = futures.pop(fut)  # drop our reference: dask frees the result on the cluster
                    finish(cell, _result(fut, cell, executor))
            except BaseException:
                for fut in futures:  # the cells still pending
                    fut.cancel()
                raise
    finally:
        bar.close()
    frames = [_read_part(parts / f"{ids[c]}.parquet") for c in all_cells]
    df = pd.concat(frames, ignore_index=True)
    _write_parquet(out / "results.parquet", df, {**prov, "cells": len(all_cells)})
    atomic_write_json(out / "provenance.json", {**prov, "cells": len(all_cells), "rows": len(df)})
    return df


# --------------------------------------------------------------------------- analysis


def summarise(df: pd.DataFrame, quantiles: Sequence[float] = QUANTILES) -> pd.DataFrame:
    """Per (cell, quantity, row): n, mean, std, se, quantiles, and mean/se of the squared values."""
    keys = [c for c in (*KEY_COLS, "label") if c in df.columns] + ["quantity", "row"]
    g = df.assign(value_sq=df["value"] ** 2).groupby(keys, dropna=False, sort=False)
    agg = g.agg(
        n=("value", "size"),
        mean=("value", "mean"),
        std=("value", "std"),
        mean_sq=("value_sq", "mean"),
        std_sq=("value_sq", "std"),
    )
    agg["se"] = agg["std"] / np.sqrt(agg["n"])
    agg["se_sq"] = agg["std_sq"] / np.sqrt(agg["n"])
    qs = g["value"].quantile(list(quantiles)).unstack()
    qs.columns = [f"q{round(100 * q):02d}" for q in quantiles]
    return agg.join(qs).reset_index()


def fit_exponents(
    df: pd.DataFrame,
    quantities: Iterable[str] = ("fro", "jac_fro"),
    *,
    level: float = 0.9,
    n_boot: int = 1000,
    seed: int = 0,
    N_min: int = 1,
) -> pd.DataFrame:
    """Growth exponent of mean(value) vs N per series (all cell keys but N) and quantity.

    Each series gets its own bootstrap seed ``SeedSequence(seed, sha256(series key))``;
    columns: series keys, quantity, slope, ci_lo, ci_hi, regime, local_slopes (JSON), evidence (JSON).
    """
    keys = [c for c in (*KEY_COLS, "label") if c in df.columns and c != "N"] + ["quantity"]
    sel = df[df["quantity"].isin(list(quantities)) & (df["row"] == -1) & (df["N"] >= N_min)]
    out = []
    for gkey, g in sel.groupby(keys, dropna=False, sort=False):
        Ns = sorted(g["N"].unique())
        if len(Ns) < 2:
            continue
        samples = [g.loc[g["N"] == n, "value"].to_numpy() for n in Ns]
        if any(np.any(s <= 0) for s in samples):
            continue
        key = {k: (None if isinstance(v, float) and math.isnan(v) else (v.item() if hasattr(v, "item") else v)) for k, v in zip(keys, gkey)}
        fit = fit_exponent(Ns, samples, level=level, n_boot=n_boot, seed=seed_sequence(seed, key))
        regime, evidence = classify_regime(fit)
        out.append(
            {
                **dict(zip(keys, gkey)),
                "slope": fit.slope,
                "ci_lo": fit.ci[0],
                "ci_hi": fit.ci[1],
                "level": level,
                "regime": regime,
                "N_min": int(Ns[0]),
                "N_max": int(Ns[-1]),
                "last_local_slope": fit.local[-1],
                "local_slopes": json.dumps([round(s, 4) for s in fit.local]),
                "evidence": json.dumps(evidence),
            }
        )
    return pd.DataFrame(out)


def attach_exact(summary: pd.DataFrame, config: SweepConfig | None = None) -> pd.DataFrame:
    """Add ``expected_sq`` = exact E‖·‖² (``theory.moments``) and ``z`` = (mean_sq − E)/se_sq.

    Exact moments exist for polynomial cells without mask or row scale, isotropic zero-mean
    inputs with σ_x = 1; weights have std σ_w (default 1/√D), the paper model σ_ab; and
    E‖c φ‖² = c² E‖φ‖² with c = 1/√N, 1/√d or the constant. Other rows get NaN.
    """
    from theory.moments import exact_moments

    sigma_w = None if config is None else config.sigma_w
    sigma_ab = 1.0 if config is None else config.sigma_ab
    if config is not None and config.sigma_x != 1.0:
        raise InputError("attach_exact supports sigma_x = 1 only")
    out = summary.copy()
    out["expected_sq"] = np.nan
    cache: dict = {}
    for i, r in out.iterrows():
        if r["quantity"] not in ("fro", "jac_fro") or r["row"] != -1 or r["activation"] != "poly":
            continue
        if r["mask"] != "none" or r["scale_policy"] == "dynamic_causal" or r["x_model"] != "iso" or r["mean_norm"] != 0:
            continue
        p, wm, N, D, d = int(r["p"]), r["weight_model"], int(r["N"]), int(r["D"]), int(r["d"])
        sigma = sigma_ab if wm == "paper" else (sigma_w if sigma_w is not None else 1 / math.sqrt(D))
        key = (p, wm, float(r["rho"]), N, D, d, sigma)
        if key not in cache:
            cache[key] = exact_moments(p, wm, N, D, d, rho=key[2], sigma=sigma)
        m = cache[key]
        c = {"inv_sqrt_n": 1 / math.sqrt(N), "inv_sqrt_d": 1 / math.sqrt(d), "const": r["c"]}[r["scale_policy"]]
        e = m.expected_fro2 if r["quantity"] == "fro" else m.expected_jac_fro2
        out.at[i, "expected_sq"] = float(e) * c * c
    out["z"] = (out["mean_sq"] - out["expected_sq"]) / out["se_sq"]
    return out


def softmax_typical_norm(N_grid: Sequence[int], d: int, trials: int, seed: int = 0, *, chunk: int = 1024) -> pd.DataFrame:
    """``‖softmax(A Bᵀ/√d)‖_F`` for A, B (N, d) i.i.d. N(0, 1) vs the bound √N (Thm 4.1).

    Returns rows (N, trial, fro, bound = √N, ratio = fro/√N). Always 1 ≤ ‖P‖_F ≤ √N; the
    bound is reached only by one-hot rows.
    """
    d, trials = positive_int("d", d), positive_int("trials", trials)
    rows = []
    for N in N_grid:
        N = positive_int("N", N)
        for t in range(trials):
            g = trial_generator(seed, {"softmax_typical": SCHEMA, "N": N, "d": d}, t)
            A = torch.randn(N, d, generator=g, dtype=torch.float64)
            B = torch.randn(N, d, generator=g, dtype=torch.float64)
            sq = 0.0
            for s in range(0, N, chunk):
                P = torch.softmax(A[s : s + chunk] @ B.T / math.sqrt(d), dim=-1)  # (c, d)@(d, N)
                sq += float((P * P).sum())
            fro = math.sqrt(sq)
            rows.append({"N": N, "trial": t, "fro": fro, "bound": math.sqrt(N), "ratio": fro / math.sqrt(N)})
    return pd.DataFrame(rows)


def with_overrides(config: SweepConfig, **changes) -> SweepConfig:
    """``dataclasses.replace`` re-validated through :func:`config_from_dict`."""
    return config_from_dict(replace(config, **changes).as_dict())
