"""σ₁(J) as a certified bracket [lower, upper] from Jacobian products only: Lanczos on JᵀJ, then a dense certificate.

A = JᵀJ is symmetric positive semi-definite with tr A = ‖J‖²_F (known exactly: :mod:`sapa.empirics.kernels.expr_norms`).

**Lanczos** (J never formed). Lanczos with full reorthogonalisation builds an orthonormal basis V = [v_1 … v_k]
(restarted with a fresh seeded vector orthogonal to V when the Krylov space becomes invariant: the new residual
is below 1e-10·‖A‖, ‖A‖ estimated by the largest α, β and Ritz value seen, and a vector that loses more than half
its norm when orthogonalised once more is replaced the same way), keeps AV, and forms T = VᵀAV and the residual
block R = AV − TV (k × n, rows A v_j − Σ_l T_jl v_l: in the orthogonal complement of span V).

* **Lower bound.** For the top Ritz vector x = V y₁: σ₁ ≥ ‖Jx‖/‖x‖ (a Rayleigh quotient; J applied once more).
* **Upper bound (theorem used).** Write a unit vector as x = Vc + b with b ⊥ span V. Then
  xᵀAx = cᵀTc + 2cᵀRb + bᵀAb, and bᵀAb ≤ ‖(I−VVᵀ)A(I−VVᵀ)‖ ‖b‖² ≤ t_⊥‖b‖² with
  t_⊥ = tr A − tr T (A is positive semi-definite, so the largest eigenvalue of the compressed rest is at
  most its trace; this is what keeps a top eigenvector that the Krylov space missed from escaping the
  bound). With R = UΣWᵀ (thin SVD; U and Σ from the eigen-decomposition of the k×k matrix RRᵀ),
  cᵀRb = (ΣUᵀc)·(Wᵀb) and ‖Wᵀb‖ ≤ ‖b‖, hence
  λ₁(A) ≤ λ_max [[T, UΣ], [ΣUᵀ, t_⊥ I]]  (and ≤ t_⊥),
  a symmetric 2k×2k eigenproblem. So σ₁ ≤ √ of it, and also σ₁ ≤ ‖J‖_F. Once the Krylov space holds the
  top singular direction and t_⊥ < θ₁, the bound is θ₁ + O(‖residual of the top Ritz pair‖²/(θ₁ − t_⊥)),
  i.e. as tight as the Ritz value; while the unexplored trace t_⊥ exceeds θ₁ (a spread-out spectrum in a
  space much larger than k) it is ≈ t_⊥ and the bracket stays open. Every check's bounds are kept: the
  bracket reported is the largest lower and the smallest upper bound seen.

**Dense certificate** (where JᵀJ fits in memory, n ≤ :data:`DENSE_MAX_N`): when the unexplored trace still
exceeds the top Ritz value after :data:`DENSE_AFTER` steps, or Lanczos ends open, A is formed column by
column from batches of products (Â, n × n), its top eigenpair θ̂, x̂ found by ARPACK
(``scipy.sparse.linalg.eigsh``) and

* lower: ‖Jx̂‖/‖x̂‖ as above;
* upper: λ₁(Â) < μ is *proven* by a floating-point Cholesky factorisation of (μ − c)I − Â that runs to
  completion, c = 2·γ_{n+1}/(1 − 2γ_{n+1})·tr(μI − Â) (γ_m = mε/(1 − mε); Rump, *Verification of positive
  definiteness*, BIT 46 (2006), Thm 2.3, with ε in place of the unit round-off and a factor 2 to spare),
  μ = θ̂(1 + tol) (raised if the factorisation fails); and λ₁(A) ≤ λ₁(Â) + δ with δ = ‖Â − Âᵀ‖_F (the
  measured asymmetry of the formed matrix) + 64·ε·m·tr A, m = the products' largest dimension (the
  textbook bound on the round-off of sums of m products, γ_m·|J|ᵀ|J|, whose norm is ≤ γ_m‖J‖²_F).
  Cost: n products, n³/3 flops for the factorisation (X 128×64: n = 8 192, ≈ 10 s on 2 cores).

Rounding (Lanczos): V is orthonormal to ~1e-15 (reorthogonalised twice); its departure ‖VVᵀ − I‖_max is
measured at each check, and a check whose basis departs by more than :data:`ORTHO_TOL` gives no upper bound
(its lower bound, a Rayleigh quotient of whatever vector, still counts); t_⊥ carries a margin of
64·ε·(tr A + Σ|θ| + k max|θ|), and both ends are widened by 64·ε·(k + m) relative, m as above (the products'
own round-off, which grows with the length of their sums, and the basis'). The certificate is exact
arithmetic's up to these round-off allowances, not interval arithmetic.

``converged`` is (upper − lower) ≤ tol·upper: the bracket's relative width, not a gap between two
lower bounds.

Range: where ‖J‖²_F lies outside 2^{±200}, the bracket is found for 2^{−e}J (e = round(log₂‖J‖_F); products
scaled by exact powers of two) and scaled back, so T, the residual block R and RRᵀ (of order ‖J‖⁴) neither
underflow nor overflow (issue 52: at ‖J‖ ≈ 1e−128, RRᵀ underflowed and an upper bound fell below σ₁). The
products themselves must be representable: :class:`sapa.empirics.kernels.expr_norms.LayerOperator` takes
``log2_scale`` for that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from sapa.common.validate import InputError, positive_float, positive_int
from sapa.empirics.kernels.norms import NormOverflowError

__all__ = ["SpectralBracket", "certified_spectral_norm", "dense_bracket", "MAX_BASIS_BYTES", "DENSE_MAX_N",
           "DENSE_AFTER", "ORTHO_TOL"]

MAX_BASIS_BYTES = 2 * 2**30  # V and AV together
DENSE_MAX_N = 16_384         # Â and its factor: 2·n²·8 bytes ≤ 4 GiB
DENSE_AFTER = 20             # Lanczos steps before the trace test may hand over to the dense certificate
ORTHO_TOL = 1e-10            # a basis departing further from orthonormality gives no upper bound
EPS = np.finfo(np.float64).eps
ROUND = float(64 * EPS)  # per Lanczos vector or summed term: relative widening of the bracket for float64 round-off
DENSE_MODES = ("auto", "never", "always")
FRO2_RANGE = (2.0**-200, 2.0**200)  # ‖J‖²_F outside: the bracket is found for 2^{−e}J (exact), then scaled back


@dataclass(frozen=True)
class SpectralBracket:
    """lower ≤ σ₁(J) ≤ upper, certified (module docstring); ``estimate`` = √θ₁ (top Ritz value)."""

    lower: float
    upper: float
    estimate: float
    upper_frobenius: float   # ‖J‖_F, the trivial bound
    rel_width: float         # (upper − lower)/upper
    converged: bool          # rel_width ≤ tol
    steps: int               # Lanczos vectors (= Jacobian product pairs)
    residual: float          # ‖R‖₂ of the basis
    trace_rest: float        # t_⊥ = ‖J‖²_F − tr T (with its round-off margin)
    tol: float
    v: np.ndarray            # top right singular vector estimate (input shape, unit norm)
    method: str = "lanczos"  # "lanczos" or "dense-cholesky": which certificate gave the upper bound
    ortho: float = 0.0       # ‖VVᵀ − I‖_max of the Lanczos basis at its last check

    def as_dict(self) -> dict:
        return {"sigma_lower": float(self.lower), "sigma_upper": float(self.upper),
                "sigma_estimate": float(self.estimate), "sigma_upper_frobenius": float(self.upper_frobenius),
                "rel_width": float(self.rel_width), "converged": bool(self.converged), "lanczos_steps": int(self.steps),
                "residual": float(self.residual), "trace_rest": float(self.trace_rest), "tol": float(self.tol),
                "spectral_method": self.method, "basis_orthogonality": float(self.ortho)}


def _eigh(M: np.ndarray, values_only: bool = False):
    """Symmetric eigen-decomposition, LAPACK's divide-and-conquer first, the QR driver if it does not converge."""
    import scipy.linalg as sl

    try:
        return np.linalg.eigvalsh(M) if values_only else np.linalg.eigh(M)
    except np.linalg.LinAlgError:
        return sl.eigh(M, eigvals_only=values_only, driver="ev", check_finite=False)


