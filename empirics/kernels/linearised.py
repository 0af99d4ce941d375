"""c·(QKᵀ)^{∘p}V = c·φ_p(Q)(φ_p(K)ᵀV): the exact linearisation of polynomial attention (arXiv 2410.18613; the reviews ask for running times).

Without softmax's row normalisation, the element-wise power of the score matrix factorises:
(q·k)^p = ⟨q^{⊗p}, k^{⊗p}⟩ = φ_p(q)·φ_p(k), with

* tensor-power features φ_p(x) = x^{⊗p} (dimension d^p), or
* symmetric features: one monomial x_{i1}…x_{ip} per multiset i1 ≤ … ≤ ip with weight
  √(p!/∏_k m_k!) (m_k the multiplicities), dimension F = C(d+p−1, p) < d^p for p, d ≥ 2.

So c·(QKᵀ)^{∘p}V = c·φ_p(Q)(φ_p(K)ᵀV) costs O(N·F·d_v) instead of O(N²·d) (for p = 1 it is linear
attention). Under a causal mask the sum over keys j ≤ i is a prefix sum, done blockwise: inside a
block of ``chunk`` rows the masked quadratic form, across blocks a carried state Σ_j φ(K_j)ᵀV_j
(F × d_v), so memory is O(F·d_v + chunk·F + chunk²), never N×F. The backward pass is written by
hand (:class:`_Linearised`) with the same memory bound: a forward sweep for ∂/∂Q, a reverse sweep
(suffix sums of φ(Q_b)ᵀ dO_b) for ∂/∂K and ∂/∂V.

The kernel builds the unweighted monomials degree by degree (x_i times a suffix of the degree-(k−1)
table: contiguous slices, no gathers) and folds the weights W = p!/∏ m_k! into the F × d_v state;
:func:`symmetric_features` and :func:`tensor_power_features` are independent reference implementations.

Tensors may carry leading batch/head dimensions: Q (…, N, d), K (…, M, d), V (…, M, d_v).
Gradients flow to Q, K, V (and, through autograd, to ``c`` and ``row_scale`` when they are tensors).
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from sapa.common.validate import InputError, choice, positive_int

__all__ = [
    "KINDS", "feature_dim", "tensor_power_features", "symmetric_features", "poly_attention_quadratic",
    "poly_attention_linearised", "flops", "crossover_flops", "default_chunk",
]

KINDS = ("sym", "full")
CAUSAL_CHUNK = 128          # default block length under a causal mask (intra-block work N·chunk·(d + d_v))
FEATURE_ELEMS = 2**22       # default non-causal block: chunk·F ≤ 4 Mi elements (16 MiB in float32)


# =========================================================================== feature maps


def feature_dim(d: int, p: int, kind: str = "sym") -> int:
    """F = C(d+p−1, p) (``kind="sym"``) or d^p (``kind="full"``): the dimension of φ_p on R^d."""
    d, p = positive_int("d", d), positive_int("p", p)
    choice("features", kind, KINDS)
    return math.comb(d + p - 1, p) if kind == "sym" else d**p


@lru_cache(maxsize=16)
def _index_table(d: int, p: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """φ_f(x) = w_f ∏_j x[idx_fj]: (idx (F, p) int64, w (F,) float64), read-only.

    sym: idx the multisets i1 ≤ … ≤ ip in lexicographic order, w = √(p!/∏ m_k!);
    full: idx every p-tuple in C order (x^{⊗p} flattened), w = 1.
    """
    if kind == "sym":
        idx = np.array(list(itertools.combinations_with_replacement(range(d), p)), dtype=np.int64).reshape(-1, p)
        # ∏_k m_k! = ∏_j r_j, r_j = position of column j inside its run of equal indices (rows are sorted)
        run = np.ones(len(idx), dtype=np.int64)
        prod = np.ones(len(idx), dtype=np.int64)
        for j in range(1, p):
            run = np.where(idx[:, j] == idx[:, j - 1], run + 1, 1)
            prod *= run
        w = np.sqrt(math.factorial(p) / prod.astype(np.float64))
    else:
        idx = np.stack(np.unravel_index(np.arange(d**p), (d,) * p), axis=1).astype(np.int64)
        w = np.ones(len(idx))
    idx.flags.writeable = False
    w.flags.writeable = False
    return idx, w


@lru_cache(maxsize=16)
def _torch_table(d: int, p: int, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_index_table` as CPU tensors (copied once; never written to)."""
    idx, w = _index_table(d, p, kind)
    return torch.from_numpy(idx.copy()), torch.from_numpy(w.copy())


