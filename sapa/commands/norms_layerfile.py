"""A layer's weights from a ``.safetensors`` file (``sapa norms --safetensors``): dtype, rank, every shape across the
tensors and the total size are checked from the header before a byte of data is read.

A file can declare a W_Q of 8·10⁸ float32 (3.2 GB, sparse on disk) beside a W_K that does not match it; loading W_Q
first and finding the mismatch after reached 6.4 GB. So every tensor of the layer is looked up and checked from the
header alone: its dtype is real (as ``.npy`` inputs: :data:`REAL_DTYPES`), it is a matrix, W_Q, W_K and W_V have the
D rows X has, the shapes make ``heads`` heads (:func:`sapa.empirics.kernels.expr_norms.check_qk_shapes`), and what the
layer takes once loaded as float64 (the file's own bytes, the float64 copy, a transposed copy for ``nn.Linear``
layouts) is within :data:`sapa.empirics.kernels.expr_norms.MAX_BYTES`, the cap of a norms request. Only then is a tensor
read. :func:`check_npy_layer` applies the same checks to ``--wq/--wk/--wv/--wo`` ``.npy`` headers.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from sapa.common.validate import InputError

__all__ = ["REAL_DTYPES", "load_layer_file", "check_layer", "check_npy_layer"]

# suffixes of a layer's tensors in a .safetensors file: (our name, transpose?) — plain names are (D, H·d) as
# sapa takes them, BERT's nn.Linear weights are (out, in)
_SUFFIXES = {
    "wq": (("wq", False), ("attention.self.query.weight", True)),
    "wk": (("wk", False), ("attention.self.key.weight", True)),
    "wv": (("wv", False), ("attention.self.value.weight", True)),
    "wo": (("wo", False), ("attention.output.dense.weight", True)),
}
REAL_DTYPES = ("F64", "F32", "F16", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8")  # safetensors' names
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1}
_DTYPE_WORDS = {"BOOL": "boolean", "C64": "complex", "C128": "complex", "BF16": "bfloat16, which numpy cannot hold"}


def _check_tensor(sl, key: str, path: Path) -> tuple[int, ...]:
    """A weight's dtype (real numbers only, as ``.npy`` inputs) and rank (a matrix) from the header; its shape."""
    dtype, shape = sl.get_dtype(), tuple(int(n) for n in sl.get_shape())
    if dtype not in REAL_DTYPES:
        word = _DTYPE_WORDS.get(dtype, "not a real number type")
        raise InputError(f"--safetensors {path}: tensor {key} has dtype {dtype} ({word}); give integer or floating-point "
                         "weights (float32 or float64)")
    if len(shape) != 2:
        raise InputError(f"--safetensors {path}: tensor {key} has shape {shape}; a weight is a matrix")
    return shape


def check_layer(shapes: dict[str, tuple[int, int]], nbytes: int, D: int | None, heads: int, where: str,
                labels: dict[str, str] | None = None) -> None:
    """InputError (naming ``where``, and a tensor by ``labels[name]``) unless the (D, ·)-layout ``shapes`` of wq,
    wk[, wv, wo] agree with X's ``D`` and make ``heads`` heads, and the ``nbytes`` they take once loaded fit the cap
    of a norms request."""
    from sapa.empirics.kernels.expr_norms import MAX_BYTES, check_qk_shapes

    for name in ("wq", "wk", "wv"):
        if D is not None and name in shapes and shapes[name][0] != D:
            raise InputError(f"{where}: {(labels or {}).get(name, name)} has D = {shapes[name][0]} rows in the (D, ·) "
                             f"layout but X has D = {D} columns")
    try:
        check_qk_shapes(shapes["wq"], shapes["wk"], shapes.get("wv"), shapes.get("wo"), heads)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    if nbytes > MAX_BYTES:
        dims = ", ".join(f"{n} {s[0]:,}×{s[1]:,}" for n, s in shapes.items())
        raise InputError(f"{where}: the layer's weights ({dims}) take {nbytes / 2**30:.3g} GiB once loaded as float64, "
                         f"more than the {MAX_BYTES / 2**30:.0f} GiB a norms request may use")


