"""Tests for `empirics/kernels/lanczos_random_start.py`: the formula solved for ε, and the bound's failure rate over
random starts on a matrix built to be hard for Lanczos (no gap at the top), against δ."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.empirics.kernels import lanczos_random_start as kw


def test_epsilon_solves_the_failure_bound():
    for n, k, d in [(3072, 19, 1e-3), (98304, 149, 1e-3), (12288, 59, 0.01)]:
        eps = kw.relative_error(n, k, d)
        assert 0 < eps < 1
        assert kw.KW_CONSTANT * math.sqrt(n) * math.exp(-(2 * k - 1) * math.sqrt(eps)) == pytest.approx(d, rel=1e-12)
    assert kw.relative_error(10**6, 0, 0.01) == 1.0 and kw.relative_error(1, 5, 0.01) == 0.0
    assert kw.upper_bound(2.0, 1, 100, 0.01) == math.inf  # one Lanczos vector: no product with A, no bound
    eps = kw.relative_error(100, 9, 0.01)
    assert kw.upper_bound(2.0, 10, 100, 0.01) == pytest.approx(2.0 / math.sqrt(1 - eps), rel=1e-15)


@pytest.mark.parametrize("bad", [dict(n=0, k=3, delta=0.1), dict(n=5, k=-1, delta=0.1), dict(n=5, k=3, delta=1.0),
                                 dict(n=5, k=3, delta=0.0), dict(n=True, k=3, delta=0.1)])
def test_bad_arguments_are_refused(bad):
    with pytest.raises(ValueError):
        kw.relative_error(**bad)


def _lanczos_top(A: np.ndarray, b: np.ndarray, m: int) -> float:
    """Top Ritz value of A on span{b, Ab, …, A^{m−1}b} (an orthonormal basis by QR: the exact Krylov space)."""
    K = np.empty((A.shape[0], m))
    v = b / np.linalg.norm(b)
    for j in range(m):
        K[:, j] = v
        v = A @ v
        v /= np.linalg.norm(v)
    Q, _ = np.linalg.qr(K)
    return float(np.linalg.eigvalsh(Q.T @ A @ Q)[-1])


def test_the_bound_fails_no_more_often_than_delta_on_a_gapless_spectrum():
    """A diagonal A whose eigenvalues crowd the top (1 − j/n)⁴: 2 000 seeded uniform starts, 6 Lanczos vectors, δ = 0.2.
    The bound's failures (σ₁² above θ₁/(1 − ε)) stay within δ plus a 4-sd binomial allowance; the bound is loose in
    practice, so the count is far below δ, and a bound without the 1/(1 − ε) factor fails often (the test can fail)."""
    rng = np.random.default_rng(0)
    n, m, delta, trials = 200, 6, 0.2, 2000
    lam = (1 - np.arange(n) / n) ** 4
    A = np.diag(lam)
    eps = kw.relative_error(n, m - 1, delta)
    fails = naive = 0
    for _ in range(trials):
        th = _lanczos_top(A, rng.standard_normal(n), m)
        fails += lam[0] > th / (1 - eps)
        naive += lam[0] > th * (1 + 1e-9)
    assert fails / trials <= delta + 4 * math.sqrt(delta * (1 - delta) / trials)
    assert naive / trials > 0.5  # the Ritz value alone is below σ₁² in most starts: the factor is what bounds it
