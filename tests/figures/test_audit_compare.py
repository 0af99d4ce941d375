"""Tests for `figures/audit_compare.py`: the small main asserts its claims and saves PNG + PDF."""

from __future__ import annotations

import numpy as np
import pytest

from figures import audit_compare


def test_main_small(tmp_path):
    paths = audit_compare.main(tmp_path, small=True)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)
    assert "audit_compare_D64_d64_trials8" in paths[0].name


def test_check_rejects_a_softmax_above_its_bound():
    res = audit_compare.compute(Ns=(8, 64, 128), mc_Ns=(8, 16), trials=4)
    audit_compare.check(res)
    bad = {**res["curves"]}
    bad[("softmax(x/8)", "iid")] = {**bad[("softmax(x/8)", "iid")], "constant": np.array([1.5, 1.5])}
    with pytest.raises(AssertionError):
        audit_compare.check({**res, "curves": bad})


def test_six_activations_two_models():
    assert len(audit_compare.ACTIVATIONS) == 6 and audit_compare.MODELS == ("iid", "tied")
