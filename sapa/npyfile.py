"""Loading user-given ``.npy`` files safely: the header is read and checked before any data is.

``sapa norms --x/--w`` and ``sapa exact --w/--sigma-x`` read matrices that users pass. A file
can be empty, truncated, or claim a shape of ~93 GiB in a 100-byte file; its dtype can be text,
dates, a structured record or a pickled object. Each of these is refused with one line
(:class:`sapa.common.validate.InputError`, exit 2) before memory is allocated:

* the magic string and header are parsed with ``numpy.lib.format`` (header size capped);
* the dtype must be real numeric: integer (signed or unsigned) or floating. **bool is refused**
  (a mask passed where a matrix is meant is a mistake, and True/False are not magnitudes);
  complex, strings, bytes, datetime64, timedelta64, structured/void and object dtypes are refused;
* shape × itemsize must fit in the bytes after the header (Python integers: no overflow);
* only then is the array loaded, with ``allow_pickle=False``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from numpy.lib import format as npf

from sapa.common.validate import InputError

try:  # numpy >= 2 keeps the private reader (needed for version-3.0 headers) in _format_impl
    from numpy.lib._format_impl import _read_array_header
except ImportError:  # pragma: no cover - numpy 1.x
    _read_array_header = npf._read_array_header

__all__ = ["NUMERIC_KINDS", "read_npy_header", "check_numeric_dtype", "load_npy", "square_matrix",
           "load_square_matrix"]

NUMERIC_KINDS = {"i": "signed integer", "u": "unsigned integer", "f": "floating"}
_REFUSED_KINDS = {"b": "boolean", "c": "complex", "U": "string", "S": "bytes", "M": "datetime64",
                  "m": "timedelta64", "V": "structured/void", "O": "object"}


def read_npy_header(path: Path, name: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran_order, dtype, data offset) from the header of ``path``; InputError if it is not a .npy header."""
    try:
        with open(path, "rb") as f:
            version = npf.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = npf.read_array_header_1_0(f)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = npf.read_array_header_2_0(f) if version == (2, 0) else \
                    _read_array_header(f, version)  # 3.0 differs from 2.0 only by a UTF-8 header
            else:  # pragma: no cover - read_magic refuses other versions already
                raise ValueError(f"unsupported .npy version {version}")
            return tuple(int(n) for n in shape), bool(fortran), dtype, f.tell()
    except (ValueError, EOFError, SyntaxError, TypeError) as exc:
        what = "is empty" if path.stat().st_size == 0 else f"has no valid .npy header ({' '.join(str(exc).split())})"
        raise InputError(f"{name}: {path} {what}") from None


def check_numeric_dtype(name: str, dtype: np.dtype) -> None:
    """InputError unless ``dtype`` is a plain integer or floating dtype (bool refused, see module docstring)."""
    if dtype.fields is not None or dtype.subdtype is not None:
        text = str(dtype)
        text = text if len(text) <= 80 else text[:77] + "..."  # a nested dtype's text is kilobytes long
        raise InputError(f"{name}: a structured array (dtype {text}) is not a matrix of numbers")
    if dtype.kind not in NUMERIC_KINDS:
        kind = _REFUSED_KINDS.get(dtype.kind, dtype.kind)
        raise InputError(f"{name}: dtype {dtype} ({kind}) is not numeric; give an integer or floating-point array")


def _check_size(name: str, path: Path, shape: tuple[int, ...], dtype: np.dtype, offset: int) -> None:
    """InputError unless prod(shape)·itemsize bytes follow the header (exact integer arithmetic)."""
    need = math.prod(shape) * dtype.itemsize
    have = path.stat().st_size - offset
    if need > have:
        raise InputError(f"{name}: {path} claims shape {shape} of {dtype} ({need:,} bytes) "
                         f"but holds only {max(have, 0):,} bytes of data (truncated or forged header)")


def load_npy(path: Path, name: str) -> np.ndarray:
    """The numeric array stored in ``path``: header, dtype and size checked first; one-line InputError otherwise."""
    path = Path(path)
    if not path.is_file():
        from sapa.common.readfile import require_regular

        require_regular(path, name, limit=2**62)  # says "file not found" or what it is instead (a FIFO, a device)
    shape, _, dtype, offset = read_npy_header(path, name)
    check_numeric_dtype(f"{name}: {path}", dtype)
    _check_size(name, path, shape, dtype, offset)
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{name}: cannot read {path} as .npy ({' '.join(str(exc).split())})") from None
    except MemoryError:
        raise InputError(f"{name}: {path} holds {shape} of {dtype}, more than fits in memory") from None


def square_matrix(name: str, a) -> np.ndarray:
    """A finite square float64 matrix from a loaded array, or InputError (one line naming ``name``)."""
    from sapa.common.validate import finite_matrix

    arr = finite_matrix(name, a, (None, None))
    if arr.shape[0] != arr.shape[1]:
        raise InputError(f"{name} must be square, got shape {arr.shape}")
    return arr


def load_square_matrix(path: Path, name: str) -> np.ndarray:
    """The finite square float64 matrix stored in ``path`` (``sapa exact`` / ``sapa audit``: --w, --sigma-x)."""
    return square_matrix(name, load_npy(path, name))
