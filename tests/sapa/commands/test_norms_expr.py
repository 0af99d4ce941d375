"""Tests for `sapa/commands/norms_expr.py`: `sapa norms --activation EXPR` (heads, values, layer files) and `--spectral`."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from sapa.empirics.kernels.expr_norms import expr_norms, layer_from_qk, layer_from_w
from sapa.cli import main
from sapa.theory.activation_audit import parse_activation


@pytest.fixture
def mats(tmp_path):
    rng = np.random.default_rng(21)
    N, D, H = 6, 4, 2
    arrays = {"x": rng.standard_normal((N, D)), "w": rng.standard_normal((D, D)) * 0.5,
              "wq": rng.standard_normal((D, 2 * H)) * 0.5, "wk": rng.standard_normal((D, 2 * H)) * 0.5,
              "wv": rng.standard_normal((D, 2 * H)), "wo": rng.standard_normal((2 * H, 3))}
    paths = {}
    for k, a in arrays.items():
        paths[k] = tmp_path / f"{k}.npy"
        np.save(paths[k], a)
    return arrays, paths


def _run(capsys, argv):
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_acceptance_command_gives_the_three_frobenius_norms(mats, capsys):
    a, p = mats
    code, out, _ = _run(capsys, ["norms", "--x", str(p["x"]), "--w", str(p["w"]), "--activation",
                                 "sigmoid(x/8 - log(N))", "--json"])
    assert code == 0
    r = json.loads(out)
    ref = expr_norms(a["x"], layer_from_w(a["w"]), parse_activation("sigmoid(x/8 - log(N))"))
    assert (r["fro_norm"], r["jac_s_fro_norm"], r["jac_fro_norm"]) == (ref.fro[0], ref.jac_s_fro[0], ref.jac_fro[0])
    assert r["dtype"] == "float64" and r["heads"] == 1 and "sigma_upper" not in r


def test_spectral_bracket_of_the_layer_from_the_command_line(mats, capsys):
    a, p = mats
    argv = ["norms", "--x", str(p["x"]), "--wq", str(p["wq"]), "--wk", str(p["wk"]), "--wv", str(p["wv"]), "--wo",
            str(p["wo"]), "--heads", "2", "--activation", "exp(x/2)", "--normalize", "row", "--mask", "causal",
            "--spectral", "--json", "--max-steps", "24"]
    code, out, _ = _run(capsys, argv)
    assert code == 0
    r = json.loads(out)
    layer = layer_from_qk(a["wq"], a["wk"], a["wv"], a["wo"], heads=2)

    def f(x):
        out = 0
        for h in range(2):
            q, k = torch.from_numpy(layer.Wq[h]), torch.from_numpy(layer.Wk[h])
            S = ((x @ q) @ (x @ k).T) / 2
            P = torch.softmax(S.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), -float("inf")), dim=1)
            out = out + P @ x @ torch.from_numpy(layer.Wv[h]) @ torch.from_numpy(layer.Wo[h])
        return out

    J = torch.autograd.functional.jacobian(f, torch.from_numpy(a["x"])).reshape(18, 24)
    sigma = float(torch.linalg.svdvals(J)[0])
    assert r["layer_sigma_lower"] <= sigma <= r["layer_sigma_upper"]
    assert r["layer_converged"] and abs(r["layer_sigma_upper"] - sigma) <= 1e-8 * sigma
    assert r["layer_jac_fro_norm"] == pytest.approx(float(torch.linalg.norm(J)), rel=1e-12)
    assert len(r["spectral_per_head"]) == 2 and len(r["fro_norm_per_head"]) == 2


def test_a_layer_file_gives_the_same_numbers_as_the_matrices(mats, capsys, tmp_path):
    from safetensors.numpy import save_file

    a, p = mats
    f = tmp_path / "layer.safetensors"  # BERT layout: nn.Linear weights are (out, in)
    save_file({"encoder.layer.0.attention.self.query.weight": np.ascontiguousarray(a["wq"].T),
               "encoder.layer.0.attention.self.key.weight": np.ascontiguousarray(a["wk"].T),
               "encoder.layer.0.attention.self.value.weight": np.ascontiguousarray(a["wv"].T),
               "encoder.layer.0.attention.output.dense.weight": np.ascontiguousarray(a["wo"].T)}, str(f))
    common = ["--activation", "relu(x)/N", "--heads", "2", "--json"]
    _, out1, _ = _run(capsys, ["norms", "--x", str(p["x"]), "--safetensors", str(f), *common])
    _, out2, _ = _run(capsys, ["norms", "--x", str(p["x"]), "--wq", str(p["wq"]), "--wk", str(p["wk"]), "--wv",
                               str(p["wv"]), "--wo", str(p["wo"]), *common])
    r1 = json.loads(out1)
    assert r1.pop("heads_from") == "--heads" and r1 == json.loads(out2)


def test_softmax_with_spectral_goes_through_the_expression_path(mats, capsys):
    _, p = mats
    code, out, _ = _run(capsys, ["norms", "--x", str(p["x"]), "--w", str(p["w"]), "--activation", "softmax",
                                 "--scale", "0.5", "--spectral", "--json"])
    r = json.loads(out)
    assert code == 0 and r["expression"] == "exp(0.5*x)" and r["normalize"] == "row" and r["sigma_lower"] > 0


@pytest.mark.parametrize("extra,msg", [
    (["--activation", "y*x"], "unknown symbol 'y'"),
    (["--activation", "x", "--wv", "W"], "does not combine"),
    (["--activation", "x", "--heads", "2"], "--heads needs"),
    (["--activation", "exp(x)"], "overflows"),
    (["--activation", "x", "--p", "3"], "--p and --scale apply"),
    (["--activation", "softmax", "--normalize", "row"], "--normalize applies"),
    (["--activation", "x", "--spectral", "--tol", "2"], "--tol"),
])
def test_user_errors_are_one_line(mats, capsys, extra, msg):
    _, p = mats
    extra = [str(p["wv"]) if e == "W" else e for e in extra]
    code, out, err = _run(capsys, ["norms", "--x", str(p["x"]), "--w", str(p["w"]), *extra])
    assert code == 2 and out == "" and err.count("\n") == 1 and msg in err and "Traceback" not in err


def test_missing_weights_and_unreadable_layer_file(mats, capsys, tmp_path):
    _, p = mats
    code, _, err = _run(capsys, ["norms", "--x", str(p["x"]), "--activation", "x"])
    assert code == 2 and "exactly one of" in err
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a safetensors file")
    code, _, err = _run(capsys, ["norms", "--x", str(p["x"]), "--safetensors", str(bad), "--activation", "x"])
    assert code == 2 and "cannot read" in err and err.count("\n") == 1


def test_an_unconverged_bracket_shows_its_steps_and_says_what_to_do(mats, capsys):
    a, p = mats
    code, out, err = _run(capsys, ["norms", "--x", str(p["x"]), "--w", str(p["w"]), "--activation", "x**3/sqrt(N)",
                                   "--spectral", "--json", "--max-steps", "3", "--certificate", "lanczos"])
    assert code == 0
    r = json.loads(out)
    assert not r["converged"] and r["lanczos_steps"] == 3 and r["spectral_method"] == "lanczos"
    assert r["sigma_lower"] <= r["sigma_upper"]
    # the log: the bar's closing line with its step count and the bracket, then the advice, which the JSON keeps
    bracket = f"[{r['sigma_lower']:.6g}, {r['sigma_upper']:.6g}], rel. width {r['rel_width']:.3g}"
    assert f"σ₁ of ∂φ/∂X: 100% (3/3 step) bracket {bracket}" in err
    assert "raise --max-steps above 3" in r["spectral_advice"] and r["spectral_advice"] in err
    assert err.count("\n") == 2  # one progress line, one advice line


def test_the_same_open_lanczos_bracket_is_closed_by_the_dense_certificate(mats, capsys):
    """auto: Lanczos ends open after 3 steps, the dense Cholesky certificate closes it around the autograd σ₁."""
    a, p = mats
    code, out, err = _run(capsys, ["norms", "--x", str(p["x"]), "--w", str(p["w"]), "--activation", "x**3/sqrt(N)",
                                   "--spectral", "--json", "--max-steps", "3"])
    r = json.loads(out)
    X, W = torch.from_numpy(a["x"]), torch.from_numpy(a["w"])
    J = torch.autograd.functional.jacobian(lambda x: (x @ W @ x.T) ** 3 / 6**0.5, X).reshape(36, 24)
    sigma = float(torch.linalg.svdvals(J)[0])
    assert code == 0 and r["converged"] and r["spectral_method"] == "dense-cholesky" and "spectral_advice" not in r
    assert r["sigma_lower"] <= sigma <= r["sigma_upper"] and r["rel_width"] <= 1e-8
    assert "dense-cholesky" in r["spectral_certificate"]
    assert f"100% (3/3 step) bracket [{r['sigma_lower']:.6g}, {r['sigma_upper']:.6g}]" in err  # the closed bracket


@pytest.mark.parametrize("certificate,method", [("lanczos", "lanczos"), ("dense", "dense-cholesky")])
def test_the_certificate_can_be_chosen(mats, capsys, certificate, method):
    a, p = mats
    code, out, _ = _run(capsys, ["norms", "--x", str(p["x"]), "--w", str(p["w"]), "--activation", "x/sqrt(N)",
                                 "--spectral", "--json", "--certificate", certificate])
    r = json.loads(out)
    assert code == 0 and r["converged"] and r["spectral_method"] == method


def test_a_converged_bracket_gives_no_advice(mats, capsys):
    a, p = mats
    code, out, err = _run(capsys, ["norms", "--x", str(p["x"]), "--w", str(p["w"]), "--activation", "x/sqrt(N)",
                                   "--spectral", "--json"])
    r = json.loads(out)
    assert code == 0 and r["converged"] and "spectral_advice" not in r and "sapa: note" not in err


@pytest.mark.parametrize("dtype, word", [(np.complex64, "C64 (complex)"), (bool, "BOOL (boolean)")])
def test_safetensors_weights_that_are_not_real_numbers_are_refused_as_npy_ones_are(mats, capsys, tmp_path, dtype, word):
    from safetensors.numpy import save_file

    a, p = mats
    f = tmp_path / "layer.safetensors"
    save_file({"wq": a["wq"].astype(dtype), "wk": a["wk"]}, str(f))
    code, out, err = _run(capsys, ["norms", "--x", str(p["x"]), "--safetensors", str(f), "--activation", "x"])
    assert code == 2 and out == ""
    assert err.strip() == (f"sapa: error: --safetensors {f}: tensor wq has dtype {word}; give integer or "
                           "floating-point weights (float32 or float64)")


def test_safetensors_shapes_are_checked_from_the_header_before_a_tensor_is_loaded(mats, capsys, tmp_path, monkeypatch):
    from safetensors.numpy import save_file

    a, p = mats
    f0, f1 = tmp_path / "scalar.safetensors", tmp_path / "wide.safetensors"
    save_file({"wq": np.array(3.0), "wk": a["wk"]}, str(f0))
    save_file({"wq": np.ones((5, 4)), "wk": a["wk"]}, str(f1))  # X has D = 4 columns
    code, _, err = _run(capsys, ["norms", "--x", str(p["x"]), "--safetensors", str(f0), "--activation", "x"])
    assert code == 2 and err.strip() == f"sapa: error: --safetensors {f0}: tensor wq has shape (); a weight is a matrix"
    import safetensors

    loaded = []
    real_open = safetensors.safe_open

    class Spy:  # records every tensor read in full
        def __init__(self, *args, **kwargs):
            self.fh = real_open(*args, **kwargs)

        def __enter__(self):
            self.inner = self.fh.__enter__()
            return self

        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)

        def keys(self):
            return self.inner.keys()

        def get_slice(self, k):
            return self.inner.get_slice(k)

        def get_tensor(self, k):
            loaded.append(k)
            return self.inner.get_tensor(k)

    monkeypatch.setattr(safetensors, "safe_open", Spy)
    code, _, err = _run(capsys, ["norms", "--x", str(p["x"]), "--safetensors", str(f1), "--activation", "x"])
    assert code == 2 and err.strip() == (f"sapa: error: --safetensors {f1}: tensor wq (wq) has D = 5 rows in the (D, ·) "
                                         "layout but X has D = 4 columns")
    assert loaded == []  # refused from the header: nothing was read


def test_a_family_id_gives_the_norms_of_its_expression(mats, capsys):
    """``--activation relu_N`` is the row of theory/families.py: the same numbers as its expression."""
    _, p = mats
    base = ["norms", "--x", str(p["x"]), "--w", str(p["w"]), "--json", "--activation"]
    by_id = json.loads(_run(capsys, base + ["relu_N"])[1])
    by_expr = json.loads(_run(capsys, base + ["Max(x, 0)/N"])[1])
    assert by_id["fro_norm"] == by_expr["fro_norm"] and by_id["jac_fro_norm"] == by_expr["jac_fro_norm"]


def _layer_file(a: dict, folder, config: str | None):
    """``a``'s W_Q, W_K, W_V, W_O as a BERT-layout layer file in ``folder``, with ``config`` as config.json beside it."""
    from safetensors.numpy import save_file

    folder.mkdir(exist_ok=True)
    f = folder / "model.safetensors"
    save_file({f"encoder.layer.0.attention.self.{n}.weight": np.ascontiguousarray(a[k].T)
               for n, k in (("query", "wq"), ("key", "wk"), ("value", "wv"))}, str(f))
    if config is not None:
        (folder / "config.json").write_text(config)
    return f


