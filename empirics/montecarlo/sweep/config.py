"""Sweep configuration: grids over N, D, d, weight model, ρ, mask, input model and activations.

A TOML file (:func:`load_config`) or a dict (:func:`config_from_dict`) becomes a frozen
:class:`SweepConfig`; every key is validated, an unknown one raises :class:`InputError` naming it.

This module is the sweep's stored format (TOML keys, :meth:`SweepConfig.as_dict`/``hash``, the cells' columns
``activation, p, scale_policy, c``): an activation is held as that plain 4-tuple, never as an object, so the
hashes and part-file ids of a config do not depend on any class. Three spellings of an ``[[activation]]`` table:

* ``kind = "softmax" | "poly"`` with ``p``, ``scale`` and ``c``: ``softmax(τ S)`` or ``c·S^p``, the coefficient
  set by a scale policy: ``inv_sqrt_n`` c = 1/√N (the paper); ``const`` a given c (the paper's x/16, x³/1 rows);
  ``inv_sqrt_d`` c = 1/√d (softmax's default τ); ``inv_n`` c = 1/N; ``inv_sqrt_i`` row scale c_i = 1/√i under
  the causal mask (row i sees i tokens). The names and coefficients are :mod:`sapa.theory.families`'s; a stored
  config's old ``dynamic_causal`` still parses, as ``inv_sqrt_i``.
* ``family = "relu_N"`` (or a list): rows of :data:`sapa.theory.families.FAMILY_TABLE`, run as written on the
  sweep's logit S. A row with an exact kernel becomes the ``kind`` cell it is (``x3_sqrtN`` → poly, 3,
  inv_sqrt_n; ``x_16`` → poly, 1, const, 0.0625; ``softmax`` → softmax(S), i.e. softmax, const, c = 1: the
  attention convention softmax(S/√d) is ``kind = "softmax"``), so it shares that cell's part file; any other row
  is the cell ``(id, 0, its rule, None)`` (``relu_N``, 0, inv_n), computed from its expression. A row with a free
  parameter (x/α*, softmax(S/τ)) needs a number: write it as ``expr``.
* ``expr = "x/(1+Abs(x))"`` (or a list), optional ``normalize = "row"``: any φ(x, N, i, j)
  :func:`sapa.theory.activation.parse_activation` accepts, the cell ``("expr:<text>" | "row:<text>", 0, "expr",
  None)``. Family and expression cells run in float64.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import torch

from sapa.common.validate import InputError, choice, positive_float, positive_int, unit_interval
from sapa.empirics.montecarlo.samplers import INPUT_MODELS, WEIGHT_MODELS
from sapa.common.seeds import stable_hash
from sapa.theory import families as F

ACTIVATIONS = ("softmax", "poly")  # the exact kernels' kinds (sapa.empirics.kernels.norms)
POLICIES = ("inv_sqrt_n", "const", "inv_sqrt_d", "inv_sqrt_i", "inv_n")  # sapa.theory.families rule codes
SOFTMAX_POLICIES = ("inv_sqrt_d", "const")
MASKS = ("none", "causal")
DTYPES = ("float64", "float32")
EXPR, ROW = "expr:", "row:"  # activation prefixes of an expression cell (element-wise, row-normalised)
EXPR_RULE = "expr"  # scale_policy of an expression cell: the scale sits inside φ(x, N, i, j)

# One activation as stored: (activation, p, scale_policy, c), the columns of its cells.
Act = tuple  # tuple[str, int, str, float | None]


def is_kernel(activation: str) -> bool:
    """Whether cells of this ``activation`` column run on the exact kernels (softmax, poly)."""
    return activation in ACTIVATIONS


def expression(activation: str) -> tuple[str, str, tuple[str, ...]] | None:
    """``(text, normalize, masks)`` of an expression or table-family ``activation`` column; None for a kernel kind.

    >>> expression("relu_N"), expression("row:x**2")
    (('Max(x, 0)/N', 'none', ('none', 'causal')), ('x**2', 'row', ('none', 'causal')))
    """
    if is_kernel(activation):
        return None
    for prefix, normalize in ((EXPR, "none"), (ROW, "row")):
        if activation.startswith(prefix):
            return activation[len(prefix):], normalize, F.MASKS
    f = F.family(activation)
    return f.expr, f.normalize, f.masks


def label(a: Act) -> str:
    """Readable name (the rows' ``label`` column): ``softmax``, ``x^3/sqrt(N)``, ``0.0625*x^1``, ``x^1/sqrt(i)``,
    a family's label (``ReLU(x)/N``), an expression's text (``row-normalised x**4`` when row-normalised)."""
    kind, p, scale, c = a
    if kind == "softmax":
        return "softmax" if scale == F.INV_SQRT_D else f"softmax(tau={c:g})"
    if kind == "poly":
        if scale == F.CONST:
            return f"{c:g}*x^{p}"
        return f"x^{p}/" + {F.INV_SQRT_N: "sqrt(N)", F.INV_SQRT_D: "sqrt(d)", F.INV_SQRT_I: "sqrt(i)", F.INV_N: "N"}[scale]
    if kind.startswith(EXPR):
        return kind[len(EXPR):]
    if kind.startswith(ROW):
        return "row-normalised " + kind[len(ROW):]
    return F.family(kind).label


def cell_columns(f: F.Family) -> Act:
    """The stored columns of a table family as written (no free parameter): its kernel cell or ``(id, 0, rule, None)``.

    >>> cell_columns(F.family("x3_sqrtN")), cell_columns(F.family("x3")), cell_columns(F.family("relu_N"))
    (('poly', 3, 'inv_sqrt_n', None), ('poly', 3, 'const', 1.0), ('relu_N', 0, 'inv_n', None))
    """
    if f.params:
        raise InputError(f"activation family {f.id} ({f.label}) has the free parameter {', '.join(f.params)}: "
                         f"write its expression {f.expr!r} with a number in its place as expr = \"...\"")
    if f.kernel == "softmax":
        return ("softmax", 0, F.CONST, 1.0)  # softmax(S) as written; softmax(S/√d) is kind = "softmax"
    if f.kernel == "poly":
        if f.const is not None:
            return ("poly", f.p, F.CONST, f.const)
        return ("poly", f.p, f.rule, None)
    return (f.id, 0, f.rule, None)


@dataclass(frozen=True)
class SweepConfig:
    """A Monte Carlo sweep: grids (tuples) and per-sweep settings."""

    N: tuple[int, ...]  # tokens
    D: tuple[int, ...]  # model width
    activations: tuple[Act, ...]  # (activation, p, scale_policy, c) each, see the module docstring
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


def _activation_entry(a: Act) -> dict:
    """The TOML table of one activation: ``kind``, ``scale`` (``p`` only for poly, ``c`` only for const), or
    ``family`` / ``expr`` (+ ``normalize = "row"``) for the cells computed from an expression."""
    kind, p, scale, c = a
    if kind.startswith(EXPR):
        return {"expr": kind[len(EXPR):]}
    if kind.startswith(ROW):
        return {"expr": kind[len(ROW):], "normalize": "row"}
    if not is_kernel(kind):
        return {"family": kind}
    e: dict = {"kind": kind, "scale": scale}
    if kind == "poly":
        e["p"] = p
    if c is not None:
        e["c"] = c
    return e


_GRID = {"N", "D", "d", "weight_model", "rho", "mask", "x_model", "mean_norm"}
_SCALARS = {f.name for f in fields(SweepConfig)} - _GRID - {"activations"}
_ACT_KEYS = {"kind", "p", "scale", "c"}
_FAMILY_KEYS = {"family"}
_EXPR_KEYS = {"expr", "normalize"}


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


def _policy(name: str, v: object, options: tuple[str, ...]) -> str:
    """A scale rule of ``options`` under its one name (``dynamic_causal`` → ``inv_sqrt_i``, :mod:`sapa.theory.families`)."""
    return _str(name, F.ALIASES.get(v, v) if isinstance(v, str) else v, options)


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


def _parse_family(where: str, entry: dict) -> list[Act]:
    out = []
    for k, v in enumerate(_as_list(f"{where}.family", entry["family"])):
        if not isinstance(v, str):
            raise InputError(f"{where}.family[{k}] must be a family id (one of {', '.join(F.FAMILIES)}), got {v!r}")
        if v not in F.FAMILIES:
            raise InputError(f"{where}.family[{k}]: unknown activation family {v!r}; known: {', '.join(F.FAMILIES)}")
        out.append(cell_columns(F.FAMILIES[v]))
    return out


def _parse_expr(where: str, entry: dict) -> list[Act]:
    from sapa.theory.activation import parse_activation

    normalize = entry.get("normalize", "none")
    if not isinstance(normalize, str):
        raise InputError(f"{where}.normalize must be 'none' or 'row', got {normalize!r}")
    normalize = choice(f"{where}.normalize", normalize, ("none", "row"))
    out = []
    for k, text in enumerate(_as_list(f"{where}.expr", entry["expr"])):
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{where}.expr[{k}] must be an expression φ(x, N, i, j) as text, got {text!r}")
        parse_activation(text, normalize)  # one-line InputError for an expression the audit refuses
        out.append(((ROW if normalize == "row" else EXPR) + text, 0, EXPR_RULE, None))
    return out


def _parse_activation(i: int, entry: object) -> list[Act]:
    where = f"activation[{i}]"
    allowed = _ACT_KEYS | _FAMILY_KEYS | _EXPR_KEYS
    if not isinstance(entry, dict):
        raise InputError(f"{where} must be a table with keys {sorted(_ACT_KEYS)}, 'family' or 'expr', got {entry!r}")
    for key in entry:
        if key not in allowed:
            raise InputError(f"unknown config key {where}.{key!r} (allowed: {', '.join(sorted(allowed))})")
    spellings = [s for s in ("kind", "family", "expr") if s in entry]
    if len(spellings) > 1:
        raise InputError(f"{where} has {' and '.join(spellings)}: give one of kind, family, expr")
    if "family" in entry or "expr" in entry:
        own = _FAMILY_KEYS if "family" in entry else _EXPR_KEYS
        extra = sorted(set(entry) - own)
        if extra:
            raise InputError(f"{where}.{extra[0]} is not used with {spellings[0]!r}; remove it")
        return _parse_family(where, entry) if "family" in entry else _parse_expr(where, entry)
    if "normalize" in entry:
        raise InputError(f"{where}.normalize is only used with 'expr'")
    if "kind" not in entry:
        raise InputError(f"{where} needs 'kind' (softmax or poly), 'family' or 'expr'")
    kind = _str(f"{where}.kind", entry["kind"], ACTIVATIONS)
    c = entry.get("c")
    if c is not None:
        c = positive_float(f"{where}.c", c)
    if kind == "softmax":
        if "p" in entry:
            raise InputError(f"{where}.p is not used by softmax; remove it")
        policies = [_policy(f"{where}.scale", s, SOFTMAX_POLICIES) for s in _as_list(f"{where}.scale", entry.get("scale", F.INV_SQRT_D))]
        degrees = [0]
    else:
        policies = [_policy(f"{where}.scale", s, POLICIES) for s in _as_list(f"{where}.scale", entry.get("scale", F.INV_SQRT_N))]
        if "p" not in entry:
            raise InputError(f"{where} (poly) needs 'p'")
        degrees = [positive_int(f"{where}.p", p) for p in _as_list(f"{where}.p", entry["p"])]
    if F.CONST in policies and c is None:
        raise InputError(f"{where}: scale 'const' needs 'c'")
    if c is not None and F.CONST not in policies:
        raise InputError(f"{where}.c is only used with scale 'const'")
    return [(kind, p, s, (c if s == F.CONST else None)) for p in degrees for s in policies]


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
    if raw.get("dtype", "float64") != "float64" and not all(is_kernel(a[0]) for a in kw["activations"]):
        raise InputError("family and expr activations (computed from their expression) run in float64 only: "
                         "set dtype = \"float64\"")
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
    from sapa.common.readfile import read_regular_text

    path = Path(path)
    if not path.is_file():
        raise InputError(f"config file not found: {path}")
    try:
        raw = tomllib.loads(read_regular_text(path, "config", limit=2**20))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: invalid TOML ({exc})") from None
    return config_from_dict(raw)


def builtin_config(name: str) -> Path:
    """Path of a bundled config: ``quick`` or ``full``."""
    if name not in ("quick", "full"):
        raise InputError(f"no config file {name!r} and no built-in config of that name (built-ins: quick, full)")
    return Path(__file__).parents[2] / "configs" / f"{name}.toml"


def with_overrides(config: SweepConfig, **changes) -> SweepConfig:
    """``dataclasses.replace`` re-validated through :func:`config_from_dict`."""
    return config_from_dict(replace(config, **changes).as_dict())
