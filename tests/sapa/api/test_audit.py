"""Tests for `sapa/api/audit.py`: ``sapa.audit`` is ``sapa audit --json``, takes torch weights as numpy ones, and
refuses bad input in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import sapa
from sapa.common.validate import InputError


def _cli(argv, capsys) -> dict:
    from sapa.cli import main

    assert main(["audit", *argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    out.pop("seconds")
    return out


@pytest.mark.parametrize("expr, argv, kw", [
    ("x**3/sqrt(N)", [], {}),
    ("x/N", ["--model", "tied", "--D", "64", "--d", "8", "--logit-scale", "S"],
     {"model": "tied", "D": 64, "d": 8, "logit_scale": "S"}),
    ("exp(x)", ["--normalize", "row", "--N", "16", "--trials", "20", "--D", "32", "--d", "4"],
     {"normalize": "row", "N": 16, "trials": 20, "D": 32, "d": 4}),
])
def test_to_dict_is_the_command_json(capsys, expr, argv, kw):
    r = sapa.audit(expr, **kw)
    want = _cli([expr, *argv], capsys)
    got = r.to_dict()
    got.pop("seconds")
    assert got == want
    assert r.verdict == want["verdict"] and r.method == want["method"]


def test_x3_sqrtN_grows_like_sqrtN_at_vit_base():
    r = sapa.audit("x**3/sqrt(N)")
    assert r.method == "exact" and r.growth_exponent == pytest.approx(0.5, abs=0.01)
    assert set(r.conventions) == {"S/sqrt(d)", "S"} and r.verdict in ("HOLDS", "HOLDS_IN_REGIME", "FAILS")


def test_shared_weights_as_a_torch_tensor_equal_numpy():
    W = np.random.default_rng(0).standard_normal((6, 6)) / 6
    a = sapa.audit("x**2/N", model="shared", W=W, d=3, N=32).to_dict()
    b = sapa.audit("x**2/N", model="shared", W=torch.tensor(W, dtype=torch.float64), d=3, N=32).to_dict()
    a.pop("seconds"), b.pop("seconds")
    assert a == b


@pytest.mark.parametrize("expr, kw, words", [
    ("x", {"model": "shared"}, "model='shared' needs W"),
    ("x", {"rho": 0.3}, "rho applies to model='corr' only, not iid"),
    ("x", {"N": 0}, "N must be a positive integer, got 0"),
    ("x", {"normalize": "col"}, "normalize must be one of none, row; got 'col'"),
    ("x", {"model": "shared", "W": np.ones((3, 4))}, "W must be square, got shape (3, 4)"),
    (3, {}, "expr must be a string"),
])
def test_bad_input_is_one_line(expr, kw, words):
    with pytest.raises(InputError) as e:
        sapa.audit(expr, **kw)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_result_is_frozen_and_json_ready():
    import dataclasses

    r = sapa.audit("x/sqrt(N)", D=64, d=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.verdict = "FAILS"
    with pytest.raises(TypeError):
        r.data["readings"]["rate"]["verdict"] = "FAILS"
    json.dumps(r.to_dict(), allow_nan=False)
    assert repr(r).startswith(f"AuditResult(verdict={r.verdict!r}, activation='x/sqrt(N)', logit_scale='S/sqrt(d)'")


def test_an_infinite_expectation_fails_by_construction():
    r = sapa.audit("1/x")
    assert r.verdict == "FAILS" and r.constant_vs_softmax == float("inf")
    assert r.to_dict()["constant_vs_softmax"] is None  # JSON-ready: ∞ as null, as the command prints it