def test_a_layer_file_takes_its_heads_from_the_config_beside_it(mats, capsys, tmp_path):
    """num_attention_heads = 2 in config.json: the same numbers as --wq/--wk with --heads 2, and the text says so."""
    a, p = mats
    f = _layer_file(a, tmp_path / "m", json.dumps({"num_attention_heads": 2, "hidden_size": 4}))
    _, out1, _ = _run(capsys, ["norms", "--x", str(p["x"]), "--safetensors", str(f), "--activation", "x**3", "--json"])
    _, out2, _ = _run(capsys, ["norms", "--x", str(p["x"]), "--wq", str(p["wq"]), "--wk", str(p["wk"]), "--wv",
                               str(p["wv"]), "--heads", "2", "--activation", "x**3", "--json"])
    r = json.loads(out1)
    assert r.pop("heads_from") == "config.json" and r == json.loads(out2) and r["heads"] == 2
    _, text, _ = _run(capsys, ["norms", "--x", str(p["x"]), "--safetensors", str(f), "--activation", "x**3"])
    assert re.search(r"^heads\s+: 2 \(from config\.json\)$", text, re.M) and "heads_from" not in text
    code, out, _ = _run(capsys, ["norms", "--x", str(p["x"]), "--safetensors", str(f), "--activation", "x**3",
                                 "--heads", "2", "--json"])
    assert code == 0 and json.loads(out)["heads_from"] == "--heads, as config.json"


