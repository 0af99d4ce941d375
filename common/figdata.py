"""A figure's data as plain JSON (DataFrames as Parquet, arrays as .npy, both base64): safe to read from anyone.

``sapa verify`` stores what each figure's ``compute()`` returned under ``OUT/data/NAME.json`` so that
``sapa figures`` redraws it without recomputing. Results folders are exchanged between people, so
reading one must never run code: no pickle, no ``allow_pickle=True``. The format needs nothing of
sapa to read (``json``, ``pyarrow``, ``numpy``)::

    {"format": "sapa-figdata/1", "stem": str, "sha256": hex of the canonical "data", "data": TREE}

TREE is JSON, with one-key objects as tags for what JSON lacks:
``{"__tuple__": [...]}``, ``{"__dict__": [[key, value], ...]}`` (a dict with a non-string key),
``{"__float__": "nan" | "inf" | "-inf"}``, ``{"__ndarray__": base64 .npy}`` (numeric and bool
dtypes only) and ``{"__dataframe__": base64 Parquet}``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
from pathlib import Path

FORMAT = "sapa-figdata/1"
TAGS = ("__tuple__", "__dict__", "__float__", "__ndarray__", "__dataframe__")
_ARRAY_KINDS = "biufc"  # bool, int, uint, float, complex: no objects, strings or dates


class FigureDataError(ValueError):
    """A stored figure-data file that is not in this format, damaged, or holds something unsupported."""


def encode(obj: object, where: str = "data") -> object:
    """A JSON-ready tree for ``obj`` (dicts, lists, tuples, scalars, numpy arrays, DataFrames); ``where`` names it."""
    import numpy as np
    import pandas as pd

    if obj is None or type(obj) in (bool, int, str):
        return obj
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        return x if math.isfinite(x) else {"__float__": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}
    if isinstance(obj, str):  # str subclasses (e.g. torch's TorchVersion)
        return str(obj)
    if isinstance(obj, list):
        return [encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, dict):
        return _encode_dict(obj, where)
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": _npy_bytes(obj, where)}
    if isinstance(obj, pd.DataFrame):
        return {"__dataframe__": _parquet_bytes(obj, where)}
    raise FigureDataError(f"{where}: cannot store a {type(obj).__name__} as figure data")


def decode(tree: object, where: str = "data") -> object:
    """The object ``tree`` (from :func:`encode`) stands for; refuses anything else."""
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    if isinstance(tree, list):
        return [decode(v, f"{where}[{i}]") for i, v in enumerate(tree)]
    if not isinstance(tree, dict):
        raise FigureDataError(f"{where}: unexpected {type(tree).__name__}")
    if len(tree) == 1 and next(iter(tree)) in TAGS:
        tag, val = next(iter(tree.items()))
        return _decode_tagged(tag, val, where)
    return {k: decode(v, f"{where}[{k!r}]") for k, v in tree.items()}


def write(path: str | Path, data: dict, stem: str) -> Path:
    """Atomically store a figure's ``data`` and file ``stem`` at ``path`` (JSON)."""
    from sapa.common.atomic import atomic_write_text

    tree = encode(data)
    doc = {"format": FORMAT, "stem": str(stem), "sha256": _sha256(tree), "data": tree}
    return atomic_write_text(path, json.dumps(doc, allow_nan=False, separators=(",", ":")) + "\n")


