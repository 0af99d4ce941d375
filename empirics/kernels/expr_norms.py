"""‖φ(S)‖_F, ‖∂φ/∂S‖_F, ‖∂φ/∂X‖_F exactly for any audited φ(x, N, i, j) on given matrices, and for a multi-head layer.

``sapa norms --activation EXPR``: the activation is any expression :func:`sapa.theory.activation_audit.parse_activation`
accepts (element-wise φ of the logit x, the length N, the row index i and the column index j;
optionally row-normalised, optionally causal), evaluated on the user's X (N, D) and heads
(S_h = X W_Q^h W_K^hᵀ Xᵀ, or S = X W Xᵀ), optionally with values: the layer
F(X) = Σ_h φ(S_h) X W_V^h W_O^h (W_O absent: the heads' outputs concatenated). Nothing builds a
Jacobian; everything is O(N²D) per head (the layer's cross-head Frobenius terms add O(N H² d³)).

Notation per head: a_i = W_Qᵀx_i, b_k = W_Kᵀx_k (queries, keys), S_ik = a_i·b_k,
y_k = W_Q b_k, z_i = W_K a_i, so dS_ik = dx_i·y_k + z_i·dx_k. The row Jacobian of P_i w.r.t. S_i is

* element-wise: R_i = diag(g_i), g_ik = φ'(S_ik);
* row-normalised, P_ik = φ(S_ik)/s_i: R_i = diag(g_i) − P_i g_iᵀ, g_ik = φ'(S_ik)/s_i
  (the rank-one correction of each row), so dP_ik = g_ik dS_ik − P_ik Σ_l g_il dS_il.

Masked entries (causal: k > i) are 0 and carry no derivative. Then

* ‖∂φ/∂S‖²_F = Σ_i ‖R_i‖²_F: Σ g² (element-wise) or Σ_ik g_ik²(1 − 2P_ik + ‖P_i‖²) (row; at the entry P_im > ½
  of a near-one-hot row as (1 − P_im)² + Σ_{l≠m} P_il² with 1 − P_im = Σ_{l≠m} P_il, see :func:`dominant`);
* ‖∂φ/∂X‖²_F (attention matrix): element-wise Σ_{i≠k} g_ik²(‖y_k‖² + ‖z_i‖²) + Σ_i g_ii²‖y_i + z_i‖²;
  row-normalised ‖R_iY‖²_F + ‖z_i‖²‖R_i‖²_F + 2(R_ie_i)ᵀ(R_iYz_i) per row (as :mod:`sapa.empirics.experiments.activation_sampling`);
* the layer: with v_k = W_Vᵀx_k, c_i = 0 (element-wise) or Σ_k P_ik v_k (row), ω_ik = g_ik(v_k − c_i),
  C_i = Σ_k ω_ik b_kᵀ (d_v × d), the Jacobian block of output row i w.r.t. token k is
  J_ik = Σ_h W_O^hᵀ [δ_ik C_i W_Qᵀ + ω_ik z_iᵀ + P_ik W_Vᵀ], and ‖J‖²_F = Σ_{h,h'} Σ_ik ⟨·,·⟩ expands into
  six kinds of traces with the Gram matrices W_O^h W_O^{h'}ᵀ, W_Q^{h'}ᵀW_Q^h, … (:func:`layer_jac_fro2`).

Range: the per-head norms are scaled before squaring (φ, g and Y, Z divided by powers of two,
squares summed, the scales added back in log₂), as :mod:`sapa.empirics.kernels.norms`. A row-normalised exp-type φ
(softmax) carries each row whose logit gap exceeds ROW_SCALE_GAP divided by t_i = e^{−gap} (:class:`RowScale`,
from log φ, so nothing underflows at any gap), per-row sums combined by a log-sum-exp; :class:`LayerOperator`
applies the same rows, optionally as 2^{−e}·J (``log2_scale``). The layer's cross-head sum
has signed terms and is summed in float64 as it is (NormOverflowError if it is not finite).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from sapa.common.validate import InputError
from sapa.empirics.kernels.norms import NormOverflowError

__all__ = ["Layer", "HeadNorms", "ExprNorms", "RowScale", "layer_from_w", "layer_from_qk", "attention_rows", "head_norms",
           "expr_norms", "layer_jac_fro2", "dominant", "LayerOperator", "MAX_BYTES", "MAX_HEADS_WITH_VALUES",
           "request_bytes", "check_qk_shapes"]

MAX_BYTES = 4 * 2**30          # the largest peak memory a norms request may need (estimated up front, request_bytes)
MAX_HEADS_WITH_VALUES = 256    # the layer's cross-head sum is a Python loop over H² head pairs


@dataclass(frozen=True)
class Layer:
    """Heads of one attention layer: W_Q^h, W_K^h (H, D, d); optional W_V^h (H, D, d_v) and W_O^h (H, d_v, D_out)."""

    Wq: np.ndarray
    Wk: np.ndarray
    Wv: np.ndarray | None = None
    Wo: np.ndarray | None = None
    bq: np.ndarray | None = None  # (H, d) query bias: a_i = W_Qᵀx_i + b_Q (constant: the Jacobian keeps its form)
    bk: np.ndarray | None = None  # (H, d) key bias

    @property
    def H(self) -> int:
        return int(self.Wq.shape[0])

    @property
    def D(self) -> int:
        return int(self.Wq.shape[1])

    @property
    def has_values(self) -> bool:
        return self.Wv is not None


def _f64(name: str, a, ndim: int) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != ndim or 0 in arr.shape:
        raise InputError(f"{name} must be a non-empty {ndim}-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name} contains NaN or inf")
    return arr


def layer_from_w(W) -> Layer:
    """One head with S = X W Xᵀ: W_Q = W, W_K = I (so y_k = W x_k, z_i = Wᵀ x_i)."""
    W = _f64("W", W, 2)
    if W.shape[0] != W.shape[1]:
        raise InputError(f"W must be square (D, D), got shape {W.shape}")
    return Layer(W[None], np.eye(W.shape[0])[None])


def layer_from_qk(Wq, Wk, Wv=None, Wo=None, heads: int = 1) -> Layer:
    """Heads from stacked matrices: W_Q, W_K (D, H·d), W_V (D, H·d_v), W_O (H·d_v, D_out); columns split in ``heads``.

    W_V without W_O: the heads' outputs are concatenated (W_O = I). W_O without W_V is refused.
    """
    Wq, Wk = _f64("W_Q", Wq, 2), _f64("W_K", Wk, 2)
    if Wo is not None and Wv is None:
        raise InputError("W_O needs W_V (the output projection acts on the values)")
    Wv = None if Wv is None else _f64("W_V", Wv, 2)
    Wo = None if Wo is None else _f64("W_O", Wo, 2)
    check_qk_shapes(Wq.shape, Wk.shape, None if Wv is None else Wv.shape, None if Wo is None else Wo.shape, heads)
    d = Wq.shape[1] // heads

    def split(M, w):  # (D, H·w) -> (H, D, w)
        return np.ascontiguousarray(M.reshape(M.shape[0], heads, w).transpose(1, 0, 2))

    wv = wo = None
    if Wv is not None:
        dv = Wv.shape[1] // heads
        wv = split(Wv, dv)
        Wo = np.eye(heads * dv) if Wo is None else Wo
        wo = np.ascontiguousarray(Wo.reshape(heads, dv, Wo.shape[1]))
    return Layer(split(Wq, d), split(Wk, d), wv, wo)


def check_qk_shapes(q: tuple, k: tuple, v: tuple | None = None, o: tuple | None = None, heads: int = 1) -> None:
    """InputError unless W_Q, W_K (D, H·d), W_V (D, H·d_v) and W_O (H·d_v, D_out) of these shapes make ``heads``
    heads: the shapes alone, so that a file's header is checked before its tensors are read."""
    if tuple(q) != tuple(k):
        raise InputError(f"W_Q {tuple(q)} and W_K {tuple(k)} must have the same shape (D, H·d)")
    if not isinstance(heads, (int, np.integer)) or heads < 1:
        raise InputError(f"heads must be a positive integer, got {heads!r}")
    D, Hd = q
    if Hd % heads:
        raise InputError(f"W_Q has {Hd} columns, not divisible by {heads} heads")
    if o is not None and v is None:
        raise InputError("W_O needs W_V (the output projection acts on the values)")
    if v is not None:
        if v[0] != D or v[1] % heads:
            raise InputError(f"W_V must be (D, H·d_v) = ({D}, multiple of {heads}), got {tuple(v)}")
        if o is not None and o[0] != v[1]:
            raise InputError(f"W_O must have H·d_v = {v[1]} rows, got {tuple(o)}")


