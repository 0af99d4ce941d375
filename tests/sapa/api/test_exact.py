"""Tests for `sapa/api/exact.py`: ``sapa.exact`` against an independent Gaussian identity, the command's JSON, torch
input and one-line refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import sapa
from sapa.common.validate import InputError


def test_shared_p1_matches_the_gaussian_quadratic_form_identity():
    """p = 1, fixed W, x ~ N(0, I): E(x₁ᵀWx₂)² = ‖W‖²_F and E(xᵀWx)² = (tr W)² + 2‖(W + Wᵀ)/2‖²_F, so
    E‖S‖²_F = N(N−1)‖W‖²_F + N[(tr W)² + 2‖W_s‖²_F] (an identity independent of sapa.theory)."""
    W = np.array([[1.0, 2.0, 0.0], [-1.0, 0.5, 1.0], [0.0, 3.0, -2.0]])
    N = 7
    Ws = (W + W.T) / 2
    want = N * (N - 1) * np.sum(W * W) + N * (np.trace(W) ** 2 + 2 * np.sum(Ws * Ws))
    r = sapa.exact(1, "shared", N, W=W)
    assert r.expected_fro2 == pytest.approx(want, rel=1e-12)
    assert sapa.exact(1, "shared", N, W=torch.tensor(W, dtype=torch.float32)).to_dict() == r.to_dict()


def test_to_dict_is_the_command_json(capsys):
    from sapa.cli import main

    assert main(["exact", "--p", "3", "--model", "iid", "--N", "196", "--D", "768", "--d", "64", "--json"]) == 0
    r = sapa.exact(3, "iid", N=196, D=768, d=64)
    assert json.loads(capsys.readouterr().out) == r.to_dict()
    assert r.growth_exponent == pytest.approx(0.5, abs=1e-3) and r.p == 3 and r.model == "iid"


@pytest.mark.parametrize("args, kw, line", [
    ((2, "iid", 10), {"d": 4}, "model='iid' needs D"),
    ((2, "iid", 10), {"D": 8}, "model='iid' needs d"),
    ((2, "shared", 10), {}, "model='shared' needs W"),
    ((2, "iid", 10), {"D": 8, "d": 4, "rho": 0.2}, "rho applies to model='corr' only, not iid"),
    ((2, "iid", 10), {"D": 8, "d": 4, "sigma": -1.0}, "sigma must be a positive finite number, got -1.0"),
    ((2, "iid", 10), {"D": 8, "d": 4, "W": np.eye(8)}, "W and sigma_x apply to model='shared' only"),
    ((0, "iid", 10), {"D": 8, "d": 4}, "p must be a positive integer, got 0"),
    ((2, "bogus", 10), {}, "model must be one of paper, shared, iid, tied, corr; got 'bogus'"),
    ((2, "shared", 10), {"W": np.ones((2, 3))}, "W must be square, got shape (2, 3)"),
])
def test_bad_input_is_one_line(args, kw, line):
    with pytest.raises(InputError) as e:
        sapa.exact(*args, **kw)
    assert str(e.value) == line


def test_result_is_frozen_and_json_ready():
    import dataclasses

    r = sapa.exact(2, "paper", 10, d=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.crossover_n = 1.0
    json.dumps(r.to_dict(), allow_nan=False)
    assert "formula" not in repr(r) and repr(r).startswith("ExactResult(p=2, model='paper', n=10,")
