"""Monte Carlo of ‖φ(S)‖_F, ‖∂φ/∂S‖_F, ‖∂φ/∂X‖_F for any audited activation φ(x, N, i), with exact kernels.

The Monte Carlo side of ``sapa audit`` (:mod:`sapa.theory.activation_audit`; arXiv 2410.18613's Cor 4.3/4.5 and the
other papers' scale rules). φ and φ' come from the sympy expression (``lambdify`` to numpy); the
norms of one draw are exact and never build a Jacobian, O(N²D) per draw (derivation as in
:mod:`sapa.empirics.kernels.norms`, with dS_ij = y_jᵀdx_i + z_iᵀdx_j, y_j = W x_j, z_i = Wᵀx_i):

* element-wise: ‖∂φ/∂X‖²_F = Σ_{i≠j} φ'(S_ij)²(‖y_j‖² + ‖z_i‖²) + Σ_i φ'(S_ii)²‖y_i + z_i‖²;
* row-normalised P_i = φ(S_i)/s_i: with g_k = φ'(S_ik)/s_i the row Jacobian w.r.t. S_i is
  J_i = (I − P_i 1ᵀ) diag(g), so ‖J_i‖²_F = Σ_k g_k²(1 − 2P_ik + ‖P_i‖²) and
  ‖∂P_i/∂X‖²_F = ‖J_iY‖²_F + ‖z_i‖²‖J_i‖²_F + 2(J_ie_i)ᵀ(J_iYz_i), each term in O(ND) per row;
  φ = exp(·) is evaluated through log φ (stable: g = (log φ)'·P).

A causal mask keeps j ≤ i (masked entries are 0 and carry no derivative). The paper's model
(S = ABᵀ, A, B independent) takes the Jacobian w.r.t. (A, B): no cross term. All in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sapa.common.seeds import rng_for
from sapa.empirics.kernels.activation_fns import _Fns, activation_functions
from sapa.empirics.montecarlo.stats import local_slopes
from sapa.theory.activation_audit import Activation, ModelSpec
from sapa.theory.families import COMPARED
from sapa.common.validate import InputError, positive_int

__all__ = [
    "Geometry",
    "MCNorms",
    "activation_functions",
    "draw_norms",
    "geometry",
    "geometry_paper",
    "geometry_qk",
    "sample_fro2",
    "sample_norms",
    "trials_for",
    "z_scores",
    "ACTIVATIONS",
    "MODELS",
    "Curve",
    "AuditCompareResult",
    "run_audit_compare",
]

CHUNK_ELEMS = 2**24  # one (T, N, D) block of normals ≈ 128 MB


@dataclass(frozen=True)
class MCNorms:
    """Squared norms of T independent draws at one N: fro2, jac_s2, jac2 each (T,)."""

    N: int
    fro2: np.ndarray
    jac_s2: np.ndarray
    jac2: np.ndarray

    def summary(self) -> dict:
        def ms(v):
            return {"mean": float(v.mean()), "se": float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan}

        return {"N": self.N, "trials": int(self.fro2.size), "fro2": ms(self.fro2), "jac_s2": ms(self.jac_s2),
                "jac2": ms(self.jac2)}


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Batched a @ b through torch (float64; numpy's stacked matmul does not use BLAS here and is ~30× slower)."""
    import torch

    return (torch.from_numpy(np.ascontiguousarray(a)) @ torch.from_numpy(np.ascontiguousarray(b))).numpy()


@dataclass(frozen=True)
class Geometry:
    """What the exact kernels need from one batch of draws (T draws, N tokens), never the Jacobian.

    S (T,N,N) logits; ny2, nz2 (T,N) = ‖y_j‖², ‖z_i‖²; yz (T,N) = y_i·z_i; YY (T,N,N) = Y Yᵀ and
    V (T,N,N) = Z Yᵀ (only for row normalisation; None otherwise). y_j = W x_j, z_i = Wᵀ x_i
    (paper model: y = b, z = a, and the Jacobian has no cross term).
    """

    S: np.ndarray
    ny2: np.ndarray
    nz2: np.ndarray
    yz: np.ndarray
    YY: np.ndarray | None = None
    V: np.ndarray | None = None