def _table(d: int, p: int, kind: str, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The index table on ``like``'s device, weights in its dtype."""
    idx, w = _torch_table(d, p, kind)
    return idx.to(like.device), w.to(like.device, like.dtype)


def _gather(x: torch.Tensor, idx: torch.Tensor) -> list[torch.Tensor]:
    """The p factors of every monomial: [x[..., idx[:, j]] for j < p], each (…, F)."""
    return [x.index_select(-1, idx[:, j]) for j in range(idx.shape[1])]


def _features(cols: list[torch.Tensor], w: torch.Tensor) -> torch.Tensor:
    """φ = w ∏_j cols_j; (…, F)."""
    f = cols[0] * w
    for c in cols[1:]:
        f = f * c
    return f


def tensor_power_features(x: torch.Tensor, p: int) -> torch.Tensor:
    """φ_p(x) = x^{⊗p}, flattened in C order; (…, d) -> (…, d^p), so φ_p(q)·φ_p(k) = (q·k)^p."""
    p = positive_int("p", p)
    _check_tensor("x", x, min_dim=1)
    f = x
    for _ in range(p - 1):
        f = (f.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2)  # (…, d^k, 1) * (…, 1, d) -> (…, d^{k+1})
    return f


def symmetric_features(x: torch.Tensor, p: int) -> torch.Tensor:
    """φ_p(x)_{i1≤…≤ip} = √(p!/∏ m_k!)·x_{i1}…x_{ip}; (…, d) -> (…, C(d+p−1, p)), with φ_p(q)·φ_p(k) = (q·k)^p exactly."""
    p = positive_int("p", p)
    _check_tensor("x", x, min_dim=1)
    idx, w = _table(x.shape[-1], p, "sym", x)
    return _features(_gather(x, idx), w)


# =========================================================================== the kernel's monomials


@dataclass(frozen=True)
class _Plan:
    """How the kernel builds the monomials of degree 1…p on R^d, degree by degree.

    Degree-k monomials, in the order of :func:`_index_table`, are the blocks x_i · m_{k−1}[start_k[i]:]
    for i = 0…d−1: x_i times the degree-(k−1) monomials whose first index is ≥ i (sym, a suffix of
    the lexicographic table) or all of them (full). φ = √W ⊙ m_p; the kernel folds W into the state.
    """

    d: int
    p: int
    kind: str
    sizes: tuple[int, ...]              # F_1 = d, F_2, …, F_p
    starts: tuple[tuple[int, ...], ...]  # starts[k − 2][i]: first degree-(k−1) row that x_i multiplies

    @property
    def F(self) -> int:
        return self.sizes[-1]


@lru_cache(maxsize=32)
def _plan(d: int, p: int, kind: str) -> _Plan:
    sizes = tuple(math.comb(d + k - 1, k) if kind == "sym" else d**k for k in range(1, p + 1))
    starts = []
    for k in range(2, p + 1):
        prev = sizes[k - 2]
        # sym: degree-(k−1) multisets with first index < i number C(d+k−2, k−1) − C(d−i+k−2, k−1)
        starts.append(tuple(prev - math.comb(d - i + k - 2, k - 1) if kind == "sym" else 0 for i in range(d)))
    return _Plan(d, p, kind, sizes, tuple(starts))


def _weights(plan: _Plan, like: torch.Tensor) -> torch.Tensor:
    """W = w² (the multinomial p!/∏ m_k!, 1 for full), (F, 1) in ``like``'s dtype and device."""
    return _weights_on(plan, like.device, like.dtype)


@lru_cache(maxsize=32)
def _weights_on(plan: _Plan, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    if plan.kind == "full":
        return torch.ones(plan.F, 1, device=device, dtype=dtype)
    _, w = _torch_table(plan.d, plan.p, plan.kind)
    return (w.to(torch.float64) ** 2).round().to(device, dtype).unsqueeze(-1)  # exact integers


GATHER_ELEMS = 2**20  # a degree with F_k·C at most this many entries is built by two row gathers, else by d slices


@lru_cache(maxsize=32)
def _gather_rows(d: int, p: int, kind: str, device: torch.device) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """Per degree k ≥ 2: (src, xi) with m_k = m_{k−1}[src] ⊙ x[xi] row-wise (the slices of :class:`_Plan` flattened)."""
    plan, out = _plan(d, p, kind), []
    for k in range(2, p + 1):
        prev, starts = plan.sizes[k - 2], plan.starts[k - 2]
        src = np.concatenate([np.arange(s, prev) for s in starts])
        xi = np.repeat(np.arange(d), [prev - s for s in starts])
        out.append((torch.from_numpy(src).to(device), torch.from_numpy(xi).to(device)))
    return tuple(out)


def _by_gather(plan: _Plan, k: int, C: int) -> bool:
    return plan.sizes[k - 1] * C <= GATHER_ELEMS


def _monomials(xT: torch.Tensor, plan: _Plan) -> list[torch.Tensor]:
    """[m_1 = xT, m_2, …, m_p], m_k (B, F_k, C) the unweighted degree-k monomials of the columns of xT (B, d, C).

    Small degrees (F_k·C ≤ GATHER_ELEMS) by two row gathers, large ones by d contiguous slices (no index copies).
    """
    ms = [xT]
    C = xT.shape[2]
    for k in range(2, plan.p + 1):
        prev, starts = ms[-1], plan.starts[k - 2]
        if _by_gather(plan, k, C):
            src, xi = _gather_rows(plan.d, plan.p, plan.kind, xT.device)[k - 2]
            ms.append(prev.index_select(1, src) * xT.index_select(1, xi))  # (B, F_k, C)
            continue
        out = xT.new_empty(xT.shape[0], plan.sizes[k - 1], C)
        off = 0
        for i, s in enumerate(starts):
            n = prev.shape[1] - s
            torch.mul(prev[:, s:], xT[:, i:i + 1], out=out[:, off:off + n])  # (B, n, C) * (B, 1, C)
            off += n
        ms.append(out)
    return ms


def _monomials_vjp(ms: list[torch.Tensor], plan: _Plan, g: torch.Tensor) -> torch.Tensor:
    """(∂m_p/∂xT)ᵀ g by the same recursion, degree p down to 1; g (B, F_p, C) -> (B, d, C)."""
    xT = ms[0]
    C = xT.shape[2]
    dx = torch.zeros_like(xT)
    for k in range(plan.p, 1, -1):
        prev, starts = ms[k - 2], plan.starts[k - 2]
        if _by_gather(plan, k, C):
            src, xi = _gather_rows(plan.d, plan.p, plan.kind, xT.device)[k - 2]
            dx.index_add_(1, xi, g * prev.index_select(1, src))
            g = torch.zeros_like(prev).index_add_(1, src, g * xT.index_select(1, xi))
            continue
        g_prev = torch.zeros_like(prev)
        off = 0
        for i, s in enumerate(starts):
            n = prev.shape[1] - s
            block = g[:, off:off + n]  # ∂L/∂(x_i · prev[s:])
            dx[:, i] += (block * prev[:, s:]).sum(1)
            g_prev[:, s:].addcmul_(block, xT[:, i:i + 1])
            off += n
        g = g_prev
    return dx + g


def _cols(x: torch.Tensor) -> torch.Tensor:
    """(B, C, d) -> (B, d, C), contiguous: one column per token."""
    return x.transpose(1, 2).contiguous()


# =========================================================================== the two forms


def _quadratic(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, p: int, causal: bool) -> torch.Tensor:
    """(QKᵀ)^{∘p}V with entries j > i zeroed when causal, S materialised; (…, N, d) -> (…, N, d_v)."""
    S = Q @ K.transpose(-1, -2)  # (…, N, d) @ (…, d, M) -> (…, N, M)
    if causal:
        S = torch.tril(S)  # 0^p = 0: masking before the power is the same
    P = S if p == 1 else S.pow(p)
    return P @ V  # (…, N, M) @ (…, M, d_v) -> (…, N, d_v)


def _scale(O: torch.Tensor, c, row_scale) -> torch.Tensor:
    """c · O with row i also times row_scale_i; (…, N, d_v)."""
    if not (isinstance(c, numbers.Real) and c == 1):
        O = O * c
    if row_scale is not None:
        O = O * row_scale.unsqueeze(-1)  # (…, N, 1)
    return O


def poly_attention_quadratic(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, p: int, c=1.0, causal: bool = False,
                             row_scale: torch.Tensor | None = None) -> torch.Tensor:
    """O = c·(QKᵀ)^{∘p}V, entries j > i zeroed under ``causal``, row i times ``row_scale[i]``; O(N²d) time, O(N²) memory.

    Args:
      Q: (…, N, d) queries; K: (…, M, d) keys; V: (…, M, d_v) values (same leading dims, dtype, device).
      p: the power, an integer ≥ 1.
      c: a finite scalar (e.g. 1/√N).
      causal: zero the scores j > i (requires M = N).
      row_scale: (N,) or (…, N), e.g. 1/√i, the dynamic scale of causal attention.

    Returns:
      (…, N, d_v).
    """
    p, c, row_scale = _check(Q, K, V, p, c, causal, row_scale)
    return _scale(_quadratic(Q, K, V, p, causal), c, row_scale)


def poly_attention_linearised(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, p: int, c=1.0,
                              causal: bool = False, row_scale: torch.Tensor | None = None, features: str = "sym",
                              chunk: int | None = None) -> torch.Tensor:
    """O = c·φ_p(Q)(φ_p(K)ᵀV) = c·(QKᵀ)^{∘p}V exactly; O(N·F·d_v) time, O(F·d_v + chunk·F + chunk²) memory.

    Args:
      Q, K, V, p, c, causal, row_scale: as :func:`poly_attention_quadratic`.
      features: ``"sym"`` (F = C(d+p−1, p)) or ``"full"`` (F = d^p).
      chunk: rows per block (default :func:`default_chunk`); under ``causal`` the block length of the
        prefix sum (masked quadratic form inside a block, carried state Σ_j φ(K_j)ᵀV_j across blocks).

    Returns:
      (…, N, d_v), equal to :func:`poly_attention_quadratic` up to rounding.
    """
    p, c, row_scale = _check(Q, K, V, p, c, causal, row_scale)
    choice("features", features, KINDS)
    if chunk is not None:
        chunk = positive_int("chunk", chunk)
    return _linearised(Q, K, V, p, c, causal, row_scale, features, chunk)


def default_chunk(F: int, causal: bool) -> int:
    """Block length: CAUSAL_CHUNK under a causal mask, else the largest with chunk·F ≤ FEATURE_ELEMS (≥ 16)."""
    return CAUSAL_CHUNK if causal else max(16, FEATURE_ELEMS // F)


def _linearised(Q, K, V, p: int, c, causal: bool, row_scale, kind: str = "sym", chunk: int | None = None
                ) -> torch.Tensor:
    """:func:`poly_attention_linearised` without input checks (the benchmark's kernel)."""
    *lead, N, d = Q.shape
    M, e = V.shape[-2], V.shape[-1]
    plan = _plan(d, p, kind)
    chunk = chunk or default_chunk(plan.F, causal)
    O = _Linearised.apply(Q.reshape(-1, N, d), K.reshape(-1, M, d), V.reshape(-1, M, e), plan, causal, chunk)
    return _scale(O.reshape(*lead, N, e), c, row_scale)


class _Linearised(torch.autograd.Function):
    """Σ_j [j ≤ i] Σ_f W_f m_f(Q_i) m_f(K_j) V_j over blocks, with a hand-written backward of the same memory bound."""

    @staticmethod
    def forward(ctx, Q, K, V, plan: _Plan, causal: bool, chunk: int):  # (B, N, d), (B, M, d), (B, M, e)
        B, N, _ = Q.shape
        e, p = V.shape[-1], plan.p
        W = _weights(plan, Q)  # (F, 1)
        O = Q.new_empty(B, N, e)
        T = Q.new_zeros(B, plan.F, e)  # Σ_j m(K_j) V_jᵀ, unweighted
        if not causal:
            for s in range(0, K.shape[1], chunk):
                T.baddbmm_(_monomials(_cols(K[:, s:s + chunk]), plan)[-1], V[:, s:s + chunk])  # (B, F, C) @ (B, C, e)
            U = W * T  # (F, 1) * (B, F, e)
            for s in range(0, N, chunk):
                mq = _monomials(_cols(Q[:, s:s + chunk]), plan)[-1]
                O[:, s:s + chunk] = mq.transpose(1, 2) @ U  # (B, C, F) @ (B, F, e)
        else:
            U = None
            for s in range(0, N, chunk):
                q, k, v = Q[:, s:s + chunk], K[:, s:s + chunk], V[:, s:s + chunk]
                A = torch.tril(q @ k.transpose(1, 2))  # (B, C, d) @ (B, d, C): the block's own keys
                o = (A if p == 1 else A.pow(p)) @ v
                if s > 0:  # earlier blocks through the carried state
                    o.baddbmm_(_monomials(_cols(q), plan)[-1].transpose(1, 2), W * T)
                O[:, s:s + chunk] = o
                if s + chunk < N:
                    T.baddbmm_(_monomials(_cols(k), plan)[-1], v)
        ctx.save_for_backward(Q, K, V, U)
        ctx.plan, ctx.causal, ctx.chunk = plan, causal, chunk
        return O

    @staticmethod
    @once_differentiable
    def backward(ctx, G):  # G = ∂L/∂O: (B, N, e)
        Q, K, V, U = ctx.saved_tensors
        plan, chunk = ctx.plan, ctx.chunk
        G = G.contiguous()
        if ctx.causal:
            return (*_causal_backward(Q, K, V, plan, G, chunk), None, None, None)
        W = _weights(plan, Q)
        dQ, dK, dV = torch.empty_like(Q), torch.empty_like(K), torch.empty_like(V)
        dU = torch.zeros_like(U)  # Σ_i m(Q_i) G_iᵀ
        for s in range(0, Q.shape[1], chunk):
            ms = _monomials(_cols(Q[:, s:s + chunk]), plan)
            g = G[:, s:s + chunk]
            dU.baddbmm_(ms[-1], g)  # (B, F, C) @ (B, C, e)
            dQ[:, s:s + chunk] = _monomials_vjp(ms, plan, U @ g.transpose(1, 2)).transpose(1, 2)  # (B, F, e) @ (B, e, C)
        dT = W * dU
        for s in range(0, K.shape[1], chunk):
            ms = _monomials(_cols(K[:, s:s + chunk]), plan)
            v = V[:, s:s + chunk]
            dV[:, s:s + chunk] = ms[-1].transpose(1, 2) @ dT  # (B, C, F) @ (B, F, e)
            dK[:, s:s + chunk] = _monomials_vjp(ms, plan, dT @ v.transpose(1, 2)).transpose(1, 2)
        return dQ, dK, dV, None, None, None


def _causal_backward(Q, K, V, plan: _Plan, G, chunk: int):
    """∂/∂(Q, K, V) of the causal blockwise form: forward sweep (prefix state → ∂Q), reverse sweep (suffix → ∂K, ∂V)."""
    B, N, _ = Q.shape
    e, p = V.shape[-1], plan.p
    W = _weights(plan, Q)
    dQ, dK, dV = torch.empty_like(Q), torch.empty_like(K), torch.empty_like(V)
    starts = list(range(0, N, chunk))
    T = Q.new_zeros(B, plan.F, e)  # prefix Σ_{j < block} m(K_j) V_jᵀ
    for s in starts:
        q, k, v, g = Q[:, s:s + chunk], K[:, s:s + chunk], V[:, s:s + chunk], G[:, s:s + chunk]
        if s > 0:
            ms = _monomials(_cols(q), plan)
            dQ[:, s:s + chunk] = _monomials_vjp(ms, plan, (W * T) @ g.transpose(1, 2)).transpose(1, 2)
        else:
            dQ[:, s:s + chunk] = 0
        if s + chunk < N:
            T.baddbmm_(_monomials(_cols(k), plan)[-1], v)
    S = Q.new_zeros(B, plan.F, e)  # suffix Σ_{i > block} m(Q_i) G_iᵀ
    for s in reversed(starts):
        q, k, v, g = Q[:, s:s + chunk], K[:, s:s + chunk], V[:, s:s + chunk], G[:, s:s + chunk]
        L = torch.tril(q @ k.transpose(1, 2))  # (B, C, C) scores of the block, masked
        P = L if p == 1 else L.pow(p)
        dP = torch.tril(g @ v.transpose(1, 2))  # (B, C, e) @ (B, e, C)
        dv = P.transpose(1, 2) @ g
        dS = dP if p == 1 else dP * (p * L.pow(p - 1))
        dQ[:, s:s + chunk] += dS @ k
        dk = dS.transpose(1, 2) @ q
        if s + chunk < N:  # later blocks' queries see this block's keys through the state
            ms = _monomials(_cols(k), plan)
            WS = W * S
            dv.baddbmm_(ms[-1].transpose(1, 2), WS)  # (B, C, F) @ (B, F, e)
            dk += _monomials_vjp(ms, plan, WS @ v.transpose(1, 2)).transpose(1, 2)
        dV[:, s:s + chunk], dK[:, s:s + chunk] = dv, dk
        if s > 0:
            S.baddbmm_(_monomials(_cols(q), plan)[-1], g)
    return dQ, dK, dV


# =========================================================================== flop counts


def _blocks(N: int, chunk: int) -> list[int]:
    return [min(chunk, N - s) for s in range(0, N, chunk)]


def _feature_cost(d: int, p: int, kind: str) -> int:
    """Multiplies to build one token's degree-p monomials degree by degree: Σ_{k=2}^{p} F_k."""
    return sum(_plan(d, p, kind).sizes[1:])


def flops(form: str, N: int, d: int, d_v: int, p: int, causal: bool = False, *, kind: str = "sym",
          chunk: int | None = None) -> int:
    """Multiply(-add)s of the forward pass of ``form`` as implemented here: matmul MACs plus element-wise multiplies.

    quadratic:  N²·a + N·d_v with a = d + d_v + p − 1 (dense S; the mask skips nothing);
    linearised: with h = F·d_v + Σ_{k=2}^{p} F_k per token and side (monomials, then one MAC per
    feature and value column), 2N·h + F·d_v + N·d_v without a mask; with it Σ_b n_b²·a inside the
    blocks n_b, (N − n_first + N − n_last)·h across them and F·d_v per carried state (weights).
    """
    choice("form", form, ("quadratic", "linearised"))
    N, d, d_v, p = (positive_int(n, v) for n, v in (("N", N), ("d", d), ("d_v", d_v), ("p", p)))
    a = d + d_v + p - 1
    if form == "quadratic":
        return N * N * a + N * d_v
    F = feature_dim(d, p, kind)
    h = F * d_v + _feature_cost(d, p, kind)
    if not causal:
        return 2 * N * h + F * d_v + N * d_v
    blocks = _blocks(N, positive_int("chunk", chunk) if chunk is not None else default_chunk(F, True))
    return sum(n * n for n in blocks) * a + (2 * N - blocks[0] - blocks[-1]) * h + (len(blocks) - 1) * F * d_v + N * d_v


def crossover_flops(d: int, p: int, d_v: int | None = None, *, causal: bool = False, kind: str = "sym",
                    chunk: int | None = None) -> float:
    """N* ≈ 2h/a (h = F·d_v + Σ_{k≥2} F_k, a = d + d_v + p − 1): beyond it the linearised form needs fewer flops.

    The roots of :func:`flops`' difference, N real: without a mask a·N² = 2N·h + F·d_v; with it
    (N a multiple of the block C) a·N² = N·C·a + 2(N − C)·h + (N/C − 1)·F·d_v, whose roots are C and
    (2h + F·d_v/C)/a — below C the two forms coincide (one block), so N* = max(C, that root).
    """
    d, p = positive_int("d", d), positive_int("p", p)
    d_v = d if d_v is None else positive_int("d_v", d_v)
    F = feature_dim(d, p, kind)
    a = d + d_v + p - 1
    h = F * d_v + _feature_cost(d, p, kind)
    if not causal:
        return float((2 * h + math.sqrt(4 * h * h + 4 * a * F * d_v)) / (2 * a))
    C = positive_int("chunk", chunk) if chunk is not None else default_chunk(F, True)
    return float(max(C, (2 * h + F * d_v / C) / a))


# =========================================================================== validation


def _check_tensor(name: str, x: object, min_dim: int = 2) -> None:
    if not isinstance(x, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise InputError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.dim() < min_dim:
        raise InputError(f"{name} must have at least {min_dim} dimension(s), got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise InputError(f"{name} is empty (shape {tuple(x.shape)})")
    if not bool(torch.isfinite(x).all()):
        raise InputError(f"{name} contains NaN or inf")


def _check(Q, K, V, p, c, causal, row_scale):
    """Validate the arguments of both forms; return (p, c, row_scale) normalised."""
    p = positive_int("p", p)
    for name, x in (("Q", Q), ("K", K), ("V", V)):
        _check_tensor(name, x)
    if not (Q.dtype == K.dtype == V.dtype) or not (Q.device == K.device == V.device):
        raise InputError(f"Q, K, V must share dtype and device, got {Q.dtype}/{Q.device}, {K.dtype}/{K.device}, "
                         f"{V.dtype}/{V.device}")
    if not (Q.shape[:-2] == K.shape[:-2] == V.shape[:-2]):
        raise InputError(f"Q, K, V must share leading (batch/head) dims, got shapes {tuple(Q.shape)}, "
                         f"{tuple(K.shape)}, {tuple(V.shape)}")
    if Q.shape[-1] != K.shape[-1]:
        raise InputError(f"Q (…, N, d) and K (…, M, d) must share d, got shapes {tuple(Q.shape)} and {tuple(K.shape)}")
    if K.shape[-2] != V.shape[-2]:
        raise InputError(f"K (…, M, d) and V (…, M, d_v) must share M, got shapes {tuple(K.shape)} and {tuple(V.shape)}")
    if not isinstance(causal, bool):
        raise InputError(f"causal must be True or False, got {causal!r}")
    if causal and Q.shape[-2] != K.shape[-2]:
        raise InputError(f"a causal mask needs as many queries as keys, got N = {Q.shape[-2]}, M = {K.shape[-2]}")
    if isinstance(c, torch.Tensor):
        if c.numel() != 1 or not bool(torch.isfinite(c).all()):
            raise InputError(f"c must be one finite number, got a tensor of shape {tuple(c.shape)}")
    elif isinstance(c, bool) or not isinstance(c, numbers.Real) or not math.isfinite(float(c)):
        raise InputError(f"c must be a finite number, got {c!r}")
    else:
        c = float(c)
    if row_scale is not None:
        if not isinstance(row_scale, torch.Tensor):
            try:
                row_scale = torch.as_tensor(np.asarray(row_scale, dtype=np.float64), dtype=Q.dtype, device=Q.device)
            except (TypeError, ValueError) as exc:
                raise InputError(f"row_scale must be a numeric vector ({' '.join(str(exc).split())})") from None
        _check_tensor("row_scale", row_scale, min_dim=1)
        N = Q.shape[-2]
        if row_scale.shape not in ((N,), Q.shape[:-1]):
            raise InputError(f"row_scale must have shape ({N},) or {tuple(Q.shape[:-1])}, got {tuple(row_scale.shape)}")
    return p, c, row_scale