# ----------------------------------------------------------------------------- one head


@dataclass(frozen=True)
class _Head:
    """What the norms and the Jacobian products need from one head (all float64)."""

    A: np.ndarray   # (N, d) queries a_i
    B: np.ndarray   # (N, d) keys b_k
    Y: np.ndarray   # (N, D) y_k = W_Q b_k
    Z: np.ndarray   # (N, D) z_i = W_K a_i
    P: np.ndarray   # (N, N) φ(S) (row-normalised if asked), 0 where masked
    g: np.ndarray   # (N, N) φ'(S) (divided by the row sum if row-normalised), 0 where masked
    row: bool       # row-normalised
    eP: int = 0     # the true φ(S) is P·2^eP, φ' is g·2^eg and y, z are Y·2^eY, Z·2^eY (exact powers of two:
    eg: int = 0     # :func:`_scaled_head`, for φ homogeneous in x, so that tiny or huge X keep their norms)
    eY: int = 0
    rs: "RowScale | None" = None  # row-normalised: near-one-hot rows divided by t_i (:func:`row_scale`)


@dataclass(frozen=True)
class RowScale:
    """Row i's Jacobian R_i carried as t_i·(R_i/t_i): the non-maximal P_ik, g_ik and q_i = 1 − P_im divided by t_i.

    For an exp-type row-normalised φ whose row has logit gap log φ_im − max_{k≠m} log φ_ik > ROW_SCALE_GAP,
    t_i = e^{−gap}; then P_ik/t_i = e^{ℓ_ik − ℓ_i,2nd}/(1 + t_i Σ_{l≠m} e^{ℓ_il − ℓ_i,2nd}) (ℓ = log φ) cannot underflow
    however large the gap. Elsewhere t_i = 1 and the arrays are the head's own. R_i/t_i has columns
    (g_ik/t_i)(e_k − P_i), k ≠ m, and g_im (q_i/t_i · e_m − P_i^(−m)/t_i): every entry of order 1 where R_i is of order t_i.
    """

    lt: np.ndarray    # (N,) ln t_i (0 on ordinary rows)
    P: np.ndarray     # (N, N) P_ik/t_i off the dominant column m_i, P_im at it
    g: np.ndarray     # (N, N) g_ik/t_i off m_i, g_im at it
    m: np.ndarray     # (N,) dominant column
    has: np.ndarray   # (N,) P_im > ½
    q: np.ndarray     # (N,) (1 − P_im)/t_i

    @property
    def scaled(self) -> bool:
        return bool(np.any(self.lt != 0.0))


