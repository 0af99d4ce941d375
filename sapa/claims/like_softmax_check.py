"""The check the other papers' entries share (relu-over-n, sigmoid-bias-logn, poly4-normalised): "with this scale the
attention norm grows like softmax's".

Each is read as "E-RMS ‖φ(S)‖_F = O(√N), with a constant within K× of softmax's bound √N" (``audit-like-softmax``),
first with independent W_Q, W_K (the papers' initialisation: the charitable reading), beside it tied weights, the rate
and the size apart, the rate alone and the worst case over token-bounded inputs. Evidence: closed form / quadrature
at ViT-Base sizes (:mod:`sapa.theory.activation_audit`), Monte Carlo with exact kernels that must agree with it (|z| from the
sample size, ``mc-agreement`` gate; a row-normalised φ has no closed form: Monte Carlo is its evidence, the bound
‖P‖_F ≤ √N its gate), and the comparative figure (:mod:`sapa.evidence.comparative_audit`). The activation is the
family's row of ``theory/families.py`` at the papers' own logits qᵀk/√d (x → x/8 at d = 64). Not an entry itself:
the entry modules call :func:`check_like_softmax`.
"""

from __future__ import annotations

import math

from sapa.evidence import monte_carlo as mc_log
from sapa.ledger import Context, Outcome
from sapa.prose import like_softmax_words as words
from sapa.theory.families import family

VIT_B = (768, 64, 196)
MC_SIZE = (64, 64)          # Monte Carlo (D, d): cheap, and the exact comparison is size-independent
MC_NS = (32, 64)            # exact-vs-MC comparisons at these N
MC_TRIALS = 400
ROW_NS = (64, 128, 256)     # normalised activations: the rule's Monte Carlo design (sapa.rules.like_softmax)
ROW_TRIALS = 48
Z_GATE = 2.5758293035489004  # two-sided 99 %
NOMINAL = 0.99
LOGIT = "x/8"               # the papers' logits qᵀk/√d at d = 64
MODELS = ("iid", "tied")


def activation_of(fam: str) -> tuple[str, str]:
    """(expression, normalisation) the entry audits: the family at the papers' logits."""
    return family(fam).at_logit(LOGIT), family(fam).normalize


def check_like_softmax(ctx: Context, cid: str, fam: str, claimed: str) -> Outcome:
    """Audit the family ``fam`` as entry ``cid`` (module docstring): per weight model, the gate, the readings."""
    from sapa.evidence.comparative_audit import figure
    from sapa.rules.like_softmax import N_MIN
    from sapa.theory.activation_audit import parse_activation, worst_case

    text, norm = activation_of(fam)
    act = parse_activation(text, norm)
    per_model, profiles, comparisons = {}, {}, []
    for m in MODELS:
        if norm == "none":
            per_model[m], profiles[m] = exact_model(act, m, N_MIN)
            comparisons += exact_against_monte_carlo(ctx, cid, act, m)
        else:
            per_model[m], profiles[m] = row_model(ctx, cid, act, m), (None, None, None)
            comparisons.append({"model": m, "N": max(ROW_NS), "quantity": "fro2 ≤ N (theory: ‖P‖_F ≤ √N)",
                                "z": 0.0 if per_model[m].pop("bound_ok") else math.inf})
        _rate_and_size(per_model[m])
    gate, _, missed = mc_log.agreement_gate((abs(c["z"]) < Z_GATE for c in comparisons), NOMINAL)
    wc = worst_case(act, N=VIT_B[2])
    rate = _rate_reading_evidence(per_model, norm)
    readings = words.readings(act, norm, N_MIN, per_model, profiles, rate, _worst_verdict(wc), wc, _design())
    fal, robust, regime = conditions(ctx, cid, fam, per_model, profiles, readings, N_MIN)
    if regime is None and any(r.verdict == "HOLDS_IN_REGIME" for r in readings):
        regime = regime_of(per_model, N_MIN)
    source = family(fam).source
    return Outcome(
        verdict=readings[0].verdict if gate == "HOLDS" else "UNDETERMINED", readings=readings,
        rule="audit-like-softmax", figures=figure(ctx), falsifiability=fal, robustness=robust, regime=regime,
        headline=words.headline(source, readings, per_model, profiles, N_MIN, wc["exponent"], comparisons, missed, norm,
                                _design()),
        findings=words.findings(per_model, norm, VIT_B[2]), tested_statement=words.tested(source, claimed, act, norm, VIT_B),
        corrected_claim=None,
        evidence={"source": source, "activation": text, "normalize": norm, "per_model": per_model,
                  "monte_carlo": {"comparisons": comparisons, "missed_at_99": missed,
                                  "gate": {"rule": "mc-agreement", "verdict": gate}, "first_pass": True},
                  "worst_case": {k: v for k, v in wc.items() if k != "B"}, "rate_evidence": rate["evidence"],
                  "command": words.command(text, norm)},
    )


