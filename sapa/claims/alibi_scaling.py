"""Ledger question ``alibi-scaling``: does a length-extrapolation bias change the N-scaling of attention norms?

ALiBi (Press, Smith & Lewis 2022, "Train Short, Test Long") adds −m·|i − j| to the logit of query i and key j
before softmax. arXiv 2410.18613 replaces softmax by x^p/√N; for a polynomial the same bias can be read two
ways: added to the logit, (x − m|i − j|)^p/√N, or — what the additive bias *is* for exp — as the factor
e^{−m|i−j|}. Each is audited with :mod:`sapa.theory.relpos` (exact for polynomials in x with position-dependent
coefficients; sums over offsets up to N = 4096) and softmax with and without the bias by Monte Carlo with
exact kernels (:mod:`sapa.empirics.experiments.activation_sampling`; no closed form for row-normalised φ). Verdicts from the calibrated
rules ``growth-upper`` / ``growth-upper-exact`` (exponent ≤ ½ + TOL: softmax's O(√N)) and
``audit-like-softmax``.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

from sapa.ledger import Claim, Context, Contract, Outcome
from sapa.prose import alibi_scaling_words as words

SLOPE = 1 / 16                    # ALiBi's geometric slopes 2^(−8k/H): the middle of the 8-head set
SLOPES_VARIED = (1 / 2, 1 / 256)  # the set's ends (robustness)
D, d = 768, 64                    # ViT-Base head for the closed forms
MC_SIZE = (64, 64)                # Monte Carlo (D, d) for softmax
MC_NS = (64, 128, 256)
MC_TRIALS = 48
POWERS = (1, 3)
PROFILE_NS = tuple(2**k for k in range(1, 15))  # the additive form's local exponents: N → 2N for N = 2 … 16 384
SHARE_AT = 4096                                 # where the bias-only share of E‖φ‖²_F is reported
# the negative control: the factor form times N (E‖φ‖² × N² exactly: its exponent is the factor form's + 1)
CONTROL_TEXT = f"N*exp(-{SLOPE!r}*Abs(i - j))*x**3/sqrt(N)"


def poly_texts(p: int, m: float, x: str = "x") -> dict:
    """The three forms of x^p/√N (``x`` = "(x/8)": on S/√d for the ViT-B head, d = 64)."""
    inner = "x/8" if x == "(x/8)" else x
    return {"none": f"{x}**{p}/sqrt(N)", "additive": f"({inner} - {m!r}*Abs(i - j))**{p}/sqrt(N)",
            "factor": f"exp(-{m!r}*Abs(i - j))*{x}**{p}/sqrt(N)"}


def poly_exponents(text: str) -> dict:
    """Exact secant exponents of E‖φ‖² on a doubling grid up to 4096 (sup and the last), iid ViT-B head."""
    from sapa.theory.activation_audit import model_spec, parse_activation, profile
    from sapa.theory.relpos import N_GRID_J, relpos_profile

    act, spec = parse_activation(text), model_spec("iid", D, d)
    if act.uses_j:
        prof = relpos_profile(act, spec, 64)
        tot = [prof.totals(n)["fro"] for n in N_GRID_J]
    else:
        tot = list(profile(act, spec).totals(list(N_GRID_J))["fro"])
    e = [0.5 * math.log(b / a) / math.log(n2 / n1) for a, b, n1, n2 in zip(tot, tot[1:], N_GRID_J, N_GRID_J[1:])]
    return {"sup": max(e), "asymptotic": e[-1], "at_196_ratio": None, "fro2_at_4096": tot[-1],
            "exponents": e, "N": list(N_GRID_J)}


def additive_profile(p: int, m: float = SLOPE) -> dict:
    """What the additive form's exponent is: its local-exponent profile over N, the limit, and the bias's share.

    Local exponents ½ log(E‖φ‖²(2N)/E‖φ‖²(N))/log 2 from the exact totals of :mod:`sapa.theory.relpos` (the moments
    the readings use) for N = 2 … 16 384; the limit p + ½ from the degree 2p + 1 in N of the bias-only sum
    B_p(N) = Σ_δ 2(N − δ)(mδ)^{2p}/N (sympy, :mod:`sapa.theory.alibi_bias`); the share B_p/E‖φ‖²_F at N = SHARE_AT; the
    offset std(S)/m beyond which the bias outweighs a typical logit (std from the exact second moment of S_12).
    """
    from sapa.theory.alibi_bias import bias_only_fro2, leading_term
    from sapa.theory.alibi_bias import m as m_
    from sapa.theory.activation_audit import model_spec, parse_activation
    from sapa.theory.entry_moments import entry_moments
    from sapa.theory.relpos import relpos_profile

    spec = model_spec("iid", D, d)
    prof = relpos_profile(parse_activation(poly_texts(p, m)["additive"]), spec, 64)
    tot = {n: prof.totals(n)["fro"] for n in (*PROFILE_NS, 2 * PROFILE_NS[-1])}
    local = [0.5 * math.log(tot[2 * n] / tot[n]) / math.log(2) for n in PROFILE_NS]
    degree, coef = leading_term(p)
    bias = bias_only_fro2(p, m, SHARE_AT)
    lead = float(coef.subs(m_, m)) * SHARE_AT ** degree
    return {"N": list(PROFILE_NS), "local_exponents": local, "limit": degree / 2,
            "leading_term": f"{coef} * N**{degree}", "bias_only_fro2": bias, "fro2": tot[SHARE_AT],
            "bias_only_share": bias / tot[SHARE_AT], "leading_over_bias_only": lead / bias,
            "onset_offset": math.sqrt(float(entry_moments(spec, 2).off[2])) / m}


def softmax_monte_carlo(ctx: Context, m: float | None, logit: str = "x/8", key: tuple = ("alibi-scaling",)) -> dict:
    from sapa.empirics.experiments.activation_sampling import sample_fro2
    from sapa.rules.like_softmax import decide, mc_evidence
    from sapa.theory.activation_audit import model_spec, parse_activation

    text = f"exp({logit})" if m is None else f"exp({logit} - {m!r}*Abs(i - j))"
    act, spec = parse_activation(text, "row"), model_spec("iid", *MC_SIZE)
    fro2s = [sample_fro2(act, spec, n, MC_TRIALS, seed=ctx.budget.seed, key=key) for n in MC_NS]
    ev = mc_evidence(MC_NS, fro2s, MC_NS[1])
    return {"activation": text, "exponent_interval": [ev.exp_lo, ev.exp_hi], "ratio_interval_at_128":
            [ev.ratio_lo, ev.ratio_hi], "verdict_like_softmax": decide(ev), "evidence": ev.__dict__,
            "mean_fro2": [float(f.mean()) for f in fro2s]}

# what the words quote: the design of this entry
DESIGN = SimpleNamespace(SLOPE=SLOPE, SLOPES_VARIED=SLOPES_VARIED, POWERS=POWERS, D=D, d=d, MC_NS=MC_NS,
                         SHARE_AT=SHARE_AT, PROFILE_NS=PROFILE_NS, poly_texts=poly_texts)


def check(ctx: Context) -> Outcome:
    """Does ALiBi's bias change the N-scaling of softmax and of x^p/√N? (module docstring)"""
    soft = {"none": softmax_monte_carlo(ctx, None), "alibi": softmax_monte_carlo(ctx, SLOPE)}
    poly = {p: {k: poly_exponents(t) for k, t in poly_texts(p, SLOPE).items()} for p in POWERS}
    add = {p: additive_profile(p) for p in POWERS}
    varied = {repr(m): {p: {k: poly_exponents(t)["asymptotic"] for k, t in poly_texts(p, m).items() if k != "none"}
                        for p in POWERS} for m in SLOPES_VARIED}
    readings = words.readings(DESIGN, verdicts(soft, {p: {k: poly[p][k]["asymptotic"] for k in poly[p]} for p in POWERS},
                                       varied), soft, poly, add, varied)
    decided = all(r.verdict != "UNDETERMINED" for r in readings)
    from sapa.labels import question_verdict

    e_ctrl = poly_exponents(CONTROL_TEXT)["asymptotic"]
    return Outcome(
        verdict="ANSWERED" if decided else "UNDETERMINED",
        readings=readings,
        falsifiability=words.falsifiability(DESIGN, CONTROL_TEXT, e_ctrl, _upper_exact(e_ctrl)),
        robustness=robustness_of(ctx, readings, soft, poly, varied, question_verdict(readings)),
        answer=words.answer(DESIGN, soft, poly, add),
        headline=words.headline(soft, poly, add),
        findings=words.findings(DESIGN, poly, add),
        tested_statement=words.TESTED,
        evidence={"slope": SLOPE, "softmax": soft, "polynomial": {str(p): v for p, v in poly.items()},
                  "additive_profile": {str(p): v for p, v in add.items()},
                  "slopes_varied": varied, "sizes": {"closed_form": {"D": D, "d": d, "N": "2…4096"},
                                                     "monte_carlo": {"D": MC_SIZE[0], "d": MC_SIZE[1], "N": list(MC_NS),
                                                                     "trials": MC_TRIALS}},
                  "command": "sapa audit \"sigmoid(x/8 - log(N) - 0.1*Abs(i - j))\" --model iid --N 64 --D 768 --d 64 "
                             "--logit-scale S"},
    )


