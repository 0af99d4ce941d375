"""Tests for `sapa/commands/norms_layerfile.py`: a layer's shapes and size are checked across its tensors from the headers, before
any data is read (issue 52, case 9: a sparse file with W_Q of 8·10⁸ float32 and a mismatched W_K reached 6.4 GB)."""

from __future__ import annotations

import json
import resource
import struct

import numpy as np
import pytest

from sapa.cli import main

D = 4


def _sparse_safetensors(path, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """A .safetensors file whose header declares ``tensors`` ({name: (dtype, shape)}) over data that is all holes."""
    size = {"F32": 4, "F64": 8}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = int(np.prod(shape)) * size[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset)  # sparse: gigabytes declared, nothing written


def _norms(capsys, tmp_path, *weights):
    x = tmp_path / "x.npy"
    np.save(x, np.ones((3, D)))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = main(["norms", "--x", str(x), *map(str, weights), "--activation", "x"])
    err = capsys.readouterr().err
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    return code, err, grew


@pytest.mark.parametrize("wk, needle", [
    (("F32", (D, 3)), "W_Q (4, 200000000) and W_K (4, 3) must have the same shape (D, H·d)"),
    (("F32", (D, 200_000_000)), "the layer's weights (wq 4×200,000,000, wk 4×200,000,000) take 29.8 GiB once loaded "
                                "as float64, more than the 4 GiB a norms request may use")])
def test_a_sparse_layer_is_refused_from_its_header(capsys, tmp_path, wk, needle):
    f = tmp_path / "layer.safetensors"
    _sparse_safetensors(f, {"wq": ("F32", (D, 200_000_000)), "wk": wk})  # W_Q: 8·10⁸ float32, 3.2 GB declared
    code, err, grew = _norms(capsys, tmp_path, "--safetensors", f)
    assert code == 2 and err.count("\n") == 1 and err.strip() == f"sapa: error: --safetensors {f}: {needle}", err
    assert grew < 200 * 2**20  # nothing of the 3.2 GB was read


def test_heads_and_values_are_checked_across_tensors_before_loading(capsys, tmp_path):
    f = tmp_path / "layer.safetensors"
    _sparse_safetensors(f, {"wq": ("F64", (D, 6)), "wk": ("F64", (D, 6)), "wv": ("F64", (D, 6)),
                            "wo": ("F64", (5, D))})
    code, err, _ = _norms(capsys, tmp_path, "--safetensors", f, "--heads", "2")
    assert code == 2 and err.strip() == f"sapa: error: --safetensors {f}: W_O must have H·d_v = 6 rows, got (5, 4)"
    code, err, _ = _norms(capsys, tmp_path, "--safetensors", f, "--heads", "4")
    assert code == 2 and err.strip() == f"sapa: error: --safetensors {f}: W_Q has 6 columns, not divisible by 4 heads"


def test_a_bert_layout_is_checked_transposed(capsys, tmp_path):
    """nn.Linear weights are (out, in): W_Q^T of (8, D) is (D, 8) in sapa's layout, its W_K^T (6, D) disagrees."""
    f = tmp_path / "bert.safetensors"
    _sparse_safetensors(f, {"attention.self.query.weight": ("F32", (8, D)), "attention.self.key.weight": ("F32", (6, D))})
    code, err, _ = _norms(capsys, tmp_path, "--safetensors", f)
    assert code == 2 and err.strip() == (f"sapa: error: --safetensors {f}: W_Q (4, 8) and W_K (4, 6) must have the "
                                         "same shape (D, H·d)")


def _sparse_npy(path, shape) -> None:
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})
        f.truncate(f.tell() + 4 * int(np.prod(shape)))


def test_npy_weights_are_checked_across_files_before_any_is_loaded(capsys, tmp_path):
    wq, wk = tmp_path / "wq.npy", tmp_path / "wk.npy"
    _sparse_npy(wq, (D, 200_000_000))
    _sparse_npy(wk, (D, 3))
    code, err, grew = _norms(capsys, tmp_path, "--wq", wq, "--wk", wk)
    assert code == 2 and err.strip() == ("sapa: error: --wq/--wk: W_Q (4, 200000000) and W_K (4, 3) must have the "
                                         "same shape (D, H·d)")
    assert grew < 200 * 2**20


def test_a_layer_within_the_cap_still_loads(capsys, tmp_path):
    from safetensors.numpy import save_file

    rng = np.random.default_rng(3)
    f = tmp_path / "ok.safetensors"
    save_file({"wq": rng.standard_normal((D, 4)), "wk": rng.standard_normal((D, 4))}, str(f))
    x = tmp_path / "x.npy"
    np.save(x, rng.standard_normal((3, D)))
    assert main(["norms", "--x", str(x), "--safetensors", str(f), "--activation", "x", "--heads", "2"]) == 0
