"""Tests for `sapa/regime.py`: windows of N where a local exponent exceeds its edge, on profiles with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa import regime
from sapa.regime import exponent_windows, windows_text

EDGE = 0.55
HALF_WIDTH = math.sqrt(math.log(4.0))  # 0.5 + 0.2·exp(−u²) > 0.55  ⇔  |u| < √ln 4, u = log(N/N₀)


class Bump:
    """Exponents 0.5 + 0.2·exp(−log²(N/N₀)) for ``fro`` (N₀ = 100) and ``jac`` (N₀ = 10⁴); ``jac_s`` flat at 0.4."""

    def __init__(self):
        self.calls = 0

    def exponents(self, N) -> dict:
        self.calls += 1
        N = np.atleast_1d(np.asarray(N, dtype=np.float64))
        bump = lambda n0: 0.5 + 0.2 * np.exp(-np.log(N / n0) ** 2)  # noqa: E731
        return {"fro": bump(100.0), "jac_s": np.full_like(N, 0.4), "jac": bump(1e4)}


def test_windows_are_where_the_exponent_exceeds_the_edge():
    w = exponent_windows(Bump(), EDGE, n_min=16)
    assert [(x["from"], x["to"]) for x in w["windows"]] == [
        pytest.approx((100 * math.exp(-HALF_WIDTH), 100 * math.exp(HALF_WIDTH)), rel=1e-12),
        pytest.approx((1e4 * math.exp(-HALF_WIDTH), 1e4 * math.exp(HALF_WIDTH)), rel=1e-12)]
    assert all(x["peak"] == pytest.approx(0.7, abs=1e-3) and not x["below_n_min"] for x in w["windows"])
    assert w["sup_from_n_min"] == pytest.approx(0.7, abs=1e-3) and w["asymptotic"] == pytest.approx(0.5, abs=1e-6)
    assert len(w["by_quantity"]["fro"]) == 1 and len(w["by_quantity"]["jac"]) == 1 and w["by_quantity"]["jac_s"] == []
    assert w["by_quantity"]["fro"][0]["from"] == pytest.approx(100 * math.exp(-HALF_WIDTH), rel=1e-12)
    assert "N ≈ 30.81–324.6 (peak 0.700" in windows_text(w)
    assert windows_text(exponent_windows(Bump(), 0.8, n_min=16)).startswith("local exponent never above 0.80")


def test_each_n_is_evaluated_once_and_the_answer_is_unchanged():
    """The searches for the maximum and per quantity share the grid and bisection points (a memo): the same
    windows as searching on the profile itself, with a fraction of the evaluations."""
    memo, plain = Bump(), Bump()
    got = exponent_windows(memo, EDGE, n_min=16)
    want = regime._windows(plain, EDGE, 16, regime.N_LO, regime.N_HI, None)
    want["by_quantity"] = {q: regime._windows(plain, EDGE, 16, regime.N_LO, regime.N_HI, (q,))["windows"]
                           for q in ("fro", "jac_s", "jac")}
    assert got == want  # bit for bit
    assert memo.calls <= plain.calls / 2
