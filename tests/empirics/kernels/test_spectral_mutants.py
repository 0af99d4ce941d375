"""Mutation-testing additions for `empirics/kernels/spectral.py`: brackets against exactly known σ₁ (rank one,
multiples of the identity), the basis-size cap, the check schedule, scale invariance, the dense certificate on a
tiny-scale operator and the refusals that call the full eigen-decomposition.

Each test names the mutants of ``tools/mutation_sample.py`` (line, change) it kills. σ₁ comes from a dense SVD
(numpy) or is exact by construction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.empirics.kernels.spectral import certified_spectral_norm, dense_bracket


def _rank_one(n: int):
    """J = u vᵀ with ‖u‖ = 5, ‖v‖ = 5: σ₁ = ‖J‖_F = 25 exactly, ‖J‖²_F = 625 exactly."""
    u = np.zeros(n)
    u[:2] = (3.0, 4.0)
    v = np.zeros(n)
    v[-2:] = (3.0, 4.0)
    return (lambda x: u * float(v @ x)), (lambda y: v * float(u @ y))


def test_rank_one_bracket_contains_the_exact_sigma_and_keeps_a_nonnegative_trace_rest():
    """Kills spectral.py line 251 ``sqrt(fro2) * (1 + slack)`` → ``/ (1 + slack)`` (the Frobenius bound shrunk
    below σ₁ = ‖J‖_F) and line 121 ``… + margin`` → ``- margin`` (t_⊥ = ‖J‖²_F − tr T + margin is ≥ 0)."""
    mv, rmv = _rank_one(8)
    b = certified_spectral_norm(mv, rmv, (8,), 625.0, dense="never")
    assert b.converged
    assert b.lower <= 25.0 <= b.upper
    assert b.trace_rest > 0.0 and b.trace_rest >= 625.0 - b.estimate**2


def test_the_basis_cap_is_two_gib_of_v_and_av():
    """Kills spectral.py line 64 MAX_BASIS_BYTES ``2 * 2**30`` → ``2 * 2**31`` and line 210 ``2 * k_max * n * 8`` →
    ``2 * k_max / n * 8``: with n = 2²⁰ input entries, V and AV (2·k·n·8 bytes) fit 2 GiB for k ≤ 128 only.

    The arrays are allocated lazily (zeros); a rank-one J converges within two steps, so the test takes < 1 s."""
    n = 2**20
    mv, rmv = _rank_one(n)
    seen = []
    b = certified_spectral_norm(mv, rmv, (n,), 625.0, max_steps=200, dense="never", tol=1e-6,
                                on_step=lambda k, k_max, br: seen.append(k_max))
    assert seen and set(seen) == {2 * 2**30 // (16 * n)} == {128}
    assert b.converged and b.steps <= 2  # rank one: breakdown at step 2; the slack 64ε·n ≈ 1.5e-8 is why tol is 1e-6
    assert b.lower <= 25.0 <= b.upper


def test_the_bracket_is_checked_on_the_geometric_schedule():
    """Kills spectral.py line 241 ``next_check = k + max(check_every, k // 4)``: ``+`` → ``-`` (a check at every
    step) and ``k // 4`` → ``k // 5``. The schedule: 5, 10, 15, 20, 25, 25 + 6, 31 + 7, then k_max = 40."""
    rng = np.random.default_rng(15)
    n = 400
    s = np.concatenate([[1.0, 0.97], rng.uniform(0.0, 0.95, n - 2)])
    Q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    Q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    J = (Q1 * s) @ Q2.T
    checks, last = [], [None]

    def on_step(k, k_max, br):
        if br is not None and br is not last[0]:
            checks.append(k)
            last[0] = br

    b = certified_spectral_norm(lambda v: J @ v, lambda u: J.T @ u, (n,), float(np.sum(s**2)), max_steps=40,
                                dense="never", on_step=on_step)
    assert checks == [5, 10, 15, 20, 25, 31, 38, 40]
    assert b.lower <= 1.0 <= b.upper