@pytest.mark.parametrize("config, heads, msg", [
    (None, None, "the number of heads is unknown (no config.json with num_attention_heads beside it), and W_Q's "
                 "columns are H·d for any H that divides them: give --heads H (--heads 1 reads the layer as one head)"),
    ('{"hidden_size": 4}', None, "the number of heads is unknown"),  # a config without the count: as none
    ('{"num_attention_heads": 2}', "1", "--heads 1 contradicts"),
    ('{"num_attention_heads": 2}', "4", "num_attention_heads = 2; drop --heads or give --heads 2"),
    ('{"num_attention_heads": 0}', None, "num_attention_heads = 0 is not a positive integer"),
    ('{"num_attention_heads": "2"}', "2", "num_attention_heads = '2' is not a positive integer"),
    ('{"num_attention_heads": true}', None, "is not a positive integer"),
    ("{not json", "2", "cannot be read (JSONDecodeError)"),
])
def test_a_layer_file_without_a_known_head_count_or_against_its_config_is_refused(mats, capsys, tmp_path, config,
                                                                                     heads, msg):
    a, p = mats
    f = _layer_file(a, tmp_path / "m", config)
    extra = [] if heads is None else ["--heads", heads]
    code, out, err = _run(capsys, ["norms", "--x", str(p["x"]), "--safetensors", str(f), "--activation", "x", *extra])
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("sapa: error: ") and msg in err, err