def _loaded_bytes(shape: tuple[int, ...], itemsize: int, transpose: bool) -> int:
    """The file's bytes, the float64 copy, a transposed copy (``nn.Linear`` layout) and the split into heads."""
    return math.prod(shape) * (itemsize + 8 * (2 + transpose))


def check_npy_layer(paths: dict, heads: int) -> dict[str, tuple[int, int]]:
    """:func:`check_layer` (X's D aside: the caller says which file disagrees with --x) on the headers of
    ``--wq/--wk[/--wv/--wo]`` ``.npy`` files (``{name: path}``), before any is loaded; their shapes. A header that is
    not a matrix's is left to the loading, which names it."""
    from sapa.npyfile import read_npy_header

    shapes, nbytes = {}, 0
    for name, path in paths.items():
        shape, _, dtype, _ = read_npy_header(Path(path), f"--{name}")
        if len(shape) != 2:
            return {}
        shapes[name] = shape
        nbytes += _loaded_bytes(shape, dtype.itemsize, False)
    check_layer(shapes, nbytes, None, heads, "/".join(f"--{n}" for n in shapes))
    return shapes


def load_layer_file(path: Path, prefix: str = "", D: int | None = None, heads: int = 1) -> dict:
    """{wq, wk[, wv, wo]} (float64, (D, ·) layout) from a .safetensors file, by name suffix under ``prefix``; with
    ``D``, W_Q, W_K and W_V must have D rows. Every check (module docstring) is made on the header, across the
    tensors, before a tensor is loaded."""
    try:
        from safetensors import safe_open
    except ImportError:
        raise InputError("--safetensors needs the package 'safetensors' (pip install safetensors)") from None
    path = Path(path)
    if not path.is_file():
        raise InputError(f"--safetensors: file not found: {path}")
    try:
        with safe_open(str(path), framework="np") as fh:
            keys = [k for k in fh.keys() if k.startswith(prefix)]
            found = {}  # name -> (key, transpose, shape in the file)
            for name, options in _SUFFIXES.items():
                for suffix, transpose in options:
                    hits = [k for k in keys if k == prefix + suffix or k.endswith("." + suffix) or k == suffix]
                    if len(hits) > 1:
                        raise InputError(f"--safetensors: {len(hits)} tensors end in {suffix!r} ({hits[0]}, {hits[1]}, ...): "
                                         "give --prefix (e.g. encoder.layer.0.)")
                    if hits:
                        sl = fh.get_slice(hits[0])
                        found[name] = (hits[0], transpose, _check_tensor(sl, hits[0], path), sl.get_dtype())
                        break
            if "wq" not in found or "wk" not in found:
                raise InputError(f"--safetensors {path}: no query/key weights (names ending in wq/wk or "
                                 "attention.self.query.weight/key.weight"
                                 + (f" under prefix {prefix!r}" if prefix else "") + ")")
            shapes = {n: (s[::-1] if t else s) for n, (_, t, s, _) in found.items()}
            nbytes = sum(_loaded_bytes(s, _ITEMSIZE[dt], t) for _, t, s, dt in found.values())
            check_layer(shapes, nbytes, D, heads, f"--safetensors {path}",  # before a byte of data is read
                        {n: f"tensor {key} ({n})" for n, (key, *_) in found.items()})
            out = {}
            for name, (key, transpose, _, _) in found.items():
                a = np.asarray(fh.get_tensor(key), dtype=np.float64)
                out[name] = a.T.copy() if transpose else a
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt header, an unsupported dtype (bf16 in numpy), ...
        raise InputError(f"--safetensors {path}: cannot read ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
                         ) from None
    return out