def attention_rows(S: np.ndarray, act, fns=None) -> tuple[np.ndarray, np.ndarray]:
    """(P, g) for logits S (N, N): P = φ(S) or its row-normalised form, g as in the module docstring (masked: 0)."""
    from sapa.empirics.kernels.activation_fns import activation_functions

    fns = fns or activation_functions(act)
    N = S.shape[0]
    i = np.arange(1, N + 1, dtype=np.float64)[:, None]
    j = np.arange(1, N + 1, dtype=np.float64)[None, :]
    vis = np.tril(np.ones((N, N), dtype=bool)) if act.mask == "causal" else np.ones((N, N), dtype=bool)
    with np.errstate(all="ignore"):
        if act.normalize == "none":
            P = np.where(vis, fns.f(S, float(N), i, j), 0.0)
            g = np.where(vis, fns.fp(S, float(N), i, j), 0.0)
        elif fns.logf is not None:  # exp-type φ: through log φ, shifted by the row maximum (softmax-stable)
            L = np.where(vis, fns.logf(S, float(N), i, j), -np.inf)
            E = np.exp(L - L.max(axis=1, keepdims=True))
            P = E / E.sum(axis=1, keepdims=True)
            g = np.where(vis, fns.dlogf(S, float(N), i, j), 0.0) * P
        else:
            F = np.where(vis, fns.f(S, float(N), i, j), 0.0)
            s = F.sum(axis=1, keepdims=True)
            P, g = F / s, np.where(vis, fns.fp(S, float(N), i, j), 0.0) / s
    if not (np.all(np.isfinite(P)) and np.all(np.isfinite(g))):
        raise NormOverflowError(f"φ or φ' is not finite in float64 for {act.text!r} at N = {N} (the activation "
                                "overflows at these logits, or a row sum vanished)")
    return P, g


ROW_SCALE_GAP = 64.0  # rows with a larger logit gap are carried divided by t_i = e^{−gap} (RowScale)


def row_scale(S: np.ndarray, act, fns, P: np.ndarray, g: np.ndarray) -> RowScale:
    """The :class:`RowScale` of row-normalised (P, g) at logits S (N, N): near-one-hot rows of an exp-type φ scaled."""
    m, has, q = dominant(P)
    N = S.shape[0]
    lt = np.zeros(N)
    plain = RowScale(lt, P, g, m, has, q)
    if fns.logf is None:
        return plain
    i = np.arange(1, N + 1, dtype=np.float64)[:, None]
    j = np.arange(1, N + 1, dtype=np.float64)[None, :]
    vis = np.tril(np.ones((N, N), dtype=bool)) if act.mask == "causal" else np.ones((N, N), dtype=bool)
    rows = np.arange(N)
    with np.errstate(all="ignore"):
        L = np.where(vis, fns.logf(S, float(N), i, j), -np.inf)  # ℓ_ik = log φ(S_ik), −inf where masked
        gap = L - L[rows, m][:, None]
        gap[rows, m] = -np.inf
        second = gap.max(axis=1)  # −(the logit gap); −inf for a row with one visible entry
        sc = np.isfinite(second) & (second < -ROW_SCALE_GAP)  # here P_im > ½, so m is the arg-max of ℓ
        if not sc.any():
            return plain
        E = np.exp(gap[sc] - second[sc][:, None])  # (n, N) e^{ℓ_ik − ℓ_i,2nd} ≤ 1, 0 at m and where masked
        s = E.sum(axis=1)
        denom = 1.0 + np.exp(second[sc]) * s
        dl = np.broadcast_to(np.where(vis, fns.dlogf(S, float(N), i, j), 0.0), (N, N))[sc]
    Ps, gs, qs = P.copy(), g.copy(), q.copy()
    Ps[sc] = E / denom[:, None]
    Ps[rows[sc], m[sc]] = 1.0 / denom  # P_im itself
    gs[sc] = dl * Ps[sc]  # g = (log φ)'·P
    qs[sc] = s / denom
    lt[sc] = second[sc]
    if not (np.all(np.isfinite(Ps)) and np.all(np.isfinite(gs))):
        raise NormOverflowError(f"(log φ)' is not finite in float64 for {act.text!r} at N = {N}")
    return RowScale(lt, Ps, gs, m, has | sc, qs)


def _head(X: np.ndarray, Wq: np.ndarray, Wk: np.ndarray, act, fns, bq=None, bk=None) -> _Head:
    A, B = X @ Wq, X @ Wk          # (N, D) @ (D, d) -> (N, d)
    if bq is not None:
        A, B = A + bq[None, :], B + bk[None, :]
    S = A @ B.T                    # (N, d) @ (d, N) -> (N, N)
    P, g = attention_rows(S, act, fns)
    row = act.normalize == "row"
    return _Head(A, B, B @ Wq.T, A @ Wk.T, P, g, row, rs=row_scale(S, act, fns, P, g) if row else None)


def homogeneous_degree(act) -> int | None:
    """p ≥ 1 if φ(λx, N, i, j) = λ^p φ(x, N, i, j) for every λ > 0 (x³/√N: 3, relu(x): 1), else None (sympy)."""
    from sapa.theory.activation import x_

    return _degree(act.expr, x_)