def _rowdot(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    return np.einsum("tnk,tnk->tn", P, Q)


def geometry(X: np.ndarray, W: np.ndarray, gram: bool = True) -> Geometry:
    """Geometry of S = X W Xᵀ for X (T,N,D), W (T,D,D) (or broadcastable (D,D))."""
    X = np.asarray(X, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)  # (D, D) shared by all draws, or (T, D, D)
    Y = _mm(X, np.swapaxes(W, -1, -2))  # rows y_j = W x_j
    Z = _mm(X, W)                       # rows z_i = Wᵀ x_i
    S = _mm(X, Y.transpose(0, 2, 1))                         # S_ij = x_i · y_j
    YY = _mm(Y, Y.transpose(0, 2, 1)) if gram else None
    V = _mm(Z, Y.transpose(0, 2, 1)) if gram else None
    return Geometry(S, _rowdot(Y, Y), _rowdot(Z, Z), _rowdot(Y, Z), YY, V)


def geometry_qk(X: np.ndarray, Q: np.ndarray, K: np.ndarray, gram: bool = True) -> Geometry:
    """Geometry of S = X Q Kᵀ Xᵀ without forming W (D×D): A = XQ, B = XK, Y = B Qᵀ, Z = A Kᵀ, in O(N D d + N² d)."""
    A, B = _mm(X, Q), _mm(X, K)  # (T, N, d)
    Mq, Mk, Mqk = _mm(Q.transpose(0, 2, 1), Q), _mm(K.transpose(0, 2, 1), K), _mm(Q.transpose(0, 2, 1), K)  # (T, d, d)
    S = _mm(A, B.transpose(0, 2, 1))
    BMq = _mm(B, Mq)
    ny2, nz2 = _rowdot(BMq, B), _rowdot(_mm(A, Mk), A)    # ‖Q b_j‖², ‖K a_i‖²
    yz = _rowdot(_mm(B, Mqk), A)                           # (Q b_i)·(K a_i)
    YY = _mm(BMq, B.transpose(0, 2, 1)) if gram else None  # y_i·y_k = b_i QᵀQ b_k
    V = _mm(_mm(A, np.ascontiguousarray(Mqk.transpose(0, 2, 1))), B.transpose(0, 2, 1)) if gram else None  # z_i·y_k
    return Geometry(S, ny2, nz2, yz, YY, V)


def geometry_paper(A: np.ndarray, B: np.ndarray, gram: bool = True) -> Geometry:
    """Geometry of S = A Bᵀ with the Jacobian w.r.t. (A, B): y = b, z = a, no cross term (yz, V unused)."""
    S = _mm(A, B.transpose(0, 2, 1))
    YY = _mm(B, B.transpose(0, 2, 1)) if gram else None
    return Geometry(S, _rowdot(B, B), _rowdot(A, A), np.zeros(S.shape[:2]), YY, None)


def _draw(spec: ModelSpec, N: int, T: int, rng: np.random.Generator, gram: bool) -> Geometry:
    """T draws of the model's randomness at N, as a :class:`Geometry`."""
    if spec.name == "paper":
        sig = float(spec.sigma)
        A = sig * rng.standard_normal((T, N, spec.d))
        B = sig * rng.standard_normal((T, N, spec.d))
        return geometry_paper(A, B, gram)
    D = spec.D
    X = rng.standard_normal((T, N, D))
    if spec.name == "shared":
        if spec.sigma_x is not None:
            X = _mm(X, np.linalg.cholesky(spec.sigma_x).T)
        return geometry(X, spec.W, gram)
    sig = float(spec.sigma)
    Q = sig * rng.standard_normal((T, D, spec.d))
    if spec.name == "tied":
        K = Q
    else:
        rho = float(spec.rho)
        K = rho * Q + math.sqrt(max(0.0, 1 - rho * rho)) * sig * rng.standard_normal((T, D, spec.d))
    return geometry_qk(X, Q, K, gram)


def _grid(act: Activation, N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row index i (1, N, 1), column index j (1, 1, N), visible entries (N, N) bool: j ≤ i under a causal mask)."""
    i = np.arange(1, N + 1, dtype=np.float64)[None, :, None]
    j = np.arange(1, N + 1, dtype=np.float64)[None, None, :]
    vis = np.tril(np.ones((N, N), dtype=bool)) if act.mask == "causal" else np.ones((N, N), dtype=bool)
    return i, j, vis


def _values(act: Activation, fns: _Fns, S: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(F, s): F = φ(S) (T, N, N) with masked entries 0, or row-normalised P_i = φ(S_i)/s_i (through log φ where
    given); s (T, N, 1) the row sums Σ_k φ(S_ik) when φ itself was summed, else None."""
    N = S.shape[1]
    i, j, vis = _grid(act, N)
    if act.normalize == "none":
        return np.where(vis, fns.f(S, float(N), i, j), 0.0), None
    if fns.logf is not None:
        L = np.where(vis, fns.logf(S, float(N), i, j), -np.inf)
        L = L - L.max(axis=2, keepdims=True)
        E = np.exp(L)
        return E / E.sum(axis=2, keepdims=True), None
    Fv = np.where(vis, fns.f(S, float(N), i, j), 0.0)
    s = Fv.sum(axis=2, keepdims=True)
    return Fv / s, s


def _fro2(act: Activation, F: np.ndarray) -> np.ndarray:
    """‖φ(S)‖²_F per draw (T,) from :func:`_values`' F (T, N, N): Σ_ij F², or Σ_i ‖P_i‖² (row sums first)."""
    if act.normalize == "none":
        return np.einsum("tij,tij->t", F, F)
    return np.einsum("tij,tij->ti", F, F).sum(axis=1)


def _finite(act: Activation, N: int, *named) -> None:
    """One InputError naming the first of ``named`` ((name, (T,) values) pairs) with a non-finite value."""
    for name, v in named:
        if not np.all(np.isfinite(v)):
            raise InputError(f"{name} is not finite in float64 for {act.text!r} at N = {N} (the activation overflows "
                             "at these logits, or a row sum vanished)")


def draw_norms(act: Activation, fns: _Fns, geo: Geometry, paper: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact (fro², jac_s², jac²) for each of T draws (see the module docstring). Returns three (T,) arrays."""
    S = geo.S
    N = S.shape[1]  # S: (T, N, N)
    i, j, vis = _grid(act, N)
    eye = np.eye(N, dtype=bool)
    ny2, nz2 = geo.ny2, geo.nz2
    with np.errstate(all="ignore"):
        if act.normalize == "none":
            F, _ = _values(act, fns, S)
            G = np.where(vis, fns.fp(S, float(N), i, j), 0.0)
            fro2 = _fro2(act, F)
            G2 = G * G
            jac_s2 = G2.sum(axis=(1, 2))
            if paper:
                jac2 = np.einsum("tij,tj->t", G2, ny2) + np.einsum("tij,ti->t", G2, nz2)
            else:
                off = np.where(eye, 0.0, G2)
                diagR = ny2 + nz2 + 2 * geo.yz  # ‖(W + Wᵀ)x_i‖² = ‖y_i + z_i‖²
                jac2 = (np.einsum("tij,tj->t", off, ny2) + np.einsum("tij,ti->t", off, nz2)
                        + np.einsum("ti,ti->t", np.diagonal(G2, axis1=1, axis2=2), diagR))
        else:
            P, s = _values(act, fns, S)
            if s is None:
                G = np.where(vis, fns.dlogf(S, float(N), i, j), 0.0) * P  # φ'/s = (log φ)'·P
            else:
                G = np.where(vis, fns.fp(S, float(N), i, j), 0.0) / s
            p2 = np.einsum("tij,tij->ti", P, P)  # (T, N) ‖P_i‖²
            fro2 = p2.sum(axis=1)
            G2 = G * G
            Jrow = np.einsum("tik,tik->ti", G2, 1.0 - 2.0 * P + p2[:, :, None])  # ‖J_i‖²_F
            jac_s2 = Jrow.sum(axis=1)
            GYY = _mm(G, geo.YY)  # (T, N, N): u_i · y_k with u_i = Σ_k g_ik y_k
            JY = (np.einsum("tik,tk->ti", G2, ny2) - 2 * np.einsum("tik,tik->ti", P * G, GYY)
                  + p2 * np.einsum("tik,tik->ti", GYY, G))  # ‖J_i Y‖²_F
            jac2_rows = JY + nz2 * Jrow
            if not paper:
                V = geo.V  # v_ik = z_i · y_k
                gv = np.einsum("tik,tik->ti", G, V)
                pgv = np.einsum("tik,tik->ti", P * G, V)
                gii = np.diagonal(G, axis1=1, axis2=2)
                vii = np.diagonal(V, axis1=1, axis2=2)
                pii = np.diagonal(P, axis1=1, axis2=2)
                jac2_rows = jac2_rows + 2 * gii * (gii * vii - pgv - (pii - p2) * gv)
            jac2 = jac2_rows.sum(axis=1)
    _finite(act, N, ("‖φ‖²", fro2), ("‖∂φ/∂S‖²", jac_s2), ("‖∂φ/∂X‖²", jac2))
    return fro2, jac_s2, jac2


def _draws(act: Activation, spec: ModelSpec, N: int, trials: int, seed: int, key: tuple, gram: bool):
    """The seeded batches of draws at N: Geometry objects covering ``trials`` draws, seeded by (seed, key, N)."""
    rng = rng_for(seed, "audit", act.text, act.normalize, act.mask, spec.name, spec.D, spec.d, str(spec.rho),
                  str(spec.sigma), N, *key)
    k = spec.d if spec.name == "paper" else spec.D
    per = max(1, min(trials, CHUNK_ELEMS // max(1, N * max(k, 3 * N))))
    done = 0
    while done < trials:
        T = min(per, trials - done)
        yield _draw(spec, N, T, rng, gram)
        done += T


def sample_norms(act: Activation, spec: ModelSpec, N: int, trials: int, seed: int = 0, key: tuple = ()) -> MCNorms:
    """``trials`` independent draws of (X, W) (or (A, B)) at N; exact norms of each. Seeded by (seed, key, N)."""
    N, trials = positive_int("N", N), positive_int("trials", trials)
    fns = activation_functions(act)
    out = [[], [], []]
    for geo in _draws(act, spec, N, trials, seed, key, gram=act.normalize == "row"):
        for lst, v in zip(out, draw_norms(act, fns, geo, spec.name == "paper")):
            lst.append(v)
    return MCNorms(N, *(np.concatenate(v) for v in out))


def sample_fro2(act: Activation, spec: ModelSpec, N: int, trials: int, seed: int = 0, key: tuple = ()) -> np.ndarray:
    """‖φ(S)‖²_F (trials,) of the draws :func:`sample_norms` makes with the same seed, key and N (the same numbers, bit
    for bit), without the Jacobians' work (φ', the Gram products Y Yᵀ and Z Yᵀ): for callers that read only the norm."""
    N, trials = positive_int("N", N), positive_int("trials", trials)
    fns = activation_functions(act)
    out = []
    for geo in _draws(act, spec, N, trials, seed, key, gram=False):
        with np.errstate(all="ignore"):
            fro2 = _fro2(act, _values(act, fns, geo.S)[0])
        _finite(act, N, ("‖φ‖²", fro2))
        out.append(fro2)
    return np.concatenate(out)


def z_scores(mc: MCNorms, expected: dict) -> dict:
    """z = (mean − E)/se for each of fro2, jac_s2, jac2 against exact/quadrature values ``expected``."""
    out = {}
    for q, v in (("fro2", mc.fro2), ("jac_s2", mc.jac_s2), ("jac2", mc.jac2)):
        e = float(expected[q])
        mean, se = float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))
        out[q] = {"mean": mean, "se": se, "expected": e,
                  "z": (mean - e) / se if se > 0 else (0.0 if abs(mean - e) <= 1e-12 * abs(e) else math.inf)}
    return out


def trials_for(rel_se: float, cv: float) -> int:
    """Trials that give a relative standard error ``rel_se`` for a quantity with coefficient of variation ``cv``."""
    return max(16, math.ceil((cv / rel_se) ** 2))


# --------------------------------------------------------------------------- the comparison experiment


# (label, expression, normalize): arXiv 2410.18613's x/√N and x³/√N beside softmax and the other papers' rules
# (label, expression, normalize) of the comparative figure: the families of theory/families.py marked for it, each
# at its logit (x/8 = S/√d at d = 64 for softmax and the other papers, as they compute it; x = S for the paper's x^p/√N)
ACTIVATIONS = tuple((f.label, f.at_logit(f.compare_logit), f.normalize) for f in COMPARED)
MODELS = ("iid", "tied")


@dataclass(frozen=True)
class Curve:
    """E-RMS growth of one activation under one weight model: e(N) = ½ dlog E‖φ‖²_F/dlog N and √(E‖φ‖²_F/N).

    ``exponent`` is given at ``exponent_N`` (Monte Carlo: geometric midpoints of neighbouring N) or at
    ``N`` when that is None (closed form / quadrature: the local exponent at each N). Shapes (K,), (K,) or (K−1,).
    """

    N: np.ndarray
    exponent: np.ndarray
    constant: np.ndarray
    method: str
    exponent_N: np.ndarray | None = None

    def to_json(self) -> dict:
        out = {"N": self.N, "exponent": self.exponent, "constant": self.constant, "method": self.method}
        return out if self.exponent_N is None else {"N": self.N, "exponent_N": self.exponent_N, **out}

    @classmethod
    def from_json(cls, data: dict) -> Curve:
        return cls(N=np.asarray(data["N"]), exponent=np.asarray(data["exponent"]),
                   constant=np.asarray(data["constant"]), method=str(data["method"]),
                   exponent_N=None if data.get("exponent_N") is None else np.asarray(data["exponent_N"]))


@dataclass(frozen=True)
class AuditCompareResult:
    """Growth curves of the six ``ACTIVATIONS`` under both ``MODELS``: ``curves[(label, model)]`` is a :class:`Curve`."""

    curves: dict  # {(label, model): Curve}
    D: int
    d: int
    trials: int
    seed: int

    def to_json(self) -> dict:
        """A mapping of plain values and arrays that ``sapa.common.figdata`` stores as JSON."""
        return {"curves": {k: c.to_json() for k, c in self.curves.items()}, "D": self.D, "d": self.d,
                "trials": self.trials, "seed": self.seed}

    @classmethod
    def from_json(cls, data: dict) -> AuditCompareResult:
        """The result :meth:`to_json` stored."""
        return cls(curves={tuple(k): Curve.from_json(c) for k, c in data["curves"].items()}, D=int(data["D"]),
                   d=int(data["d"]), trials=int(data["trials"]), seed=int(data["seed"]))


def run_audit_compare(D: int = 64, d: int = 64, Ns=(8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384),
                      mc_Ns=(32, 64, 128, 256), trials: int = 48, seed: int = 0) -> AuditCompareResult:
    """Curves per (activation, model): exact / quadrature at ``Ns``; Monte Carlo means at ``mc_Ns`` for the
    row-normalised activations (exponents between neighbouring N)."""
    from sapa.theory.activation_audit import model_spec, parse_activation, profile

    curves = {}
    for label, text, norm in ACTIVATIONS:
        act = parse_activation(text, norm)
        for m in MODELS:
            spec = model_spec(m, D, d)
            if norm == "none":
                prof = profile(act, spec)
                N = np.asarray(Ns, dtype=np.float64)
                tot = prof.totals(N)["fro"]
                curves[(label, m)] = Curve(N=N, exponent=prof.exponents(N)["fro"], constant=np.sqrt(tot / N),
                                           method=prof.method)
            else:
                N = np.asarray(mc_Ns, dtype=np.float64)
                means = np.array([sample_fro2(act, spec, int(n), trials, seed=seed, key=("figure",)).mean()
                                  for n in mc_Ns])  # (K,) E‖φ‖²_F
                ex = 0.5 * np.array(local_slopes(N, means))  # (K−1,) RMS exponents between neighbouring N
                curves[(label, m)] = Curve(N=N, exponent=ex, constant=np.sqrt(means / N), method="monte_carlo",
                                           exponent_N=np.sqrt(N[1:] * N[:-1]))
    return AuditCompareResult(curves=curves, D=D, d=d, trials=trials, seed=seed)
