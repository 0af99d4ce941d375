"""Mutation-testing additions for `empirics/kernels/spectral.py`: brackets against exactly known σ₁ (rank one,
multiples of the identity), the basis-size cap, the check schedule, scale invariance, the dense certificate on a
tiny-scale operator and the refusals that call the full eigen-decomposition.

Each test names the mutants of ``tools/mutation_sample.py`` (line, change) it kills. σ₁ comes from a dense SVD
(numpy) or is exact by construction."""

from __future__ import annotations

import numpy as np
import pytest

from empirics.kernels.spectral import certified_spectral_norm


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