def _bracket(V: np.ndarray, AV: np.ndarray, trA: float) -> tuple[float, float, np.ndarray, float, float, float]:
    """(θ₁, λ upper bound, y₁, ‖R‖₂, t_⊥, ‖VVᵀ − I‖_max) from the basis V (k, n), AV (k, n) and tr A."""
    k = V.shape[0]
    ortho = float(np.max(np.abs(V @ V.T - np.eye(k))))  # (k, n) @ (n, k)
    T = V @ AV.T  # (k, n) @ (n, k)
    T = 0.5 * (T + T.T)
    theta, Yv = _eigh(T)
    R = AV - T @ V  # rows: A v_j − Σ_l T_jl v_l, in the complement of span V
    RR = R @ R.T
    s2, U = _eigh(0.5 * (RR + RR.T))
    s = np.sqrt(np.maximum(s2, 0.0))
    margin = 64 * EPS * (abs(trA) + float(np.sum(np.abs(theta))) + k * float(np.max(np.abs(theta), initial=0.0)))
    t_rest = max(trA - float(np.trace(T)), 0.0) + margin
    M = np.zeros((2 * k, 2 * k))
    M[:k, :k] = T
    M[:k, k:] = U * s[None, :]
    M[k:, :k] = M[:k, k:].T
    M[k:, k:] = t_rest * np.eye(k)
    lam_up = max(float(_eigh(M, values_only=True)[-1]), t_rest)
    return float(theta[-1]), lam_up, Yv[:, -1], float(s[-1]) if s.size else 0.0, t_rest, ortho


