"""Exact ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F for one input, in O(N²D) time, never building the Jacobian.

For arXiv 2410.18613 (Saratchandran et al., "Rethinking Softmax: Self-Attention with
Polynomial Activations"), Theorems 4.1, 4.2, 4.4 and Corollaries 4.3, 4.5 bound the
Frobenius norms of the attention matrix P = φ(S) and of its Jacobian. This module computes
both exactly for given matrices:

* shared-X model (the transformer): S = X W Xᵀ, X (N, D), W (D, D) = W_Q W_Kᵀ (any W),
  Jacobian with respect to X;
* the paper's independent model: S = A Bᵀ, A, B (N, d), Jacobian with respect to (A, B).

Activations: a family row of :mod:`sapa.theory.families` with an exact kernel: row softmax with
inverse temperature τ, P_i = softmax(τ S_i), or element-wise φ(x) = c·x^p, c its scale rule's factor at N
(``family("x3_sqrtN")``: c = 1/√N; ``power(p, c)``, ``softmax(τ)``: a number already resolved; a per-row rule
such as x³/√i: its c_i become the row scale). Optional causal mask (row i sees j ≤ i; masked entries are exactly 0 and carry
no derivative) and an optional per-row output scale ``row_scale`` (row i of φ(S) multiplied
by c_i, e.g. the dynamic causal scale c_i = 1/√i).

Derivation (checked against autograd in tests/empirics/kernels/test_norms.py). Write
y_j = W x_j (rows of Y = X Wᵀ) and z_i = Wᵀ x_i (rows of Z = X W), so that
dS_ij = dx_iᵀ y_j + z_iᵀ dx_j.

* polynomial: ∂P_ij/∂S_ij = c p S_ij^{p−1} =: D_ij, and ‖∂S_ij/∂X‖² is ‖y_j‖² + ‖z_i‖² for
  i ≠ j and ‖y_i + z_i‖² = ‖(W + Wᵀ) x_i‖² for i = j, so
  ‖∂P/∂X‖²_F = Σ_{i≠j} D_ij² (‖y_j‖² + ‖z_i‖²) + Σ_i D_ii² ‖y_i + z_i‖².
* softmax: ∂P_i/∂x_k = τ J_i (δ_ik Y + e_k z_iᵀ), J_i = diag(P_i) − P_i P_iᵀ, so
  ‖∂P/∂X‖²_F = τ² Σ_i [‖z_i‖² ‖J_i‖²_F + ‖J_i Y‖²_F + 2 (J_i e_i)ᵀ (J_i Y z_i)].
  Every term is evaluated relative to the row's arg-max a (r_j = y_j − y_a, 1 − P_a from the
  non-maximal mass), so nearly one-hot rows keep full relative accuracy instead of
  cancelling 1 − 2 + 1.

Cost per chunk of B rows: S_chunk = (B, D) @ (D, N), and for softmax also P @ Y and P² @ Y,
(B, N) @ (N, D) each, so 3 N²D multiply-adds in all for softmax, N²D for polynomials (half
of that under a causal mask), plus two (N, D) @ (D, D) products; extra memory O(B·N + N·D), with B chosen so that one (B, N)
buffer is about 64 MB. Reductions (sums of squares) are accumulated in float64 whatever the
compute dtype; ``dtype=torch.float32`` is allowed only when asked and is reported in
``NormResult.dtype``.

Range (no underflow, no false overflow): X and W (or A and B) are first divided by powers of two
(exact), each row of S is divided by its largest visible |S_ij| before any power is taken, and
every per-row sum of squares is carried as its base-2 logarithm, with the scales (c or τ, 2^k,
the row maximum, the row scale) added back in log space; the rows are combined by a log-sum-exp.
So ‖φ(S)‖_F is right to relative round-off for X ≈ 1e-100 or c = 1e-200 (as LAPACK's nrm2 scales
before squaring), and NormOverflowError means that the true norm exceeds float64. A softmax row
whose logit gap τ·Δ (largest minus second largest) exceeds ROW_SCALE_GAP carries its non-maximal
probabilities divided by t = e^{−τΔ} (computed as e^{τ(S_ij − S_i,2nd)}, no underflow) and log₂ t
is added back, so the Jacobian norms, of order t, keep their log₁₀ at any gap (τ·Δ = 10⁴: 10^{−4343});
the plain ``jac_fro`` underflows to 0 (or a subnormal) there, ``log10_jac_fro`` does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from sapa.common.validate import InputError, choice, finite_matrix, positive_float, positive_int
from sapa.theory.families import KERNEL_KINDS, NONE, SOFTMAX, Family, power, softmax

__all__ = [
    "at_length",
    "kernel_family",
    "kernel_label",
    "NormResult",
    "NormOverflowError",
    "attention_norms",
    "attention_norms_batched",
    "jacobian_s_autograd",
    "paper_model_norms",
    "paper_model_norms_batched",
    "linear_fro_gram",
    "jacobian_autograd",
    "paper_jacobian_autograd",
    "default_device",
]

MASKS = ("none", "causal")
KINDS = KERNEL_KINDS  # ("softmax", "poly"): the exact kernels of theory/families.py's table
CHUNK_BYTES = 16 * 2**20  # one (T, B, N) buffer of the row chunk: below glibc's largest mmap threshold (32 MiB,
# sapa.common.allocator), so a freed block is reused, not faulted in again (64 MiB: 3.2 M minor faults and 4.2 s in the
# kernel over the quick sweep; 16 MiB: 83 k and 0.4 s)
P_MAX = 2**62  # torch.pow needs an int64 exponent; x^p over/underflows long before
ROW_SCALE_GAP = 64.0  # softmax rows whose second logit lies more than this below the largest carry the factor t_i
# = e^{−gap} in log₂ (ordinary rows: t_i = 1, computed exactly as without it)
AUTOGRAD_MAX_ENTRIES = 2**27  # jacobian_autograd refuses Jacobians above ~1 GiB in float64


class NormOverflowError(InputError, OverflowError):
    """φ(S) or its derivative is not finite in the compute dtype (names p, N, D and dtype)."""


def kernel_family(kind: str, p: int = 1, scale: float = 1.0) -> Family:
    """The family of the kernels' (kind, p, scale) triple: ``softmax(scale)`` (τ inside) or ``power(p, scale)``
    (scale·x^p). The sweep's cells and the timing bench store activations as these three plain values.

    >>> kernel_label(kernel_family("poly", 3, 0.03125)), kernel_label(kernel_family("softmax", scale=0.125))
    ('0.03125·x^3', 'softmax(τ=0.125)')
    """
    choice("activation kind", kind, KINDS)
    p = positive_int("p", p)
    if p > P_MAX:
        raise InputError(f"p must be at most {P_MAX} (torch takes int64 exponents), got {p}")
    scale = positive_float("scale", scale)
    if kind == "softmax" and p != 1:
        raise InputError(f"p applies to poly activations only; got p={p} for softmax")
    return softmax(scale) if kind == "softmax" else power(p, scale)


def kernel_label(f: Family) -> str:
    """The kernels' short name of a resolved family (:func:`at_length`): ``softmax(τ=0.125)`` or ``0.03125·x^3``
    (bench rows, overflow messages)."""
    if f.kernel == "softmax":
        return f"softmax(τ={f.coef:g})"
    coef = "" if f.coef == 1.0 else f"{f.coef:g}·"
    return f"{coef}x^{f.p}"


def at_length(activation: object, N: int, row_scale=None, **params) -> tuple[Family, object]:
    """``(family, row_scale)`` the kernels compute at length N: the family's scale at N resolved into its ``coef``
    (rule "none" or "softmax": a family already resolved is returned as it is), a per-row rule's c_i as the row scale.
    ``params``: the value of a free parameter (``alpha=4.0``, ``tau=0.5``); the kernels themselves take none.

    Raises InputError for anything but a family with an exact kernel (``family(id)``, ``power(p, c)``, ``softmax(τ)``).
    """
    if not isinstance(activation, Family):
        raise InputError("activation must be a family of sapa.theory.families (family(id), power(p, c), softmax(τ)), "
                         f"got {activation!r}")
    f = activation
    if f.kernel is None:
        raise InputError(f"{f.id} ({f.label}) has no exact kernel: use sapa.empirics.kernels.expr_norms")
    if f.p is not None and f.p > P_MAX:
        raise InputError(f"p must be at most {P_MAX} (torch takes int64 exponents), got {f.p}")
    if f.per_row:
        if row_scale is not None:
            raise InputError(f"{f.id} ({f.label}) has its own row scale c_i: pass no row_scale")
        row_scale = torch.from_numpy(f.row_scale(N, **params))  # (N,) c_i
        c = 1.0  # row_scale already carries coef (Family.coefficient)
    elif f.rule in (NONE, SOFTMAX):
        return f, row_scale
    else:
        c = f.coefficient(N, **params)
    return (softmax(c) if f.kernel == "softmax" else power(f.p, c)), row_scale


@dataclass(frozen=True)
class NormResult:
    """Exact norms of one attention matrix.

    Attributes:
      fro: ‖φ(S)‖_F.
      jac_fro: ‖∂φ(S)/∂X‖_F (or ∂/∂(A, B) for the paper model).
      max_abs: max_ij |φ(S)_ij|.
      row_fro: (N,) per-row ‖φ(S)_i‖ when ``with_rows``, else None.
      dtype: compute dtype ("float64" unless float32 was asked for); sums are float64.
      jac_s_fro: ‖∂φ(S)/∂S‖_F (softmax: τ²Σ_i (p₂ − 2p₃ + p₂²) under the root; poly: ‖c p S^{∘(p−1)}‖_F).
      log10_fro, log10_jac_fro, log10_jac_s_fro: log₁₀ of the three norms (finite even where the
        norm itself is below float64's smallest subnormal; −inf for an exact 0).
    """

    fro: float
    jac_fro: float
    max_abs: float
    row_fro: np.ndarray | None = field(default=None, compare=False)  # (N,)
    dtype: str = "float64"
    jac_s_fro: float = math.nan
    log10_fro: float = math.nan
    log10_jac_fro: float = math.nan
    log10_jac_s_fro: float = math.nan


# ----------------------------------------------------------------------------- validation


def default_device(device: object = None) -> torch.device:
    """``device`` as a torch.device; None means CUDA when available, else CPU."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise InputError(f"device must be a torch device such as 'cpu' or 'cuda', got {device!r} ({exc})") from None
    if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
        raise InputError(f"device {device!r} is not available here (CUDA devices: {torch.cuda.device_count()})")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"device must be 'cpu' or 'cuda[:k]', got {device!r}")
    return dev


