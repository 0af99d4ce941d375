"""Ledger checks for Thm 4.2, Cor 4.3, Thm 4.4, Cor 4.5 and other powers (arXiv 2410.18613).

The paper: for φ(x) = x^p with i.i.d. Gaussian inputs and weights, ‖φ(S)‖_F and its Jacobian
grow like O(N); scaled by 1/√N they grow like O(√N), "like softmax". The reviews: A = XW_Q and
B = XW_K share X, and the final terms mix N and D, so √N growth may hold only for N ≫ D.

Exact (``theory.moments``): in every shared-X model
    E‖S^{∘p}‖²_F = N(N−1)·m_off + N·m_diag,
so the RMS of the 1/√N-scaled norm has local exponent e(N) = ½·N/(N−1+r), r = m_diag/m_off
= N* − 1. It equals ½ for all N only when r = 1 (the paper's independent model); otherwise
it reaches ½ (within ``TOL``) only for N ≥ N_reg = ⌈1 − r + |1 − r|/(2·TOL)⌉. The unscaled
exponent is e(N) + ½. Monte Carlo (``sapa.claims.mc``) measures the same exponents.

Verdict rule (same for all four claims): FAILS if some model's asymptotic exponent differs
from the prediction; HOLDS if the local exponent is within TOL of the prediction at every N ≥ 2
under every model; HOLDS_IN_REGIME if that is true only for N ≥ N_reg under some model (the
evidence lists N_reg); UNDETERMINED if the Monte Carlo and the exact prediction disagree or
the negative control (the opposite scaling) is not detected.
"""

from __future__ import annotations

import math

from sapa.claims import mc
from sapa.ledger import Claim, Context, Contract, Outcome

TOL = 0.05  # "grows like N^e": the local exponent within 0.05 of e
MODELS = (("paper", 0.0), ("iid", 0.0), ("tied", 1.0), ("corr", 0.5))
SETTINGS = ((64, 32), (64, 64), (384, 32), (384, 64), (768, 32), (768, 64))
VIT = {"ViT-Base": (768, 64, 196), "ViT-Small": (384, 64, 196)}


def regime_start(r: float) -> int:
    """Smallest N ≥ 1 from which e(N) = ½N/(N−1+r) stays within TOL of ½: ⌈1 − r + |1−r|/(2 TOL)⌉."""
    return max(1, math.ceil(1 - r + abs(1 - r) / (2 * TOL) - 1e-9))


def exact_profile(p: int, model: str, rho: float, D: int, d: int) -> dict:
    """N*, regime start and ViT-size exponents for one model and (D, d), from exact moments."""
    from theory.moments import exact_moments

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