@functools.lru_cache(maxsize=256)
def _degree(expr, x) -> int | None:
    """The p of :func:`homogeneous_degree`: φ(λx)/φ(x) simplified to λ^p with λ a positive symbol.

    Max/Min are written with Heaviside first, and Heaviside(λ·u) is Heaviside(u) (λ > 0 keeps the sign), so
    relu(x) = x·Heaviside(x) has degree 1.
    """
    import sympy as sp

    if x not in expr.free_symbols:
        return None
    lam = sp.Symbol("lam", positive=True)
    try:
        r = expr.rewrite(sp.Heaviside) if expr.has(sp.Max, sp.Min) else expr
        scaled = r.subs(x, lam * x).replace(
            lambda e: isinstance(e, sp.Heaviside) and e.args[0].has(lam),
            lambda e: sp.Heaviside(sp.simplify(e.args[0] / lam), *e.args[1:]))
        ratio = sp.simplify(scaled / r)
        if ratio.free_symbols - {lam}:
            return None
        p = sp.simplify(sp.log(ratio.subs(lam, 2), 2))
        if not (p.is_integer and p >= 1) or sp.simplify(ratio - lam**p) != 0:
            return None
        return int(p)
    except (TypeError, ValueError, ZeroDivisionError, AttributeError, NotImplementedError):
        return None


def _scaled_head(X: np.ndarray, Wq: np.ndarray, Wk: np.ndarray, act, fns, p: int) -> _Head:
    """One head computed on X, W_Q, W_K divided by powers of two, for φ homogeneous of degree p in x (no bias).

    With X = 2^a X', W_Q = 2^b W_Q', W_K = 2^c W_K': S = 2^s S' (s = 2a + b + c), φ(S) = 2^{ps} φ(S'),
    φ'(S) = 2^{(p−1)s} φ'(S') (row-normalised: P unchanged, g·2^{−s}), y and z scale by 2^{a+b+c}. Every factor is
    exact, so logits that underflow (X ~ 1e−200: S ~ 1e−400) or overflow keep their norms in log₂.
    """
    a, b, c = _pow2(X), _pow2(Wq), _pow2(Wk)
    h = _head(np.ldexp(X, -a), np.ldexp(Wq, -b), np.ldexp(Wk, -c), act, fns)
    s = 2 * a + b + c
    eP, eg = (0, -s) if h.row else (p * s, (p - 1) * s)
    return replace(h, eP=eP, eg=eg, eY=a + b + c)


def _bias(layer: Layer, k: int) -> tuple:
    """(b_Q, b_K) of head k, or (None, None)."""
    if layer.bq is None:
        return None, None
    return layer.bq[k], layer.bk[k]


def _pow2(a: np.ndarray) -> int:
    """e with max|a| ∈ [2^(e−1), 2^e) (0 for an all-zero array): a/2^e is exact and has no overflowing square."""
    m = float(np.max(np.abs(a))) if a.size else 0.0
    return math.frexp(m)[1] if m > 0 else 0


@dataclass(frozen=True)
class HeadNorms:
    """log₂ of the three squared norms of one head's attention matrix (−inf for an exact 0)."""

    log2_fro2: float
    log2_jac_s2: float
    log2_jac2: float


def _log2_rows(v: np.ndarray, l2t: np.ndarray) -> float:
    """log₂ Σ_i v_i·2^{l2t_i} for v_i ≥ 0 (round-off below 0 counts as 0), by a log-sum-exp; −inf for all 0."""
    with np.errstate(divide="ignore"):
        L = np.log2(np.maximum(v, 0.0)) + l2t
    top = float(np.max(L))
    return top + math.log2(float(np.sum(np.exp2(L - top)))) if math.isfinite(top) else -math.inf


def _log2(v: float, e2: int) -> float:
    """log₂(v · 2^e2) for v ≥ 0 (−inf for 0)."""
    return math.log2(v) + e2 if v > 0 else -math.inf


