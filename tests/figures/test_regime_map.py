"""Tests for `figures/regime_map.py` (Figure 3): the exact grid and a small run."""

import numpy as np
import pytest

from sapa.figures import regime_map
from sapa.theory.moments import exact_moments


@pytest.mark.parametrize("model", ["iid", "tied", "corr"])
@pytest.mark.parametrize("p", [1, 3])
def test_regime_grid_matches_exact_moments(p, model):
    Ns, Ds = [8, 196, 4096], [16, 384, 768]
    E, Nstar = regime_map.regime_grid(p, model, Ns, Ds, d=64, rho=0.5)
    assert E.shape == (3, 3) and Nstar.shape == (3,)
    for i, D in enumerate(Ds):
        for j, N in enumerate(Ns):
            em = exact_moments(p, model, N, D, 64, rho=0.5 if model == "corr" else 0.0)
            assert abs(E[i, j] - em.growth_exponent) < 1e-12
        assert abs(Nstar[i] - em.crossover_n) < 1e-12 * em.crossover_n


def test_regimes():
    Ns = np.geomspace(8, 65536, 25)
    E, Nstar = regime_map.regime_grid(3, "tied", Ns, [768], d=64)
    assert np.all(np.diff(E[0]) > 0) and 0 <= E.min() and E.max() < 0.5  # rises from flat towards √N
    i = np.argmin(np.abs(Ns - Nstar[0]))  # at the crossover e ≈ 1/4
    assert abs(E[0, i] - 0.25) < 0.05
    E, _ = regime_map.regime_grid(1, "iid", Ns, [16, 1024], d=64)
    assert E[:, Ns >= 16].min() >= 0.45


def test_main_small(tmp_path):
    paths = regime_map.main(tmp_path, small=True)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)
    assert paths[0].name == "regime_map_p1-3_d64_rho0p5_N8-65536_D16-1024_grid61x13.png"
