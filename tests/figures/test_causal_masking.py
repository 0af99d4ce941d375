"""Tests for `figures/causal_masking.py` (Figure 5): it draws a result, or its stored JSON, and asserts its claim."""

from __future__ import annotations

import dataclasses

import pytest

from sapa.common import figdata
from sapa.empirics.experiments.causal import run_causal_masking
from sapa.figures import causal_masking


@pytest.fixture(scope="module")
def res():
    return run_causal_masking(Ns=(64, 256), trials=(8, 4), max_trials=256, N_train=64, transfer_trials=2,
                              transfer_max_trials=64, n_boot=500)


def test_draw_and_redraw_from_stored_json(res, tmp_path):
    causal_masking.check(res)
    stem = causal_masking.stored_stem(res, "quick")
    assert "N64-256" in stem and "Ntrain64" in stem
    paths = causal_masking.draw(res, tmp_path / "a", stem)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)
    figdata.write(tmp_path / "data" / "causal_masking.json", res.to_json(), stem)
    again = causal_masking.main(tmp_path, tmp_path / "b")
    assert [p.name for p in again] == [p.name for p in paths]


def test_check_rejects_a_disagreeing_bin(res):
    N, p = next(iter(res.agree))
    bad = res.agree[(N, p)].assign(agree=False)
    with pytest.raises(AssertionError):
        causal_masking.check(dataclasses.replace(res, agree={**res.agree, (N, p): bad}))
