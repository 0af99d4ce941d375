"""Geometry of one real head: reduced coordinates, trace invariants, canonical correlations, per-head growth.

For a head of all-MiniLM-L6-v2 (arXiv 2410.18613, Cor 4.3 / 4.5 on a real model; conventions in
:mod:`sapa.empirics.realmodel.real`): the bias as a token shift and the reduced basis U (S = X_r W_r X_rᵀ),
the trace invariants of W that drive the exact Gaussian moments, N* and exponents under a
Gaussian proxy (:func:`proxy_moments`, from :func:`sapa.theory.moments.exact_moments`), canonical
correlations of A = XW_Q + b_Q and B = XW_K + b_K against independent random weights, the
participation ratio of the tokens, and the RMS-over-texts growth exponent with a paired
bootstrap over texts (:func:`paired_rms_exponents`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sapa.common.validate import InputError
from sapa.empirics.realmodel.real_model import HeadQK
from sapa.empirics.realmodel.real_records import ABCorrelation, ABStats, Invariants, ProxyMoments
from sapa.common.seeds import rng_for
from sapa.empirics.montecarlo.stats import loglog_slope

__all__ = [
    "HeadGeometry", "head_geometry", "invariants", "grid_slope", "proxy_moments", "canonical_correlations",
    "top_canonical", "participation_ratio", "random_weight_canonical", "ab_correlation", "paired_rms_exponents",
    "paired_rms_exponent",
]


@dataclass(frozen=True)
class HeadGeometry:
    """One head in reduced coordinates: S = (X + 1sᵀ) W (X + 1sᵀ)ᵀ = X_r W_r X_rᵀ, X_r = (X + 1sᵀ) U."""

    qk: HeadQK
    U: np.ndarray  # (D, r) orthonormal basis of span[W_Q W_K], r ≤ 2d
    W_r: np.ndarray  # (r, r) = UᵀWU
    s: np.ndarray  # (D,) bias as a token shift, s ∈ span U
    shift_residual: float  # ‖[W_Q W_K]ᵀs − [b_Q; b_K]‖ / ‖[b_Q; b_K]‖ (≈ 1e-15 when exact)

    def reduce(self, X: np.ndarray) -> np.ndarray:
        """(…, N, D) attention inputs → (…, N, r) reduced, shifted tokens X_r = (X + s)U."""
        return (X + self.s) @ self.U  # (N, D) @ (D, r)

    def sigma_r(self, Sigma: np.ndarray) -> np.ndarray:
        """UᵀΣU (r, r): the covariance of Uᵀx for x ~ N(0, Σ)."""
        return self.U.T @ Sigma @ self.U


def head_geometry(qk: HeadQK) -> HeadGeometry:
    """Reduced basis, reduced W and bias shift of one head (see the module docstring)."""
    M = np.hstack([qk.W_Q, qk.W_K])  # (D, 2d)
    U, sv, _ = np.linalg.svd(M, full_matrices=False)
    r = int((sv > sv[0] * 1e-12).sum())
    U = U[:, :r]
    beta = np.concatenate([qk.b_Q, qk.b_K])  # (2d,)
    s = np.linalg.lstsq(M.T, beta, rcond=None)[0]  # (D,) minimum-norm, in the row space of Mᵀ = span U
    res = float(np.linalg.norm(M.T @ s - beta) / max(np.linalg.norm(beta), 1e-300))
    if res > 1e-8:
        raise InputError(f"head ({qk.layer}, {qk.head}): biases are not a token shift (residual {res:.2g})")
    return HeadGeometry(qk=qk, U=U, W_r=U.T @ qk.W @ U, s=s, shift_residual=res)


def invariants(W: np.ndarray) -> Invariants:
    """Trace invariants of W that drive the exact moments (any square W; reduced W_r gives the same).

    For x ~ N(0, I): E S_12² = ‖W‖²_F and E S_11² = (tr W)² + 2‖W_s‖²_F, so
    N*(p = 1) = 1 + ((tr W)² + 2‖W_s‖²_F)/‖W‖²_F (``n_star_p1_identity``).
    """
    W = np.asarray(W, dtype=np.float64)
    Ws = 0.5 * (W + W.T)
    fro2 = float((W * W).sum())
    ws2 = float((Ws * Ws).sum())
    tr = float(np.trace(W))
    sv = np.linalg.svd(W, compute_uv=False)  # descending
    ev = np.linalg.eigvalsh(Ws)  # ascending
    pos, neg = float(ev[ev > 0].sum()), float(-ev[ev < 0].sum())
    return Invariants(
        fro=math.sqrt(fro2),
        trace=tr,
        tr_ws2=ws2,
        sym_share=ws2 / fro2,
        trace_share=tr * tr / fro2 if fro2 else math.nan,
        sv_max=float(sv[0]),
        stable_rank=fro2 / float(sv[0] ** 2),
        eig_ws_max=float(ev[-1]),
        eig_ws_min=float(ev[0]),
        ws_positive_mass=pos / (pos + neg) if pos + neg else math.nan,
        n_star_p1_identity=1.0 + (tr * tr + 2.0 * ws2) / fro2,
    )


def _spd(S: np.ndarray) -> np.ndarray:
    """Symmetrise and, if Cholesky fails (LayerNorm makes token covariances singular), add a tiny ridge."""
    S = 0.5 * (S + S.T)
    for k in range(8):
        try:
            np.linalg.cholesky(S)
            return S
        except np.linalg.LinAlgError:
            S = S + np.eye(len(S)) * (np.trace(S) / len(S)) * 10.0 ** (k - 12)
    raise InputError("covariance is not positive definite even with a ridge")


def grid_slope(Ns, n_star: float) -> float:
    """OLS slope of ½ log E‖x^p/√N‖² on log N over ``Ns`` for a shared-X model with crossover N*.

    E‖S^{∘p}‖²/N = m_off (N − 1 + r), r = N* − 1 (module ``sapa.theory.moments``), so the slope
    depends on N* alone: ½ at N* = 2 (up to the −1), → 0 for N* ≫ max Ns.
    """
    n = np.asarray(Ns, dtype=np.float64)
    return 0.5 * loglog_slope(n, n - 2.0 + n_star)  # the RMS exponent of E‖·‖² ∝ N − 2 + N*


def proxy_moments(geom: HeadGeometry, p: int, Sigma_r: np.ndarray | None, Ns, N_real: int, Ns_all=None, *,
                  proxy: str = "identity") -> ProxyMoments:
    """Exact N*, regime start and exponents of x^p/√N for one head under a Gaussian proxy.

    ``exact_moments(p, "shared", N, W=W_r, sigma_x=Σ_r)``; x ~ N(0, Σ) in R^D is the same as
    Uᵀx ~ N(0, UᵀΣU) in R^r (Σ_r = None: identity). Returns N* (norm, Jacobian), the local
    exponent e(N) = ½N/(N−1+r), r = N*−1, at ``N_real``, the smallest N with |e − ½| ≤ 0.05
    (``n_reg``) and the OLS slope of ½ log E‖·‖² over ``Ns`` (what the measured fit estimates;
    also over ``Ns_all`` as ``grid_slope_all`` when given). ``proxy`` names the proxy in the record.
    """
    from sapa.theory.moments import exact_moments

    em = exact_moments(p, "shared", int(N_real), W=geom.W_r, sigma_x=None if Sigma_r is None else _spd(Sigma_r))
    out = {}
    for key, nstar in (("", em.crossover_n), ("_jac", em.crossover_n_jac)):
        r = nstar - 1.0
        out["n_star" + key] = float(nstar)
        out["exponent_at_real" + key] = float(0.5 * N_real / (N_real - 1.0 + r))
        out["n_reg" + key] = int(max(1, math.ceil(1 - r + abs(1 - r) / (2 * 0.05) - 1e-9)))
        out["grid_slope" + key] = grid_slope(Ns, nstar)
        out["grid_slope_all" + key] = None if Ns_all is None else grid_slope(Ns_all, nstar)
    return ProxyMoments(proxy=proxy, p=int(p), **out)


def canonical_correlations(Caa: np.ndarray, Cbb: np.ndarray, Cab: np.ndarray) -> np.ndarray:
    """σ(L_a⁻¹ C_AB L_b⁻ᵀ), C = L Lᵀ: the canonical correlations of A and B from their covariances (descending)."""
    La, Lb = np.linalg.cholesky(_spd(Caa)), np.linalg.cholesky(_spd(Cbb))
    K = np.linalg.solve(La, np.linalg.solve(Lb, Cab.T).T)  # La⁻¹ C_AB Lb⁻ᵀ (d, d)
    return np.linalg.svd(K, compute_uv=False)


def top_canonical(Sigma: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray) -> float:
    """ρ₁(XW_Q, XW_K) for tokens x with covariance Σ: top singular value of (W_QᵀΣW_Q)^{-½} W_QᵀΣW_K (W_KᵀΣW_K)^{-½}.

    Biases do not enter (correlations are centred); with Σ the sample covariance of pooled
    tokens this is the sample canonical correlation of A = XW_Q + b_Q and B = XW_K + b_K.
    """
    SQ, SK = Sigma @ W_Q, Sigma @ W_K  # (D, D) @ (D, d)
    return float(canonical_correlations(W_Q.T @ SQ, W_K.T @ SK, W_Q.T @ SK)[0])


def participation_ratio(Sigma: np.ndarray) -> float:
    """(tr Σ)²/tr(Σ²) = (Σλ)²/Σλ²: the effective number of directions of the tokens (D when isotropic, 1 when rank one)."""
    Sigma = np.asarray(Sigma, dtype=np.float64)
    return float(np.trace(Sigma) ** 2 / (Sigma * Sigma).sum())


def random_weight_canonical(Sigma: np.ndarray, d: int, rng: np.random.Generator) -> float:
    """ρ₁(XW_Q, XW_K) with W_Q, W_K independent, entries iid N(0, 1/D) (D, d): what the tokens' anisotropy alone gives.

    For isotropic x (Σ = I) it is the cosine of the smallest angle between two random d-planes
    of R^D (≈ 0.52 at d = 32, D = 384); a few dominant directions of Σ are shared by any two
    projections and push it towards 1.
    """
    D = Sigma.shape[0]
    W_Q = rng.standard_normal((D, d)) / math.sqrt(D)
    W_K = rng.standard_normal((D, d)) / math.sqrt(D)
    return top_canonical(Sigma, W_Q, W_K)


def ab_correlation(X: np.ndarray, qk: HeadQK, *, rng: np.random.Generator | None = None) -> ABCorrelation:
    """How far A = XW_Q + b_Q and B = XW_K + b_K (tokens pooled) are from the paper's independence.

    Cross-covariance C_AB = W_Qᵀ Σ̂ W_K (d, d): entry-wise correlations (the matched pairs
    (a_m, b_m) that enter S = a·b, and all pairs), canonical correlations, the normalised size
    ‖C_AB‖_F/√(‖C_AA‖_F‖C_BB‖_F), the diagonal logit excess tr(C_AB)/√d = E S_ii − E_{i≠j} S_ij
    (for independent tokens) in units of the off-diagonal standard deviation, the same numbers
    for X ~ N(0, I) (the reviewer's Cov(A, B) = W_QᵀW_K), and a null level from one seeded
    permutation of B's rows (what independence would show at this sample size), drawn from ``rng``
    (default ``rng_for(0, "real", "ab-null")``).
    """
    A = X @ qk.W_Q + qk.b_Q  # (n, D) @ (D, d)
    B = X @ qk.W_K + qk.b_K
    n, d = A.shape

    def stats(Caa, Cbb, Cab):
        sa, sb = np.sqrt(np.diag(Caa)), np.sqrt(np.diag(Cbb))
        R = Cab / np.outer(sa, sb)
        cc = canonical_correlations(Caa, Cbb, Cab)
        return ABStats(
            matched_abs_mean=float(np.abs(np.diag(R)).mean()),
            matched_mean=float(np.diag(R).mean()),
            all_abs_mean=float(np.abs(R).mean()),
            max_abs=float(np.abs(R).max()),
            canonical_top=float(cc[0]),
            canonical_mean=float(cc.mean()),
            cov_norm_ratio=float(np.linalg.norm(Cab) / math.sqrt(np.linalg.norm(Caa) * np.linalg.norm(Cbb))),
        )

    Ac, Bc = A - A.mean(0), B - B.mean(0)
    Caa, Cbb, Cab = Ac.T @ Ac / (n - 1), Bc.T @ Bc / (n - 1), Ac.T @ Bc / (n - 1)
    # diagonal excess of the logits: E[a·b] − E[a]·E[b] = tr C_AB, against the sd of a·b' (independent tokens)
    ma, mb = A.mean(0), B.mean(0)
    var_off = float(np.trace(Caa @ Cbb) + ma @ Cbb @ ma + mb @ Caa @ mb)  # Var(a·b'), a ⟂ b'
    rng = rng_for(0, "real", "ab-null") if rng is None else rng
    Bp = Bc[rng.permutation(n)]
    return ABCorrelation(
        sample=stats(Caa, Cbb, Cab),
        identity=stats(qk.W_Q.T @ qk.W_Q, qk.W_K.T @ qk.W_K, qk.W_Q.T @ qk.W_K),
        null=stats(Caa, Cbb, Ac.T @ Bp / (n - 1)),
        diag_logit_excess_sd=float(np.trace(Cab) / math.sqrt(var_off)) if var_off > 0 else math.nan,
        n_tokens=int(n),
    )


def paired_rms_exponents(ns, values: np.ndarray, *, n_boot: int = 1000, level: float = 0.9,
                         rng: np.random.Generator) -> dict:
    """Slope of ½ log mean_t v²(n) on log n per head, with a paired bootstrap over texts; ``values`` (H, T, K).

    Text t's K values are prefixes of the same text, so they are resampled together (a
    resample is a vector of text counts c, mean_t v² → c·v²/T); each head gets its own
    resamples, drawn from ``rng``. Returns numpy arrays: "slope" (H,), "lo", "hi" (H,) (the
    two-sided percentile interval at ``level``) and "local" (H, K − 1), the exponents between
    neighbouring n. Also the estimator of the ``head-fraction`` rule's calibration
    (:mod:`sapa.rules.heads`).
    """
    V = np.asarray(values, dtype=np.float64)
    x = np.log(np.asarray(ns, dtype=np.float64))
    if (V.ndim != 3 or V.shape[2] != x.size or V.shape[1] < 2 or x.size < 2 or not np.all(np.isfinite(V))
            or np.any(V <= 0)):
        raise InputError(f"values must be (H, T ≥ 2, {x.size}) finite and positive, got shape {V.shape}")
    H, T, _ = V.shape
    xc = x - x.mean()
    V2 = V * V
    m2 = V2.mean(1)  # (H, K)
    slope = (0.5 * np.log(m2)) @ xc / (xc @ xc)  # (H,)
    B = int(n_boot)
    idx = rng.integers(0, T, size=(H * B, T), dtype=np.int32)  # (H·B, T) resampled text indices
    idx += (T * np.arange(H * B, dtype=np.int32))[:, None]  # one bin per (head, resample, text)
    counts = np.bincount(idx.ravel(), minlength=H * B * T).reshape(H, B, T).astype(np.float64)
    boot = (0.5 * np.log(counts @ V2 / T)) @ xc / (xc @ xc)  # (H, B, T) @ (H, T, K) -> (H, B, K) -> (H, B)
    a = (1 - level) / 2
    lo, hi = np.quantile(boot, [a, 1 - a], axis=1)  # (2, H)
    local = np.diff(0.5 * np.log(m2), axis=1) / np.diff(x)  # (H, K − 1)
    return {"slope": slope, "lo": lo, "hi": hi, "local": local}


def paired_rms_exponent(Ns, values: np.ndarray, *, n_boot: int = 1000, level: float = 0.9, seed=0) -> dict:
    """Exponent of the RMS over texts, √mean_t v_t(N)², against N, with a paired bootstrap over texts.

    ``values`` (T, K): text t's norm at N_k (prefixes of the same text, so the K values of a
    text are resampled together; :func:`sapa.empirics.montecarlo.stats.fit_exponent` resamples each N on its
    own, which ignores that pairing). Slope: OLS of ½ log mean_t v² on log N. One head of
    :func:`paired_rms_exponents`, resampled with ``rng_for(seed, "real", "paired-rms-exponent")``.
    """
    V = np.asarray(values, dtype=np.float64)
    if V.ndim != 2:
        raise InputError(f"values must be (T ≥ 2, K), got shape {V.shape}")
    f = paired_rms_exponents(Ns, V[None], n_boot=n_boot, level=level, rng=rng_for(seed, "real", "paired-rms-exponent"))
    return {"slope": float(f["slope"][0]), "ci": [float(f["lo"][0]), float(f["hi"][0])], "level": level,
            "n_boot": int(n_boot), "n_texts": int(V.shape[0]), "local": [float(v) for v in f["local"][0]]}
