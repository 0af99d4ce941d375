"""Tests for `sapa/cli.py`: the public contract of the ``sapa`` command (docs/commands.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from sapa.cli import main


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def xw(tmp_path):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((6, 3))
    W = rng.standard_normal((3, 3))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "W.npy", W)
    return tmp_path, X, W


@pytest.mark.parametrize("activation,p,scale,mask", [
    ("softmax", 1, 1.0, "none"), ("softmax", 1, 0.3, "causal"),
    ("poly", 1, 1.0, "none"), ("poly", 3, 0.5, "causal"), ("poly", 2, 2.0, "none"),
])
def test_norms_json_agrees_with_autograd(xw, capsys, activation, p, scale, mask):
    import torch

    from sapa.empirics.kernels.norms import jacobian_autograd, kernel_family

    d, X, W = xw
    code, out, err = _run(["norms", "--x", str(d / "X.npy"), "--w", str(d / "W.npy"), "--activation", activation,
                           "--p", str(p), "--scale", str(scale), "--mask", mask, "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    act = kernel_family(activation, p, scale)
    J = jacobian_autograd(X, W, act, mask=mask)
    Xt, Wt = torch.as_tensor(X), torch.as_tensor(W)
    S = Xt @ Wt @ Xt.T  # (N, D) @ (D, D) @ (D, N)
    if activation == "softmax":
        if mask == "causal":
            S = S.masked_fill(torch.triu(torch.ones_like(S, dtype=torch.bool), 1), float("-inf"))
        P = torch.softmax(scale * S, dim=-1)
    else:
        P = scale * S**p
        if mask == "causal":
            P = torch.tril(P)
    assert got["fro_norm"] == pytest.approx(float(torch.linalg.norm(P)), rel=1e-12)
    assert got["jac_fro_norm"] == pytest.approx(float(torch.linalg.vector_norm(J)), rel=1e-10)
    assert set(got) >= {"fro_norm", "jac_fro_norm", "n", "d_model", "activation"}


def test_norms_text_output(xw, capsys):
    d, _, _ = xw
    code, out, _ = _run(["norms", "--x", str(d / "X.npy"), "--w", str(d / "W.npy"), "--activation", "softmax"], capsys)
    assert code == 0 and "jac_fro_norm" in out


def _bad_files(tmp_path):
    good_x = tmp_path / "X.npy"
    np.save(good_x, np.ones((4, 3)))
    good_w = tmp_path / "W.npy"
    np.save(good_w, np.eye(3))
    nan_x = tmp_path / "nan.npy"
    np.save(nan_x, np.array([[np.nan, 1.0, 0.0]] * 4))
    wrong_w = tmp_path / "wrong.npy"
    np.save(wrong_w, np.eye(4))
    vec = tmp_path / "vec.npy"
    np.save(vec, np.ones(3))
    junk = tmp_path / "junk.npy"
    junk.write_text("not an array")
    empty = tmp_path / "empty.npy"
    np.save(empty, np.ones((0, 3)))
    return dict(x=str(good_x), w=str(good_w), nan=str(nan_x), wrong=str(wrong_w), vec=str(vec), junk=str(junk),
                empty=str(empty), missing=str(tmp_path / "missing.npy"))


@pytest.mark.parametrize("argv", [
    ["norms", "--x", "{missing}", "--w", "{w}", "--activation", "poly"],
    ["norms", "--x", "{nan}", "--w", "{w}", "--activation", "poly"],
    ["norms", "--x", "{x}", "--w", "{wrong}", "--activation", "poly"],
    ["norms", "--x", "{vec}", "--w", "{w}", "--activation", "poly"],
    ["norms", "--x", "{junk}", "--w", "{w}", "--activation", "poly"],
    ["norms", "--x", "{empty}", "--w", "{w}", "--activation", "poly"],
    ["norms", "--x", "{x}", "--w", "{w}", "--activation", "relu"],
    ["norms", "--x", "{x}", "--w", "{w}", "--activation", "poly", "--p", "0"],
    ["norms", "--x", "{x}", "--w", "{w}", "--activation", "poly", "--p", "1.5"],
    ["norms", "--x", "{x}", "--w", "{w}", "--activation", "poly", "--scale", "-1"],
    ["norms", "--x", "{x}", "--w", "{w}", "--activation", "poly", "--scale", "nan"],
    ["norms", "--x", "{x}", "--w", "{w}", "--activation", "poly", "--mask", "diagonal"],
    ["norms", "--x", "{x}", "--w", "{w}", "--activation", "poly", "--bogus"],
    ["verify", "--budget", "huge"],
    ["verify", "--seed", "-3"],
    ["verify", "--only", "no-such-claim"],
    ["calibrate", "--rule", "no-such-rule"],
    ["exact", "--p", "1", "--model", "iid", "--N", "8", "--D", "4", "--d", "2", "--rho", "0.3"],  # ignored option
    ["calibrate", "--trials", "0"],
    ["frobnicate"],
    [],
])
def test_bad_input_one_line_exit_2(tmp_path, capsys, argv):
    files = _bad_files(tmp_path)
    argv = [a.format(**files) for a in argv]
    code, out, err = _run(argv, capsys)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sapa: error: "), err
    assert "Traceback" not in err


def test_verify_writes_ledger_and_report(softmax_verify):
    code, out, err, out_dir, ledger = softmax_verify  # tests/conftest.py: one verify run, shared with test_ledger
    assert code == 0, err
    ids = [c["id"] for c in ledger["claims"]]
    assert ids == ["thm4.1-norm", "thm4.1-jacobian"]
    for c in ledger["claims"]:
        assert set(c) >= {"id", "statement", "verdict", "evidence", "figures", "kind", "readings", "rule"}
    assert set(ledger["monte_carlo"]) >= {"first_pass_coverage", "nominal", "series"}
    assert "CLAIMS OF THE PAPER" in out
    jac = ledger["claims"][1]
    assert jac["evidence"]["sharp_constant"] == 0.5  # the sharp constant, stated as a number
    assert "thm4.1-jacobian" in out and jac["verdict"] in out
    assert (out_dir / "report.md").read_text().startswith("# sapa report")
    assert ledger["provenance"]["seed"] == 0 and ledger["provenance"]["dtype"] == "float64"
    assert not list(out_dir.glob("*.tmp"))


def test_calibrate_json_prints_every_rules_rates(capsys):
    code, out, err = _run(["calibrate", "--json", "--trials", "50", "--rule", "bound", "direction", "mc-agreement"],
                          capsys)
    assert code == 0, err
    data = json.loads(out)
    from sapa.rules import all_rules

    order = [r.name for r in all_rules()]  # the rules in their registry's order (sapa.rules: modules by name)
    assert [r["rule"] for r in data["rules"]] == sorted(["bound", "direction", "mc-agreement"], key=order.index)
    for r in data["rules"]:
        assert {"rule", "false_fails_rate", "false_holds_rate", "power", "trials"} <= set(r) and r["trials"] == 50
        assert 0 <= r["false_fails_rate"] <= 1 and 0 <= r["power"] <= 1
    code, text, _ = _run(["calibrate", "--trials", "50", "--rule", "bound"], capsys)
    assert code == 0 and "false FAILS" in text and "bound" in text


def test_version(capsys):
    import sapa

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"sapa {sapa.__version__}"


def test_console_script_entry_point():
    r = subprocess.run([sys.executable, "-m", "sapa.cli", "norms"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_verify_runs_the_training_readers_after_the_other_checks_and_the_timings_last():
    """The run order keeps both cores busy while the prefetched study trains; the ledger order is unchanged."""
    from types import SimpleNamespace

    from sapa.claim_ids import ORDER
    from sapa.commands.verify import TRAINED, verify_order

    ran = [c.id for c in verify_order([SimpleNamespace(id=i) for i in ORDER])]
    assert sorted(ran) == sorted(ORDER)
    assert ran[-1] == "overhead"
    assert set(ran[-1 - len(TRAINED):-1]) == set(TRAINED)
    rest = [i for i in ORDER if i not in TRAINED and i != "overhead"]
    assert ran[:len(rest)] == rest  # ledger order within the group
    from sapa.figures.regenerate import JOBS

    # the ledger's own figures are drawn before the first late entry: they may illustrate earlier checks only
    assert all(cid in rest for job in JOBS for cid in job.claims)
