"""Tests for `empirics/experiments/scale_direction.py`: the norm-only kernel, exact vs Monte Carlo, matching scales, exponents."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from sapa.empirics.kernels.norms import attention_norms, paper_model_norms
from sapa.theory.families import power, softmax
from sapa.empirics.experiments.scale_direction import (
    exact_fro2,
    fit_scale_exponents,
    matching_scales,
    row_norms2,
    sample_factors,
    sample_norms,
    trials_per_n,
)
from sapa.common.validate import InputError
from tests.tolerances import RTOL as TOLERANCES

RTOL = TOLERANCES["float64"]  # float64 kernel vs float64 reference kernel at N ≤ 12 (observed ~1e-15)


def _xw(N: int, D: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, D)), rng.standard_normal((D, D)) / math.sqrt(D)


@pytest.mark.parametrize("mask", ["none", "causal"])
@pytest.mark.parametrize("N,D", [(1, 2), (5, 3), (12, 4)])
def test_row_norms2_matches_attention_norms(mask, N, D):
    X, W = _xw(N, D, 7 * N + D)
    L, R = torch.from_numpy(X @ W)[None], torch.from_numpy(X)[None]  # S = (XW) Xᵀ
    got = row_norms2(L, R, tau=0.7, ps=(1, 2, 3), mask=mask)
    ref = attention_norms(X, W, softmax(0.7), mask, with_rows=True).row_fro ** 2
    assert np.allclose(got["softmax"][0].numpy(), ref, rtol=RTOL, atol=0)
    for p in (1, 2, 3):
        ref = attention_norms(X, W, power(p), mask, with_rows=True).row_fro ** 2
        assert np.allclose(got[p][0].numpy(), ref, rtol=RTOL, atol=1e-300)


def test_row_norms2_paper_model_matches():
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((9, 4)), rng.standard_normal((9, 4))
    got = row_norms2(torch.from_numpy(A)[None], torch.from_numpy(B)[None], tau=0.5, ps=(3,))
    assert math.isclose(float(got[3].sum()), paper_model_norms(A, B, power(3)).fro ** 2, rel_tol=RTOL)
    assert math.isclose(float(got["softmax"].sum()),
                        paper_model_norms(A, B, softmax(0.5)).fro ** 2, rel_tol=RTOL)


def test_softmax_rows_bounded_and_causal_first_row_is_one():
    L, R = sample_factors("iid", 32, 16, 8, 6, seed=0, key="t")
    r = row_norms2(L, R, tau=1 / math.sqrt(8), mask="causal")
    assert float(r["softmax"].max()) <= 1 + 1e-15
    assert torch.allclose(r["softmax"][:, 0], torch.ones(6, dtype=torch.float64), rtol=0, atol=1e-15)


def test_sample_factors_deterministic_and_models():
    a = sample_factors("tied", 8, 6, 3, 2, seed=5, key={"k": 1})
    b = sample_factors("tied", 8, 6, 3, 2, seed=5, key={"k": 1})
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    A, B = sample_factors("paper", 8, 6, 3, 2, seed=5, key="p")
    assert A.shape == (2, 8, 3) and B.shape == (2, 8, 3)
    with pytest.raises(InputError):
        sample_factors("nope", 8, 6, 3, 2, seed=5, key="p")


def test_trials_design_equal_cost_and_capped():
    t = trials_per_n([8, 64, 512], 4, max_trials=100)
    assert t == {8: 100, 64: 100, 512: 4}
    assert trials_per_n([256, 512], 8) == {256: 32, 512: 8}


@pytest.mark.parametrize("model", ["paper", "iid", "tied"])
@pytest.mark.parametrize("p", [1, 3])
def test_exact_fro2_matches_monte_carlo(model, p):
    """Mean of ‖S^{∘p}‖²_F over T = 1500 seeded draws (N = 12, D = 8, d = 4) vs the exact E‖S^{∘p}‖²_F:
    one-sample t-test, p-value > 0.001; rerun once on fresh draws (x³ squared norms are heavy-tailed)."""
    ex = exact_fro2(p, model, 12, 8, 4)
    for seed in (11, 12):
        s = sample_norms([12], model, 8, 4, 1500, seed, ps=(p,))
        v = s.loc[s["quantity"] == f"poly{p}_fro2", "value"].to_numpy()
        assert v.size == 1500
        if stats.ttest_1samp(v, ex).pvalue > 0.001:
            return
    pytest.fail(f"MC mean {v.mean():.6g} vs exact {ex:.6g} (se {v.std(ddof=1) / math.sqrt(v.size):.3g})")


def test_exact_fro2_closed_form_iid_p1():
    # iid, σ² = 1/D: m_off = d, m_diag = d(D + 2)/D, so M_1 = N(N−1)d + N d (D+2)/D.
    N, D, d = 10, 8, 4
    assert math.isclose(exact_fro2(1, "iid", N, D, d), N * (N - 1) * d + N * d * (D + 2) / D, rel_tol=1e-12)


@pytest.fixture(scope="module")
def iid_samples():
    return sample_norms([8, 16, 32, 64, 128], "iid", 16, 16, 8, 0, max_trials=256)


def test_matching_scales_formulas(iid_samples):
    t = matching_scales([8, 16, 32, 64, 128], 1, "iid", 16, 16, samples=iid_samples)
    for r in t.itertuples():
        root = math.sqrt(exact_fro2(1, "iid", r.N, 16, 16))
        assert math.isclose(r.c_bound, math.sqrt(r.N) / root, rel_tol=1e-12)
        assert math.isclose(r.c_typical, r.softmax_mean / root, rel_tol=1e-12)
        assert r.c_typical_lo < r.c_typical < r.c_typical_hi
        assert r.softmax_mean <= math.sqrt(r.N)  # Theorem 4.1: ‖softmax‖_F ≤ √N
    assert list(t["trials"]) == [256, 256, 128, 32, 8]  # 8·(128/N)², capped at 256


def test_fit_exponents_directions(iid_samples):
    f = fit_scale_exponents(iid_samples, 1, "iid", 16, 16, n_boot=300, seed=1).set_index("criterion")
    x, N = np.log([8, 16, 32, 64, 128]), np.array([8, 16, 32, 64, 128])
    closed = np.polyfit(x, 0.5 * x - 0.5 * np.log([exact_fro2(1, "iid", n, 16, 16) for n in N]), 1)[0]
    assert math.isclose(f.loc["bound", "slope"], closed, abs_tol=1e-12)
    assert f.loc["bound", "ci_lo"] == f.loc["bound", "ci_hi"]  # exact: no sampling
    assert f.loc["inv_sqrt_n", "slope"] == pytest.approx(-0.5, abs=1e-12)
    assert f.loc["typical", "ci_hi"] < -0.8  # softmax nearly flat ⇒ c_a ∝ N^{-1}
    assert f.loc["bound_mc", "ci_lo"] <= closed <= f.loc["bound_mc", "ci_hi"]
    again = fit_scale_exponents(iid_samples, 1, "iid", 16, 16, n_boot=300, seed=1)
    assert np.allclose(again["ci_lo"], f["ci_lo"].to_numpy())  # seeded bootstrap


def test_paper_model_bound_exponent_is_exactly_minus_half():
    s = sample_norms([8, 32], "paper", 4, 4, 4, 0, max_trials=8)
    f = fit_scale_exponents(s, 3, "paper", d=4, D=4, n_boot=50).set_index("criterion")
    assert f.loc["bound", "slope"] == pytest.approx(-0.5, abs=1e-12)  # M_p = N²·m: c_b = 1/√(N m)


def test_fit_needs_two_lengths(iid_samples):
    with pytest.raises(InputError):
        fit_scale_exponents(iid_samples, 1, "iid", 16, 16, n_range=(8, 8))


# --------------------------------------------------------------------------- the experiment and its stored form


@pytest.fixture(scope="module")
def small_run():
    from sapa.empirics.experiments.scale_direction import run_scale_direction

    return run_scale_direction([8, 16, 32, 64], models=("iid", "paper"), trials=2, max_trials=32, n_boot=100)


def test_run_returns_a_frozen_typed_result(small_run):
    import dataclasses

    from sapa.empirics.experiments.scale_direction import PS, ScaleDirectionResult

    r = small_run
    assert isinstance(r, ScaleDirectionResult) and r.Ns == (8, 16, 32, 64) and r.models == ("iid", "paper")
    assert set(r.tables) == set(r.fits) == {(m, p) for m in r.models for p in PS} and set(r.samples) == set(r.models)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.seed = 1
    # the run is the composition of the module's functions on the same draws
    t = matching_scales(r.Ns, 3, "iid", 64, 64, samples=r.samples["iid"])
    assert t.equals(r.tables[("iid", 3)])
    assert r.showing(["iid"]).models == ("iid",) and r.showing(["iid"]).tables is r.tables


def test_result_json_round_trip(small_run, tmp_path):
    from sapa.common import figdata
    from sapa.empirics.experiments.scale_direction import ScaleDirectionResult

    figdata.write(tmp_path / "x.json", small_run.to_json(), "stem")
    data, stem = figdata.read(tmp_path / "x.json")
    back = ScaleDirectionResult.from_json(data)
    assert stem == "stem" and back.Ns == small_run.Ns and back.models == small_run.models
    assert figdata.encode(back.to_json()) == figdata.encode(small_run.to_json())


def test_bound_exponent_is_the_exact_criterion_of_the_fit(small_run):
    """The exact bound slope equals the `bound` row of the fit (same OLS on the same grid, no sampling)."""
    from sapa.empirics.experiments.scale_direction import bound_exponent

    f = small_run.fits[("iid", 1)].set_index("criterion")
    assert bound_exponent(1, "iid", small_run.Ns, 64, 64) == pytest.approx(f.loc["bound", "slope"], abs=1e-12)
    assert bound_exponent(3, "paper", [8, 64, 512], 64, 64) == pytest.approx(-0.5, abs=1e-12)  # M_p ∝ N² exactly