def dominant(P: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(m, has, q): the column m_i of each row's largest P, whether P_im > ½, and q_i = 1 − P_im without cancellation.

    A row-normalised row sums to 1, so 1 − P_im = Σ_{l≠m} P_il: a sum of small non-negative terms, exact to
    round-off even when P_im rounds to 1 (near-one-hot rows, logit gaps ≳ 37). At most one entry of a row exceeds ½;
    every other entry k has 1 − 2P_ik ≥ 0, so the row Jacobian's 1 − 2P_ik + ‖P_i‖² sums non-negative terms there.
    """
    N = P.shape[0]
    m = np.argmax(P, axis=1)
    rows = np.arange(N)
    has = P[rows, m] > 0.5
    P0 = P.copy()
    P0[rows, m] = 0.0
    return m, has, np.where(has, P0.sum(axis=1), 1.0 - P[rows, m])


def _row_col_norms2(P: np.ndarray, m, has, q, Ps: np.ndarray | None = None) -> np.ndarray:
    """c_ik = ‖e_k − P_i‖² = 1 − 2P_ik + ‖P_i‖², at k = m_i as q_i² + Σ_{l≠m} P_il² (no cancellation), (N, N).

    With ``Ps`` and q of a :class:`RowScale`, the entry at m_i is ‖e_m − P_i‖²/t_i² (the others are not scaled).
    """
    rows = np.arange(P.shape[0])
    p2 = np.sum(P * P, axis=1)
    c = 1.0 - 2.0 * P + p2[:, None]
    P0 = (P if Ps is None else Ps).copy()
    P0[rows, m] = 0.0
    c[rows[has], m[has]] = q[has] ** 2 + np.sum(P0 * P0, axis=1)[has]
    return c


def _row_jac2(P, g, Y, Z, m, has, q, c, Ps=None, gs=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Σ_i ‖∂P_i/∂X‖²_F for row-normalised P, with the two entries that cancel written out.

    Row i: ∂P_i/∂x_k = R_i e_k z_iᵀ (k ≠ i) and M_i = R_iY + R_i e_i z_iᵀ (k = i), whose row k is
    g_ik y_k − P_ik w_i (+ g_ii z_i at k = i), u_i = Σ_l g_il y_l, w_i = u_i + g_ii z_i. ‖M_i‖² is summed as
    Σ_k g_ik²‖y_k‖² − 2 w_i·Σ_k P_ik g_ik y_k + ‖w_i‖² Σ_k P_ik² over k ∉ {i, m_i} (every P_ik ≤ ½ there), plus
    the rows k = i and k = m_i as vectors: at the dominant k = m_i (P_im > ½) g_im y_m − P_im w_i is
    g_im q_i y_m − P_im(u_i^(−m) + g_ii z_i), u_i^(−m) = Σ_{l≠m} g_il y_l, and at m_i = i g_ii q_i(y_i + z_i) − P_ii u_i^(−i).
    O(N² D) in matrix products.

    With ``Ps``, ``gs`` and q of a :class:`RowScale` (t_i ≠ 1 on near-one-hot rows), row i is computed for R_i/t_i:
    the rows k ≠ m_i are (g_ik y_k − P_ik w_i)/t_i with w_i the true one, and the dominant row's terms use the scaled
    u_i^(−m), q_i and g_ii. Returns per row (Σ_{k≠i} ‖R_i e_k‖²‖z_i‖², the rows k ∉ {i, m_i} of M_i, the rows i and
    m_i), each (N,), all divided by t_i².
    """
    N = Y.shape[0]
    rows = np.arange(N)
    Ps = P if Ps is None else Ps
    gs = g if gs is None else gs
    G2c = gs * gs * c  # c = _row_col_norms2(P, m, has, q), (N, N)
    G2c[rows, rows] = 0.0
    off = G2c.sum(axis=1)  # Σ_{k≠i} ‖R_i e_k‖²; the block k = i is M_i
    gii, pii = np.diagonal(gs).copy(), np.diagonal(Ps).copy()
    keep = np.ones((N, N))
    keep[rows, rows] = 0.0
    keep[rows[has], m[has]] = 0.0
    g0 = gs.copy()
    g0[rows[has], m[has]] = 0.0
    u, um = g @ Y, g0 @ Y  # (N, N) @ (N, D): u_i and u_i^(−m) (= u_i where no entry exceeds ½)
    w = u + np.diagonal(g)[:, None] * Z
    gk, pk = gs * keep, Ps * keep
    rest = (gk * gk) @ np.sum(Y * Y, axis=1) - 2 * np.sum(w * ((pk * gk) @ Y), axis=1) \
        + np.sum(pk * pk, axis=1) * np.sum(w * w, axis=1)
    self_dom = has & (m == rows)
    Ed = gii[:, None] * (Y + Z) - pii[:, None] * w  # row k = i of M_i (not dominant)
    gm, pm = gs[rows, m], Ps[rows, m]
    Em = np.where(self_dom[:, None], (gii * q)[:, None] * (Y + Z) - pii[:, None] * um,
                  (gm * q)[:, None] * Y[m] - pm[:, None] * (um + gii[:, None] * Z))  # row k = m_i
    diag = np.where(self_dom, 0.0, np.sum(Ed * Ed, axis=1)) + np.where(has, np.sum(Em * Em, axis=1), 0.0)
    return off * np.sum(Z * Z, axis=1), rest, diag


def head_norms(h: _Head) -> HeadNorms:
    """‖φ(S)‖²_F, ‖∂φ/∂S‖²_F, ‖∂φ/∂X‖²_F of one head, each scaled before squaring (log₂)."""
    rs = h.rs if h.row else None
    scaled = rs is not None and rs.scaled
    eP, eg = _pow2(h.P), max(_pow2(h.g), _pow2(rs.g) if scaled else 0)
    P, g = np.ldexp(h.P, -eP), np.ldexp(h.g, -eg)  # exact
    fro2 = float(np.sum(P * P))
    gs = np.ldexp(rs.g, -eg) if scaled else g  # exact
    G2 = gs * gs
    ey = max(_pow2(h.Y), _pow2(h.Z))
    Y, Z = np.ldexp(h.Y, -ey), np.ldexp(h.Z, -ey)
    oP, og, oY = 2 * h.eP, 2 * h.eg, 2 * h.eY  # the head's own exact scale (_scaled_head), 0 otherwise
    if scaled:  # near-one-hot rows: per-row sums of R_i/t_i, the t_i² added back in log₂ (any gap, no underflow)
        c = _row_col_norms2(h.P, rs.m, rs.has, rs.q, rs.P)
        parts = _row_jac2(h.P, g, Y, Z, rs.m, rs.has, rs.q, c, rs.P, gs)
        l2t = 2.0 * rs.lt / math.log(2.0)  # log₂ t_i²
        return HeadNorms(_log2(fro2, 2 * eP + oP), _log2_rows(np.sum(G2 * c, axis=1), l2t) + 2 * eg + og,
                         _log2_rows(parts[0] + parts[1] + parts[2], l2t) + 2 * eg + 2 * ey + og + oY)
    if h.row:
        m, has, q = dominant(h.P)  # the true P (≤ 1) enters the row Jacobian's e_k − P_i
        c = _row_col_norms2(h.P, m, has, q)
        jac_s2 = float(np.sum(G2 * c))  # Σ_i ‖R_i‖²_F / 2^(2eg)
        jac2 = float(sum(np.sum(part) for part in _row_jac2(h.P, g, Y, Z, m, has, q, c)))
    else:
        jac_s2 = float(G2.sum())
        ny2, nz2 = np.sum(Y * Y, axis=1), np.sum(Z * Z, axis=1)
        off = G2.copy()
        np.fill_diagonal(off, 0.0)
        diagR = np.sum((Y + Z) ** 2, axis=1)  # ‖y_i + z_i‖²
        jac2 = float((off @ ny2).sum() + (off.sum(axis=1) * nz2).sum() + (np.diagonal(G2) * diagR).sum())
    return HeadNorms(_log2(fro2, 2 * eP + oP), _log2(jac_s2, 2 * eg + og), _log2(max(jac2, 0.0), 2 * eg + 2 * ey + og + oY))


# ----------------------------------------------------------------------------- the layer


def _values(h: _Head, X: np.ndarray, Wv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(V, c, C, ω_diag): v_k = W_Vᵀx_k (N, d_v); c_i (N, d_v); C_i = Σ_k ω_ik b_kᵀ (N, d_v, d); ω_ii (N, d_v)."""
    V = X @ Wv  # (N, D) @ (D, d_v)
    c = h.P @ V if h.row else np.zeros_like(V)
    C = np.einsum("ik,kv,kd->ivd", h.g, V, h.B, optimize=True) - c[:, :, None] * (h.g @ h.B)[:, None, :]
    w_ii = np.diagonal(h.g)[:, None] * (V - c)
    return V, c, C, w_ii


def layer_jac_fro2(X: np.ndarray, layer: Layer, heads: list) -> float:
    """‖∂F/∂X‖²_F of F(X) = Σ_h P_h X W_V^h W_O^h: Σ_{h,h'} [t11 + t22 + t33 + 2(t12 + t13 + t23)] (module docstring).

    The weight Gram matrices of all head pairs come from three stacked products (W_O W_Oᵀ, W_QᵀW_Q, W_VᵀW_Q and
    W_VᵀW_V), so a pair costs O(N d_v d² + N² d_v).
    """
    H = layer.H
    d, dv = layer.Wq.shape[2], layer.Wv.shape[2]
    vals = [_values(h, X, layer.Wv[k]) for k, h in enumerate(heads)]
    Qs = np.concatenate(list(layer.Wq), axis=1)   # (D, H·d)
    Vs = np.concatenate(list(layer.Wv), axis=1)   # (D, H·d_v)
    Os = np.concatenate(list(layer.Wo), axis=0)   # (H·d_v, D_out)
    GO, GQ, GVQ, GVV = Os @ Os.T, Qs.T @ Qs, Vs.T @ Qs, Vs.T @ Vs

    def blk(G, a, b, ra, rb):
        return G[a * ra:(a + 1) * ra, b * rb:(b + 1) * rb]

    ZQ = [h.Z @ Qs for h in heads]   # (N, H·d): z_i^h · W_Q^{h'} columns
    ZV = [h.Z @ Vs for h in heads]   # (N, H·d_v)
    total = 0.0
    for a, (h, (V, c, C, w)) in enumerate(zip(heads, vals)):
        for b, (h2, (V2, c2, C2, w2)) in enumerate(zip(heads, vals)):
            O = blk(GO, a, b, dv, dv)  # W_O^a W_O^bᵀ (d_v, d_v')
            t11 = float(np.sum(C * (np.matmul(O, C2) @ blk(GQ, b, a, d, d))))  # Σ_i ⟨C_i, O C'_i Q'ᵀQ⟩
            ZQ2 = ZQ[b][:, a * d:(a + 1) * d]  # rows Qᵀ z'_i
            t12 = float(np.sum(np.matmul(C, ZQ2[:, :, None])[:, :, 0] * (w2 @ O.T)))  # Σ_i (C_i Qᵀz'_i)·(O ω'_ii)
            t13 = float(np.diagonal(h2.P) @ np.tensordot(C, O @ blk(GVQ, b, a, dv, d), axes=([1, 2], [0, 1])))
            zz = np.sum(h.Z * h2.Z, axis=1)  # z_i·z'_i
            vv = np.sum((V @ O) * V2, axis=1)  # v_k O v'_k
            CV, VC = c @ O @ V2.T, c2 @ O.T @ V.T  # c_i O v'_k, v_k O c'_i (both indexed [i, k])
            cc = np.sum((c @ O) * c2, axis=1)
            t22 = float(np.sum(zz[:, None] * h.g * h2.g * (vv[None, :] - CV - VC + cc[:, None])))
            R = ZV[a][:, b * dv:(b + 1) * dv] @ O.T  # r_i = O W_V'ᵀ z_i, (N, d_v)
            t23 = float(np.sum(h2.P * h.g * (R @ V.T - np.sum(c * R, axis=1)[:, None])))
            t33 = float(np.sum(h.P * h2.P)) * float(np.sum(O * blk(GVV, b, a, dv, dv).T))  # tr(O W_V'ᵀW_V)
            total += t11 + t22 + t33 + 2.0 * (t12 + t13 + t23)
    if not math.isfinite(total):
        raise NormOverflowError("the layer Jacobian's Frobenius norm overflows float64; rescale X or the weights")
    return max(total, 0.0)


@dataclass(frozen=True)
class ExprNorms:
    """Norms of every head's attention matrix (lists over heads) and, with values, of the whole layer."""

    fro: list            # ‖φ(S_h)‖_F
    jac_s_fro: list      # ‖∂φ(S_h)/∂S_h‖_F
    jac_fro: list        # ‖∂φ(S_h)/∂X‖_F
    log10_fro: list
    log10_jac_s_fro: list
    log10_jac_fro: list
    layer_jac_fro: float | None = None  # ‖∂F/∂X‖_F, F = Σ_h φ(S_h) X W_V^h W_O^h


def _from_log2(L: float, what: str) -> float:
    if L / 2 >= 1024:
        raise NormOverflowError(f"{what} ≈ 10^{L / 2 * math.log10(2):.1f} exceeds float64")
    return math.ldexp(2.0 ** (L / 2 - math.floor(L / 2)), int(math.floor(L / 2))) if math.isfinite(L) else 0.0


def request_bytes(N: int, D: int, layer: Layer) -> int:
    """Peak bytes of :func:`expr_norms` on X (N, D), from its arrays (an upper bound of the traced peak; measured:
    within 10 % at N = 4 096, where the (N, N) arrays dominate).

    Every head keeps P and g (N, N) and its (N, d), (N, D) factors; one head's norms use ~12 more (N, N)
    temporaries (row-normalised; ~6 element-wise) and up to 14 (N, D) ones (the row-normalised Jacobian's rows);
    with values the cross-head sum adds C_i (N, d_v, d) and v, c, ω_ii (N, d_v) per head (and 3 more C while one
    is formed), the stacked Z W_Q, Z W_V (N, H·(d + d_v)) per head, the stacked weights and their Gram matrices
    W_O W_Oᵀ, W_VᵀW_V ((H·d_v)² each), W_QᵀW_Q ((H·d)²) and W_VᵀW_Q, and ~8 (N, N) per pair.
    """
    H, d = layer.H, layer.Wq.shape[2]
    words = N * N * (2 * H + 12) + H * N * (2 * d + 2 * D) + 14 * N * D
    if layer.has_values:
        dv = layer.Wv.shape[2]
        words += (H + 3) * N * dv * d + 3 * H * N * dv + H * H * N * (d + dv) + 8 * N * N \
            + H * H * (2 * dv * dv + d * d + dv * d) + H * (D * (d + dv) + dv * layer.Wo.shape[2])
    return 8 * int(words)


def _check_request(N: int, D: int, layer: Layer) -> None:
    """InputError before any allocation when the request needs more than MAX_BYTES or too many head pairs."""
    if layer.has_values and layer.H > MAX_HEADS_WITH_VALUES:
        raise InputError(f"{layer.H} heads with values: the layer's Jacobian norm sums over {layer.H ** 2:,} head pairs "
                         f"(at most {MAX_HEADS_WITH_VALUES} heads, {MAX_HEADS_WITH_VALUES ** 2:,} pairs)")
    need = request_bytes(N, D, layer)
    if need > MAX_BYTES:
        raise InputError(f"N = {N} with {layer.H} head(s) needs about {need / 2**30:.1f} GiB of memory (at most "
                         f"{MAX_BYTES / 2**30:.0f} GiB): use fewer tokens or heads")


def expr_norms(X, layer: Layer, act) -> ExprNorms:
    """Exact norms of φ(S_h), ∂φ/∂S_h, ∂φ/∂X for every head, and ‖∂F/∂X‖_F of the layer when it has values.

    >>> from sapa.theory.activation_audit import parse_activation
    >>> r = expr_norms(np.eye(2), layer_from_w(np.eye(2)), parse_activation("x"))
    >>> round(r.fro[0], 12), round(r.jac_fro[0] ** 2, 12)   # as sapa.empirics.kernels.norms' poly p = 1
    (1.414213562373, 12.0)
    """
    from sapa.empirics.kernels.activation_fns import activation_functions

    X = _f64("X", X, 2)
    N, D = X.shape
    if D != layer.D:
        raise InputError(f"X has D = {D} columns but the weights expect D = {layer.D}")
    _check_request(N, D, layer)
    fns = activation_functions(act)
    heads = [_head(X, layer.Wq[k], layer.Wk[k], act, fns, *_bias(layer, k)) for k in range(layer.H)] \
        if layer.has_values else None  # the layer's cross-head sum needs the heads at their true scale
    p = homogeneous_degree(act) if layer.bq is None else None
    if p is not None:  # exact powers of two: full relative precision at any scale of X and the weights
        hn = [head_norms(_scaled_head(X, layer.Wq[k], layer.Wk[k], act, fns, p)) for k in range(layer.H)]
    else:
        hn = [head_norms(h) for h in heads] if heads is not None else \
            [head_norms(_head(X, layer.Wq[k], layer.Wk[k], act, fns, *_bias(layer, k))) for k in range(layer.H)]
    l10 = math.log10(2) / 2

    def col(attr, what):
        return [_from_log2(getattr(n, attr), what) for n in hn], [getattr(n, attr) * l10 for n in hn]

    fro, lf = col("log2_fro2", "‖φ(S)‖_F")
    js, ljs = col("log2_jac_s2", "‖∂φ/∂S‖_F")
    jx, ljx = col("log2_jac2", "‖∂φ/∂X‖_F")
    lay = math.sqrt(layer_jac_fro2(X, layer, heads)) if layer.has_values else None
    return ExprNorms(fro, js, jx, lf, ljs, ljx, lay)


# ----------------------------------------------------------------------------- Jacobian products


class LayerOperator:
    """J = ∂F/∂X at X as products v ↦ Jv and u ↦ Jᵀu (closed form, O(H N² d + H N D d) each), never formed.

    F is the layer Σ_h P_h X W_V^h W_O^h when the layer has values, else the attention matrix of head
    ``head`` (X ↦ φ(S_h), (N, D) -> (N, N)). Shapes: v (N, D), Jv (N, D_out) or (N, N).

    ``log2_scale`` e (attention matrix of one head only): the operator is 2^{−e}·J, its row i computed as
    (2^{−e} t_i)·(R_i/t_i) from the head's :class:`RowScale`, so that J of any size (a near-one-hot softmax at a
    logit gap of 10⁴: ~10^{−4343}) is applied as a matrix of norm ~1 without underflow.
    """

    def __init__(self, X, layer: Layer, act, head: int | None = None, log2_scale: int = 0):
        from sapa.empirics.kernels.activation_fns import activation_functions

        self.X = _f64("X", X, 2)
        self.layer = layer
        fns = activation_functions(act)
        if layer.has_values and head is None:
            self.idx = list(range(layer.H))
        else:
            self.idx = [0 if head is None else int(head)]
        self.heads = {k: _head(self.X, layer.Wq[k], layer.Wk[k], act, fns, *_bias(layer, k)) for k in self.idx}
        self._dom = {id(h): dominant(h.P) for h in self.heads.values() if h.row}
        self.values = layer.has_values and head is None
        if log2_scale and self.values:
            raise InputError("log2_scale applies to one head's attention matrix, not to a layer with values")
        self._w = {}  # id(head) -> (N, 1) weights 2^{−e}·t_i of the rows of R_i/t_i (absent: no scaling)
        for h in self.heads.values():
            rs = h.rs if h.row else None
            if (rs is not None and rs.scaled) or log2_scale:
                lt = rs.lt if rs is not None else np.zeros(self.X.shape[0])
                w = np.exp2(lt / math.log(2.0) - float(log2_scale))
                if rs is not None:  # a row with one visible entry (q = 0) has R_i = 0: its weight is immaterial
                    w = np.where(rs.q > 0, w, 1.0)
                self._w[id(h)] = w[:, None]
        self.in_shape = self.X.shape
        N = self.X.shape[0]
        self.out_shape = (N, layer.Wo.shape[2]) if self.values else (N, N)

    def _dP(self, h: _Head, dS: np.ndarray) -> np.ndarray:
        """R_i dS_i per row; at the dominant k = m_i as g_im q_i dS_im − P_im Σ_{l≠m} g_il dS_il (no cancellation).

        dS (..., N, N): leading axes are a batch of directions.
        """
        wr = self._w.get(id(h))
        if not h.row:
            return h.g * dS if wr is None else (h.g * dS) * wr
        rs = h.rs if wr is not None else None
        m, has, q = (rs.m, rs.has, rs.q) if rs is not None else self._dom[id(h)]
        Ps, gs = (rs.P, rs.g) if rs is not None else (h.P, h.g)
        rows = np.arange(dS.shape[-2])
        gd = gs * dS  # g_ik dS_ik (/t_i off m_i)
        total = gd if gs is h.g else h.g * dS  # the true g inside Σ_l g_il dS_il
        out = gd - Ps * total.sum(axis=-1, keepdims=True)
        gd0 = gd.copy()
        gd0[..., rows, m] = 0.0
        out[..., rows[has], m[has]] = (gd[..., rows, m] * q - Ps[rows, m] * gd0.sum(axis=-1))[..., has]
        return out if wr is None else out * wr

    def _dS_adj(self, h: _Head, Pbar: np.ndarray) -> np.ndarray:
        """R_iᵀ P̄_i per row; at l = m_i as g_im (q_i P̄_im − Σ_{k≠m} P_ik P̄_ik); P̄ (..., N, N)."""
        wr = self._w.get(id(h))
        if wr is not None:
            Pbar = Pbar * wr
        if not h.row:
            return h.g * Pbar
        rs = h.rs if wr is not None else None
        m, has, q = (rs.m, rs.has, rs.q) if rs is not None else self._dom[id(h)]
        Ps, gs = (rs.P, rs.g) if rs is not None else (h.P, h.g)
        rows = np.arange(Pbar.shape[-2])
        pp = h.P * Pbar  # the true P in P_i·P̄_i; column k ≠ m of R_i/t_i is (g_ik/t_i)(e_k − P_i)
        out = gs * (Pbar - pp.sum(axis=-1, keepdims=True))
        pp0 = (pp if Ps is h.P else Ps * Pbar).copy()
        pp0[..., rows, m] = 0.0
        out[..., rows[has], m[has]] = (gs[rows, m] * (q * Pbar[..., rows, m] - pp0.sum(axis=-1)))[..., has]
        return out

    def matvec(self, E: np.ndarray) -> np.ndarray:
        """J E for a direction E (N, D), or a batch of them (b, N, D) -> (b, *out_shape)."""
        out = np.zeros(E.shape[:-2] + self.out_shape)
        for k in self.idx:
            h, Wq, Wk = self.heads[k], self.layer.Wq[k], self.layer.Wk[k]
            dS = (E @ Wq) @ h.B.T + h.A @ np.swapaxes(E @ Wk, -1, -2)  # dA Bᵀ + A dBᵀ, (…, N, N)
            dP = self._dP(h, dS)
            if not self.values:
                return dP
            Wv, Wo = self.layer.Wv[k], self.layer.Wo[k]
            out += (dP @ (self.X @ Wv) + h.P @ (E @ Wv)) @ Wo
        return out

    def rmatvec(self, U: np.ndarray) -> np.ndarray:
        """Jᵀ U for an output cotangent U (N, D_out) or (N, N), or a batch of them (b, …) -> (b, N, D)."""
        Xbar = np.zeros(U.shape[:-2] + self.in_shape)
        for k in self.idx:
            h, Wq, Wk = self.heads[k], self.layer.Wq[k], self.layer.Wk[k]
            if self.values:
                Wv, Wo = self.layer.Wv[k], self.layer.Wo[k]
                Ub = U @ Wo.T                      # (…, N, d_v)
                Pbar = Ub @ (self.X @ Wv).T        # (…, N, N)
                Xbar += h.P.T @ Ub @ Wv.T          # through the values
            else:
                Pbar = U
            Sbar = self._dS_adj(h, Pbar)
            Xbar += (Sbar @ h.B) @ Wq.T + (np.swapaxes(Sbar, -1, -2) @ h.A) @ Wk.T
        return Xbar

    def gram(self, E: np.ndarray) -> np.ndarray:
        """JᵀJ E for a batch of directions E (b, N, D) -> (b, N, D) (the dense certificate's columns)."""
        return self.rmatvec(self.matvec(E))