def test_lanczos_is_invariant_under_scaling_by_a_power_of_two_across_a_restart():
    """Kills spectral.py line 277 ``beta_prev = 0.0`` → ``1.0`` after a restart: the stale term β·v_{k−1} (a unit
    vector) is removed by the reorthogonalisation only to round-off, which at ‖J‖ = 2⁻⁷⁰ swamps the true residual.

    J = diag(10, 10, 1, …, 1): two distinct singular values, so the Krylov space is invariant after two steps and
    Lanczos restarts; σ₁ = 10 exactly. Scaling J by 2⁻⁷⁰ must scale every bound and keep the step count."""
    d = np.array([10.0, 10.0] + [1.0] * 10)
    n = d.size
    out = {}
    for scale in (1.0, 2.0**-70):
        dd = d * scale
        out[scale] = certified_spectral_norm(lambda v: dd * v, lambda u: dd * u, (n,), float(np.sum(dd**2)),
                                             tol=1e-10, dense="never")
    a, b = out[1.0], out[2.0**-70]
    assert a.converged and b.converged
    assert a.steps == b.steps
    assert a.lower <= 10.0 <= a.upper
    assert b.lower * 2.0**70 <= 10.0 <= b.upper * 2.0**70
    assert b.upper * 2.0**70 == pytest.approx(a.upper, rel=1e-12)


def test_dense_certificate_is_tight_on_a_tiny_scale_operator():
    """Kills spectral.py line 329 ``delta = asym + ROUND * m_prod * fro2`` → ``ROUND * m_prod / fro2`` (a round-off
    allowance that should scale with ‖J‖²_F, not with its inverse)."""
    rng = np.random.default_rng(21)
    J = rng.standard_normal((7, 6)) * 1e-6
    sigma = float(np.linalg.svd(J, compute_uv=False)[0])
    b = certified_spectral_norm(lambda v: J @ v, lambda u: J.T @ u, (6,), float(np.sum(J * J)), tol=1e-10,
                                dense="always")
    assert b.method == "dense-cholesky" and b.converged
    assert b.lower <= sigma <= b.upper
    assert b.upper <= sigma * (1 + 1e-9)


def test_dense_certificate_takes_no_full_eigendecomposition_when_the_first_cholesky_proves_the_bound():
    """Kills spectral.py line 335 ``if attempt == 2`` → ``!= 2`` (an O(n³) eigen-decomposition at the first attempt
    instead of only after two refusals)."""
    rng = np.random.default_rng(22)
    J = rng.standard_normal((9, 8))
    sigma = float(np.linalg.svd(J, compute_uv=False)[0])
    stages = []
    b = certified_spectral_norm(lambda v: J @ v, lambda u: J.T @ u, (8,), float(np.sum(J * J)), tol=1e-10,
                                dense="always", on_dense=lambda stage, done, total: stages.append((stage, done)))
    assert b.lower <= sigma <= b.upper and b.converged
    assert "full eigen-decomposition" not in [s for s, _ in stages]
    assert [d for s, d in stages if s.startswith("Cholesky")] == [1]


def test_dense_upper_bound_of_a_rank_one_operator_at_tiny_tol_stays_above_sigma():
    """Kills spectral.py line 354 ``sqrt(mu + delta) * (1 + slack)`` → ``/ (1 + slack)``: at tol = 1e-15 the μ that
    Cholesky proves is within a few ε of θ, and dividing by the slack puts the bound below σ₁ = 25 (exact)."""
    mv, rmv = _rank_one(2)
    b = certified_spectral_norm(mv, rmv, (2,), 625.0, tol=1e-15, dense="always")
    assert b.method == "dense-cholesky"
    assert b.lower <= 25.0 <= b.upper


def test_dense_upper_bound_of_a_multiple_of_the_identity_stays_above_sigma():
    """Kills spectral.py line 354 ``sqrt(mu + delta)`` → ``sqrt(mu - delta)``: for J = 5·I₄ every eigenvalue of JᵀJ
    is 25, the round-off allowance δ ∝ ‖J‖²_F = 100 exceeds tol·θ, and μ − δ falls below σ₁² = 25."""
    b = certified_spectral_norm(lambda v: 5.0 * v, lambda u: 5.0 * u, (4,), 100.0, tol=1e-15, dense="always")
    assert b.method == "dense-cholesky"
    assert b.lower <= 5.0 <= b.upper


