"""E‖S^{∘p}‖²_F = N(N−1)·m_off + N·m_diag: the exact growth profiles behind Thm 4.2 – Cor 4.5 and other powers p.

The paper (arXiv 2410.18613): for φ(x) = x^p with i.i.d. Gaussian inputs and weights, ‖φ(S)‖_F and its Jacobian grow
like O(N); scaled by 1/√N like O(√N), "like softmax". The reviews: A = XW_Q and B = XW_K share X, so √N growth may
hold only for N ≫ D. Exact (``sapa.theory.moments``): in every shared-X model the RMS of the 1/√N-scaled norm has local
exponent e(N) = ½·N/(N−1+r), r = m_diag/m_off = N* − 1. It equals ½ for all N only when r = 1 (the paper's
independent model); otherwise it reaches ½ (within ``TOL``) only for N ≥ N_reg = ⌈1 − r + |1 − r|/(2·TOL)⌉. The
unscaled exponent is e(N) + ½. This module computes those profiles, the constants against softmax's √N at ViT sizes,
the Jacobian w.r.t. S and the matrix-power reading; the growth entries (``sapa.claims.growth_check``) decide.
"""

from __future__ import annotations

import math

from sapa.common.seeds import rng_for
from sapa.evidence import monte_carlo as mc
from sapa.ledger import Context

TOL = 0.05  # "grows like N^e": the local exponent within 0.05 of e
MODELS = (("paper", 0.0), ("iid", 0.0), ("tied", 1.0), ("corr", 0.5))
SETTINGS = ((64, 32), (64, 64), (384, 32), (384, 64), (768, 32), (768, 64))
VIT = {"ViT-Base": (768, 64, 196), "ViT-Small": (384, 64, 196)}


def regime_start(r: float) -> int:
    """Smallest N ≥ 1 from which e(N) = ½N/(N−1+r) stays within TOL of ½: ⌈1 − r + |1−r|/(2 TOL)⌉."""
    return max(1, math.ceil(1 - r + abs(1 - r) / (2 * TOL) - 1e-9))


def exact_profile(p: int, model: str, rho: float, D: int, d: int) -> dict:
    """N*, regime start and ViT-size exponents for one model and (D, d), from exact moments."""
    from sapa.theory.moments import exact_moments

    e = exact_moments(p, model, 196, D, d, rho=rho, sigma=1 / math.sqrt(D))
    r, rj = e.crossover_n - 1, e.crossover_n_jac - 1
    # e(N) = ½N/(N−1+r) → ½ as N → ∞ exactly when the N² coefficient m_off is positive (else → 0).
    return {
        "model": model, "rho": rho, "D": D, "d": d,
        "crossover_n": e.crossover_n, "crossover_n_jac": e.crossover_n_jac,
        "regime_start_n": regime_start(r), "regime_start_n_jac": regime_start(rj),
        "scaled_exponent_at_196": e.growth_exponent, "scaled_exponent_jac_at_196": e.growth_exponent_jac,
        "asymptotic_scaled_exponent": 0.5 if e.m_off > 0 else 0.0,
        "asymptotic_scaled_exponent_jac": 0.5 if e.j_off > 0 else 0.0,
    }


def mc_gate(series: list[dict]) -> tuple[str, int, int]:
    """mc-agreement over independent draws: x^p/√N and c·x^p of one (model, ρ, D, d, quantity) share their draws.

    Returns (verdict, independent comparisons, missed). A shared draw counts once (covered if every series on it is).
    """
    draws: dict[tuple, bool] = {}
    for s in series:
        if s["agree"] is None:
            continue
        key = (s["weight_model"], s["rho"], s["D"], s["d"], s["quantity"])
        draws[key] = draws.get(key, True) and bool(s["agree"])
    return mc.agreement_gate(draws.values(), mc.LEVEL)  # no draws: UNDETERMINED, 0, 0


def sup_local_exponent(r: float, shift: float) -> float:
    """sup over N ≥ 2 of the exact local exponent ½N/(N−1+r) + shift: ½ + shift if r ≥ 1, else its value at N = 2."""
    return 0.5 + shift if r >= 1 else 1.0 / (1.0 + r) + shift