def _dtype(dtype: object) -> torch.dtype:
    """torch.float64 or torch.float32 (strings 'float64' / 'float32' accepted)."""
    table = {torch.float64: torch.float64, torch.float32: torch.float32, "float64": torch.float64, "float32": torch.float32}
    try:
        return table[dtype]
    except (KeyError, TypeError):
        raise InputError(f"dtype must be torch.float64 or torch.float32, got {dtype!r}") from None


def _tensor(name: str, a: object, shape: tuple[int | None, ...], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Validate ``a`` (numpy / list / torch) as a finite array of ``shape``; return it on device."""
    if isinstance(a, torch.Tensor):
        if a.is_complex() or a.dtype == torch.bool:
            raise InputError(f"{name} must be a real numeric array, got dtype {a.dtype}")
        if a.ndim != len(shape):
            raise InputError(f"{name} must have {len(shape)} dimensions, got shape {tuple(a.shape)}")
        for axis, want in enumerate(shape):
            if want is not None and a.shape[axis] != want:
                raise InputError(f"{name} has shape {tuple(a.shape)}; axis {axis} must be {want}")
        if a.numel() == 0:
            raise InputError(f"{name} is empty (shape {tuple(a.shape)})")
        t = a.detach().to(device=device, dtype=dtype)
        if not bool(torch.isfinite(t).all()):
            raise InputError(f"{name} contains NaN or inf" + (f" in {dtype}" if a.dtype != dtype else ""))
        return t
    arr = finite_matrix(name, a, shape)
    t = torch.from_numpy(arr).to(device=device, dtype=dtype)
    if not bool(torch.isfinite(t).all()):
        raise InputError(f"{name} contains values that overflow {dtype}")
    return t


def _chunk(chunk: object) -> int | None:
    return None if chunk is None else positive_int("chunk", chunk)


def _rows_per_chunk(chunk: int | None, n_rows: int, n_cols: int, trials: int, dtype: torch.dtype) -> int:
    """Rows per chunk: ``chunk`` if given, else as many as keep trials·B·N ≈ CHUNK_BYTES."""
    if chunk is not None:
        return min(chunk, n_rows)
    item = torch.finfo(dtype).bits // 8
    return max(1, min(n_rows, CHUNK_BYTES // (item * n_cols * trials)))


def _trials_per_group(n_trials: int, n_cols: int, dtype: torch.dtype) -> int:
    """Trials processed together so that one row of each fits CHUNK_BYTES."""
    item = torch.finfo(dtype).bits // 8
    return max(1, min(n_trials, CHUNK_BYTES // (item * n_cols)))


# ----------------------------------------------------------------------------- kernels


def _softmax_rows(
    t: torch.Tensor,  # (T, B, M) logits τ S_ij of rows r0..r0+B−1 against columns 0..M−1 (overwritten)
    Y: torch.Tensor,  # (T, M, D) rows y_j
    ynorm2: torch.Tensor,  # (T, M) ‖y_j‖²
    Zc: torch.Tensor,  # (T, B, D) rows z_i of the chunk
    vis: torch.Tensor | None,  # (B, M) visible entries, None = all
    r0: int,
    tied: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row (‖P_i‖², ‖∂P_i/∂X‖²/(τ t_i)², max_j P_ij, ‖J_i‖²_F/t_i², log₂ t_i) for P_i = softmax(t_i); all (T, B).

    t_i = e^{−gap_i} on rows whose logit gap exceeds ROW_SCALE_GAP (else 1): every non-maximal P_ij and 1 − P_ia is
    carried divided by t_i (from e^{t_ij − t_ia + gap_i}, which cannot underflow), and both Jacobian norms, of order
    t_i, are returned divided by t_i², so a row at any gap keeps its relative accuracy.
    """
    T, B, M = t.shape
    # the only (T, B, M) buffers below: t (becomes Po), Qo and one temporary
    if vis is not None:
        t.masked_fill_(~vis, -math.inf)
    tmax, a = t.max(dim=-1, keepdim=True)  # (T, B, 1) value and arg-max a_i
    t.sub_(tmax).scatter_(-1, a, -math.inf)  # t_j − t_a ≤ 0 off the arg-max (masked: −inf)
    second = t.amax(-1, keepdim=True)  # (T, B, 1) −(the row's logit gap); −inf when a is the only visible entry
    far = (second < -ROW_SCALE_GAP) & torch.isfinite(second)
    scaled = bool(far.any())  # else every t_i = 1 and the arithmetic below is that of unscaled rows, op for op
    lt = torch.where(far, second, torch.zeros_like(second))  # ln t_i
    e = (t.sub_(lt) if scaled else t).exp_()  # (T, B, M) e_j / t_i, the non-maximal mass (column a: 0)
    tt = lt.squeeze(-1).exp()  # (T, B) t_i (0 where it underflows: it then multiplies only negligible terms)
    s_other = e.sum(-1)  # (T, B)  Σ_{j≠a} e_j / t
    denom = 1.0 + tt * s_other
    Po = e.div_(denom.unsqueeze(-1))  # (T, B, M) P/t with column a zeroed
    Pa = 1.0 / denom  # (T, B) P_ia = max_j P_ij
    om_a = s_other / denom  # (T, B) (1 − P_ia)/t without cancellation
    Qo = Po * Po  # (T, B, M) P_ij²/t², column a zeroed
    p2o = Qo.sum(-1)  # (T, B) Σ_{j≠a} P_ij² / t²
    p2 = tt * tt * p2o + Pa * Pa  # (T, B) ‖P_i‖²

    # ‖J_i‖²_F = Σ_j P_j²(1 − P_j)² + Σ_j P_j² Σ_{k≠j} P_k², with the j = a terms split off (all over t²)
    if scaled:
        tmp = torch.sub(1.0, Po * tt.unsqueeze(-1)).square_().add_(p2.unsqueeze(-1)).sub_(Qo * (tt * tt).unsqueeze(-1))
    else:
        tmp = torch.sub(1.0, Po).square_().add_(p2.unsqueeze(-1)).sub_(Qo)
    tmp.mul_(Qo)  # P²[(1 − P)² + p2 − P²] / t²
    J2 = tmp.sum(-1) + Pa * Pa * (om_a * om_a + p2o)
    del tmp

    ya = Y.gather(1, a.expand(T, B, Y.shape[-1]))  # (T, B, D) y_{a_i}
    ya2 = ynorm2.gather(1, a.squeeze(-1))  # (T, B)
    PoY = Po @ Y  # (T, B, M) @ (T, M, D) -> (T, B, D)
    QoY = Qo @ Y  # (T, B, M) @ (T, M, D) -> (T, B, D)
    rbar = PoY - om_a.unsqueeze(-1) * ya  # (ȳ_i − y_a)/t = Σ_j P_ij r_j / t, r_j = y_j − y_a
    qr = QoY - p2o.unsqueeze(-1) * ya  # Σ_j P_ij² r_j / t²
    sq = (Qo @ ynorm2.unsqueeze(-1)).squeeze(-1) - 2.0 * (QoY * ya).sum(-1) + p2o * ya2  # Σ_j P_ij² ‖r_j‖² / t²
    # ‖J_i Y‖²_F / t² = Σ_j P_ij² ‖r_j − r̄_i‖² / t²
    JY2 = sq.clamp_min(0.0) - 2.0 * tt * (rbar * qr).sum(-1) + p2 * (rbar * rbar).sum(-1)

    zn2 = (Zc * Zc).sum(-1)  # (T, B) ‖z_i‖²
    jac2 = zn2 * J2 + JY2
    if tied:  # 2 (J_i e_i)ᵀ (J_i Y z_i) = 2 P_ii [P_ii r_i·z_i + (p2 − P_ii) r̄_i·z_i − (Σ_j P_ij² r_j)·z_i], over t²
        idx = torch.arange(B, device=t.device)
        cols = idx + r0
        is_a = a.squeeze(-1) == cols  # (T, B) the diagonal is the row's maximum
        Pii = torch.where(is_a, Pa, Po[:, idx, cols])  # P_ii (i = a) or P_ii / t
        pm = torch.where(is_a, tt * p2o - Pa * om_a, p2 - tt * Pii)  # (p2 − P_ii)/t at a (no cancellation), else p2 − P_ii
        ri = Y[:, cols] - ya  # (T, B, D) y_i − y_a (exactly 0 when i = a)
        qf = torch.where(is_a, torch.ones_like(tt), tt)
        bracket = Pii * (ri * Zc).sum(-1) + pm * (rbar * Zc).sum(-1) - qf * (qr * Zc).sum(-1)
        jac2 = jac2 + 2.0 * Pii * bracket
    return p2, jac2.clamp_min(0.0), Pa, J2.clamp_min(0.0), lt.squeeze(-1) / math.log(2.0)


def _poly_rows(
    Sc: torch.Tensor,  # (T, B, M) Ŝ (S divided by a power of two)
    Y: torch.Tensor,  # (T, M, D)
    ynorm2: torch.Tensor,  # (T, M) float64
    Zc: torch.Tensor,  # (T, B, D)
    vis: torch.Tensor | None,  # (B, M)
    p: int,
    r0: int,
    tied: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row log₂ of (Σ_j Ŝ_ij^{2p}, Σ_j (p Ŝ_ij^{p−1})² ‖∂S_ij‖², Σ_j (p Ŝ_ij^{p−1})², max_j |Ŝ_ij|^p); (T, B) float64.

    Row i is divided by m_i = max_j |Ŝ_ij| (visible j) before any power is taken, and m_i's
    powers are added back in log₂ (e.g. log₂ Σ_j Ŝ_ij^{2p} = 2p log₂ m_i + log₂ Σ_j (Ŝ_ij/m_i)^{2p}),
    so no power under- or overflows. ‖∂S_ij/∂·‖² is ‖y_j‖² + ‖z_i‖², except ‖y_i + z_i‖² on the
    diagonal when ``tied``.
    """
    T, B, M = Sc.shape
    q = Sc.to(torch.float64)  # (T, B, M)
    if vis is not None:
        q = q.masked_fill(~vis, 0.0)
    m = q.abs().amax(-1, keepdim=True)  # (T, B, 1)
    m = torch.where(m > 0, m, torch.ones_like(m))
    q = q / m  # entries in [−1, 1], the row's largest is ±1
    lm = torch.log2(m.squeeze(-1))  # (T, B)
    deriv = q.pow(p - 1) if p > 1 else torch.ones_like(q)  # (T, B, M) q^{p−1}
    if vis is not None:
        deriv.masked_fill_(~vis, 0.0)
    phi = deriv * q  # q^p
    fro2 = torch.linalg.vecdot(phi, phi)  # (T, B) Σ_j q_ij^{2p}
    maxabs = phi.abs_().amax(-1)
    del phi, q
    R = deriv.square_().mul_(float(p) ** 2)  # (T, B, M) (p q^{p−1})²
    zn2 = Zc.to(torch.float64).square().sum(-1)  # (T, B)
    if tied:
        idx = torch.arange(B, device=Sc.device)
        cols = idx + r0
        Rii = R[:, idx, cols].clone()  # (T, B)
        yz2 = (Y[:, cols].to(torch.float64) + Zc.to(torch.float64)).square().sum(-1)  # ‖y_i + z_i‖²
    rsum = R.sum(-1)  # (T, B) Σ_j (p q^{p−1})²
    if tied:
        R[:, idx, cols] = 0.0
    jac2 = (R @ ynorm2.unsqueeze(-1)).squeeze(-1) + (rsum - (Rii if tied else 0.0)) * zn2  # (T, B, M) @ (T, M, 1)
    if tied:
        jac2 = jac2 + Rii * yz2
    e2 = 2.0 * float(p) - 2.0
    return (torch.log2(fro2) + 2.0 * float(p) * lm, torch.log2(jac2) + e2 * lm,
            torch.log2(rsum) + e2 * lm, torch.log2(maxabs) + float(p) * lm)


@dataclass(frozen=True)
class _Scaled:
    """Inputs divided by powers of two: S = 2^es · Zs Kᵀ and (y_j, z_i) = 2^ey · (Y_j, Z_i), exactly."""

    K: torch.Tensor  # (T, N, D) columns k_j of Ŝ
    Zs: torch.Tensor  # (T, N, D) rows of Ŝ: Ŝ_ij = Zs_i · k_j
    Y: torch.Tensor  # (T, N, D) ∂S_ij/∂(row variable i) / 2^ey
    Z: torch.Tensor  # (T, N, D) ∂S_ij/∂(column variable j) / 2^ey
    es: torch.Tensor  # (T,) float64 integer exponents
    ey: torch.Tensor  # (T,)


def _pow2_exponent(t: torch.Tensor) -> torch.Tensor:
    """(T,) e with max_t |t| = m·2^e, m ∈ [0.5, 1) (0 for an all-zero trial), float64."""
    return torch.frexp(t.abs().flatten(1).amax(-1).to(torch.float64)).exponent.to(torch.float64)


def _mul_pow2(t: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """t·2^e (e: (T,) integers, one per leading index) in steps whose factors stay finite in t's dtype."""
    e = e.reshape(e.shape + (1,) * (t.ndim - e.ndim))
    limit = 1000.0 if t.dtype == torch.float64 else 100.0  # 2^limit is finite in t's dtype
    while bool((e != 0).any()):
        step = e.clamp(-limit, limit)
        t = t * torch.exp2(step).to(t.dtype)
        e = e - step
    return t


def _scaled_shared(X: torch.Tensor, W: torch.Tensor, dt: torch.dtype) -> _Scaled:
    """S = X W Xᵀ with X = 2^a X̂, W = 2^b Ŵ, Y = X̂Ŵᵀ and Z = X̂Ŵ divided by 2^h: S = 2^{2a+b+h} Z Xᵀ."""
    a, b = _pow2_exponent(X), _pow2_exponent(W)  # (T,)
    Xh, Wh = _mul_pow2(X, -a), _mul_pow2(W, -b)  # (T, N, D), (T, D, D), max |·| in [0.5, 1)
    Y = Xh @ Wh.transpose(-1, -2)  # (T, N, D) @ (T, D, D) -> (T, N, D), rows Ŵ x̂_j
    Z = Xh @ Wh  # rows Ŵᵀ x̂_i
    h = torch.maximum(_pow2_exponent(Y), _pow2_exponent(Z))
    Y, Z = _mul_pow2(Y, -h).to(dt), _mul_pow2(Z, -h).to(dt)
    return _Scaled(K=Xh.to(dt), Zs=Z, Y=Y, Z=Z, es=2 * a + b + h, ey=a + b + h)


def _scaled_paper(A: torch.Tensor, B: torch.Tensor, dt: torch.dtype) -> _Scaled:
    """S = A Bᵀ with A = 2^a Â, B = 2^b B̂; the Jacobian factors (B, A) share 2^max(a, b)."""
    a, b = _pow2_exponent(A), _pow2_exponent(B)
    Ah, Bh = _mul_pow2(A, -a), _mul_pow2(B, -b)
    g = torch.maximum(a, b)
    return _Scaled(K=Bh.to(dt), Zs=Ah.to(dt), Y=_mul_pow2(Bh, b - g).to(dt), Z=_mul_pow2(Ah, a - g).to(dt),
                   es=a + b, ey=g)


def _norms_core(
    sc: _Scaled,
    act: Family,
    mask: str,
    lrs: torch.Tensor | None,  # (T, N) log₂|row scale| or None
    tied: bool,
    chunk: int | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row log₂ (‖φ(S)_i‖², ‖∂φ(S)_i/∂X‖², ‖∂φ(S)_i/∂S_i‖², max_j |φ(S)_ij|), each (T, N) float64.

    log₂ of the scales is added per row: poly 2p·es + 2 log₂ c (and 2 ey for the X-Jacobian),
    softmax 2 log₂ τ + 2 ey; the row scale adds 2 log₂|c_i| (log₂|c_i| to the maximum).
    """
    K, Y, Z = sc.K, sc.Y, sc.Z
    T, N, D = K.shape
    dev = K.device
    B = _rows_per_chunk(chunk, N, N, T, K.dtype)
    ynorm2 = Y.to(torch.float64).square().sum(-1)  # (T, N)
    if act.kernel == "softmax":
        ynorm2 = ynorm2.to(K.dtype)
    out = [torch.empty(T, N, dtype=torch.float64, device=dev) for _ in range(4)]
    lc = math.log2(act.coef)
    mt, et = math.frexp(act.coef)  # τ = mt·2^et exactly
    es = sc.es.to(dev)[:, None]  # (T, 1)
    ey = sc.ey.to(dev)[:, None]
    for r0 in range(0, N, B):
        r1 = min(N, r0 + B)
        M = r1 if mask == "causal" else N  # causal rows r0..r1−1 see columns < r1 only
        Sc = sc.Zs[:, r0:r1] @ K[:, :M].transpose(-1, -2)  # (T, B, D) @ (T, D, M) -> (T, B, M), Ŝ
        Zc = Z[:, r0:r1]  # (T, B, D)
        vis = None
        if mask == "causal":
            vis = torch.arange(M, device=dev)[None, :] <= torch.arange(r0, r1, device=dev)[:, None]  # (B, M)
        if act.kernel == "softmax":
            top = (Sc if vis is None else Sc.masked_fill(~vis, -math.inf)).amax(-1, keepdim=True)  # (T, B, 1)
            logits = _mul_pow2(Sc.sub_(top).mul_(mt), sc.es.to(dev) + et)  # τ(S_ij − max_j S_ij) ≤ 0: no +inf
            f2, j2, mx, s2, lt = (v.to(torch.float64) for v in _softmax_rows(logits, Y[:, :M], ynorm2[:, :M], Zc, vis,
                                                                              r0, tied))
            rows = [torch.log2(f2), torch.log2(j2) + 2 * lc + 2 * ey + 2 * lt, torch.log2(s2) + 2 * lc + 2 * lt,
                    torch.log2(mx)]
        else:
            f2, j2, s2, mx = _poly_rows(Sc, Y[:, :M], ynorm2[:, :M], Zc, vis, act.p, r0, tied)
            p = float(act.p)
            rows = [f2 + 2 * p * es + 2 * lc, j2 + (2 * p - 2) * es + 2 * ey + 2 * lc, s2 + (2 * p - 2) * es + 2 * lc,
                    mx + p * es + lc]
        if lrs is not None:
            lr = lrs[:, r0:r1]  # (T, B)
            rows = [r + w * lr for r, w in zip(rows, (2.0, 2.0, 2.0, 1.0))]
        if any(bool(torch.isnan(r).any() | (r == math.inf).any()) for r in rows):
            raise _overflow(act, N, D, K.dtype, "a non-finite intermediate")
        for o, r in zip(out, rows):
            o[:, r0:r1] = r
    return tuple(out)


def _overflow(act: Family, N: int, D: int, dtype: torch.dtype, detail: str) -> NormOverflowError:
    """The error raised when a norm (or softmax's scores) exceeds the range of ``dtype``."""
    name = str(dtype).removeprefix("torch.")
    if act.kernel == "poly":
        what = f"x^{act.p} (p={act.p}, c={act.coef:g}) or its derivative"
    else:
        what = f"softmax(τ={act.coef:g}) attention (S = X W Xᵀ or ‖W x‖²)"
    hint = "use dtype=torch.float64 or rescale X, W" if dtype != torch.float64 else "rescale X, W or the scale"
    return NormOverflowError(f"{what} overflows {name} at N={N}, D={D} ({detail}); {hint}")


def _exp2(L: torch.Tensor) -> torch.Tensor:
    """2^L in float64 without spurious under/overflow: 2^{L − ⌊L⌋} · 2^{⌊L⌋} (±inf map to inf and 0)."""
    fin = torch.isfinite(L)
    Lf = torch.where(fin, L, torch.zeros_like(L))
    n = torch.floor(Lf).clamp(-1100.0, 1100.0)
    v = torch.exp2(Lf - n) * torch.exp2(n)
    return torch.where(fin, v, torch.where(L > 0, math.inf, 0.0))


def _log2_sum(L: torch.Tensor) -> torch.Tensor:
    """log₂ Σ 2^L over the last axis (log-sum-exp in base 2; −inf when every term is 0)."""
    M = L.amax(-1, keepdim=True)
    M = torch.where(torch.isfinite(M), M, torch.zeros_like(M))
    return (M + torch.log2(torch.exp2(L - M).sum(-1, keepdim=True))).squeeze(-1)


def _norm_from_log2(L2: torch.Tensor, act: Family, N: int, D: int, what: str) -> torch.Tensor:
    """‖·‖ = 2^{L2/2} from log₂ of a squared norm; NormOverflowError if it exceeds float64."""
    if bool((L2 / 2 >= 1024.0).any()):
        raise _overflow(act, N, D, torch.float64, f"{what} ≈ 10^{float(L2.max()) / 2 * math.log10(2):.1f}")
    return _exp2(L2 / 2)


def _finish(rows: tuple[torch.Tensor, ...], with_rows: bool, dtype: torch.dtype, act: Family, D: int) -> NormResult:
    """Combine per-row log₂ values (each (1, N)) into a NormResult."""
    lf2, lj2, ls2, lmx = (r[0].cpu() for r in rows)
    N = lf2.shape[0]
    tot = [_log2_sum(v) for v in (lf2, lj2, ls2)]
    fro, jac, jac_s = (_norm_from_log2(v, act, N, D, name) for v, name in zip(tot, ("‖φ(S)‖_F", "‖∂φ/∂X‖_F", "‖∂φ/∂S‖_F")))
    lg = [float(v) / 2 * math.log10(2) for v in tot]
    return NormResult(
        fro=float(fro),
        jac_fro=float(jac),
        max_abs=float(_exp2(lmx.max())),
        row_fro=_exp2(lf2 / 2).numpy() if with_rows else None,
        dtype=str(dtype).removeprefix("torch."),
        jac_s_fro=float(jac_s),
        log10_fro=lg[0],
        log10_jac_fro=lg[1],
        log10_jac_s_fro=lg[2],
    )


def _log2_abs(rs: torch.Tensor) -> torch.Tensor:
    """log₂|c_i| of row scales (−inf for 0)."""
    return torch.log2(rs.abs())


# ----------------------------------------------------------------------------- public API


def attention_norms(
    X,  # (N, D)
    W,  # (D, D)
    activation: Family,
    mask: str = "none",
    row_scale=None,  # (N,) or None
    *,
    chunk: int | None = None,
    device=None,
    dtype: torch.dtype = torch.float64,
    with_rows: bool = False,
) -> NormResult:
    """‖φ(X W Xᵀ)‖_F and ‖∂φ(X W Xᵀ)/∂X‖_F exactly, in O(N²D) time and O(chunk·N + N·D) memory.

    Args:
      X: (N, D) tokens (numpy or torch).
      W: (D, D) bilinear form W = W_Q W_Kᵀ, not necessarily symmetric.
      activation: a family with an exact kernel (:func:`at_length`): ``family("x3_sqrtN")``, ``softmax(τ)``
        (τ inside), ``power(p, c)`` (c·x^p).
      mask: "none" or "causal" (row i sees j ≤ i; softmax normalises over j ≤ i).
      row_scale: optional (N,) multipliers c_i of row i of φ(S) (e.g. 1/√i; a per-row family brings its own).
      chunk: rows per chunk (default: one (chunk, N) buffer ≈ 64 MB).
      device: default CUDA when available, else CPU.
      dtype: compute dtype, float64 (default) or float32; sums are float64.
      with_rows: also return the (N,) per-row norms ‖φ(S)_i‖.

    Returns:
      NormResult(fro, jac_fro, max_abs, row_fro, dtype).

    >>> r = attention_norms(np.eye(2), np.eye(2), power(1))
    >>> round(r.fro, 12), round(r.jac_fro ** 2, 12)   # S = I: 2·(1 + 1) off-diagonal + 2·‖2 x_i‖²
    (1.414213562373, 12.0)
    """
    mask = choice("mask", mask, MASKS)
    dev, dt, ch = default_device(device), _dtype(dtype), _chunk(chunk)
    Xt = _tensor("X", X, (None, None), dev, torch.float64)  # validated and scaled in float64, then cast to dt
    N, D = Xt.shape
    act, row_scale = at_length(activation, N, row_scale)
    Wt = _tensor("W", W, (D, D), dev, torch.float64)
    lrs = None if row_scale is None else _log2_abs(_tensor("row_scale", row_scale, (N,), dev, torch.float64))[None]
    rows = _norms_core(_scaled_shared(Xt[None], Wt[None], dt), act, mask, lrs, tied=True, chunk=ch)
    return _finish(rows, with_rows, dt, act, D)


def attention_norms_batched(
    X,  # (T, N, D)
    W,  # (T, D, D) or (D, D)
    activation: Family,
    mask: str = "none",
    row_scale=None,  # (N,) or (T, N)
    *,
    chunk: int | None = None,
    device=None,
    dtype: torch.dtype = torch.float64,
    with_rows: bool = False,
) -> dict[str, torch.Tensor]:
    """Per trial t: ‖φ(X_t W_t X_tᵀ)‖_F, ‖∂φ/∂X_t‖_F, max |φ|, as in :func:`attention_norms`.

    Vectorised over trials (batched matmuls), chunked over rows and, when T·N is large, over
    groups of trials.

    Returns:
      {"fro": (T,), "jac_fro": (T,), "jac_s_fro": (T,), "max_abs": (T,)} float64 CPU tensors, their log₁₀
      "log10_fro", "log10_jac_fro", "log10_jac_s_fro" (T,) (finite where a norm is below float64's range), plus
      "row_fro": (T, N) when ``with_rows``.
    """
    mask = choice("mask", mask, MASKS)
    dev, dt, ch = default_device(device), _dtype(dtype), _chunk(chunk)
    f64 = torch.float64  # inputs are validated and scaled in float64, then cast to dt
    Xt = _tensor("X", X, (None, None, None), dev, f64)
    T, N, D = Xt.shape
    act, row_scale = at_length(activation, N, row_scale)
    if (W.ndim if isinstance(W, torch.Tensor) else np.ndim(W)) == 2:  # one W shared by all trials
        Wt = _tensor("W", W, (D, D), dev, f64).expand(T, D, D)
    else:
        Wt = _tensor("W", W, (T, D, D), dev, f64)
    lrs = None
    if row_scale is not None:
        if (row_scale.ndim if isinstance(row_scale, torch.Tensor) else np.ndim(row_scale)) == 2:
            lrs = _log2_abs(_tensor("row_scale", row_scale, (T, N), dev, f64))
        else:
            lrs = _log2_abs(_tensor("row_scale", row_scale, (N,), dev, f64)).expand(T, N)
    G = _trials_per_group(T, N, dt)
    parts = []
    for t0 in range(0, T, G):
        sc = _scaled_shared(Xt[t0 : t0 + G], Wt[t0 : t0 + G], dt)
        parts.append(_norms_core(sc, act, mask, None if lrs is None else lrs[t0 : t0 + G], True, ch))
    return _batched_out(parts, act, N, D, with_rows)


def _batched_out(parts: list, act: Family, N: int, D: int, with_rows: bool) -> dict[str, torch.Tensor]:
    """The per-trial norms from :func:`_norms_core`'s per-row log₂ values of consecutive trial groups."""
    lf2, lj2, ls2, lmx = (torch.cat([p[k] for p in parts]).cpu() for k in range(4))
    tot = {"fro": _log2_sum(lf2), "jac_fro": _log2_sum(lj2), "jac_s_fro": _log2_sum(ls2)}
    out = {"fro": _norm_from_log2(tot["fro"], act, N, D, "‖φ(S)‖_F"),
           "jac_fro": _norm_from_log2(tot["jac_fro"], act, N, D, "‖∂φ/∂X‖_F"),
           "jac_s_fro": _norm_from_log2(tot["jac_s_fro"], act, N, D, "‖∂φ/∂S‖_F"), "max_abs": _exp2(lmx.amax(-1))}
    out.update({f"log10_{k}": v * (math.log10(2) / 2) for k, v in tot.items()})  # finite below float64's range too
    if with_rows:
        out["row_fro"] = _exp2(lf2 / 2)
    return out


def paper_model_norms(
    A,  # (N, d)
    B,  # (N, d)
    activation: Family,
    mask: str = "none",
    row_scale=None,  # (N,)
    *,
    chunk: int | None = None,
    device=None,
    dtype: torch.dtype = torch.float64,
    with_rows: bool = False,
) -> NormResult:
    """‖φ(A Bᵀ)‖_F and ‖∂φ(A Bᵀ)/∂(A, B)‖_F: the paper's model with A, B independent.

    dS_ij = da_iᵀ b_j + a_iᵀ db_j, so
    poly: ‖∂P‖²_F = c² p² Σ_ij S_ij^{2p−2} (‖b_j‖² + ‖a_i‖²);
    softmax: ‖∂P‖²_F = τ² Σ_i [‖J_i B‖²_F + ‖a_i‖² ‖J_i‖²_F] (no cross term: A and B are
    different variables). Arguments as in :func:`attention_norms`.
    """
    mask = choice("mask", mask, MASKS)
    dev, dt, ch = default_device(device), _dtype(dtype), _chunk(chunk)
    At = _tensor("A", A, (None, None), dev, torch.float64)  # validated and scaled in float64, then cast to dt
    N, d = At.shape
    act, row_scale = at_length(activation, N, row_scale)
    Bt = _tensor("B", B, (N, d), dev, torch.float64)
    lrs = None if row_scale is None else _log2_abs(_tensor("row_scale", row_scale, (N,), dev, torch.float64))[None]
    rows = _norms_core(_scaled_paper(At[None], Bt[None], dt), act, mask, lrs, tied=False, chunk=ch)
    return _finish(rows, with_rows, dt, act, d)


def paper_model_norms_batched(
    A,  # (T, N, d)
    B,  # (T, N, d)
    activation: Family,
    mask: str = "none",
    row_scale=None,  # (N,)
    *,
    chunk: int | None = None,
    device=None,
    dtype: torch.dtype = torch.float64,
    with_rows: bool = False,
) -> dict[str, torch.Tensor]:
    """Per trial t: ‖φ(A_t B_tᵀ)‖_F, ‖∂φ/∂(A_t, B_t)‖_F, max |φ| as :func:`paper_model_norms`, vectorised over
    trials (each trial scaled by its own powers of two); the keys and shapes of :func:`attention_norms_batched`."""
    mask = choice("mask", mask, MASKS)
    dev, dt, ch = default_device(device), _dtype(dtype), _chunk(chunk)
    At = _tensor("A", A, (None, None, None), dev, torch.float64)  # validated and scaled in float64, then cast to dt
    T, N, d = At.shape
    act, row_scale = at_length(activation, N, row_scale)
    Bt = _tensor("B", B, (T, N, d), dev, torch.float64)
    lrs = None
    if row_scale is not None:
        lrs = _log2_abs(_tensor("row_scale", row_scale, (N,), dev, torch.float64)).expand(T, N)
    G = _trials_per_group(T, N, dt)
    parts = [_norms_core(_scaled_paper(At[t0 : t0 + G], Bt[t0 : t0 + G], dt), act, mask,
                         None if lrs is None else lrs[t0 : t0 + G], tied=False, chunk=ch) for t0 in range(0, T, G)]
    return _batched_out(parts, act, N, d, with_rows)


def linear_fro_gram(X, W, c: float = 1.0, *, device=None) -> float:
    """‖c X W Xᵀ‖_F = c·sqrt(tr(G W G Wᵀ)), G = XᵀX (D, D): the p = 1 norm in O(N D² + D³).

    Exact (float64); it matches ``attention_norms(X, W, power(1, c)).fro``.

    >>> round(linear_fro_gram(np.eye(3), 2 * np.eye(3), c=0.5), 12)   # ‖I‖_F = √3
    1.732050807569
    """
    c = positive_float("c", c)
    dev = default_device(device)
    Xt = _tensor("X", X, (None, None), dev, torch.float64)
    D = Xt.shape[1]
    Wt = _tensor("W", W, (D, D), dev, torch.float64)
    ea, eb = _pow2_exponent(Xt[None]), _pow2_exponent(Wt[None])  # X = 2^a X̂, W = 2^b Ŵ exactly
    Xt, Wt = _mul_pow2(Xt[None], -ea)[0], _mul_pow2(Wt[None], -eb)[0]
    G = Xt.T @ Xt  # (D, N) @ (N, D) -> (D, D)
    t = float(((G @ Wt @ G) * Wt).sum())  # tr(Ĝ Ŵ Ĝ Ŵᵀ) = Σ_ab (Ĝ Ŵ Ĝ)_ab Ŵ_ab
    mc, ec = math.frexp(c)
    try:  # ‖c X W Xᵀ‖_F = c 2^{2a+b} ‖X̂ Ŵ X̂ᵀ‖_F
        return math.ldexp(mc * math.sqrt(max(t, 0.0)), ec + int(2 * ea + eb))
    except OverflowError:
        raise NormOverflowError(f"‖c X W Xᵀ‖_F (c={c:g}) overflows float64") from None


def _phi(S: torch.Tensor, act: Family, mask: str, rs: torch.Tensor | None) -> torch.Tensor:
    """φ(S) (N, N) with mask and row scale, differentiable, for the autograd references."""
    N = S.shape[-1]
    vis = torch.ones(N, N, dtype=torch.bool, device=S.device)
    if mask == "causal":
        vis = torch.tril(vis)
    if act.kernel == "softmax":
        P = torch.softmax((act.coef * S).masked_fill(~vis, -math.inf), dim=-1)
    else:
        P = torch.where(vis, act.coef * S**act.p, torch.zeros((), dtype=S.dtype, device=S.device))
    if rs is not None:
        P = P * rs[:, None]
    return P


def _autograd_args(name_a, a, name_b, b, activation, mask, row_scale, device, square_b):
    mask = choice("mask", mask, MASKS)
    dev = torch.device("cpu") if device is None else default_device(device)
    at = _tensor(name_a, a, (None, None), dev, torch.float64)
    N, D = at.shape
    act, row_scale = at_length(activation, N, row_scale)
    bt = _tensor(name_b, b, (D, D) if square_b else (N, D), dev, torch.float64)
    if N * N * N * D * (1 if square_b else 2) > AUTOGRAD_MAX_ENTRIES:
        raise InputError(f"jacobian_autograd is for small sizes; N={N}, D={D} gives {N**3 * D} entries")
    rs = None if row_scale is None else _tensor("row_scale", row_scale, (N,), dev, torch.float64)
    return act, mask, at, bt, rs


def jacobian_autograd(X, W, activation: Family, mask: str = "none", row_scale=None, *, device=None) -> torch.Tensor:
    """∂ vec φ(X W Xᵀ) / ∂ vec X by ``torch.func.jacrev``: reference, float64, small sizes only.

    Returns:
      (N·N, N·D) float64 tensor; row (i·N + j), column (k·D + a) is ∂φ(S)_ij/∂X_ka.
    """
    act, mask, Xt, Wt, rs = _autograd_args("X", X, "W", W, activation, mask, row_scale, device, True)
    N, D = Xt.shape

    def f(x: torch.Tensor) -> torch.Tensor:
        return _phi(x @ Wt @ x.T, act, mask, rs).reshape(-1)  # (N, D) @ (D, D) @ (D, N)

    return torch.func.jacrev(f)(Xt).reshape(N * N, N * D)


def paper_jacobian_autograd(A, B, activation: Family, mask: str = "none", row_scale=None, *, device=None) -> torch.Tensor:
    """∂ vec φ(A Bᵀ) / ∂ (vec A, vec B) by ``torch.func.jacrev``: (N·N, 2·N·d) float64 reference."""
    act, mask, At, Bt, rs = _autograd_args("A", A, "B", B, activation, mask, row_scale, device, False)
    N, d = At.shape

    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _phi(a @ b.T, act, mask, rs).reshape(-1)  # (N, d) @ (d, N)

    ja, jb = torch.func.jacrev(f, argnums=(0, 1))(At, Bt)
    return torch.cat([ja.reshape(N * N, N * d), jb.reshape(N * N, N * d)], dim=1)


def jacobian_s_autograd(X, W, activation: Family, mask: str = "none", row_scale=None, *, device=None) -> torch.Tensor:
    """∂ vec φ(S) / ∂ vec S at S = X W Xᵀ by ``torch.func.jacrev``: (N·N, N·N) float64 reference, small sizes only.

    Its Frobenius norm is ``NormResult.jac_s_fro`` (masked entries of S carry no derivative).
    """
    act, mask, Xt, Wt, rs = _autograd_args("X", X, "W", W, activation, mask, row_scale, device, True)
    N = Xt.shape[0]
    S = Xt @ Wt @ Xt.T  # (N, D) @ (D, D) @ (D, N)
    return torch.func.jacrev(lambda s: _phi(s, act, mask, rs).reshape(-1))(S).reshape(N * N, N * N)
