"""The certified σ₁ of ∂φ/∂X for ``sapa norms --spectral`` (``sapa.norms(..., spectral=True)``): a Lanczos bracket
(:mod:`sapa.empirics.kernels.spectral`) found on rescaled weights where φ is homogeneous, widened by the float64
rounding of the logits, with a progress bar and advice when it stays open.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["CERTIFICATE", "DENSE", "SIGMA_KEYS", "bracket_text", "spectral_keys", "unconverged_advice"]

DENSE = {"auto": "auto", "lanczos": "never", "dense": "always"}
SCALE_BEYOND = 30  # |log₁₀ ‖J‖_F| beyond which the bracket is found for 2^{−e}J (JᵀJ's residuals square it again)
SIGMA_KEYS = ("sigma_lower", "sigma_upper", "sigma_estimate", "sigma_upper_frobenius")


def _scaled_for_spectral(X: np.ndarray, layer, act, k: int):
    """(X', the one-head layer of head k on scaled weights, e) with ∂φ/∂X = 2^e·∂φ'/∂X' for φ homogeneous in x.

    X = 2^a X', W_Q = 2^b W_Q', W_K = 2^c W_K': S = 2^s S' (s = 2a + b + c), φ(S) = 2^{ps} φ(S') (row-normalised:
    unchanged) and ∂/∂X = 2^{−a} ∂/∂X', so e = ps − a (row: −a), exact. The bracket is then found where the
    products neither underflow nor overflow. (X, layer, None) when φ is not homogeneous or the head has a bias.
    """
    from dataclasses import replace as dc_replace

    from sapa.empirics.kernels.expr_norms import _pow2, homogeneous_degree

    p = homogeneous_degree(act) if layer.bq is None else None
    if p is None:
        return X, layer, None
    a, b, c = _pow2(X), _pow2(layer.Wq[k]), _pow2(layer.Wk[k])
    one = dc_replace(layer, Wq=np.ldexp(layer.Wq[k:k + 1], -b), Wk=np.ldexp(layer.Wk[k:k + 1], -c), Wv=None, Wo=None)
    s = 2 * a + b + c
    return np.ldexp(X, -a), one, (-a if act.normalize == "row" else p * s - a)


def _logit_rounding(X: np.ndarray, layer, act, k: int) -> float:
    """ρ: a first-order bound on the relative change of σ₁ that the float64 rounding of the logits causes (row-normalised
    exp-type φ of head k; 0 otherwise).

    S = (X W_Q)(X W_K)ᵀ is formed with errors |δS_ij| ≤ γ_m (|X||W_Q|)(|X||W_K|)ᵀ_ij, m = 2D + d (γ_m = mε/(1 − mε)),
    and log φ moves by |(log φ)'|·|δS|; each P_ik then moves by a factor e^{±2 max|δ log φ|}, each entry of R_i (a
    product of two) by ±4 max|δ log φ| relative, and y, z by γ_m. At a logit gap of 10⁴ this is ~1e−11 — far below
    --tol, but above the bracket's own width, so the bracket is widened by it: it then holds σ₁ of the exact inputs.
    First order and entrywise: where the sums Σ_l R_kl y_l of an entry of J cancel (Σ_l R_kl = 0), and when
    W x_l itself cancels, the change can exceed ρ by that cancellation's factor (not bounded here).
    """
    from sapa.empirics.kernels.activation_fns import activation_functions

    fns = activation_functions(act)
    if act.normalize != "row" or fns.logf is None:
        return 0.0
    N, D = X.shape
    Wq, Wk = layer.Wq[k], layer.Wk[k]
    m = 2 * D + Wq.shape[1]
    gam = m * EPS / (1 - m * EPS)
    M = (np.abs(X) @ np.abs(Wq)) @ (np.abs(X) @ np.abs(Wk)).T  # (N, d) @ (d, N): |δS| ≤ γ_m M
    S = (X @ Wq) @ (X @ Wk).T
    i = np.arange(1, N + 1, dtype=np.float64)[:, None]
    j = np.arange(1, N + 1, dtype=np.float64)[None, :]
    with np.errstate(all="ignore"):
        dl = np.abs(np.broadcast_to(fns.dlogf(S, float(N), i, j), (N, N)))
    if act.mask == "causal":
        dl = np.tril(dl)
    move = float(np.max(dl * M)) * gam  # max |δ log φ|
    return 4.0 * math.expm1(2.0 * move) + 4.0 * gam


def _widened(d: dict, rho: float) -> dict:
    """A rescaled bracket dict widened by the relative amount ``rho`` (``logit_rounding``); converged re-judged."""
    out = dict(d)
    out["logit_rounding"] = rho
    if rho <= 0.0 or not d["sigma_upper"] and d["log10_sigma_upper"] is None:
        return out
    for key, f in (("sigma_lower", 1.0 - rho), ("sigma_upper", 1.0 + rho)):
        out[key] = d[key] * f if d[key] is not None else None
        if d[f"log10_{key}"] is not None:
            out[f"log10_{key}"] = d[f"log10_{key}"] + math.log10(max(f, 0.0)) if f > 0 else None
    lo, up = out["log10_sigma_lower"], out["log10_sigma_upper"]
    width = 1.0 - 10 ** (lo - up) if lo is not None and up is not None else 1.0
    out["rel_width"] = width
    out["converged"] = bool(width <= d["tol"])
    return out


EPS = float(np.finfo(np.float64).eps)


def _rescaled(d: dict, e: int) -> dict:
    """A bracket of ∂φ'/∂X' as one of ∂φ/∂X = 2^e·∂φ'/∂X', with log10 ends that survive under- and overflow."""
    out = dict(d)
    for key, k in [(s, e) for s in SIGMA_KEYS] + [("residual", 2 * e), ("trace_rest", 2 * e)]:  # the last two: of JᵀJ
        v = float(d[key])
        out[f"log10_{key}"] = math.log10(v) + k * math.log10(2) if v > 0 else None
        out[key] = math.ldexp(v, k) if v > 0 and out[f"log10_{key}"] < 308 else (0.0 if v == 0 else math.inf)
    return out  # values below float64's range: sapa.api.floats.mark_below_range
CERTIFICATE = ("Lanczos on JᵀJ with Jacobian products: lower = ‖Jx‖ of the top Ritz vector; upper = "
               "λ_max[[T, UΣ], [ΣUᵀ, t_⊥I]]^½ with t_⊥ = ‖J‖²_F − tr T (JᵀJ ⪰ 0), and ≤ ‖J‖_F. Where spectral_method is "
               "dense-cholesky (N·D ≤ 16 384, when the Lanczos bracket stays open), JᵀJ is formed from products, "
               "lower = ‖Jx‖ of ARPACK's top eigenvector and upper = √(μ + δ) with λ₁ < μ proven by a floating-point "
               "Cholesky factorisation of (μ − c)I − JᵀJ (Rump 2006) and δ the round-off of the formed matrix. For a "
               "row-normalised exp-type φ (softmax) both ends are then widened by logit_rounding, a first-order bound "
               "on what the float64 rounding of S moves σ₁ by. converged: (upper − lower) ≤ tol·upper")


def bracket_text(b, e2: int = 0) -> str:
    """``[lower, upper], rel. width w`` of a :class:`~sapa.empirics.kernels.spectral.SpectralBracket` (of 2^e2·J)."""
    return f"[{_times_pow2(b.lower, e2)}, {_times_pow2(b.upper, e2)}], rel. width {b.rel_width:.3g}"


def _times_pow2(v: float, e2: int) -> str:
    """v·2^e2 as text, also where it under- or overflows float64 (as m·10^k)."""
    if v <= 0 or e2 == 0:
        return f"{v:.6g}"
    l10 = math.log10(v) + e2 * math.log10(2)
    if -300 < l10 < 300:
        return f"{math.ldexp(v, e2):.6g}"
    k = math.floor(l10)
    return f"{10 ** (l10 - k):.6g}e{k:+d}"


def unconverged_advice(what: str, b, max_steps: int, e2: int = 0) -> str:
    """What to do when a bracket stayed open: it is still certified; a looser --tol, more steps, or a smaller X."""
    head = (f"{what}: the bracket {bracket_text(b, e2)} did not close to --tol {b.tol:g}; it holds as it is (σ₁ lies "
            "inside it).")
    if b.method == "dense-cholesky":
        return (f"{head} It comes from the dense certificate, whose round-off allowance (about 64·ε·N·D·‖J‖²_F/σ₁² "
                "relative) is wider than --tol here: loosen --tol.")
    n = int(np.prod(b.v.shape))
    return (f"{head} Lanczos ran {b.steps} steps and the dense certificate needs N·D ≤ 16 384 (here {n}). To narrow "
            f"it, raise --max-steps above {max_steps} (each step costs one Jacobian product and one transposed "
            "product, and the check every few steps O(k²·N·D)), or loosen --tol; a bracket whose lower end no longer "
            "moves needs a smaller X or fewer heads.")


def _bracket_with_progress(certify, what: str, progress, *args, e2: int = 0, **kwargs):
    """``certify(*args, **kwargs, on_step=…)`` under a bar of Lanczos steps whose postfix is the current bracket."""
    from sapa.common.progress import progress_bar

    bar = progress_bar(min(int(kwargs["max_steps"]), int(np.prod(args[2]))), desc=what, unit="step",
                       progress=progress)
    seen = {"k": 0, "bracket": ""}

    def on_step(k, k_max, b):
        if b is not None:
            seen["bracket"] = f"bracket {bracket_text(b, e2)}"
            bar.set_postfix_str(seen["bracket"])
        if k_max != bar.total:  # the basis' memory cap lowered the step limit, or the dense certificate took over
            bar.total = k_max
        bar.update(k - seen["k"])
        seen["k"] = k

    def on_dense(stage, done, total):  # the Lanczos steps are over: the bar stops counting them (no stale ETA)
        if bar.total != max(seen["k"], 1):
            bar.total = max(seen["k"], 1)
        where = f"{stage} {done}/{total}" if total > 1 else stage
        bar.set_postfix_str(f"{seen['bracket']}; dense certificate: {where}".lstrip("; "), refresh=True)

    try:
        return certify(*args, **kwargs, on_step=on_step, on_dense=on_dense)
    finally:
        bar.close()


def spectral_keys(out: dict, X: np.ndarray, layer, act, r, *, tol: float, max_steps: int, seed: int, progress,
                  certificate: str) -> None:
    """Add the certified σ₁ brackets to ``out`` (a flat norms result; ``r`` its
    :func:`sapa.empirics.kernels.expr_norms.expr_norms`): per head, and of the whole layer when it has values."""
    from sapa.api.floats import mark_below_range
    from sapa.empirics.kernels.expr_norms import LayerOperator
    from sapa.empirics.kernels.spectral import certified_spectral_norm

    per_head, advice = [], []
    for k in range(layer.H):
        what = "σ₁ of ∂φ/∂X" + (f", head {k + 1}/{layer.H}" if layer.H > 1 else "")
        b, e2 = _head_bracket(X, layer, act, r, k, what, progress, tol=tol, max_steps=max_steps, seed=seed,
                              dense=DENSE[certificate])
        per_head.append(_widened(_rescaled(b.as_dict(), e2 or 0), _logit_rounding(X, layer, act, k)))
        mark_below_range(per_head[-1], SIGMA_KEYS + ("residual", "trace_rest"))
        advice += [] if per_head[-1]["converged"] else [unconverged_advice(what, b, max_steps, e2 or 0)]
    if layer.H == 1:
        below = out.pop("below_double_range") + per_head[0].pop("below_double_range")
        out.update({f"{k}": v for k, v in per_head[0].items()})
        out["below_double_range"] = below
    else:
        out["spectral_per_head"] = per_head
    if layer.has_values:
        op = LayerOperator(X, layer, act)
        b = _bracket_with_progress(certified_spectral_norm, "σ₁ of the layer's Jacobian", progress, op.matvec,
                                   op.rmatvec, op.in_shape, r.layer_jac_fro ** 2, tol=tol, max_steps=max_steps,
                                   seed=seed, gram=op.gram, dense=DENSE[certificate])
        out.update({f"layer_{k}": v for k, v in b.as_dict().items()})
        advice += [] if b.converged else [unconverged_advice("σ₁ of the layer's Jacobian", b, max_steps)]
    if advice:
        from sapa.common.progress import say

        out["spectral_advice"] = " ".join(advice)
        for line in advice:
            say(f"sapa: note: {line}")
    out["spectral_certificate"] = CERTIFICATE


def _head_bracket(X: np.ndarray, layer, act, r, k: int, what: str, progress, **kwargs):
    """(the bracket of head k's σ₁, the power of 2 it is scaled by or None), found on rescaled inputs where φ is
    homogeneous or ‖J‖_F is far from 1."""
    from sapa.empirics.kernels.expr_norms import LayerOperator
    from sapa.empirics.kernels.spectral import certified_spectral_norm

    Xk, lay_k, e2 = _scaled_for_spectral(X, layer, act, k)
    scale = 0  # ‖J‖_F far from 1: the operator is 2^{−scale}·J (no under/overflow in JᵀJ and its residuals)
    if e2 is None and act.normalize == "row" and math.isfinite(r.log10_jac_fro[k]) \
            and abs(r.log10_jac_fro[k]) > SCALE_BEYOND:
        scale = round(r.log10_jac_fro[k] / math.log10(2))
        e2 = scale
    op = LayerOperator(Xk, lay_k, act, head=0 if e2 is not None and not scale else k, log2_scale=scale)
    fro2 = r.jac_fro[k] ** 2 if e2 is None else 10.0 ** (2 * (r.log10_jac_fro[k] - e2 * math.log10(2)))
    b = _bracket_with_progress(certified_spectral_norm, what, progress, op.matvec, op.rmatvec, op.in_shape, fro2,
                               gram=op.gram, e2=e2 or 0, **kwargs)
    return b, e2