def test_minilm_layer_0_is_read_as_its_twelve_heads(capsys):
    """all-MiniLM-L6-v2 (D = 384, 12 heads of d = 32): heads from its config.json, the norm against the twelve heads
    of sapa.empirics.realmodel (its own loader and config), and --heads 1 refused (it read 4.70e7 as one head, 1.51e7 as
    twelve, on the issue's input)."""
    real = pytest.importorskip("sapa.empirics.realmodel.real_model")
    if not real.available():
        pytest.skip("optional extra 'real' not installed")
    folder = real.model_dir()
    w = real.load_weights(folder)
    X = np.random.default_rng(55).standard_normal((12, w.config.hidden))  # (N, D)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "x.npy", X)
        argv = ["norms", "--x", str(Path(tmp) / "x.npy"), "--safetensors", str(folder / "model.safetensors"),
                "--prefix", "encoder.layer.0.", "--activation", "x**3/sqrt(N)"]
        code, out, err = _run(capsys, argv + ["--json"])
        assert code == 0, err
        r = json.loads(out)
        code1, out1, err1 = _run(capsys, argv + ["--heads", "1"])
    assert (r["heads"], r["heads_from"], w.config.n_heads) == (12, "config.json", 12)
    phi2 = 0.0
    for h in range(12):
        qk = real.head_qk(w, 0, h)
        S = (X @ qk.W_Q) @ (X @ qk.W_K).T  # (N, d) @ (d, N): the layer's logits without biases, as sapa norms reads it
        phi2 += float(np.sum((S**3 / np.sqrt(X.shape[0])) ** 2))
    assert r["fro_norm"] == pytest.approx(np.sqrt(phi2), rel=1e-10)
    assert code1 == 2 and out1 == "" and "--heads 1 contradicts" in err1 and "num_attention_heads = 12" in err1
