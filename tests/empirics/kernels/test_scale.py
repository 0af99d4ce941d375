"""Tests for `empirics/kernels/scale.py`: one name per scale rule, one rule → coefficient function."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.common.validate import InputError
from sapa.empirics.kernels.scale import RULES, Scale, canonical_rule, coefficient, row_coefficients


def test_the_causal_alias_is_one_rule():
    assert canonical_rule("dynamic_causal") == canonical_rule("inv_sqrt_i") == "inv_sqrt_i"
    assert Scale("dynamic_causal") == Scale("inv_sqrt_i") and Scale("inv_sqrt_i").per_row
    with pytest.raises(InputError):
        canonical_rule("bogus")


@pytest.mark.parametrize("N", [1, 7, 64])
def test_row_coefficients_are_the_formulas(N):
    i = np.arange(1, N + 1)
    assert np.array_equal(row_coefficients("inv_sqrt_i", N), 1 / np.sqrt(i))
    assert np.array_equal(row_coefficients("inv_i", N), 1 / i)
    assert np.array_equal(row_coefficients("inv_sqrt_n", N), np.full(N, 1 / math.sqrt(N)))
    assert np.array_equal(row_coefficients("fixed", N, N_train=16), np.full(N, 0.25))
    assert np.array_equal(row_coefficients("const", N, c=0.5), np.full(N, 0.5))
    assert np.array_equal(row_coefficients("inv_sqrt_d", N, d=64), np.full(N, 0.125))


def test_global_coefficients_and_missing_parameters():
    assert coefficient("inv_sqrt_n", 256) == 1 / 16 and Scale("fixed", N_train=64).coefficient(1024) == 0.125
    assert Scale("const", c=2.0).coefficient(5) == 2.0 and Scale("inv_sqrt_d").coefficient(5, d=4) == 0.5
    for rule in ("const", "inv_sqrt_d", "fixed", "inv_sqrt_i", "inv_i"):
        with pytest.raises(InputError):
            coefficient(rule, 16)
    assert set(RULES) >= {"inv_sqrt_n", "inv_sqrt_i", "const"}