def _upper_exact(e: float, tol: float | None = None) -> str:
    from sapa.rules.growth import UpperEvidence, decide_upper

    ev = UpperEvidence(0.5, e, e, True)
    return decide_upper(ev) if tol is None else decide_upper(ev, tol=tol)


def verdicts(soft: dict, asym: dict, varied_m: dict, tol: float | None = None) -> list[str]:
    """The readings' verdicts, in reading order: softmax without and with the bias (Monte Carlo intervals, rule
    growth-upper), x^p/√N per p without a bias, as a factor, added (exact, growth-upper-exact), the varied slopes."""
    from sapa.rules.growth import TOL, UpperEvidence, decide_upper

    tol = TOL if tol is None else tol
    out = [decide_upper(UpperEvidence(0.5, *soft[k]["exponent_interval"], False), tol=tol) for k in ("none", "alibi")]
    for p in POWERS:
        out += [_upper_exact(asym[p][k], tol) for k in ("none", "factor", "additive")]
    return out + [_upper_exact(max(v[p]["factor"] for v in varied_m.values() for p in POWERS), tol)]


def robustness_of(ctx: Context, readings, soft: dict, poly: dict, varied_m: dict, answer_verdict: str) -> dict:
    """The answer (every reading decided, and how) under ALiBi's end slopes, the tolerance ±20 %, the other logit
    convention and a second Monte Carlo stream for softmax."""
    from sapa.conditions import not_applicable, question_row, robustness, threshold_variants
    from sapa.rules.growth import TOL

    names, base = [r.name for r in readings], [r.verdict for r in readings]  # the rows show each change by name
    asym = {p: {k: poly[p][k]["asymptotic"] for k in poly[p]} for p in POWERS}
    rows = [question_row(words.slope_condition(m, SLOPE), names, base,
                         verdicts(soft, {p: {"none": asym[p]["none"], **v[p]} for p in POWERS}, varied_m),
                         "polynomial forms at this m; softmax at the headline m") for m, v in varied_m.items()]
    rows += [question_row(f"exponent tolerance {t:.3g} (±20 % of {TOL})", names, base, verdicts(soft, asym, varied_m, t))
             for t in threshold_variants(TOL)]
    scaled = {p: {k: poly_exponents(t)["asymptotic"] for k, t in poly_texts(p, SLOPE, "(x/8)").items()} for p in POWERS}
    soft_s = {"none": softmax_monte_carlo(ctx, None, "x"), "alibi": softmax_monte_carlo(ctx, SLOPE, "x")}
    rows.append(question_row("logit convention: x^p/√N on S/√d (= S/8), softmax on S (no 1/8)", names, base,
                             verdicts(soft_s, scaled, varied_m), words.convention_note(DESIGN, scaled, soft_s)))
    soft2 = {k: softmax_monte_carlo(ctx, m, key=("alibi-scaling", "robustness")) for k, m in (("none", None), ("alibi", SLOPE))}
    rows.append(question_row("another seed (a second, independent Monte Carlo stream for softmax)", names, base,
                             verdicts(soft2, asym, varied_m), "the polynomial readings are exact"))
    rows.append(not_applicable("budget full", "the design is the same in both budgets"))
    return robustness(answer_verdict, rows)


CONTRACT = Contract(
    object="φ(S) with ALiBi's position bias: softmax(S/8 − m|i−j|) row-wise; x^p/√N with the bias added to the logit or "
           "as the factor e^(−m|i−j|); p = 1, 3",
    norm="Frobenius, E-RMS",
    randomness="shared X, rows N(0, I_D); W_Q, W_K N(0, 1/D) independent",
    quantifier="in expectation",
    n_range="exact N = 2…4096 (D = 768, d = 64); Monte Carlo N = 64…256 (D = d = 64) for softmax",
    predicted_exponent="≤ 0.5 (softmax's O(√N)) for each form; the question is whether the bias changes the exponent",
    refuted_by="an exponent above 0.55 (a form that leaves O(√N))",
    logit_scale="S",
    logit_note="x^p/√N on S (the paper's theory); softmax at S/√d = S/8; exponents do not depend on a constant factor",
)

CLAIM = Claim("alibi-scaling", "(question; Press et al. 2022's ALiBi beside arXiv 2410.18613) Does a length-extrapolation "
              "bias −m|i − j| change the N-scaling of softmax and of x^p/√N?", CONTRACT, check, kind="question")