def _judge(ctx: Context, p: int, scaled: bool) -> Outcome:
    """Shared logic of the four growth claims: exact profiles, Monte Carlo, negative control, verdict."""
    from theory.moments import matrix_power_growth

    shift = 0.0 if scaled else 0.5
    pred = 0.5 + shift
    profiles = [exact_profile(p, m, rho, D, d) for m, rho in MODELS for D, d in SETTINGS]
    vit = {name: {m: exact_profile(p, m, rho, D, d) for m, rho in MODELS} for name, (D, d, _) in VIT.items()}
    asym_ok = all(pr["asymptotic_scaled_exponent"] == 0.5 == pr["asymptotic_scaled_exponent_jac"] for pr in profiles)
    everywhere = all(pr["regime_start_n"] <= 2 and pr["regime_start_n_jac"] <= 2 for pr in profiles)
    paper_everywhere = all(pr["regime_start_n"] <= 2 for pr in profiles if pr["model"] == "paper")

    # Monte Carlo: the claimed activation, and the opposite scaling as negative control.
    if scaled:
        claimed = mc.series(ctx, p=p, scale_policy="inv_sqrt_n")
        control = mc.series(ctx, p=p, scale_policy="const")
        control_pred = 1.0
    else:
        claimed = mc.series(ctx, p=p, scale_policy="const")
        control = mc.series(ctx, p=p, scale_policy="inv_sqrt_n")
        control_pred = 0.5
    disagree = [s for s in claimed + control if s["agree"] is False]
    n_series = len(claimed) + len(control)
    # 99% intervals: about 1% of honest series miss by chance; allow that many (at least one).
    mc_agrees = n_series > 0 and len(disagree) <= max(1, round(0.01 * n_series) + 1)
    # Negative control: where exact theory says the model is in its asymptotic regime (paper, iid),
    # the MC interval of the opposite scaling must exclude the claimed exponent.
    ctrl = [s for s in control if s["weight_model"] in ("paper", "iid")]
    control_detected = bool(ctrl) and all(not (s["mc_ci"][0] <= pred <= s["mc_ci"][1]) for s in ctrl)

    mp = {}
    if p > 1:
        import numpy as np

        W = np.random.default_rng([ctx.budget.seed, p]).standard_normal((16, 16)) / 4.0
        g = matrix_power_growth(p, W)
        mp = {"reading": "x^p as matrix power (XWXᵀ)^p", "asymptotic_exponent_scaled": g.asymptotic_exponent,
              "asymptotic_exponent_unscaled": g.asymptotic_exponent + 0.5, "formula": g.formula}

    from sapa.claims import worst as worst_side

    wc, wc_figures = worst_side.evidence(ctx, p, scaled)
    if not mc_agrees or not control_detected or not wc["theory_and_numerics_agree"]:
        verdict = "UNDETERMINED"
    elif not asym_ok:
        verdict = "FAILS"
    elif everywhere:
        verdict = "HOLDS"
    else:
        verdict = "HOLDS_IN_REGIME"

    worst = max(profiles, key=lambda pr: pr["regime_start_n"])
    vb = vit["ViT-Base"]
    word = "x/√N" if p == 1 else f"x^{p}/√N"
    if not scaled:
        word = "x" if p == 1 else f"x^{p}"
    vit_str = ", ".join(f"{m} {vb[m]['scaled_exponent_at_196'] + shift:.3f}" for m, _ in MODELS)
    headline = (f"exponent of E-RMS ‖{word}‖: paper model exactly {pred:g}; shared X reaches {pred:g}±{TOL} only "
                f"for N ≥ N_reg (up to {worst['regime_start_n']} for {worst['model']}, D={worst['D']}, d={worst['d']}); "
                f"at ViT-Base N=196: {vit_str}; MC agrees on {n_series - len(disagree)}/{n_series} series; "
                + worst_side.headline(wc))
    corrected = (
        f"E‖{word}‖²_F = c(N)²[N(N−1)·m_off + N·m_diag] exactly (m_off = E S_12^{2 * p}, m_diag = E S_11^{2 * p}); "
        f"the growth exponent is {pred:g} at every N only when m_diag = m_off (the paper's independent A, B). "
        f"With shared X it is {pred:g} ± {TOL} only for N ≥ N_reg = ⌈1 − r + |1 − r|/{2 * TOL:g}⌉, r = N* − 1 = m_diag/m_off; "
        f"below N* the diagonal dominates and the scaled norm is nearly flat. N* at ViT-Base (D=768, d=64): "
        + ", ".join(f"{m} {vb[m]['crossover_n']:.4g}" for m, _ in MODELS) + ". "
        + _worst_sentence(wc, word)
    )
    return Outcome(
        verdict=verdict,
        headline=headline,
        tested_statement=(
            f"The expected squared Frobenius norm of φ(S) = {word} (element-wise; and of its Jacobian w.r.t. X, or "
            f"w.r.t. (A, B) in the paper's model) grows so that its root has local exponent d log/d log N within {TOL} "
            f"of {pred:g}, for every N ≥ 2, under the paper's independent A, B and under shared-X models "
            f"(i.i.d., tied, ρ = 0.5-correlated W_Q, W_K; σ_w² = 1/D). The verdict is for this quantifier (in "
            f"expectation); the worst case over inputs of equal energy (every ‖x_i‖ = r, or only ‖X‖_F = r√N) is "
            f"judged beside it (evidence 'worst_case': exact exponents, checked by gradient ascent)."
        ),
        corrected_claim=None if verdict == "HOLDS" else corrected,
        figures=wc_figures,
        evidence={
            "predicted_exponent": pred,
            "tolerance": TOL,
            "exact_profiles": profiles,
            "vit": vit,
            "asymptotic_exponent_matches_all_models": asym_ok,
            "holds_at_every_N_all_models": everywhere,
            "holds_at_every_N_paper_model": paper_everywhere,
            "monte_carlo": {"claimed": claimed, "negative_control": control, "control_prediction": control_pred,
                            "series": n_series, "disagreeing": len(disagree), "agrees": mc_agrees,
                            "negative_control_detected": control_detected, "interval_level": mc.LEVEL},
            "worst_case": wc,
            "other_reading": mp or "p = 1: element-wise and matrix power coincide",
            "note": "O(N) read as an upper bound holds at every N, with the D-, d-dependent constant √(m_off + m_diag).",
        },
    )