def _design() -> dict:
    """The sizes the words quote (read at call time: a test may shrink them)."""
    return {"mc_size": MC_SIZE, "mc_ns": MC_NS, "row_ns": ROW_NS, "vit_b": VIT_B, "z_gate": Z_GATE, "nominal": NOMINAL}


def contract(text: str, norm: str):
    """The entry's contract (:func:`sapa.prose.like_softmax_words.contract`) at this check's sizes."""
    return words.contract(text, norm, _design())


def exact_model(act, m: str, n_min: float) -> tuple[dict, tuple]:
    """Closed form / quadrature at ViT-Base for one weight model: the per-model evidence and (profile, audit, windows)."""
    from sapa.regime import exponent_windows
    from sapa.rules.like_softmax import A, TOL, LikeSoftmaxEvidence, decide
    from sapa.theory.activation_audit import audit, model_spec, profile

    D, d, N = VIT_B
    prof_vit = profile(act, model_spec(m, D, d))
    a = audit(act, model_spec(m, D, d), N, prof=prof_vit)
    win = exponent_windows(prof_vit, A + TOL, n_min)
    ev = LikeSoftmaxEvidence(win["sup_from_n_min"], win["sup_from_n_min"], a.asymptotic_exponent_all,
                             a.constant_vs_softmax, a.constant_vs_softmax, a.method == "exact")
    return {"method": a.method, "error_bound": a.error_bound, "growth_exponent_at_196": a.growth_exponent,
            "sup_exponent_from_n_min": win["sup_from_n_min"], "n_min": n_min,
            "windows_above_edge": win["windows"], "windows_by_quantity": win["by_quantity"],
            "sup_exponent": a.sup_growth_exponent, "sup_at": list(a.sup_growth_at),
            "asymptotic_exponent": a.asymptotic_exponent, "asymptotic_exponent_all": a.asymptotic_exponent_all,
            "crossover_n": a.crossover_n, "constant_vs_softmax": a.constant_vs_softmax,
            "growth_exponent_jac": a.growth_exponent_jac, "growth_exponent_jac_s": a.growth_exponent_jac_s,
            "verdict": decide(ev), "evidence": ev.__dict__}, (prof_vit, a, win)


def exact_against_monte_carlo(ctx: Context, cid: str, act, m: str) -> list[dict]:
    """|z| of Monte Carlo means against the exact E‖·‖² at MC_NS (small D, d), each logged as a first-pass check."""
    from sapa.empirics.experiments.activation_sampling import sample_norms, z_scores
    from sapa.theory.activation_audit import model_spec, profile

    spec = model_spec(m, *MC_SIZE)
    prof = profile(act, spec)
    out = []
    for n in MC_NS:
        tot = prof.totals([n])
        mc = sample_norms(act, spec, n, MC_TRIALS, seed=ctx.budget.seed, key=("ledger", cid))
        z = z_scores(mc, {"fro2": tot["fro"][0], "jac_s2": tot["jac_s"][0], "jac2": tot["jac"][0]})
        out += [{"model": m, "N": n, "quantity": q, **v} for q, v in z.items()]
        for q, v in z.items():  # first-pass coverage counts these intervals too (mean ± 2.58·se vs exact)
            mc_log.record(ctx, f"audit/{cid}/{m}/D={MC_SIZE[0]}/N={n}/{q}", covered=abs(v["z"]) < Z_GATE,
                          nominal=NOMINAL, detail={"z": v["z"], "mean": v["mean"], "se": v["se"],
                                                   "expected": v["expected"], "trials": MC_TRIALS,
                                                   "draws": f"audit/{cid}/{m}/N={n}"})
    return out


