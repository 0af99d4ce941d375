"""The check the four growth entries share (thm4.2-linear, cor4.3-linear-scaled, thm4.4-cubic, cor4.5-cubic-scaled).

Verdict (rules in ``sapa.rules.growth``): the paper writes O(·), an upper bound, and its quantifier is an
expectation, so the headline reading is "the local exponent never exceeds the prediction (+TOL)" under every weight
model (``growth-upper-exact``). Beside it: the tight rate at every N (``growth-tight``: HOLDS_IN_REGIME with shared
X, N ≥ N_reg), the paper's own model, the Jacobian w.r.t. S (like-for-like with Eq. 4.2), the two worst cases and,
for x^p/√N, the size against softmax's √N at ViT-Base (``size-within-factor``). The entry is UNDETERMINED if the
Monte Carlo disagrees with the exact exponents (``mc-agreement`` on first-pass intervals), the negative control (the
opposite scaling) is not detected, or the worst-case theory and numerics disagree. Not an entry itself: the four
entry modules call :func:`check_growth`.
"""

from __future__ import annotations

import math

import numpy as np

from sapa.evidence import growth_profiles as gp
from sapa.evidence import monte_carlo as mc
from sapa.ledger import Context, Outcome, Reading
from sapa.prose import growth_words as words
from sapa.theory.families import CONST, INV_SQRT_N

ORDER = {"HOLDS": 0, "HOLDS_IN_REGIME": 1, "UNDETERMINED": 2, "FAILS": 3}  # the least favourable verdict is the max
CONTROL_SHIFT = 0.1  # the false variant φ·N^0.1: E‖·‖² × N^0.2 exactly, every local exponent + 0.1


def upper(pred: float, value: float, tol: float | None = None) -> str:
    """growth-upper-exact on one exact exponent."""
    from sapa.rules.growth import UpperEvidence, decide_upper

    ev = UpperEvidence(predicted=pred, lo=value, hi=value, exact=True)
    return decide_upper(ev) if tol is None else decide_upper(ev, tol=tol)


def tight(pred: float, r: float, shift: float, tol: float | None = None) -> tuple[str, float]:
    """growth-tight verdict for e(N) = ½N/(N−1+r) + shift on N = 2…2²⁰, and the regime start."""
    from sapa.rules.growth import TightEvidence, decide_tight

    N = np.geomspace(2, 2**20, 200)
    ev = TightEvidence(predicted=pred, N=tuple(N), local=tuple(0.5 * N / (N - 1 + r) + shift), asymptotic=0.5 + shift)
    return decide_tight(ev) if tol is None else decide_tight(ev, tol=tol), float(gp.regime_start(r))


