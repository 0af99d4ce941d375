"""Tests for `figures/norm_scaling.py` (Figures 1 and 2): small runs, exact curves, drawing from stored results."""

import math

import numpy as np
import pandas as pd
import pytest

from sapa.empirics.montecarlo.sweep import summarise
from sapa.figures import norm_scaling
from sapa.theory.moments import exact_moments


@pytest.fixture(scope="module")
def tiny():
    """The small self-run sweep (cached in the module, so Figures 1 and 2 share it)."""
    df, _ = norm_scaling._tiny_sweep(True)
    return df


@pytest.mark.parametrize("quantity, prefix", [("fro", "norm_vs_n_"), pytest.param("jac_fro", "jac_norm_vs_n_",
                                                                               marks=pytest.mark.slow)])
def test_main_small(tmp_path, tiny, quantity, prefix):
    """main(small=True) for Figure 1 (Figure 2, the Jacobian's, in the slow run: by default it is drawn from a stored
    summary and from a stored sweep, with its file names, in test_draw_from_stored_summary)."""
    paths = norm_scaling.main(tmp_path, small=True, quantity=quantity)
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)
    assert paths[0].name.startswith(prefix + "D64_d16_rho0p5_trials32_N8-128")


@pytest.mark.parametrize("model", ["paper", "iid", "tied", "corr"])
@pytest.mark.parametrize("quantity", ["fro", "jac_fro"])
def test_exact_sq_matches_exact_moments(model, quantity):
    D, d = 24, 8
    sigma = 1.0 if model == "paper" else 1 / math.sqrt(D)
    for p in (1, 3):
        Ns = [2, 7, 196]
        got = norm_scaling.exact_sq(p, model, Ns, D, d, quantity, rho=0.5)
        for N, g in zip(Ns, got):
            em = exact_moments(p, model, N, None if model == "paper" else D, d, rho=0.5 if model == "corr" else 0.0,
                               sigma=sigma)
            want = em.expected_fro2 if quantity == "fro" else em.expected_jac_fro2
            assert abs(g / want - 1) < 1e-12


def test_draw_from_stored_summary(tmp_path, tiny):
    """`draw` needs only a stored summary; `main(results=...)` redraws a stored sweep without sampling."""
    summ = summarise(tiny)
    summ.to_parquet(tmp_path / "summary.parquet")
    back = pd.read_parquet(tmp_path / "summary.parquet")
    fig = norm_scaling.draw(back, 64, 16, "jac_fro")
    assert sum(ax.get_visible() for ax in fig.axes) == 4
    # a stored sweep directory (no provenance metadata: defaults σ_w = 1/√D, σ_ab = 1)
    from sapa.common.validate import InputError
    from sapa.empirics.montecarlo.sweep.store import _write_parquet

    (tmp_path / "sweep").mkdir()
    _write_parquet(tmp_path / "sweep" / "results.parquet", tiny, {})  # sealed, as `sapa sweep` writes it
    paths = norm_scaling.main(tmp_path / "figs", results=tmp_path / "sweep", quantity="jac_fro")
    assert [p.name for p in paths] == ["jac_norm_vs_n_D64_d16_rho0p5_trials32_N8-128.png",
                                       "jac_norm_vs_n_D64_d16_rho0p5_trials32_N8-128.pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)
    tiny.assign(mean_sq=float("nan")).to_parquet(tmp_path / "sweep" / "results.parquet")  # edited: no checksum
    with pytest.raises(InputError, match="no content checksum"):
        norm_scaling.main(tmp_path / "figs2", results=tmp_path / "sweep", quantity="fro")


def test_claim_holds_and_a_wrong_curve_is_caught(tiny):
    summ = summarise(tiny)
    res = norm_scaling.check(summ, 64, 16, "fro")
    norm_scaling.assert_claim(res, "fro")
    mc, exact = res["slopes"][("iid", "x/√N")]
    assert abs(mc - 0.5) < 0.1 and abs(exact - 0.5) < 0.01
    assert 3 < res["k"] < 5 and res["K"] == 4 * 2 * 5  # models × powers × N
    # negative control: a 10 % error in one x/√N cell (tolerance ≈ 1–4 % there) must be flagged
    bad = summ.copy()
    m = (bad["weight_model"] == "iid") & (bad["scale_policy"] == "inv_sqrt_n") & (bad["p"] == 1) & (bad["N"] == 64)
    bad.loc[m, "mean_sq"] *= 1.1**2
    res = norm_scaling.check(bad, 64, 16, "fro")
    assert not res["points"]["ok"].all()
    with pytest.raises(AssertionError, match="disagrees"):
        norm_scaling.assert_claim(res, "fro")


def test_tolerance_formula():
    """tol = k·ĈV·√(1 + ĈV²)/(2√T): Kish's T_eff = T/(1 + ĈV²) in the delta-method SE of the RMS."""
    rows = []
    for N, cv in ((8, 0.1), (16, 2.0)):
        rows.append({"quantity": "fro", "weight_model": "paper", "D": 4, "d": 4, "activation": "poly", "p": 1,
                     "scale_policy": "inv_sqrt_n", "c": np.nan, "rho": 0.0, "row": -1, "N": N, "n": 25,
                     "mean_sq": 4.0 * N, "std_sq": cv * 4.0 * N, "se_sq": cv * 4.0 * N / 5})  # E = N²d/N
    res = norm_scaling.check(pd.DataFrame(rows), 4, 4, "fro")
    pts = res["points"]
    assert np.allclose(pts["rel_err"], 0.0, atol=1e-12)  # E‖S‖² = N²d for the paper model, times 1/N
    assert np.allclose(pts["se_rel"], [0.1 * math.sqrt(1.01) / 10, 2.0 * math.sqrt(5.0) / 10])
    assert np.allclose(pts["tol"], res["k"] * pts["se_rel"])


def test_bad_quantity():
    with pytest.raises(ValueError, match="quantity"):
        norm_scaling.main(small=True, quantity="spectral")
