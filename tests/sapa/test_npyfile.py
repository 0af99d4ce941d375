"""Tests for `sapa/npyfile.py`: user .npy files are checked (header, dtype, size) before loading."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib import format as npf

from sapa.cli import main
from sapa.npyfile import check_numeric_dtype, load_npy
from sapa.common.validate import InputError


def _forged(path, shape, descr="<f8", data=b"\0" * 64, version=(1, 0)):
    """A .npy whose header claims ``shape`` but holds only ``data``."""
    with open(path, "wb") as f:
        (npf.write_array_header_1_0 if version == (1, 0) else npf.write_array_header_2_0)(
            f, {"descr": descr, "fortran_order": False, "shape": shape})
        f.write(data)
    return path


NON_NUMERIC = {
    "str": np.array([["1", "2"], ["3", "4"]]),
    "bytes": np.array([[b"1", b"2"], [b"3", b"4"]]),
    "record1": np.zeros((2, 2), dtype=[("a", "f8")]),
    "record2": np.zeros((2, 2), dtype=[("a", "f8"), ("b", "i4")]),
    "datetime": np.array([["2020-01-01"] * 2] * 2, dtype="datetime64[D]"),
    "timedelta": np.ones((2, 2), dtype="timedelta64[s]"),
    "bool": np.ones((2, 2), dtype=bool),
    "complex": np.ones((2, 2), dtype=complex),
}


@pytest.mark.parametrize("name", sorted(NON_NUMERIC))
def test_non_numeric_dtypes_are_refused(tmp_path, name):
    path = tmp_path / f"{name}.npy"
    np.save(path, NON_NUMERIC[name])
    with pytest.raises(InputError, match="not numeric|structured"):
        load_npy(path, "--x")


def test_object_arrays_are_refused_before_unpickling(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([[1, None]], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="object"):
        load_npy(path, "--x")


@pytest.mark.parametrize("dtype", ["i1", "i8", "u2", "u8", "f2", "f4", "f8", ">f8", "<i4"])
def test_integer_and_floating_dtypes_load(tmp_path, dtype):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(6).reshape(2, 3).astype(dtype))
    np.testing.assert_array_equal(load_npy(path, "--x"), np.arange(6).reshape(2, 3))
    check_numeric_dtype("--x", np.dtype(dtype))


def test_empty_file_is_one_line(tmp_path):
    path = tmp_path / "empty.npy"
    path.write_bytes(b"")
    with pytest.raises(InputError, match="is empty"):
        load_npy(path, "--x")


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
@pytest.mark.parametrize("shape", [(111111, 111111), (10**12, 10**12), (2**62, 4), (3, 3)])
def test_header_claiming_more_than_the_file_is_refused_before_allocating(tmp_path, shape, version):
    path = _forged(tmp_path / "huge.npy", shape, version=version)
    with pytest.raises(InputError, match="claims shape .* holds only 64 bytes"):
        load_npy(path, "--w")


@pytest.mark.parametrize("raw", [b"\x93NUMPY", b"\x93NUMPY\x01\x00\xff\xff{", b"\x93NUMPY\x09\x00", b"PK\x03\x04" + b"\0" * 60,
                                 b"\x93NUMPY\x01\x00\x10\x00{'descr': 1}    \n"])
def test_broken_headers_are_one_line(tmp_path, raw):
    path = tmp_path / "bad.npy"
    path.write_bytes(raw)
    with pytest.raises(InputError, match="no valid .npy header|is empty|not numeric"):
        load_npy(path, "--x")


def test_truncated_data_is_refused(tmp_path):
    path = tmp_path / "t.npy"
    np.save(path, np.ones((4, 3)))
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(InputError, match=r"claims shape \(4, 3\)"):
        load_npy(path, "--x")


def test_header_without_any_data_reports_zero_bytes(tmp_path):
    """A header and nothing after it: the message says 0 bytes of data (not a negative or made-up count)."""
    path = _forged(tmp_path / "hdr.npy", (3, 3), data=b"")
    with pytest.raises(InputError, match=r"\(72 bytes\) but holds only 0 bytes of data"):
        load_npy(path, "--x")


def test_memory_error_while_loading_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / "a.npy"
    np.save(path, np.ones((2, 2)))

    def boom(*a, **k):
        raise MemoryError

    monkeypatch.setattr(np, "load", boom)
    with pytest.raises(InputError, match="more than fits in memory"):
        load_npy(path, "--x")


@pytest.mark.parametrize("which", ["empty", "huge", "str", "datetime", "record1"])
@pytest.mark.parametrize("cmd", ["norms-x", "norms-w", "exact-w", "exact-sigma-x"])
def test_cli_gives_one_line_and_exit_2(tmp_path, capsys, which, cmd):
    bad = tmp_path / "bad.npy"
    if which == "empty":
        bad.write_bytes(b"")
    elif which == "huge":
        _forged(bad, (111111, 111111))
    else:
        np.save(bad, NON_NUMERIC[which])
    good = tmp_path / "w.npy"
    np.save(good, np.eye(3))
    argv = {"norms-x": ["norms", "--x", bad, "--w", good, "--activation", "poly"],
            "norms-w": ["norms", "--x", good, "--w", bad, "--activation", "softmax"],
            "exact-w": ["exact", "--p", "1", "--model", "shared", "--N", "8", "--w", bad],
            "exact-sigma-x": ["exact", "--p", "1", "--model", "shared", "--N", "8", "--w", good, "--sigma-x", bad]}[cmd]
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr()
    assert err.out == "" and err.err.count("\n") == 1 and err.err.startswith("sapa: error:") and str(bad) in err.err


# --------------------------------------------------------------------------- sharpened by mutation testing


def _v3(path, shape, descr="<f8", data=None):
    """A version-3.0 .npy (UTF-8 header; numpy writes it only for non-Latin-1 field names)."""
    import struct

    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape!r}, }}"
    header += " " * (-(12 + len(header) + 1) % 64) + "\n"
    body = b"\x93NUMPY\x03\x00" + struct.pack("<I", len(header)) + header.encode("utf-8")
    path.write_bytes(body + (np.arange(6, dtype=descr).tobytes() if data is None else data))
    return path


def test_version_3_files_load_and_are_checked(tmp_path):
    np.testing.assert_array_equal(load_npy(_v3(tmp_path / "v3.npy", (2, 3)), "--x"), np.arange(6.0).reshape(2, 3))
    with pytest.raises(InputError, match=r"claims shape \(111111, 111111\)"):
        load_npy(_v3(tmp_path / "huge3.npy", (111111, 111111), data=b"\0" * 64), "--x")


@pytest.mark.parametrize("name", ["record1", "record2"])
def test_structured_arrays_are_named_as_such(tmp_path, name):
    path = tmp_path / f"{name}.npy"
    np.save(path, NON_NUMERIC[name])
    with pytest.raises(InputError, match=r"^--x: .*: a structured array \(dtype .*\) is not a matrix of numbers$"):
        load_npy(path, "--x")
    with pytest.raises(InputError, match="a structured array"):  # a sub-array dtype: no fields, but not a scalar
        check_numeric_dtype("--x", np.dtype(("<f8", (2,))))


@pytest.mark.parametrize("name, kind", [("str", "string"), ("bytes", "bytes"), ("datetime", "datetime64"),
                                        ("timedelta", "timedelta64"), ("bool", "boolean"), ("complex", "complex")])
def test_refused_dtypes_are_named_in_words(tmp_path, name, kind):
    path = tmp_path / f"{name}.npy"
    np.save(path, NON_NUMERIC[name])
    with pytest.raises(InputError, match=rf"^--x: {path}: dtype \S+ \({kind}\) is not numeric; give an integer"):
        load_npy(path, "--x")


def test_messages_name_the_flag_the_file_and_the_cause(tmp_path):
    missing = tmp_path / "missing.npy"
    with pytest.raises(InputError, match=rf"^--w: file not found: {missing}$"):
        load_npy(missing, "--w")
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=rf"^--w: {empty} is empty$"):
        load_npy(empty, "--w")
    zip_ = tmp_path / "zip.npy"
    zip_.write_bytes(b"PK\x03\x04" + b"\0" * 60)  # not empty: the header is what is wrong, with numpy's reason
    with pytest.raises(InputError, match=rf"^--w: {zip_} has no valid \.npy header \(the magic string is not correct; "):
        load_npy(zip_, "--w")
    huge = _forged(tmp_path / "huge.npy", (3, 3), data=b"\0" * 8)
    with pytest.raises(InputError, match=rf"^--w: {huge} claims shape \(3, 3\)"):
        load_npy(huge, "--w")


def test_a_file_swapped_for_a_pickle_after_the_checks_is_never_unpickled(tmp_path, monkeypatch):
    """The header is checked, then the file is replaced by a pickle before it is loaded: it must not run."""
    import pickle

    import sapa.npyfile as npyfile

    marker = tmp_path / "ran"
    path = tmp_path / "a.npy"
    np.save(path, np.ones((2, 2)))
    check_size = npyfile._check_size

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    def swap(*a):
        check_size(*a)
        path.write_bytes(pickle.dumps(Payload()))

    monkeypatch.setattr(npyfile, "_check_size", swap)
    with pytest.raises(InputError, match=rf"^--x: cannot read {path} as \.npy \(This file contains pickled \(object\) "
                                         r"data\. If you trust the file"):
        load_npy(path, "--x")
    assert not marker.exists()


def test_load_square_matrix_gives_float64_and_refuses_non_square_or_non_finite(tmp_path):
    """``sapa exact`` and ``sapa audit`` read --w / --sigma-x through this one loader (no import of the CLI)."""
    from sapa.npyfile import load_square_matrix

    good = tmp_path / "w.npy"
    np.save(good, np.arange(9, dtype=np.int32).reshape(3, 3))
    W = load_square_matrix(good, "--w")
    assert W.dtype == np.float64 and np.array_equal(W, np.arange(9).reshape(3, 3))
    rect = tmp_path / "rect.npy"
    np.save(rect, np.ones((2, 3)))
    with pytest.raises(InputError, match=r"^--w must be square, got shape \(2, 3\)$"):
        load_square_matrix(rect, "--w")
    nan = tmp_path / "nan.npy"
    np.save(nan, np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(InputError, match=r"^--sigma-x"):
        load_square_matrix(nan, "--sigma-x")