def check_growth(ctx: Context, p: int, scaled: bool) -> Outcome:
    """Exact profiles, readings, the Monte Carlo gate and the worst case of x^p (or x^p/√N) → the entry's Outcome."""
    from sapa.evidence import growth_worst_case as worst_side

    shift = 0.0 if scaled else 0.5
    pred, word = 0.5 + shift, words.word(p, scaled)
    profiles = [gp.exact_profile(p, m, rho, D, d) for m, rho in gp.MODELS for D, d in gp.SETTINGS]
    vit = {name: {m: gp.exact_profile(p, m, rho, D, d) for m, rho in gp.MODELS} for name, (D, d, _) in gp.VIT.items()}
    # O(·) is asymptotic: the headline reads the exponent as N → ∞ (½ + shift whenever m_off > 0); the sup over N of
    # the local exponent (a uniform, stronger reading) is reported beside it and is no larger here.
    r_all = [pr["crossover_n"] - 1 for pr in profiles] + [pr["crossover_n_jac"] - 1 for pr in profiles]
    sup_e = max(gp.sup_local_exponent(r, shift) for r in r_all)
    asym_e = max(max(pr["asymptotic_scaled_exponent"], pr["asymptotic_scaled_exponent_jac"]) for pr in profiles) + shift
    jac_s_r = gp.jac_s_crossovers(p)
    sup_jac_s = max(gp.sup_local_exponent(r, shift) for r in jac_s_r)
    # Monte Carlo: the claimed activation, and the opposite scaling as negative control (exact-regime models only)
    claimed, control = (mc.series(ctx, p=p, scale_policy=s) for s in
                        ((INV_SQRT_N, CONST) if scaled else (CONST, INV_SQRT_N)))
    gate, n_indep, miss_indep = gp.mc_gate(claimed + control)
    judged = [s for s in claimed + control if s["agree"] is not None]
    ctrl = [s for s in control if s["weight_model"] in ("paper", "iid")]
    control_detected = bool(ctrl) and all(not (s["mc_ci"][0] <= pred <= s["mc_ci"][1]) for s in ctrl)
    wc, wc_figures = worst_side.evidence(ctx, p, scaled)
    consts = gp.constants(p, scaled)

    verdicts = {"upper": upper(pred, asym_e), "jac_s": upper(pred, sup_jac_s),
                "tight": max((tight(pred, pr["crossover_n"] - 1, shift)[0] for pr in profiles), key=ORDER.get),
                "tight_paper": max((tight(pred, pr["crossover_n"] - 1, shift)[0] for pr in profiles
                                    if pr["model"] == "paper"), key=ORDER.get),
                **{f"worst_{c}": upper(pred, max(wc["exact_exponents"][c]["fro"], wc["exact_exponents"][c]["jac_fro"]))
                   for c in ("token", "fro")}}
    readings = words.growth_readings(p, scaled, pred, verdicts, asym_e, sup_e, sup_jac_s, profiles, wc)
    if scaled:
        readings = readings + size_readings(consts, word)
    agree = bool(judged) and gate == "HOLDS" and control_detected and wc["theory_and_numerics_agree"]
    verdict = readings[0].verdict if agree else "UNDETERMINED"  # the three kinds of evidence must agree
    n_agree = len(judged) - sum(s["agree"] is False for s in claimed + control)
    return Outcome(
        verdict=verdict, readings=readings, rule="growth-upper-exact", figures=wc_figures,
        findings=words.growth_findings(p, scaled, word, readings, consts, vit),
        headline=words.growth_headline(scaled, asym_e, sup_e, profiles, vit, consts, readings, n_agree, len(judged),
                                       worst_side.headline(wc)),
        tested_statement=words.growth_tested(word, pred),
        corrected_claim=None if all(rd.verdict == "HOLDS" for rd in readings) else
        words.growth_corrected(p, scaled, word, pred, vit, wc),
        falsifiability=words.growth_falsifiability(word, scaled, pred, CONTROL_SHIFT,
                                                   upper(pred, asym_e + CONTROL_SHIFT), asym_e + CONTROL_SHIFT),
        robustness=_robustness(consts, word, scaled, pred, asym_e, verdicts["upper"]),
        evidence=_evidence(scaled, pred, sup_e, asym_e, profiles, vit, consts, jac_s_r, claimed, control,
                           (gate, n_indep, miss_indep), control_detected, wc, gp.matrix_power_reading(ctx, p)),
    )