def test_a_zero_jacobian_has_the_all_zero_bracket():
    """Kills spectral.py line 190 ``SpectralBracket(0.0, 0.0, 0.0, 0.0, 0.0, True, 0, 0.0, 0.0, tol, zeros)``: any 0 →
    1 (bounds, estimate, ‖J‖_F, width, steps, residual, trace rest). ‖J‖²_F = 0 makes J = 0: σ₁ = 0 exactly, no step."""
    b = certified_spectral_norm(lambda v: 0 * v, lambda u: 0 * u, (2, 3), 0.0, tol=1e-7)
    assert (b.lower, b.upper, b.estimate, b.upper_frobenius, b.rel_width) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert (b.converged, b.steps, b.residual, b.trace_rest, b.tol) == (True, 0, 0.0, 0.0, 1e-7)
    assert b.v.shape == (2, 3) and not np.any(b.v)


def test_dense_certificate_reports_its_stages_in_order():
    """Kills spectral.py line 333 ``say("top eigenpair (ARPACK)", 0, 1)`` → ``(…, 1, 1)`` and line 364 ``say("Cholesky
    proof …", attempt + 1, 4)`` → ``…, 5)``: on_dense(stage, done, total) sees the columns formed (n = 40 in one
    batch), ARPACK started (0 of 1), and the first of at most four Cholesky attempts proving the bound."""
    rng = np.random.default_rng(23)
    J = rng.standard_normal((9, 40))
    sigma = float(np.linalg.svd(J, compute_uv=False)[0])
    stages = []
    b = certified_spectral_norm(lambda v: J @ v, lambda u: J.T @ u, (40,), float(np.sum(J * J)), tol=1e-10,
                                dense="always", on_dense=lambda *a: stages.append(a))
    assert b.lower <= sigma <= b.upper and b.converged
    assert stages == [("forming JᵀJ", 40, 40), ("top eigenpair (ARPACK)", 0, 1),
                      ("Cholesky proof of the upper bound", 1, 4)]


def test_dense_bracket_seeds_arpack_with_seed_zero_by_default():
    """Kills spectral.py line 305 ``dense_bracket(…, seed=0)`` → ``seed=1`` (the default): ARPACK's start vector comes
    from the seed, so the bracket without a seed is, to the last bit, the bracket with seed 0 (and the two seeds'
    brackets both contain σ₁ from numpy's SVD)."""
    rng = np.random.default_rng(24)
    J = rng.standard_normal((30, 30))
    sigma = float(np.linalg.svd(J, compute_uv=False)[0])
    apply = lambda v: J.T @ (J @ v)  # noqa: E731
    args = (apply, lambda v: J @ v, (30,), float(np.sum(J * J)))
    b_default, b0, b1 = (dense_bracket(*args, tol=1e-8, **kw) for kw in ({}, {"seed": 0}, {"seed": 1}))
    assert (b_default.lower, b_default.upper, b_default.estimate) == (b0.lower, b0.upper, b0.estimate)
    np.testing.assert_array_equal(b_default.v, b0.v)
    assert (b0.lower, b0.upper, b0.estimate) != (b1.lower, b1.upper, b1.estimate) or not np.array_equal(b0.v, b1.v)
    for b in (b0, b1):
        assert b.lower <= sigma <= b.upper


