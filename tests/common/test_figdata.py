"""Tests for `common/figdata.py`: every stored figure's data round-trips exactly and redraws; hostile files
(pickles, object arrays, edited content) are refused without running anything."""

from __future__ import annotations

import base64
import io
import json
import os
import pickle

import numpy as np
import pandas as pd
import pytest

from sapa.common import figdata
from sapa.common.figdata import FigureDataError


class _Payload:
    """Unpickling this creates the directory ``marker`` (a stand-in for running ``id``)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def _compute(name: str) -> dict:
    """Small real data of each figure that ``sapa verify`` stores (the ``to_json()`` of its empirics experiment)."""
    if name == "scale_direction":
        from sapa.empirics.experiments.scale_direction import run_scale_direction

        res = run_scale_direction([64, 128, 256], models=("paper", "iid", "tied"), trials=2, max_trials=8, n_boot=50)
        return res.showing([m for m in res.models if m != "paper"]).to_json()  # as sapa.claims.fig1_scale_direction stores it
    if name == "causal_masking":
        from sapa.empirics.experiments.causal import run_causal_masking

        return run_causal_masking(Ns=(16, 32), trials=(2, 2), max_trials=8, N_train=16, transfer_trials=2,
                                  transfer_max_trials=8, n_boot=50).to_json()
    if name == "worst_case":
        from sapa.empirics.experiments.worst_case import run_worst_case

        return run_worst_case(ps=(1, 3), Ns=(3, 6), D=3, steps=2, restarts=0).to_json()  # witness starts only
    if name == "overhead":
        from sapa.empirics.timing.overhead import OverheadGrid, bench_overhead

        g = OverheadGrid(Ns=(16, 32), d=8, ps=(1, 3), repeats=1, methods=("naive", "linearised"), crossover_ds=(4,),
                         crossover_masks=("none",), time_cap_s=1.0, block_s=0.002)  # the data's form, not its speed
        return bench_overhead(grid=g, device="cpu", threads=1)


STORED = ("scale_direction", "causal_masking", "worst_case", "overhead")


def assert_same(a, b, where: str = "data") -> None:
    """Exact equality, types included (tuples stay tuples, int keys stay ints, arrays keep dtype and shape)."""
    assert type(a) is type(b) or (isinstance(a, str) and type(b) is str), (where, type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True), where
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, (where, a, b)


@pytest.fixture(scope="module")
def computed() -> dict:
    return {name: _compute(name) for name in STORED}


@pytest.mark.parametrize("name", STORED)
def test_each_figures_data_round_trips_exactly(name, computed, tmp_path):
    res = computed[name]
    path = figdata.write(tmp_path / "data" / f"{name}.json", res, f"{name}_tiny")
    json.loads(path.read_text())  # plain JSON: readable without sapa
    got, stem = figdata.read(path)
    assert stem == f"{name}_tiny"
    assert_same(res, got)


@pytest.mark.slow
@pytest.mark.parametrize("name", STORED)
def test_each_figure_redraws_from_its_stored_data(name, computed, tmp_path):
    import importlib

    got, stem = figdata.read(figdata.write(tmp_path / f"{name}.json", computed[name], f"{name}_tiny"))
    paths = importlib.import_module(f"sapa.figures.{name}").draw(got, tmp_path / "figures", stem)
    assert paths and all(p.stat().st_size > 1000 for p in paths)


def test_what_json_lacks_round_trips(tmp_path):
    df = pd.DataFrame({"a": [1.0, np.nan, np.inf], "s": ["x", "y", "z"], "b": [True, False, True]}, index=[3, 1, 2])
    data = {(1, "iid"): df, 3: (1.5, -np.inf, np.nan, None), "arr": np.arange(6, dtype=np.int32).reshape(2, 3),
            "bools": np.array([True, False]), "nested": {"__tuple__": [1]}, "np": np.float64(2.5), "i": np.int64(7),
            "empty": {}, "cplx": np.array([1 + 2j])}
    got, _ = figdata.read(figdata.write(tmp_path / "x.json", data, "s"))
    assert list(got) == list(data) and isinstance(next(iter(got)), tuple)
    pd.testing.assert_frame_equal(got[(1, "iid")], df)
    assert got[3][:2] == (1.5, -np.inf) and np.isnan(got[3][2]) and got[3][3] is None
    assert got["arr"].dtype == np.int32 and got["arr"].shape == (2, 3)
    assert got["nested"] == {"__tuple__": [1]} and got["np"] == 2.5 and got["i"] == 7 and got["empty"] == {}
    assert "NaN" not in (tmp_path / "x.json").read_text()  # strict JSON


def test_unsupported_values_are_refused_when_writing(tmp_path):
    with pytest.raises(FigureDataError, match="dtype object"):
        figdata.write(tmp_path / "x.json", {"a": np.array([{"x": 1}], dtype=object)}, "s")
    with pytest.raises(FigureDataError, match=r"data\['f'\]: cannot store a set"):
        figdata.write(tmp_path / "x.json", {"f": {1, 2}}, "s")
    assert not (tmp_path / "x.json").exists()


def _doc(data_tree) -> str:
    return json.dumps({"format": figdata.FORMAT, "stem": "s", "sha256": figdata._sha256(data_tree), "data": data_tree})


def test_a_pickle_is_never_unpickled(tmp_path):
    """A pickle under the .json name, or smuggled inside an array entry, is refused and leaves no side effect."""
    marker = tmp_path / "pwned"
    (tmp_path / "a.json").write_bytes(pickle.dumps(_Payload(str(marker))))
    with pytest.raises(FigureDataError, match="not a figure-data JSON"):
        figdata.read(tmp_path / "a.json")
    buf = io.BytesIO()
    np.save(buf, np.array([_Payload(str(marker))], dtype=object), allow_pickle=True)  # an object .npy: a pickle
    (tmp_path / "b.json").write_text(_doc({"x": {"__ndarray__": base64.b64encode(buf.getvalue()).decode()}}))
    with pytest.raises(FigureDataError, match="not a numeric .npy"):
        figdata.read(tmp_path / "b.json")
    assert not marker.exists()


def test_damaged_or_foreign_files_are_refused(tmp_path):
    good = figdata.write(tmp_path / "g.json", {"a": [1.0, 2.0]}, "s")
    doc = json.loads(good.read_text())
    doc["data"]["a"][1] = 2.5  # an edited value
    (tmp_path / "e.json").write_text(json.dumps(doc))
    with pytest.raises(FigureDataError, match="does not match its checksum"):
        figdata.read(tmp_path / "e.json")
    bad = {"f.json": json.dumps({"format": "other", "stem": "s", "data": {}}),
           "t.json": _doc({"x": {"__tuple__": "no"}}),
           "d.json": _doc({"x": {"__dataframe__": base64.b64encode(b"PAR1junk").decode()}}),
           "k.json": _doc({"__dict__": [[[1, 2], 3]]}),
           "l.json": _doc([1, 2])}
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(FigureDataError):
            figdata.read(tmp_path / name)


# --------------------------------------------------------------------------- edge cases (mutation testing)


def test_numpy_bools_and_positive_infinity_round_trip(tmp_path):
    data = {"t": np.bool_(True), "f": np.bool_(False), "inf": np.inf, "ninf": np.float64(-np.inf)}
    assert figdata.encode(np.bool_(True)) is True
    assert figdata.encode(np.inf) == {"__float__": "inf"} and figdata.encode(-np.inf) == {"__float__": "-inf"}
    got, _ = figdata.read(figdata.write(tmp_path / "x.json", data, "s"))
    assert got == {"t": True, "f": False, "inf": np.inf, "ninf": -np.inf}
    assert type(got["t"]) is bool


def test_errors_name_where_in_a_list_and_why(tmp_path):
    with pytest.raises(FigureDataError, match=r"^data\['a'\]\[1\]: cannot store a set"):
        figdata.encode({"a": [1, {2}]})
    with pytest.raises(FigureDataError, match=r"^data\['d'\]: cannot store this DataFrame as Parquet \(.+\)"):
        figdata.encode({"d": pd.DataFrame({"a": [1, "x"]})})


def _npy_b64(a) -> str:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode()


def test_non_numeric_arrays_and_loose_base64_are_refused_when_reading(tmp_path):
    """A string .npy (loadable without pickle) is refused; so is base64 with stray characters; errors say why."""
    df = io.BytesIO()
    pd.DataFrame({"a": [1.0]}).to_parquet(df, engine="pyarrow")
    pq = base64.b64encode(df.getvalue()).decode()
    npy = _npy_b64(np.arange(3))
    cases = {"s": ({"x": {"__ndarray__": _npy_b64(np.array(["ab"]))}}, r"\['x'\]: not a numeric \.npy array$"),
             "n": ({"x": {"__ndarray__": npy[:8] + "!" + npy[8:]}}, r"not a numeric \.npy array \(Error\)"),
             "p": ({"x": {"__dataframe__": pq[:8] + "!" + pq[8:]}}, r"\['x'\]: not a Parquet table \(Error\)"),
             "q": ({"x": {"__dataframe__": base64.b64encode(b"PAR1junk").decode()}},
                   r"not a Parquet table \(ArrowInvalid\)")}
    for name, (tree, pattern) in cases.items():
        (tmp_path / f"{name}.json").write_text(_doc(tree))
        with pytest.raises(FigureDataError, match=pattern):
            figdata.read(tmp_path / f"{name}.json")
    (tmp_path / "ok.json").write_text(_doc({"x": {"__ndarray__": npy}}))  # the same entries, intact, are read
    assert figdata.read(tmp_path / "ok.json")[0]["x"].tolist() == [0, 1, 2]


def test_errors_name_the_key_or_element_that_cannot_be_stored():
    cases = [({frozenset(): 1}, r"^data key: cannot store a frozenset"),
             ({"m": {frozenset(): 1}}, r"^data\['m'\] key: cannot store a frozenset"),
             ({1: {2}}, r"^data\[1\]: cannot store a set"), ({"t": (1, {2})}, r"^data\['t'\]\[1\]: cannot store a set"),
             ({"a": np.array(["x"], dtype=object)}, r"^data\['a'\]: arrays of dtype object")]
    for obj, pattern in cases:
        with pytest.raises(FigureDataError, match=pattern):
            figdata.encode(obj)


def test_decode_errors_name_where():
    with pytest.raises(FigureDataError, match=r"^data\[1\]: malformed __float__ entry"):
        figdata.decode([1, {"__float__": "x"}])
    with pytest.raises(FigureDataError, match=r"^data: unexpected bytes$"):
        figdata.decode(b"x")


def test_malformed_tags_are_refused_and_named_where_nested():
    for tree in ({"__ndarray__": []}, {"__float__": [[1, 2]]}, {"__dict__": "no"}, {"__dict__": [[1, 2, 3]]},
                 {"__dict__": ["ab"]}):
        with pytest.raises(FigureDataError, match=r"^data: malformed __\w+__ entry$"):
            figdata.decode(tree)
    with pytest.raises(FigureDataError, match=r"^data: not a numeric \.npy array"):
        figdata.decode({"__ndarray__": "inf"})
    bad = {"__float__": "x"}
    cases = [({"a": {"__tuple__": [1, bad]}}, r"^data\['a'\]\[1\]: malformed __float__"),
             ({"__dict__": [[bad, 1]]}, r"^data key: malformed __float__"),
             ({"__dict__": [[1, bad]]}, r"^data\[1\]: malformed __float__"),
             ({"__dict__": [[[1], 2]]}, r"^data: a key must be a scalar or a tuple$")]
    for tree, pattern in cases:
        with pytest.raises(FigureDataError, match=pattern):
            figdata.decode(tree)


def test_the_checksum_is_of_the_canonical_json(tmp_path):
    """sha256 of the data as JSON with sorted keys and no spaces: anyone can recompute it without sapa."""
    import hashlib

    doc = json.loads(figdata.write(tmp_path / "x.json", {"b": 1, "a": [1, 2]}, "s").read_text())
    canon = json.dumps(doc["data"], sort_keys=True, separators=(",", ":"))
    assert doc["sha256"] == hashlib.sha256(canon.encode()).hexdigest()


def test_read_refuses_a_foreign_header_and_names_the_file(tmp_path):
    import hashlib
    import re

    def doc(**over):
        return json.dumps({"format": figdata.FORMAT, "stem": "s", "sha256": figdata._sha256({}), "data": {}, **over})

    bad = {"fmt.json": doc(format="other"), "stem.json": doc(stem=1), "list.json": "[1]"}
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(FigureDataError, match=rf"{name}: not in the sapa-figdata/1 format$"):
            figdata.read(tmp_path / name)
    for name, tree, why in [("t.json", {"x": {"__tuple__": "no"}}, r"\['x'\]: malformed __tuple__ entry$"),
                            ("l.json", [1, 2], r": figure data is not a mapping$")]:
        (tmp_path / name).write_text(_doc(tree))
        with pytest.raises(FigureDataError, match="^" + re.escape(str(tmp_path / name)) + why):
            figdata.read(tmp_path / name)
    # a bare NaN is not JSON: refused even when the checksum was computed over it
    nan = json.dumps({"x": float("nan")}, sort_keys=True, separators=(",", ":"))
    (tmp_path / "nan.json").write_text(json.dumps({"format": figdata.FORMAT, "stem": "s", "data": {"x": float("nan")},
                                                   "sha256": hashlib.sha256(nan.encode()).hexdigest()}))
    with pytest.raises(FigureDataError, match="^" + re.escape(str(tmp_path / "nan.json")) + ".*bare NaN"):
        figdata.read(tmp_path / "nan.json")