def _rayleigh(matvec, x: np.ndarray) -> tuple[float, int]:
    """(‖Jx‖/‖x‖, size of Jx): a lower bound on σ₁ for any x ≠ 0."""
    xn = float(np.linalg.norm(x))
    if xn == 0.0:
        return 0.0, 0
    y = np.asarray(matvec(x))
    return float(np.linalg.norm(y)) / xn, int(y.size)


def _finish(lower: float, upper: float, **kw) -> SpectralBracket:
    lower, upper = float(min(max(lower, 0.0), upper)), float(upper)
    width = (upper - lower) / upper if upper > 0 else 0.0
    return SpectralBracket(lower=lower, upper=upper, rel_width=width, converged=bool(width <= kw["tol"]), **kw)


def certified_spectral_norm(
    matvec: Callable[[np.ndarray], np.ndarray],   # v (input shape) -> J v
    rmatvec: Callable[[np.ndarray], np.ndarray],  # u (output shape) -> Jᵀ u
    shape: tuple,                                 # input shape
    fro2: float,                                  # ‖J‖²_F = tr JᵀJ, exact
    *,
    tol: float = 1e-8,
    max_steps: int = 200,
    seed: int = 0,
    check_every: int = 5,
    on_step: Callable[[int, int, "SpectralBracket | None"], None] | None = None,
    dense: str = "auto",
    gram: Callable[[np.ndarray], np.ndarray] | None = None,  # (b, *shape) -> JᵀJ applied to each, batched
    on_dense: Callable[[str, int, int], None] | None = None,
) -> SpectralBracket:
    """Bracket σ₁(J) by Lanczos on JᵀJ (full reorthogonalisation), then densely where needed, to within ``tol``.

    ``dense``: "auto" hands over to :func:`dense_bracket` when n ≤ DENSE_MAX_N and the Lanczos bracket is
    still open at the end, or its unexplored trace exceeds the top Ritz value after DENSE_AFTER steps;
    "never" keeps to Lanczos; "always" goes dense at once (n ≤ DENSE_MAX_N). ``gram`` (optional) applies JᵀJ
    to a batch of directions, which forms the dense matrix much faster than one product pair at a time.
    ``on_step(k, k_max, bracket)``: called after each Lanczos vector with the latest bracket (None before the
    first check); ``on_dense(stage, done, total)`` during the dense certificate; neither changes the numbers.

    >>> M = np.diag([3.0, 2.0, 1.0])
    >>> b = certified_spectral_norm(lambda v: M @ v, lambda u: M.T @ u, (3,), 14.0)
    >>> b.converged, round(b.lower, 12), round(b.upper, 12)
    (True, 3.0, 3.0)
    """
    from sapa.common.seeds import rng_for

    tol = positive_float("tol", tol)
    max_steps = positive_int("max_steps", max_steps)
    check_every = positive_int("check_every", check_every)
    if dense not in DENSE_MODES:
        raise InputError(f"dense must be one of {', '.join(DENSE_MODES)}, got {dense!r}")
    fro2 = float(fro2)
    if not math.isfinite(fro2) or fro2 < 0:
        raise InputError(f"‖J‖²_F must be finite and ≥ 0, got {fro2}")
    n = int(np.prod(shape))
    if dense == "always" and n > DENSE_MAX_N:
        raise InputError(f"the dense certificate needs n = {n} ≤ {DENSE_MAX_N} input entries")
    can_dense = dense != "never" and n <= DENSE_MAX_N
    if fro2 == 0.0:  # J = 0, unless ‖J‖²_F underflowed: then a random direction says so
        probe = rng_for(int(seed), "certified_spectral_norm zero", n).standard_normal(shape)
        if np.any(np.asarray(matvec(probe)) != 0):
            raise InputError("‖J‖²_F is 0 but J is not (it underflowed float64): pass 2^{−e}·J and ‖2^{−e}J‖²_F "
                             "(LayerOperator's log2_scale) and scale the bracket back")
        return SpectralBracket(0.0, 0.0, 0.0, 0.0, 0.0, True, 0, 0.0, 0.0, tol, np.zeros(shape))
    if not FRO2_RANGE[0] <= fro2 <= FRO2_RANGE[1]:  # bracket 2^{−e}J: the residuals' squares (‖J‖⁴) stay in range
        e = round(math.log2(fro2) / 2)

        def back(b: SpectralBracket | None) -> SpectralBracket | None:
            return b if b is None else replace(
                b, lower=math.ldexp(b.lower, e), upper=math.ldexp(b.upper, e), estimate=math.ldexp(b.estimate, e),
                upper_frobenius=math.ldexp(b.upper_frobenius, e), residual=math.ldexp(b.residual, 2 * e),
                trace_rest=math.ldexp(b.trace_rest, 2 * e))

        return back(certified_spectral_norm(
            lambda v: np.ldexp(np.asarray(matvec(v), dtype=np.float64), -e),
            lambda u: np.ldexp(np.asarray(rmatvec(u), dtype=np.float64), -e), shape, math.ldexp(fro2, -2 * e),
            tol=tol, max_steps=max_steps, seed=seed, check_every=check_every, dense=dense,
            on_step=None if on_step is None else (lambda k, k_max, b: on_step(k, k_max, back(b))),
            gram=None if gram is None else (lambda E: np.ldexp(np.asarray(gram(E), dtype=np.float64), -2 * e)),
            on_dense=on_dense))
    rng = rng_for(int(seed), "certified_spectral_norm", n)

    def apply(q):
        w = np.asarray(rmatvec(np.asarray(matvec(q.reshape(shape))))).reshape(-1)
        if not np.all(np.isfinite(w)):
            raise NormOverflowError("a Jacobian product is not finite in float64 (the activation or its derivative "
                                    "overflows at these logits): no σ₁ bracket")
        return w

    def go_dense(lanczos: SpectralBracket | None) -> SpectralBracket:
        b = dense_bracket(apply, matvec, shape, fro2, tol=tol, seed=seed, gram=gram, on_dense=on_dense,
                          lanczos=lanczos)
        if on_step is not None:
            on_step(b.steps, b.steps, b)
        return b

    if dense == "always":
        return go_dense(None)
    k_max = min(max_steps, n)
    if 2 * k_max * n * 8 > MAX_BASIS_BYTES:
        k_max = max(1, MAX_BASIS_BYTES // (16 * n))
    V = np.zeros((k_max, n))
    AV = np.zeros((k_max, n))

    def fresh(k):
        for _ in range(3):
            q = rng.standard_normal(n)
            for _ in range(2):
                q -= V[:k].T @ (V[:k] @ q)
            nq = float(np.linalg.norm(q))
            if nq > 1e-8:
                return q / nq
        return None

    q = fresh(0)
    beta_prev, k, next_check, anorm, m_prod = 0.0, 0, check_every, 0.0, n
    best_lo, best_up, result = 0.0, math.inf, None
    while k < k_max:
        V[k] = q
        w = apply(q)
        AV[k] = w
        k += 1
        alpha = float(q @ w)
        w = w - alpha * q - (beta_prev * V[k - 2] if k >= 2 else 0.0)
        for _ in range(2):
            w -= V[:k].T @ (V[:k] @ w)
        beta = float(np.linalg.norm(w))
        anorm = max(anorm, abs(alpha), beta)  # ≤ ‖A‖: the breakdown test is relative to the operator, not to α
        broke = beta <= 1e-10 * max(anorm, 1e-300)
        if k >= next_check or k == k_max or broke:
            next_check = k + max(check_every, k // 4)  # the bracket costs O(k²n): check on a geometric schedule
            th, lam_up, y, res, t_rest, ortho = _bracket(V[:k], AV[:k], fro2)
            anorm = max(anorm, th)
            x = (V[:k].T @ y).reshape(shape)
            lo, m_out = _rayleigh(matvec, x)
            m_prod = max(n, m_out)
            slack = ROUND * (k + m_prod)  # relative round-off of the products and of the basis' orthonormality
            best_lo = max(best_lo, lo * (1 - slack))
            if ortho <= ORTHO_TOL:
                best_up = min(best_up, math.sqrt(lam_up) * (1 + slack))
            upper = float(min(best_up, math.sqrt(fro2) * (1 + slack)))
            xn = float(np.linalg.norm(x))
            result = _finish(best_lo, upper, estimate=math.sqrt(max(th, 0.0)), upper_frobenius=math.sqrt(fro2),
                             steps=k, residual=res, trace_rest=t_rest, tol=tol, v=x / xn if xn > 0 else x,
                             ortho=ortho)
            if result.converged:
                if on_step is not None:
                    on_step(k, k_max, result)
                return result
            if can_dense and k >= DENSE_AFTER and t_rest > th and k < n:
                if on_step is not None:
                    on_step(k, k_max, result)
                return go_dense(result)  # the unexplored trace dominates: Lanczos alone would need most of n
        if on_step is not None:
            on_step(k, k_max, result)
        if k >= k_max:
            break
        if not broke:
            q, beta_prev = w / beta, beta
            for _ in range(2):  # a direction orthogonalised from round-off is no direction: test it once more
                q -= V[:k].T @ (V[:k] @ q)
            nq = float(np.linalg.norm(q))
            broke = nq < 0.5
            q = q / nq if not broke else q
        if broke:  # invariant Krylov space: continue with a fresh direction orthogonal to V
            q = fresh(k)
            beta_prev = 0.0
            if q is None:
                break
    if result is not None and not result.converged and can_dense:
        return go_dense(result)
    return result


def _symmetrise(A: np.ndarray, blk: int) -> float:
    """A ← (A + Aᵀ)/2 in place, one block of rows at a time; returns (Σ_{i<j} (a_ij − a_ji)²)^½ (= ‖A − Aᵀ‖_F/√2).

    The averaged rows i0:i1 are written to both the rows and the columns i0:i1, so every later block reads
    entries already symmetric where it meets an earlier block: each pair is measured once, where it is met first.
    """
    n = A.shape[0]
    sq = 0.0
    for i0 in range(0, n, blk):
        i1 = min(n, i0 + blk)
        rows = A[i0:i1, i0:]                   # (b, n − i0)
        cols = A[i0:, i0:i1].T.copy()          # the transposed column block
        d = rows - cols
        sq += float(np.sum(np.triu(d, 1) ** 2))  # pairs i < j only (the block's own lower part is their mirror)
        avg = 0.5 * (rows + cols)
        A[i0:i1, i0:] = avg
        A[i0:, i0:i1] = avg.T
    return math.sqrt(sq)


def dense_bracket(apply, matvec, shape: tuple, fro2: float, *, tol: float, seed: int = 0, gram=None,
                  on_dense=None, lanczos: SpectralBracket | None = None) -> SpectralBracket:
    """σ₁ bracketed from the formed Â = JᵀJ (n × n): ARPACK's top eigenpair, a Cholesky proof of λ₁(Â) < μ.

    ``apply(v)`` = JᵀJ v for one flat v; ``gram`` (optional) the same for a batch (b, *shape). The bounds of
    a ``lanczos`` bracket already found are kept where they are better. See the module docstring.
    """
    import scipy.linalg as sl
    from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigsh

    from sapa.common.seeds import rng_for

    n = int(np.prod(shape))
    say = on_dense or (lambda stage, done, total: None)
    A = np.empty((n, n))
    blk = max(1, min(n, 2**21 // n))  # columns per batch: a few MiB of directions at a time
    for j0 in range(0, n, blk):
        j1 = min(n, j0 + blk)
        E = np.zeros((j1 - j0, n))
        E[np.arange(j1 - j0), np.arange(j0, j1)] = 1.0
        if gram is not None:
            A[:, j0:j1] = np.asarray(gram(E.reshape((j1 - j0,) + tuple(shape)))).reshape(j1 - j0, n).T
        else:
            for c in range(j1 - j0):
                A[:, j0 + c] = apply(E[c])
        say("forming JᵀJ", j1, n)
    asym = _symmetrise(A, blk)  # in place, in blocks: Â and its factor are all the memory the certificate needs
    trA = float(np.trace(A))
    say("top eigenpair (ARPACK)", 0, 1)
    v0 = rng_for(int(seed), "dense_bracket", n).standard_normal(n)
    try:
        th, X = eigsh(A, k=1, which="LA", tol=tol / 16, v0=v0, maxiter=max(1000, 10 * n)) if n > 2 else (None, None)
    except (ArpackNoConvergence, ArpackError):
        th = None
    if th is None:  # tiny n or ARPACK failed: the full symmetric eigen-decomposition
        w, Q = _eigh(A)
        th, X = w[-1:], Q[:, -1:]
    theta = max(float(th[0]), 0.0)
    x = X[:, 0].reshape(shape)
    lo, m_out = _rayleigh(matvec, x)
    m_prod = max(n, m_out)
    slack = ROUND * m_prod
    delta = asym + ROUND * m_prod * fro2  # λ₁(A) ≤ λ₁(Â) + δ
    lower = lo * (1 - slack)
    upper = math.sqrt(fro2) * (1 + slack)
    g1 = (n + 1) * EPS / (1 - (n + 1) * EPS)
    rel = tol
    for attempt in range(4):
        if attempt == 2:  # twice refused: ARPACK's pair may not be the top one; take the full eigen-decomposition's
            say("full eigen-decomposition", 0, 1)
            w, Q = _eigh(A)
            if float(w[-1]) > theta:
                theta, x = float(w[-1]), Q[:, -1].reshape(shape)
                lower = max(lower, _rayleigh(matvec, x)[0] * (1 - slack))
            rel = tol
        mu = theta * (1 + rel)
        c = 2 * g1 / (1 - 2 * g1) * max(n * mu - trA, 0.0)
        B = -A  # (μ − c)I − Â: a new array, Â is kept
        B[np.diag_indices(n)] += mu - c
        say("Cholesky proof of the upper bound", attempt + 1, 4)
        try:
            sl.cholesky(B, lower=True, overwrite_a=True, check_finite=False)
        except np.linalg.LinAlgError:  # not proven at this μ: raise it
            rel = max(16 * rel, 4 * c / max(theta, 1e-300))
            continue
        finally:
            del B
        upper = min(upper, math.sqrt(mu + delta) * (1 + slack))
        break
    if lanczos is not None:
        lower = max(lower, lanczos.lower)
        upper = min(upper, lanczos.upper)
    xn = float(np.linalg.norm(x))
    return _finish(lower, float(upper), estimate=math.sqrt(theta), upper_frobenius=math.sqrt(fro2),
                   steps=lanczos.steps if lanczos is not None else 0,
                   residual=lanczos.residual if lanczos is not None else 0.0,
                   trace_rest=lanczos.trace_rest if lanczos is not None else 0.0, tol=tol,
                   v=x / xn if xn > 0 else x, method="dense-cholesky",
                   ortho=lanczos.ortho if lanczos is not None else 0.0)
