"""Tests for `empirics/experiments/causal.py`: the exact per-row formula under a causal mask against Monte Carlo, bins,
profile exponents and the train-length transfer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.empirics.experiments.causal import (
    bin_samples,
    binned_agreement,
    exact_matrix_ms,
    exact_row_ms,
    exact_row_profile,
    profile_exponents,
    regime_start,
    row_bins,
    row_coefficients,
    row_moments,
    row_profiles,
    row_samples,
    train_length_transfer,
)
from sapa.empirics.experiments.scale_direction import exact_fro2
from sapa.common.validate import InputError


def test_row_formula_sums_to_the_causal_matrix_moment():
    # Σ_i [(i−1) m_off + m_diag] = N(N−1)/2·m_off + N·m_diag: half the off-diagonal entries of the full matrix.
    for p, model in ((1, "iid"), (3, "tied"), (3, "paper")):
        m_off, m_diag = row_moments(p, model, 8, 4)
        N = 17
        assert math.isclose(exact_matrix_ms(p, model, N, 8, 4, "const"), N * (N - 1) / 2 * m_off + N * m_diag,
                            rel_tol=1e-12)
        full = exact_fro2(p, model, N, 8, 4)  # unmasked: N(N−1) m_off + N m_diag
        assert math.isclose(2 * exact_matrix_ms(p, model, N, 8, 4, "const") - N * m_diag, full, rel_tol=1e-12)


def test_row_formula_per_policy():
    N = 64
    m_off, m_diag = row_moments(1, "iid", 64, 64)
    i = np.arange(1, N + 1)
    assert np.allclose(exact_row_ms(1, "iid", N, 64, 64, "inv_sqrt_n"), ((i - 1) * m_off + m_diag) / N, rtol=1e-14)
    dyn = exact_row_ms(1, "iid", N, 64, 64, "inv_sqrt_i")
    assert np.allclose(dyn, ((i - 1) * m_off + m_diag) / i, rtol=1e-14)
    assert abs(dyn[-1] / m_off - 1) < 0.01  # → m_off
    assert np.allclose(exact_row_ms(1, "iid", N, 64, 64, "fixed", N_train=16), ((i - 1) * m_off + m_diag) / 16)
    # dynamic 1/√i at N = 1 and global 1/√N at N = 1 coincide; 1/√i(1/N's last row) = global's last row
    assert math.isclose(exact_row_ms(1, "iid", N, 64, 64, "inv_sqrt_n")[-1], dyn[-1], rel_tol=1e-14)


def test_exact_row_profile_and_regime_start():
    # tied, p = 1: r = m_diag/m_off ≈ 33.8; the 1/√i profile's log-slope ½(1−r)/(i−1+r) is within ±0.1 from i_reg on.
    m_off, m_diag = row_moments(1, "tied", 64, 64)
    r = m_diag / m_off
    i_reg = regime_start(r, 0.1)
    prof = exact_row_profile(4 * i_reg, 1, "tied", 64, 64, "inv_sqrt_i")
    slope = 0.5 * (1 - r) / (prof["i"] - 1 + r)  # exact local derivative d log RMS / d log i
    assert (slope[prof["i"] >= i_reg].abs() <= 0.1 + 1e-12).all()
    assert abs(slope[prof["i"] == i_reg - 1].iloc[0]) > 0.1
    assert regime_start(1.0) == 1 and regime_start(3.0, 0.1) == 8  # ⌈1 − 3 + 2/0.2⌉ = 8


def test_coefficients_and_bad_policies():
    assert np.allclose(row_coefficients(4, "inv_sqrt_i"), 1 / np.sqrt([1, 2, 3, 4]))
    assert np.allclose(row_coefficients(4, "inv_i"), [1, 1 / 2, 1 / 3, 1 / 4])
    with pytest.raises(InputError):
        row_coefficients(4, "fixed")
    with pytest.raises(InputError):
        row_coefficients(4, "softmax")
    with pytest.raises(InputError):
        exact_row_ms(1, "iid", 4, 8, 4, "bogus")


def test_row_bins_cover_rows():
    for N in (1, 2, 3, 8, 100, 256):
        b = row_bins(N)
        assert b[0] == (1, 1) and b[-1][1] == N
        assert all(b[k + 1][0] == b[k][1] + 1 for k in range(len(b) - 1))


@pytest.mark.parametrize("p", [1, 3])
def test_per_row_exact_vs_monte_carlo(p):
    """Per-row MC means vs E‖(S^{∘p})_i‖² = (i−1) m_off + m_diag, iid, N = 32, D = 16, d = 8: T = 3000 draws
    (one length-32 draw per trial), t-statistics per geometric row bin, Bonferroni at family level 0.01.
    x³ row norms are heavy-tailed: rerun once on fresh draws before failing (scipy.stats style)."""
    for seed in (0, 1):
        s = row_samples(32, "iid", 16, 8, 3000, seed, ps=(p,))
        a = binned_agreement([{"lo": lo, "hi": hi, "N": 32, "trials": 3000, "draw": 32,
                               "softmax": s["softmax"][:, lo - 1:hi], p: s[p][:, lo - 1:hi]} for lo, hi in row_bins(32)],
                             p, "iid", 16, 8, "const")
        assert (a["trials"] == 3000).all()
        if a["agree"].all():
            return
    pytest.fail(a.to_string())


def test_row_profiles_columns_and_softmax_row_one():
    s = row_samples(16, "iid", 8, 4, 200, 3, ps=(1,))
    sm = row_profiles(16, 1, "iid", 8, 4, "softmax", samples=s)
    assert sm.loc[0, "mc_ms"] == pytest.approx(1.0, abs=1e-15) and sm.loc[0, "exact_ms"] == 1.0
    assert (sm["mc_ms"] <= 1 + 1e-15).all() and sm["exact_ms"].iloc[1:].isna().all()
    g = row_profiles(16, 1, "iid", 8, 4, "inv_sqrt_n", samples=s)
    assert np.allclose(g["mc_ms"], (s[1] / 16).mean(0))
    assert np.allclose(g["exact_ms"], exact_row_ms(1, "iid", 16, 8, 4, "inv_sqrt_n"))
    assert set(g.columns) >= {"i", "mc_ms", "mc_se", "mc_rms", "exact_ms", "exact_rms", "z", "trials"}


def test_reps_keep_the_expectation():
    """reps = 8 sequences per weight draw: the per-trial mean has the same expectation (T = 400, N = 8)."""
    s = row_samples(8, "iid", 16, 8, 400, 5, ps=(1,), reps=8)
    ex = exact_row_ms(1, "iid", 8, 16, 8, "const")
    v = s[1].mean(1)  # (T,) row-averaged
    z = (v.mean() - ex.mean()) / (v.std(ddof=1) / math.sqrt(v.size))
    assert abs(z) < 3.5


@pytest.fixture(scope="module")
def bins64():
    return bin_samples(64, "iid", 16, 8, trials=8, seed=0, ps=(1, 3), max_trials=512)


def test_bin_samples_design(bins64):
    assert [(b["lo"], b["hi"]) for b in bins64] == row_bins(64)
    assert [b["trials"] for b in bins64] == [512] * 4 + [128, 32, 8]  # 8·(64/hi)², capped at 512
    capped = [b for b in bins64 if b["trials"] == 512]
    assert len({b["draw"] for b in capped}) == 1 and capped[0]["reps"] == 256 // capped[-1]["hi"]


def test_profile_exponents_match_exact(bins64):
    e = profile_exponents(bins64, 1, "iid", 16, 8, policies=("inv_sqrt_n", "inv_sqrt_i", "inv_i"), n_boot=400)
    e = e.set_index(["policy", "criterion"])
    g, r = e.loc[("inv_sqrt_n", "bound")], e.loc[("inv_sqrt_i", "bound")]
    assert 0.4 < g["exact_slope"] < 0.55 and abs(r["exact_slope"]) < 0.05
    for pol in ("inv_sqrt_n", "inv_sqrt_i", "inv_i"):
        b = e.loc[(pol, "bound")]
        assert b["ci_lo"] <= b["exact_slope"] <= b["ci_hi"], (pol, b.to_dict())
    assert e.loc[("softmax", "typical"), "ci_hi"] < 0  # softmax's typical rows shrink with i
    assert e.loc[("softmax", "bound"), "slope"] == 0.0


def test_train_length_transfer_exact_ratios():
    t = train_length_transfer(16, 1, "iid", 8, 4, factors=(0.5, 1, 4), trials=4, seed=0, max_trials=64)
    ex = t.set_index(["policy", "quantity", "N"])["exact_ratio"]
    for pol in ("fixed", "inv_sqrt_n", "inv_sqrt_i"):
        assert ex[(pol, "matrix", 16)] == 1.0
    m = lambda N, pol: exact_matrix_ms(1, "iid", N, 8, 4, pol, N_train=16)  # noqa: E731
    assert math.isclose(ex[("fixed", "matrix", 64)], math.sqrt(m(64, "fixed") / m(16, "fixed")), rel_tol=1e-12)
    assert ex[("fixed", "matrix", 64)] > 3.5  # ≈ N/N_train = 4
    last = exact_row_ms(1, "iid", 64, 8, 4, "inv_sqrt_i")[-1] / exact_row_ms(1, "iid", 16, 8, 4, "inv_sqrt_i")[-1]
    assert math.isclose(ex[("inv_sqrt_i", "last_row", 64)], math.sqrt(last), rel_tol=1e-12)
    assert t[t["policy"] == "softmax"]["exact_ratio"].isna().all()
    with pytest.raises(InputError):
        train_length_transfer(16, 1, "iid", 8, 4, factors=(2, 4))


# --------------------------------------------------------------------------- the experiment and its stored form


@pytest.fixture(scope="module")
def small_run():
    from sapa.empirics.experiments.causal import run_causal_masking

    return run_causal_masking(Ns=(16,), trials=(4,), D=8, d=4, max_trials=16, N_train=8, transfer_trials=2,
                              transfer_max_trials=8, n_boot=50)


def test_run_returns_a_frozen_typed_result(small_run):
    import dataclasses

    from sapa.empirics.experiments.causal import PS, CausalResult

    r = small_run
    assert isinstance(r, CausalResult) and r.Ns == (16,) and r.N_train == 8 and r.transfer_p == 3
    assert set(r.agree) == set(r.expo) == {(16, p) for p in PS}
    assert r.m == {p: row_moments(p, "iid", 8, 4) for p in PS}
    assert set(r.transfer["policy"]) == {"fixed", "inv_sqrt_n", "inv_sqrt_i", "softmax"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.seed = 1


def test_result_json_round_trip(small_run, tmp_path):
    from sapa.common import figdata
    from sapa.empirics.experiments.causal import CausalResult

    figdata.write(tmp_path / "x.json", small_run.to_json(), "stem")
    back = CausalResult.from_json(figdata.read(tmp_path / "x.json")[0])
    assert back.m == small_run.m and back.Ns == small_run.Ns
    assert figdata.encode(back.to_json()) == figdata.encode(small_run.to_json())


def test_masked_matrix_exponent_and_crossover():
    """Both are the exact formulas: E‖x^p/√N‖² masked = (N(N−1)/2·m_off + N·m_diag)/N, N* = 1 + m_diag/m_off."""
    from sapa.empirics.experiments.causal import crossover_n, exact_matrix_ms, masked_matrix_exponent

    Ns = [16, 64, 256]
    y = 0.5 * np.log([exact_matrix_ms(3, "tied", n, 8, 4, "inv_sqrt_n") for n in Ns])
    assert masked_matrix_exponent(3, "tied", Ns, 8, 4) == pytest.approx(np.polyfit(np.log(Ns), y, 1)[0], rel=1e-12)
    m_off, m_diag = row_moments(1, "iid", 8, 4)
    assert crossover_n(1, "iid", 8, 4) == 1 + m_diag / m_off


@pytest.mark.parametrize("model,p", [("paper", 1), ("iid", 3), ("tied", 1), ("tied", 3)])
def test_masked_matrix_sup_exponent_is_the_supremum_over_n(model, p):
    """E‖x^p/√N‖² masked = (N−1)/2·m_off + m_diag, so e(N) = ½·N/(N − 1 + 2r): its sup over N ≥ 2 on a fine grid."""
    from sapa.empirics.experiments.causal import masked_matrix_sup_exponent

    m_off, m_diag = row_moments(p, model, 8, 4)
    N = np.unique(np.geomspace(2, 1e9, 4000))
    e = 0.5 * N / (N - 1 + 2 * m_diag / m_off)
    sup = masked_matrix_sup_exponent(p, model, 8, 4)
    assert e.max() <= sup + 1e-12 and e.max() == pytest.approx(sup, abs=1e-6)