def _evidence(scaled: bool, pred: float, sup_e: float, asym_e: float, profiles: list, vit: dict, consts: dict,
              jac_s_r: list, claimed: list, control: list, gate: tuple, control_detected: bool, wc: dict,
              mp: dict) -> dict:
    """The numbers behind the verdict: exact profiles and constants, the Monte Carlo gate, the worst case."""
    judged = [s for s in claimed + control if s["agree"] is not None]
    return {
        "predicted_exponent": pred,
        "tolerance": gp.TOL,
        "sup_local_exponent_all_models": sup_e,
        "asymptotic_exponent_all_models": asym_e,
        "exact_profiles": profiles,
        "vit": vit,
        "constants_vs_softmax": consts,
        "asymptotic_exponent_matches_all_models": all(
            pr["asymptotic_scaled_exponent"] == 0.5 == pr["asymptotic_scaled_exponent_jac"] for pr in profiles),
        "holds_at_every_N_all_models": all(pr["regime_start_n"] <= 2 and pr["regime_start_n_jac"] <= 2
                                           for pr in profiles),
        "holds_at_every_N_paper_model": all(pr["regime_start_n"] <= 2 for pr in profiles if pr["model"] == "paper"),
        "jacobian_wrt_S_crossover_minus_1": jac_s_r,
        "monte_carlo": {"claimed": claimed, "negative_control": control, "control_prediction": 1.0 if scaled else 0.5,
                        "series": len(judged), "disagreeing": sum(s["agree"] is False for s in claimed + control),
                        "agrees": bool(judged) and gate[0] == "HOLDS",
                        "gate": {"rule": "mc-agreement", "verdict": gate[0], "independent_draws": gate[1],
                                 "missed": gate[2]},
                        "negative_control_detected": control_detected, "interval_level": mc.LEVEL,
                        "first_pass": True},
        "worst_case": wc,
        "other_reading": mp or "p = 1: element-wise and matrix power coincide",
    }


def size_readings(consts: dict, word: str, factor: float | None = None) -> tuple[Reading, ...]:
    """The size readings of x^p/√N at ViT-Base (rule ``size-within-factor``): logits S/√d first, the paper's S beside.

    The same standard as the other papers' activations: E-RMS ‖φ‖_F within K× of softmax's bound √N (K declared
    once in :mod:`sapa.rules.like_softmax`). Exact evidence: a zero-width ratio interval.
    """
    from sapa.rules.like_softmax import SIZE_FACTOR, LikeSoftmaxEvidence, decide_size

    K = SIZE_FACTOR if factor is None else factor
    cb = consts["ViT-Base"]["models"]
    out = []
    for key, conv in (("ratio_exact_s_over_sqrt_d", "S/√d"), ("ratio_exact", "S, the paper's")):
        for m in ("iid", "tied"):
            r = cb[m][key]
            verdict = decide_size(LikeSoftmaxEvidence(math.nan, math.nan, math.nan, r, r, True), K)
            out.append(words.size_reading(word, m, conv, K, r, verdict))
    return tuple(out)


def _robustness(consts: dict, word: str, scaled: bool, pred: float, asym_e: float, v_upper: str) -> dict:
    """The headline under the other logit convention and the tolerance ±20 %; x^p/√N's size readings at K ±20 %."""
    from sapa.conditions import not_applicable, not_run, robustness, threshold_variants, varied
    from sapa.rules.growth import TOL as G_TOL
    from sapa.rules.like_softmax import SIZE_FACTOR

    rows = [varied("logit convention S/√d (transformers) instead of S", upper(pred, asym_e),
                   "exponents invariant: S/√d multiplies every norm by d^(−p/2), a constant in N")]
    rows += [varied(f"tolerance {t:.3g} (±20 % of {G_TOL})", upper(pred, asym_e, tol=t))
             for t in threshold_variants(G_TOL)]
    rows.append(not_applicable("seed", "exact (closed-form moments); the Monte Carlo gate's sweep is the run's one "
                                       "sample, judged on its first pass"))
    rows.append(not_run("budget full", "the headline reading is exact and does not depend on the budget; the "
                                       "Monte Carlo gate's grid does (N up to 4096)"))
    if scaled:
        for k in threshold_variants(SIZE_FACTOR):
            rows += [varied(f"size factor {k:g} (±20 % of {SIZE_FACTOR:g})", r.verdict, reading=r.name)
                     for r in size_readings(consts, word, k)]
        rows += [varied(f"size factor {SIZE_FACTOR:g} (declared)", r.verdict, reading=r.name)
                 for r in size_readings(consts, word)]
    return robustness(v_upper, rows)