def test_the_cholesky_proof_subtracts_rumps_allowance(monkeypatch):
    """Kills spectral.py line 350 ``γ = (n + 1)ε/(1 − (n + 1)ε)`` → ``(n + 2)ε/…``: the first Cholesky factorisation is
    of (μ − c)I − Â with μ = θ̂(1 + tol) and c = 2γ/(1 − 2γ)·max(nμ − tr Â, 0) (Rump, BIT 2006, as the docstring
    states). The diagonal of the factorised matrix is captured; with Â's diagonal = the column sums of J² (numpy),
    μ − c is read off and c compared with the formula (c ≈ 5·10⁻¹¹ here, read to ~10⁻¹⁴)."""
    import scipy.linalg as sl

    rng = np.random.default_rng(25)
    J = rng.standard_normal((9, 40))
    n, tol, eps = 40, 1e-10, np.finfo(np.float64).eps
    diags = []
    real = sl.cholesky

    def spy(B, *a, **kw):
        diags.append(np.diagonal(B).copy())
        return real(B, *a, **kw)

    monkeypatch.setattr(sl, "cholesky", spy)
    b = certified_spectral_norm(lambda v: J @ v, lambda u: J.T @ u, (n,), float(np.sum(J * J)), tol=tol,
                                dense="always")
    assert len(diags) == 1 and b.method == "dense-cholesky"
    colsq = np.sum(J * J, axis=0)  # the diagonal of Â = JᵀJ
    mu = b.estimate**2 * (1 + tol)
    gamma = (n + 1) * eps / (1 - (n + 1) * eps)
    c_ref = 2 * gamma / (1 - 2 * gamma) * max(n * mu - float(np.sum(colsq)), 0.0)
    c_got = mu - (diags[0] + colsq)
    assert c_ref > 1e-11
    np.testing.assert_allclose(c_got, c_ref, rtol=2e-3)


def test_lanczos_hands_over_to_the_dense_certificate_after_twenty_steps():
    """Kills spectral.py line 260 ``k >= DENSE_AFTER`` → ``k > DENSE_AFTER``: a flat spectrum (σ ∈ [0.9, 1], n = 120)
    leaves the unexplored trace ≫ θ₁, so at the check at k = 20 (the schedule 5, 10, 15, 20) Lanczos hands over;
    the dense bracket keeps the Lanczos steps it was given and contains σ₁ (numpy's SVD)."""
    rng = np.random.default_rng(26)
    n = 120
    s = rng.uniform(0.9, 1.0, n)
    Q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    Q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    J = (Q1 * s) @ Q2.T
    b = certified_spectral_norm(lambda v: J @ v, lambda u: J.T @ u, (n,), float(np.sum(s**2)), tol=1e-8)
    assert b.method == "dense-cholesky" and b.steps == 20
    assert b.lower <= float(s.max()) <= b.upper and b.converged


def _stages_and_bracket(J, **kw):
    stages = []
    n = J.shape[1]
    b = certified_spectral_norm(lambda v: J @ v, lambda u: J.T @ u, (n,), float(np.sum(J * J)), tol=1e-10,
                                dense="always", on_dense=lambda *a: stages.append(a), **kw)
    return stages, b


def test_tiny_operators_take_the_top_pair_of_the_full_decomposition():
    """Kills spectral.py line 341 ``th, X = w[-1:], Q[:, -1:]`` → ``w[1:]`` / ``Q[:, 1:]`` (drop the minus) and →
    ``w[-2:]`` / ``Q[:, -2:]``: n ≤ 2 skips ARPACK; J = [5] and J = diag(3, 1) have σ₁ = 5 and 3 exactly, and the
    first Cholesky attempt proves it (the top pair, not the second)."""
    for J, sigma in ((np.array([[5.0]]), 5.0), (np.diag([3.0, 1.0]), 3.0)):
        stages, b = _stages_and_bracket(J)
        assert b.estimate == sigma and b.lower <= sigma <= b.upper and b.converged
        assert [s for s in stages if s[0].startswith("Cholesky")] == [("Cholesky proof of the upper bound", 1, 4)]
        assert ("full eigen-decomposition", 0, 1) not in stages


def test_a_failing_arpack_falls_back_to_the_top_pair(monkeypatch):
    """The same mutants where ARPACK fails (n = 6): the full decomposition's last pair is the top one, proven at the
    first attempt; J = diag(6, 5, …, 1), σ₁ = 6."""
    import scipy.sparse.linalg as ssl

    def fail(A, k=1, **kw):
        raise ssl.ArpackNoConvergence("no convergence", np.zeros(0), np.zeros((A.shape[0], 0)))

    monkeypatch.setattr(ssl, "eigsh", fail)
    stages, b = _stages_and_bracket(np.diag([6.0, 5.0, 4.0, 3.0, 2.0, 1.0]))
    assert b.estimate == pytest.approx(6.0, rel=1e-15) and b.lower <= 6.0 <= b.upper and b.converged
    assert [s for s in stages if s[0].startswith("Cholesky")] == [("Cholesky proof of the upper bound", 1, 4)]


