"""Predicted seconds per call t = F/R_mm + E/R_ew + B/R_bw of one attention form, from its flops F, element-wise
operations E and bytes B of N×N data moved, with this machine's measured rates (the analytic side of ``overhead``).

Counts per head, batch 1, d = d_v, one pass (forward; forward + backward ≈ 3× the matmul flops and 2.5× the
element-wise work and bytes, the backward of a product being two products and of an element-wise map one map and
its derivative):

* ``softmax`` (fused SDPA): F = 4·n_s·d (QKᵀ and PV over the n_s score entries it computes: N², or N(N + 1)/2 with
  the causal mask, whose fused kernel skips the blocks above the diagonal), E = n_s·(4 + e) (scale, max, subtract,
  sum, and one exp of cost e multiplies), B = 0 (the N×N matrix never leaves the kernel's tiles);
* ``naive``: F = 4·N²·d, E = N²·(p − 1) (+ N² for the mask's tril pass), B = 4·N²·(2 + 2·[p > 1] + 2·causal) bytes
  (S written and read; S^p written and read; tril read and written);
* ``causal_blocked``: as naive on the n_b = N(N + b)/2 entries of the blocks on and below the diagonal, the tril only
  on the diagonal blocks;
* ``linearised``: :func:`sapa.empirics.kernels.linearised.flops` multiply-adds (× 2 flops), no N×N data.

The rates come from three seeded CPU-time measurements (:func:`machine_rates`): a (1024 × 64) @ (64 × 1024) matmul,
an exp over a cache-resident vector, and a copy of a 64 MiB tensor (bytes read + written). A model, not a
measurement: the entry prints its predicted ratio beside the measured one and says where they differ.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["Rates", "counts", "predicted_seconds", "predicted_ratio", "machine_rates"]


@dataclass(frozen=True)
class Rates:
    """Measured rates: matmul flop/s, element-wise op/s, bytes/s of main-memory traffic, exp cost in multiplies."""

    matmul: float
    elementwise: float
    bandwidth: float
    exp_cost: float


def counts(form: str, N: int, d: int, p: int | None, causal: bool, pas: str, block: int = 128) -> dict:
    """{"flops", "elementwise", "bytes"} of one call of ``form`` (module docstring), forward or "fwd+bwd"."""
    from sapa.empirics.kernels.linearised import flops as lin_flops

    full = N * N
    tri = N * (N + 1) // 2
    if form == "softmax":
        n = tri if causal else full
        c = {"flops": 4 * n * d, "elementwise": 4 * n, "exp": n, "bytes": 0}
    elif form == "naive":
        c = {"flops": 4 * full * d, "elementwise": full * ((p - 1) + causal), "exp": 0,
             "bytes": 4 * full * (2 + 2 * (p > 1) + 2 * causal)}
    elif form == "causal_blocked":
        nb = sum(min(block, N - i0) * min(i0 + block, N) for i0 in range(0, N, block))
        diag = sum(min(block, N - i0) ** 2 for i0 in range(0, N, block))
        c = {"flops": 4 * nb * d, "elementwise": nb * (p - 1) + diag, "exp": 0,
             "bytes": 4 * (nb * (2 + 2 * (p > 1)) + 2 * diag)}
    elif form == "linearised":
        c = {"flops": 2 * lin_flops("linearised", N, d, d, p, causal), "elementwise": 0, "exp": 0, "bytes": 0}
    else:
        raise ValueError(f"no cost model for form {form!r}")
    if pas == "fwd+bwd":
        c = {"flops": 3 * c["flops"], "elementwise": 2.5 * c["elementwise"], "exp": c["exp"], "bytes": 2.5 * c["bytes"]}
    return c


def predicted_seconds(c: dict, r: Rates) -> float:
    """t = F/R_mm + (E + e·n_exp)/R_ew + B/R_bw."""
    return c["flops"] / r.matmul + (c["elementwise"] + r.exp_cost * c["exp"]) / r.elementwise + c["bytes"] / r.bandwidth


def predicted_ratio(form: str, N: int, d: int, p: int, causal: bool, pas: str, r: Rates, block: int = 128) -> float:
    """Predicted seconds of ``form`` over those of fused softmax at the same cell."""
    return (predicted_seconds(counts(form, N, d, p, causal, pas, block), r)
            / predicted_seconds(counts("softmax", N, d, None, causal, pas), r))


def machine_rates(seed: int = 0, min_s: float = 0.05) -> Rates:
    """This machine's rates in process CPU time (one torch thread as the caller set it), each the best of 3 blocks."""
    import torch
    from torch.utils.benchmark import Timer

    from sapa.common.seeds import torch_gen_for

    g = torch_gen_for(seed, "cost-model")
    A, B = torch.randn(1024, 64, generator=g), torch.randn(64, 1024, generator=g)
    v = torch.randn(2**15, generator=g)  # 128 KiB: cache-resident
    big = torch.randn(2**24, generator=g)  # 64 MiB: main memory
    out = torch.empty_like(big)

    def best(stmt, env) -> float:
        t = Timer(stmt, globals=env, timer=time.process_time)
        return min(t.blocked_autorange(min_run_time=min_s).times)

    mm = 2 * 1024 * 64 * 1024 / best("A @ B", {"A": A, "B": B})
    mul = v.numel() / best("v * v", {"v": v})
    exp = v.numel() / best("torch.exp(v)", {"v": v, "torch": torch})
    bw = 2 * 4 * big.numel() / best("out.copy_(big)", {"out": out, "big": big})
    return Rates(matmul=mm, elementwise=mul, bandwidth=bw, exp_cost=max(1.0, mul / exp))