def jac_s_moments(p: int, model: str, rho: float, D: int, d: int, N: int, sigma: float) -> float:
    """E‖∂(S^{∘p})/∂S‖²_F = p²·Σ E S_ij^{2p−2} = p²[N(N−1)·m_off(p−1) + N·m_diag(p−1)] (= N² for p = 1)."""
    from sapa.theory.moments import exact_moments

    if p == 1:
        return float(N * N)
    e = exact_moments(p - 1, model, N, D, d, rho=rho, sigma=sigma)
    return p * p * e.expected_fro2


def jac_s_crossovers(p: int) -> list[float]:
    """r = N* − 1 of E‖∂(c S^{∘p})/∂S‖²_F = c²p²[N(N−1) m_off(p−1) + N m_diag(p−1)] per model and setting."""
    from sapa.theory.moments import exact_moments

    out = []
    for m, rho in MODELS:
        for D, d in SETTINGS:
            if p == 1:
                out.append(1.0)  # ‖∂S/∂S‖²_F = N² for every input: r = 1, exponent exactly ½ + shift
            else:
                out.append(exact_moments(p - 1, m, 196, D, d, rho=rho, sigma=1 / math.sqrt(D)).crossover_n - 1)
    return out


def constants(p: int, scaled: bool) -> dict:
    """E-RMS ‖c·S^{∘p}‖_F at ViT sizes (N = 196) per weight model, and its ratio to softmax's bound √N.

    Weights W_Q, W_K entries N(0, 1/D) (shared X, rows N(0, I_D)); the paper's model with A, B entries
    N(0, 1), the same per-entry scale as A = XW_Q.
    """
    from sapa.theory.moments import exact_moments

    from sapa.conditions import scaled_by_logit_convention as conv

    out = {}
    for name, (D, d, N) in VIT.items():
        c2 = 1 / N if scaled else 1.0
        row = {}
        for m, rho in MODELS:
            sig = 1.0 if m == "paper" else 1 / math.sqrt(D)
            e = exact_moments(p, m, N, D, d, rho=rho, sigma=sig)
            rms = math.sqrt(c2 * e.expected_fro2)
            rms_d = conv(rms, p, d)  # the same exact moments under S/√d: factor d^(−p/2)
            row[m] = {"rms_fro": float(f"{rms:.4g}"), "ratio_to_softmax_bound_sqrtN": float(f"{rms / math.sqrt(N):.4g}"),
                      "rms_jac_s": float(f"{math.sqrt(c2 * jac_s_moments(p, m, rho, D, d, N, sig)):.4g}"),
                      "rms_fro_s_over_sqrt_d": float(f"{rms_d:.4g}"),
                      "ratio_to_softmax_bound_sqrtN_s_over_sqrt_d": float(f"{rms_d / math.sqrt(N):.4g}"),
                      "ratio_exact": rms / math.sqrt(N), "ratio_exact_s_over_sqrt_d": rms_d / math.sqrt(N)}
        out[name] = {"D": D, "d": d, "N": N, "softmax_bound_sqrtN": math.sqrt(N), "models": row,
                     "logit_scales": {"rms_fro": "S (the paper's theory)",
                                      "rms_fro_s_over_sqrt_d": f"S/√d (as transformers compute it): × d^(−p/2) = "
                                                               f"{d}^(−{p}/2)"}}
    return out


def matrix_power_reading(ctx: Context, p: int) -> dict:
    """The other reading of x^p, the matrix power (XWXᵀ)^p: its exact exponents (computed once per run and p)."""
    from sapa.theory.matrix_power import matrix_power_growth

    if p == 1:
        return {}
    if ("matrix_power", p) not in ctx.cache:  # the same seeded W for x^p and x^p/√N: computed once per run
        W = rng_for(ctx.budget.seed, "matrix-power-reading", p).standard_normal((16, 16)) / 4.0
        ctx.cache[("matrix_power", p)] = matrix_power_growth(p, W)
    g = ctx.cache[("matrix_power", p)]
    return {"reading": "x^p as matrix power (XWXᵀ)^p", "asymptotic_exponent_scaled": g.asymptotic_exponent,
            "asymptotic_exponent_unscaled": g.asymptotic_exponent + 0.5, "formula": g.formula}