@pytest.mark.parametrize("scale,tol,term", [(1.0, 1e-10, "16 tol"), (2.0**-6, 1e-15, "4c/θ")])
def test_a_refused_cholesky_raises_mu_by_the_larger_of_sixteen_tol_and_four_c(monkeypatch, scale, tol, term):
    """Kills spectral.py line 368 ``rel = max(16 * rel, 4 * c / max(θ, 1e-300))``: 16 → 17, ``4 * c / θ`` →
    ``4 * c * θ`` and ``max(θ, 1e-300)`` → ``max(θ, 1.0)`` (which is not scale-invariant below θ = 1).

    The first factorisation is refused (as if λ₁(Â) ≥ μ − c); the second is of (μ₂ − c₂)I − Â with
    μ₂ = θ(1 + max(16 tol, 4c₁/θ)), read off its diagonal with Â's diagonal = the column sums of J² (numpy) and c from
    Rump's formula. At θ ≈ 80, tol = 1e-10 the 16 tol term is the larger; at θ ≈ 0.02, tol = 1e-15 the 4c/θ one."""
    import scipy.linalg as sl

    rng = np.random.default_rng(27)
    J = rng.standard_normal((9, 40)) * scale
    n, eps = 40, np.finfo(np.float64).eps
    diags = []
    real = sl.cholesky

    def refuse_once(B, *a, **kw):
        diags.append(np.diagonal(B).copy())
        if len(diags) == 1:
            raise np.linalg.LinAlgError("not positive definite")
        return real(B, *a, **kw)

    monkeypatch.setattr(sl, "cholesky", refuse_once)
    b = certified_spectral_norm(lambda v: J @ v, lambda u: J.T @ u, (n,), float(np.sum(J * J)), tol=tol,
                                dense="always")
    assert len(diags) >= 2
    colsq, theta = np.sum(J * J, axis=0), b.estimate**2
    gamma = (n + 1) * eps / (1 - (n + 1) * eps)

    def c_of(mu):
        return 2 * gamma / (1 - 2 * gamma) * max(n * mu - float(np.sum(colsq)), 0.0)

    four_c = 4 * c_of(theta * (1 + tol)) / theta
    assert (four_c < 16 * tol) == (term == "16 tol") and max(four_c, 16 * tol) > 10 * min(four_c, 16 * tol)
    mu2 = theta * (1 + max(16 * tol, four_c))
    np.testing.assert_allclose(diags[1] + colsq, mu2 - c_of(mu2), rtol=1e-13)
    sigma = float(np.linalg.svd(J, compute_uv=False)[0])
    assert b.lower <= sigma <= b.upper


def test_without_a_lanczos_upper_bound_the_frobenius_norm_widened_by_the_slack_is_reported(monkeypatch):
    """Kills spectral.py line 251 ``sqrt(fro2) * (1 + slack)`` → ``(2 + slack)``: a check whose basis is not trusted
    (ORTHO_TOL < 0 here) gives no Lanczos upper bound, and the upper end is ‖J‖_F·(1 + 64ε(k + m)) (docstring)."""
    from sapa.empirics.kernels import spectral

    monkeypatch.setattr(spectral, "ORTHO_TOL", -1.0)
    M = np.diag([3.0, 2.0, 1.0])
    b = certified_spectral_norm(lambda v: M @ v, lambda u: M.T @ u, (3,), 14.0, dense="never", max_steps=3)
    slack = 64 * np.finfo(np.float64).eps * (b.steps + 3)
    assert b.steps == 3 and not b.converged
    assert b.upper == math.sqrt(14.0) * (1 + slack)
    assert b.lower <= 3.0