def row_model(ctx: Context, cid: str, act, m: str) -> dict:
    """A row-normalised φ (no closed form): the rule's Monte Carlo design, and whether every draw keeps ‖P‖²_F ≤ N."""
    from sapa.empirics.experiments.activation_sampling import sample_fro2
    from sapa.rules.like_softmax import decide, mc_evidence
    from sapa.theory.activation_audit import model_spec

    spec = model_spec(m, *MC_SIZE)
    fro2s = [sample_fro2(act, spec, n, ROW_TRIALS, seed=ctx.budget.seed, key=("ledger", cid)) for n in ROW_NS]
    ev = mc_evidence(ROW_NS, fro2s, ROW_NS[1])
    return {"method": "monte_carlo", "D": MC_SIZE[0], "d": MC_SIZE[1], "Ns": list(ROW_NS), "trials": ROW_TRIALS,
            "exponent_interval": [ev.exp_lo, ev.exp_hi], "constant_interval_at_128": [ev.ratio_lo, ev.ratio_hi],
            "verdict": decide(ev), "evidence": ev.__dict__,
            "bound_ok": all(float(f.max()) <= n * (1 + 1e-12) for f, n in zip(fro2s, ROW_NS))}  # rows are probability vectors


def _rate_and_size(pm: dict) -> None:
    """The rate and size readings' verdicts of one model (and why it is not like softmax), added to ``pm``."""
    from sapa.rules.like_softmax import LikeSoftmaxEvidence, decide_rate, decide_size, why_failed

    ev = LikeSoftmaxEvidence(**pm["evidence"])
    pm["rate_verdict"], pm["size_verdict"] = decide_rate(ev), decide_size(ev)
    pm["why_not_like_softmax"] = why_failed(pm["rate_verdict"], pm["size_verdict"])


def _rate_reading_evidence(per_model: dict, norm: str) -> dict:
    """The rate-only reading (exact: the exponent as N → ∞; row-normalised: the Monte Carlo intervals) and, for an
    element-wise φ, the uniform reading (the sup over N of the local exponent)."""
    from sapa.rules.growth import UpperEvidence, decide_upper

    out = {"evidence": [(pm.get("sup_exponent"), pm.get("exponent_interval")) for pm in per_model.values()]}
    if norm == "none":
        # O(√N) is asymptotic: the largest exponent at N = 2²⁰ over the norm and both Jacobians (the exponents
        # settle well before that). "At every N ≥ 2" is the stronger, uniform reading: the sup over N.
        asym_all = max(pm["asymptotic_exponent_all"] for pm in per_model.values())
        sup_all = max(pm["sup_exponent"] for pm in per_model.values())
        return {**out, "verdict": decide_upper(UpperEvidence(0.5, asym_all, asym_all, True)),
                "rule": "growth-upper-exact", "uniform": decide_upper(UpperEvidence(0.5, sup_all, sup_all, True))}
    lo = max(pm["exponent_interval"][0] for pm in per_model.values())
    hi = max(pm["exponent_interval"][1] for pm in per_model.values())
    return {**out, "verdict": decide_upper(UpperEvidence(0.5, lo, hi, False)), "rule": "growth-upper", "uniform": None}


def _worst_verdict(wc: dict) -> str:
    """growth-upper-exact on an exact worst-case exponent; a bracket's upper end within ½ + TOL also HOLDS."""
    from sapa.rules.growth import UpperEvidence, decide_upper
    from sapa.rules.like_softmax import TOL

    e = wc["exponent"]
    if wc["exponent_is_exact"]:
        return decide_upper(UpperEvidence(0.5, e, e, True))
    return "HOLDS" if e <= 0.5 + TOL else "UNDETERMINED"


def regime_of(per_model: dict, n_min: float) -> dict:
    """The regime of every HOLDS_IN_REGIME reading: its boundary, the practical minimum and every window."""
    windows = {m: pm["windows_above_edge"] for m, pm in per_model.items() if pm.get("windows_above_edge") is not None}
    return {"boundary": words.regime_boundary(windows, n_min), "n_min": n_min, "windows": windows}


def exponent_sup(prof, n_min: float) -> float:
    """sup of the local exponents (norm and Jacobians) from ``n_min`` on (:func:`sapa.regime.exponent_windows`)."""
    from sapa.regime import exponent_windows
    from sapa.rules.like_softmax import A, TOL

    return exponent_windows(prof, A + TOL, n_min, per_quantity=False)["sup_from_n_min"]


def shifted_rate(prof, shift: float, n_min: float, asym: float) -> tuple[str, float]:
    """The rate rule on φ·N^shift: the same profile, every local exponent + shift (E‖·‖² × N^(2·shift) exactly)."""
    from sapa.regime import exponent_windows
    from sapa.rules.like_softmax import A, TOL, LikeSoftmaxEvidence, decide_rate

    class _Shifted:
        def exponents(self, N):
            return {q: v + shift for q, v in prof.exponents(N).items()}

    e = exponent_windows(_Shifted(), A + TOL, n_min, per_quantity=False)["sup_from_n_min"]
    return decide_rate(LikeSoftmaxEvidence(e, e, asym + shift, 0.0, 0.0, True)), e