def _worst_sentence(wc: dict, word: str) -> str:
    """The corrected claim's worst-case half, from the exact exponents."""
    e = wc["exact_exponents"]
    pred = wc["predicted_exponent"]
    token_ok = wc["verdict_worst_case"]["token"] == "HOLDS"
    fro_ok = wc["verdict_worst_case"]["fro"] == "HOLDS"
    s = (f"Worst case: with every token norm bounded (‖x_i‖ = r, as after LayerNorm) max ‖{word}‖_F and its Jacobian "
         f"grow like N^{e['token']['fro']:g} and N^{e['token']['jac_fro']:g} "
         + ("— the claimed rate, uniformly in N (no regime)" if token_ok else f"— not N^{pred:g}")
         + f"; with only ‖X‖_F = r√N bounded they grow like N^{e['fro']['fro']:g} and N^{e['fro']['jac_fro']:g}"
         + (" (also the claimed rate)." if fro_ok else " (energy concentrated on one or two tokens)."))
    return s


def _contract(p: int, scaled: bool) -> Contract:
    word = ("x/√N" if p == 1 else f"x^{p}/√N") if scaled else ("x" if p == 1 else f"x^{p}")
    pred = "0.5 (∝ √N)" if scaled else "1 (∝ N)"
    return Contract(
        object=f"attention matrix φ(S) = {word} element-wise, S = XW_QW_KᵀXᵀ (or S = ABᵀ); and its Jacobian w.r.t. X "
               "(w.r.t. (A, B) in the paper's model)",
        norm="Frobenius, root of the expected square (E-RMS)",
        randomness="paper: A, B iid N(0, σ²) independent; shared X: rows N(0, I_D), W_Q, W_K N(0, 1/D) iid / tied / ρ=0.5",
        quantifier="in expectation (the verdict); the worst case over ‖x_i‖ = r and over ‖X‖_F = r√N is judged beside it",
        n_range="N ≥ 2 (exact); Monte Carlo N = 8…512 (quick) or …4096 (full); D ∈ {64, 384, 768}, d ∈ {32, 64}",
        predicted_exponent=pred,
        refuted_by="a local exponent outside ±0.05 of the prediction at some N (regime), or a different asymptotic "
                   "exponent (FAILS); Monte Carlo intervals excluding the exact exponent",
    )


def check_thm42(ctx: Context) -> Outcome:
    return _judge(ctx, 1, scaled=False)


def check_cor43(ctx: Context) -> Outcome:
    return _judge(ctx, 1, scaled=True)


def check_thm44(ctx: Context) -> Outcome:
    return _judge(ctx, 3, scaled=False)


def check_cor45(ctx: Context) -> Outcome:
    return _judge(ctx, 3, scaled=True)


