"""Tests for `figures/audit_compare.py`: it draws a result, or its stored JSON, and asserts its claims."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sapa.common import figdata
from sapa.empirics.experiments.activation_sampling import run_audit_compare
from sapa.figures import audit_compare
from sapa.theory.families import family


@pytest.fixture(scope="module")
def res():
    return run_audit_compare(Ns=(8, 32, 128, 512), mc_Ns=(16, 32, 64), trials=8)


def test_draw_and_redraw_from_stored_json(res, tmp_path):
    audit_compare.check(res)
    stem = audit_compare.stored_stem(res)
    assert stem.startswith("audit_compare_D64_d64_trials8")
    paths = audit_compare.draw(res, tmp_path / "a", stem)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)
    figdata.write(tmp_path / "data" / "audit_compare.json", res.to_json(), stem)
    again = audit_compare.main(tmp_path, tmp_path / "b")
    assert [p.name for p in again] == [p.name for p in paths]


def test_check_rejects_a_softmax_above_its_bound(res):
    key = (family("softmax").label, "iid")
    bad = dataclasses.replace(res.curves[key], constant=np.array([1.5, 1.5, 1.5]))
    with pytest.raises(AssertionError):
        audit_compare.check(dataclasses.replace(res, curves={**res.curves, key: bad}))