def conditions(ctx: Context, cid: str, fam: str, per_model: dict, profiles: dict, readings, n_min: float):
    """(falsifiability, robustness, regime) of one audited entry, all recomputed from this run's evidence."""
    from sapa.conditions import robustness, threshold_variants, varied
    from sapa.rules.like_softmax import K, TOL, LikeSoftmaxEvidence, decide

    ev = LikeSoftmaxEvidence(**per_model["iid"]["evidence"])
    if family(fam).normalize == "row":
        fal, rows = words.row_falsifiability(), [words.row_convention_row(per_model["iid"]["verdict"])]
    else:
        fal, rows = _element_wise_conditions(cid, fam, per_model, profiles, ev, n_min)
    rows += [varied(f"size factor {k:g} (±20 % of {K:g})", decide(ev, factor=k)) for k in threshold_variants(K)]
    rows += [varied(f"exponent tolerance {t:.3g} (±20 % of {TOL})", decide(ev, tol=t)) for t in threshold_variants(TOL)]
    if family(fam).normalize == "row":
        rows += words.row_seed_and_budget_rows(_second_stream(ctx, cid, fam), ROW_TRIALS, len(ROW_NS), cid)
        return fal, robustness(readings[0].verdict, rows), None
    prof = profiles["iid"][0]
    for n in (8, 32):  # the practical minimum N varied
        e = exponent_sup(prof, n)
        rows.append(varied(f"practical minimum N = {n} (declared {n_min:g})",
                           decide(LikeSoftmaxEvidence(e, e, ev.asymptotic, ev.ratio_lo, ev.ratio_hi, ev.exact))))
    rows += words.exact_seed_and_budget_rows()
    regime = regime_of(per_model, n_min) if any(r.verdict == "HOLDS_IN_REGIME" for r in readings) else None
    return fal, robustness(readings[0].verdict, rows), regime


def _element_wise_conditions(cid: str, fam: str, per_model: dict, profiles: dict, ev, n_min: float):
    """(falsifiability, the logit-convention row) of an element-wise φ: the control φ·N^shift through the rate rule,
    the size control 5 % below the computed ratio; ReLU's homogeneity gives the other convention exactly."""
    from sapa.rules.like_softmax import A, TOL, LikeSoftmaxEvidence, decide, decide_size

    prof, a, _ = profiles["iid"]
    asym = a.asymptotic_exponent_all
    shift = round(max(0.1, A + 2 * TOL - asym), 2)  # a false variant whose rate sits 2·TOL above ½
    ctrl, e_ctrl = shifted_rate(prof, shift, n_min, asym)
    ratio = per_model["iid"]["constant_vs_softmax"]
    size_ctrl = decide_size(LikeSoftmaxEvidence(0, 0, 0, ratio, ratio, True), ratio / words.SIZE_CONTROL_FACTOR)
    fal = words.element_wise_falsifiability(activation_of(fam)[0], shift, ctrl, e_ctrl, n_min, ratio, size_ctrl)
    if cid == "relu-over-n":  # ReLU is positively homogeneous: ReLU(x)/N = 8·ReLU(x/8)/N, exponents unchanged
        ev_s = LikeSoftmaxEvidence(ev.exp_lo, ev.exp_hi, ev.asymptotic, 8 * ev.ratio_lo, 8 * ev.ratio_hi, ev.exact)
        return fal, [words.relu_convention_row(decide(ev_s), 8 * ev.ratio_hi)]
    return fal, [words.no_convention_row()]


def _second_stream(ctx: Context, cid: str, fam: str) -> str:
    """The row-normalised verdict on an independent second Monte Carlo stream (iid)."""
    from sapa.empirics.experiments.activation_sampling import sample_fro2
    from sapa.rules.like_softmax import decide, mc_evidence
    from sapa.theory.activation_audit import model_spec, parse_activation

    act = parse_activation(activation_of(fam)[0], "row")
    spec = model_spec("iid", *MC_SIZE)
    fro2s = [sample_fro2(act, spec, n, ROW_TRIALS, seed=ctx.budget.seed, key=("ledger", cid, "robustness"))
             for n in ROW_NS]
    return decide(mc_evidence(ROW_NS, fro2s, ROW_NS[1]))
