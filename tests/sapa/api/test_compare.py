"""Tests for `sapa/api/compare.py`: rows, the ReLU² half, every parameter-free family and two unseen expressions."""

from __future__ import annotations

import json
import math

import pytest

from sapa.api.compare import AXES, compare, resolve_rows
from sapa.common.validate import InputError
from sapa.theory.families import FAMILY_TABLE


@pytest.fixture(scope="module")
def card():
    return compare(["x**2/N", "Max(x,0)**2/N", "x/(1+Abs(x))", "x3_sqrti"], "tiny")


def test_relu_square_is_exactly_half_of_the_square_under_iid_weights(card):
    """W_K → −W_K leaves iid weights' law unchanged and flips S: E Max(S,0)⁴ = ½ E S⁴, entry by entry (quadrature
    against a closed form: round-off)."""
    a, b = (card.cell(r, "size").extra for r in ("x**2/N", "Max(x,0)**2/N"))
    assert b["expected_fro2"] / a["expected_fro2"] == pytest.approx(0.5, rel=1e-12)
    assert b["expected_jac_fro2"] / a["expected_jac_fro2"] == pytest.approx(0.5, rel=1e-12)


def test_every_axis_of_every_row_and_json_without_nan(card):
    d = card.to_dict()
    json.dumps(d, allow_nan=False)
    assert [r["id"] for r in d["rows"]][0] == "softmax" and all(set(c) == set(AXES) for c in d["cells"])
    for row in card.cells:
        for c in row:
            assert c.value is not None or c.note.startswith("not computed"), c
            assert c.verdict is not None or c.note, c


def test_a_mask_only_family_says_why_its_ball_is_not_computed(card):
    c = card.cell("x3_sqrti", "lipschitz")
    assert c.value is None and "causal" in c.note


@pytest.mark.parametrize("bad", ["nope(", "x_alpha", "x@col", ""])
def test_bad_input_is_refused_before_any_work(bad):
    with pytest.raises(InputError):
        resolve_rows([bad])


def test_a_family_id_and_its_expression_give_the_same_audit():
    c = compare(["relu_N", "Max(x, 0)/N"], "tiny")
    a, b = c.cell("relu_N", "size"), c.cell("Max(x, 0)/N", "size")
    assert a.value == b.value and a.verdict == b.verdict


@pytest.mark.slow
def test_every_parameter_free_family_and_two_unseen_expressions_walk_through():
    ids = [f.id for f in FAMILY_TABLE if not f.params and f.id != "softmax"]
    card = compare([*ids, "Max(x,0)**2/N", "x/(1+Abs(x))"], "tiny")
    assert len(card.rows) == len(ids) + 3
    for r, row in zip(card.rows, card.cells):
        for c in row:
            assert c.value is None or isinstance(c.value, float) and (math.isfinite(c.value) or c.note), (r.id, c)
