"""Tests for `figures/lipschitz_ball.py`: its check rejects an input above the bound; it draws from stored data."""

from __future__ import annotations

import copy

import pytest

from sapa.empirics.experiments.lipschitz_ball import BallConfig, run_ball
from sapa.empirics.kernels.ball_ascent import AscentConfig
from sapa.empirics.realmodel.layer_lipschitz import LayerLipschitzResult
from sapa.figures import lipschitz_ball as fig


@pytest.fixture(scope="module")
def data():
    ball = run_ball(BallConfig(ns=(2, 4, 8), betas=(2.0,), D=4, d=4, d_v=4, ascent=AscentConfig(restarts=3, steps=5)))
    real = LayerLipschitzResult([], 6, 0)
    return {"ball": ball.to_json(), "real": real.to_json()}


def test_check_catches_a_bound_that_is_too_small(data):
    fig.check(data)
    bad = copy.deepcopy(data)
    bad["ball"]["rows"][0]["bound"] = 0.5 * bad["ball"]["rows"][0]["sigma_lower"]
    with pytest.raises(AssertionError):
        fig.check(bad)


def test_draws_and_redraws_from_stored_data(data, tmp_path):
    from sapa.common import figdata

    stem = fig.stored_stem(data)
    assert stem.startswith(fig.NAME)
    paths = fig.draw(data, tmp_path, stem)
    assert all(p.is_file() for p in paths)
    figdata.write(tmp_path / "res" / "data" / f"{fig.NAME}.json", data, stem)
    assert all(p.is_file() for p in fig.main(tmp_path / "res"))