def check_other_powers(ctx: Context) -> Outcome:
    """x^p/√N for p = 1…5: N* grows with p under tied/correlated weights; exponent ½ only for N ≫ N*."""
    table = []
    for p in range(1, 6):
        for m, rho in MODELS:
            for name, (D, d, _) in VIT.items():
                pr = exact_profile(p, m, rho, D, d)
                table.append({"p": p, "setting": name, **pr})
    asym_ok = all(t["asymptotic_scaled_exponent"] == 0.5 for t in table)
    everywhere = all(t["regime_start_n"] <= 2 for t in table)
    base = {(t["p"], t["model"]): t for t in table if t["setting"] == "ViT-Base"}
    grows = all(base[(p + 1, "tied")]["crossover_n"] > base[(p, "tied")]["crossover_n"] for p in range(1, 5))
    claims = mc.series(ctx, p=3, scale_policy="inv_sqrt_n") + mc.series(ctx, p=1, scale_policy="inv_sqrt_n")
    agree = sum(1 for s in claims if s["agree"])
    verdict = "FAILS" if not asym_ok else ("HOLDS" if everywhere else "HOLDS_IN_REGIME")
    if not claims or agree < len(claims) - max(1, round(0.01 * len(claims)) + 1):
        verdict = "UNDETERMINED"
    nstar = "; ".join(f"p={p}: tied {base[(p, 'tied')]['crossover_n']:.3g}, ρ=.5 {base[(p, 'corr')]['crossover_n']:.3g}, "
                      f"iid {base[(p, 'iid')]['crossover_n']:.3g}" for p in range(1, 6))
    from theory.worst_case import worst_case_exponent

    worst_table = {p: {c: {q: worst_case_exponent(p, q, c, 0.5) for q in ("fro", "jac_fro", "jac_spec")}
                       for c in ("token", "fro")} for p in range(1, 6)}
    return Outcome(
        verdict=verdict,
        headline=f"x^p/√N → exponent ½ for every p as N → ∞, but N* at ViT-Base grows with p: {nstar}",
        tested_statement="For every integer p ≥ 1 (checked p = 1…5), E-RMS ‖x^p/√N‖_F (element-wise, shared X) has local "
                         f"growth exponent within {TOL} of ½ at every N ≥ 2.",
        corrected_claim="x^p/√N grows like √N for every p, but only for N ≫ N*(p), and N* rises steeply with p under "
                        "tied or correlated W_Q, W_K (the diagonal S_ii = x_iᵀWx_i is a quadratic form with mean tr W); "
                        "under independent W_Q, W_K the diagonal is not special and N* ≈ 2 for every p. For even p the "
                        "attention entries are non-negative, for odd p signed." if verdict != "HOLDS" else None,
        evidence={"table": table, "crossover_increases_with_p_tied": grows, "asymptotic_exponent_half_all": asym_ok,
                  "monte_carlo_series_agreeing": f"{agree}/{len(claims)} (p = 1, 3 from the sweep)",
                  "worst_case_exponents_scaled": worst_table,
                  "worst_case_note": "exact (theory.worst_case): with every ‖x_i‖ = r the worst case of x^p/√N grows "
                                     "like √N for every p; with only ‖X‖_F = r√N like N^(p−½) (‖φ‖_F) and "
                                     "N^(max(p−½,1)−½) (‖J‖_F); checked numerically for p = 1, 3 in the growth claims"},
    )


CLAIMS = [
    Claim("thm4.2-linear", "For φ(x) = x, ‖φ(S)‖_F (and its Jacobian) grows like O(N) when X, Q, K are i.i.d. Gaussian.",
          _contract(1, False), check_thm42),
    Claim("cor4.3-linear-scaled", "φ(x) = x/√N grows like O(√N), like softmax.", _contract(1, True), check_cor43),
    Claim("thm4.4-cubic", "For φ(x) = x³, ‖φ(S)‖_F (and its Jacobian) grows like O(N).", _contract(3, False), check_thm44),
    Claim("cor4.5-cubic-scaled", "φ(x) = x³/√N grows like O(√N).", _contract(3, True), check_cor45),
    Claim("other-powers", "(silent) Only x and x³ are tried; what of other powers p?",
          Contract(object="φ(S) = x^p/√N element-wise, p = 1…5", norm="Frobenius, E-RMS",
                   randomness="paper model; shared X with iid / tied / ρ = 0.5 weights", quantifier="in expectation",
                   n_range="N ≥ 2 at ViT-Base (D=768, d=64) and ViT-Small (D=384, d=64)",
                   predicted_exponent="0.5", refuted_by="a different asymptotic exponent; a regime that depends on p"),
          check_other_powers),
]
