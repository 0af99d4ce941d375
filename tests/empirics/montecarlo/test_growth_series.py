"""Tests for `empirics/montecarlo/growth_series.py`: the Monte Carlo and exact exponents of a sweep series."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sapa.empirics.montecarlo.growth_series import exact_rms_slope, fit_vs_exact, poly_series, rms_exponent, series_label


def test_exact_slope_is_half_the_power():
    N = [4, 16, 64, 256]
    assert exact_rms_slope(N, [7.0 * n**2.6 for n in N]) == pytest.approx(1.3, abs=1e-12)


def _sweep(rng, N, trials=300, exponent=0.5):
    """Rows of one fro series whose ‖·‖² = N^{2e}·χ²₂₀/20 (E‖·‖² = N^{2e} exactly) and its summary."""
    rows, summ = [], []
    for n in N:
        v = np.sqrt(n ** (2 * exponent) * rng.chisquare(20, size=trials) / 20)
        rows += [{"activation": "poly", "p": 1, "scale_policy": "inv_sqrt_n", "row": -1, "mask": "none",
                  "x_model": "iso", "c": math.nan, "weight_model": "iid", "rho": 0.0, "D": 8, "d": 8,
                  "quantity": "fro", "N": n, "value": x} for x in v]
        summ.append({"activation": "poly", "p": 1, "scale_policy": "inv_sqrt_n", "row": -1, "mask": "none",
                     "c": math.nan, "weight_model": "iid", "rho": 0.0, "D": 8, "d": 8, "quantity": "fro", "N": n,
                     "expected_sq": float(n ** (2 * exponent)), "z": float((np.mean(v**2) - n ** (2 * exponent))
                                                                            / (np.std(v**2, ddof=1) / math.sqrt(trials)))})
    return pd.DataFrame(rows), pd.DataFrame(summ)


def test_series_record_covers_the_exact_slope():
    df, summ = _sweep(np.random.default_rng(3), [8, 16, 32, 64])
    (rec,) = poly_series(df, summ, p=1, scale_policy="inv_sqrt_n", c=None, level=0.99)
    assert rec["exact_exponent_on_grid"] == pytest.approx(0.5, abs=1e-12)
    assert rec["trials"] == [300] * 4 and rec["cells"] == 4 and rec["c"] is None
    assert rec["mc_ci"][0] <= 0.5 <= rec["mc_ci"][1] and rec["agree"]
    assert rec == {**rec, **fit_vs_exact(df, summ.sort_values("N"), 0.99)}
    assert rms_exponent([8, 16], [np.ones(3), 2 * np.ones(3)], 0.9)["level"] == 0.9


def test_labels():
    assert series_label(3, "inv_sqrt_n", None) == "x^3/sqrt(N)" and series_label(1, "const", 0.0625) == "0.0625*x^1"