def read(path: str | Path) -> tuple[dict, str]:
    """``(data, stem)`` stored at ``path`` by :func:`write`; :class:`FigureDataError` naming ``path`` otherwise."""
    def no_constants(name: str):  # NaN / Infinity are never written (tagged instead): refuse them on reading
        raise FigureDataError(f"{path}: not a figure-data JSON file (bare {name})")

    try:
        doc = json.loads(_read_bounded(path), parse_constant=no_constants)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FigureDataError(f"{path}: not a figure-data JSON file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("stem"), str):
        raise FigureDataError(f"{path}: not in the {FORMAT} format")
    if doc.get("sha256") != _sha256(doc.get("data")):
        raise FigureDataError(f"{path}: content does not match its checksum (corrupt file)")
    from sapa.common.safepath import plain_name
    from sapa.common.validate import InputError

    try:
        plain_name(doc["stem"], "stem")
    except InputError as exc:
        raise FigureDataError(f"{path}: {exc}") from None
    data = decode(doc["data"], str(path))
    if not isinstance(data, dict):
        raise FigureDataError(f"{path}: figure data is not a mapping")
    return data, doc["stem"]


def _read_bounded(path: str | Path) -> str:
    """The text of ``path``: a regular file (a FIFO or a link to /dev/zero is refused) of bounded size."""
    from sapa.common.readfile import read_regular
    from sapa.common.validate import InputError

    try:
        return read_regular(path, "figure data").decode("utf-8")
    except InputError as exc:
        raise FigureDataError(str(exc)) from None


def _encode_dict(obj: dict, where: str) -> dict:
    plain = all(isinstance(k, str) for k in obj) and not (len(obj) == 1 and next(iter(obj)) in TAGS)
    if plain:
        return {str(k): encode(v, f"{where}[{k!r}]") for k, v in obj.items()}
    return {"__dict__": [[encode(k, f"{where} key"), encode(v, f"{where}[{k!r}]")] for k, v in obj.items()]}


def _decode_tagged(tag: str, val: object, where: str) -> object:
    if tag == "__tuple__" and isinstance(val, list):
        return tuple(decode(v, f"{where}[{i}]") for i, v in enumerate(val))
    if tag == "__dict__" and isinstance(val, list) and all(isinstance(kv, list) and len(kv) == 2 for kv in val):
        out = {}
        for k, v in val:
            key = decode(k, f"{where} key")
            try:
                out[key] = decode(v, f"{where}[{key!r}]")
            except TypeError:  # an unhashable key (a list)
                raise FigureDataError(f"{where}: a key must be a scalar or a tuple") from None
        return out
    if tag == "__float__" and val in ("nan", "inf", "-inf"):
        return float(val)
    if tag == "__ndarray__" and isinstance(val, str):
        return _npy_load(val, where)
    if tag == "__dataframe__" and isinstance(val, str):
        return _parquet_load(val, where)
    raise FigureDataError(f"{where}: malformed {tag} entry")


def _npy_bytes(a, where: str) -> str:
    import numpy as np

    if a.dtype.kind not in _ARRAY_KINDS:
        raise FigureDataError(f"{where}: arrays of dtype {a.dtype} are not stored (numbers and booleans only)")
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _npy_load(text: str, where: str):
    import numpy as np

    try:
        a = np.load(io.BytesIO(base64.b64decode(text, validate=True)), allow_pickle=False)
    except Exception as exc:  # bad base64, bad header, object arrays (refused without unpickling)
        raise FigureDataError(f"{where}: not a numeric .npy array ({type(exc).__name__})") from None
    if not isinstance(a, np.ndarray) or a.dtype.kind not in _ARRAY_KINDS:
        raise FigureDataError(f"{where}: not a numeric .npy array")
    return a


def _parquet_bytes(df, where: str) -> str:
    try:
        buf = io.BytesIO()
        df.to_parquet(buf, engine="pyarrow")
    except Exception as exc:  # columns Parquet cannot hold
        raise FigureDataError(f"{where}: cannot store this DataFrame as Parquet ({exc})") from None
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _parquet_load(text: str, where: str):
    from sapa.common.readfile import read_parquet_table
    from sapa.common.validate import InputError

    try:
        buf = io.BytesIO(base64.b64decode(text, validate=True))
        return read_parquet_table(buf, where).to_pandas()  # every size bounded before it is decoded
    except InputError as exc:
        raise FigureDataError(str(exc)) from None
    except Exception as exc:  # bad base64, not Parquet
        raise FigureDataError(f"{where}: not a Parquet table ({type(exc).__name__})") from None


def _sha256(tree: object) -> str:
    """sha256 of the canonical JSON of ``tree`` (sorted keys, no spaces)."""
    text = json.dumps(tree, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
