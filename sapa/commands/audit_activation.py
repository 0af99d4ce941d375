"""``sapa audit EXPR``: the N-scaling of any attention activation, wired from theory, empirics and the rules.

Exact (polynomial φ) or quadrature (other element-wise φ) expectations come from
:mod:`sapa.theory.activation_audit`; row-normalised φ, and φ whose row-index dependence is not a factor, go to Monte
Carlo with exact kernels (:mod:`sapa.empirics.experiments.activation_sampling`); the verdict "grows like softmax" is the calibrated
rule ``audit-like-softmax`` (:mod:`sapa.rules.like_softmax`). Every result says which ``method`` produced it.
"""

from __future__ import annotations

import math
import time

import numpy as np

from sapa.empirics.montecarlo.stats import loglog_slope
from sapa.commands.audit_conventions import logit_substituted
from sapa.theory.activation_audit import (
    N_GRID,
    Activation,
    ModelSpec,
    audit,
    model_spec,
    parse_activation,
    profile,
    worst_case,
)

__all__ = ["NAMED_SIZES", "RANGE_N", "mc_grid", "run_audit"]

# Named sizes (token width D, head width d, tokens N): ViT-Base/Small at 224² with 16² patches, and
# all-MiniLM-L6-v2's heads (D = 384, d = 32) at the ledger's longest real-text prefix.
NAMED_SIZES = {"ViT-B": (768, 64, 196), "ViT-S": (384, 64, 196), "MiniLM head": (384, 32, 256)}
RANGE_N = (16, 64, 196, 1024, 4096, 16384)
MC_TRIALS = 200  # default Monte Carlo trials per N (row-normalised activations)


def mc_grid(N: int) -> tuple[int, ...]:
    """The Monte Carlo grid around N for the local exponent: N/2, N, 2N (at least 2 tokens)."""
    return tuple(sorted({max(2, N // 2), N, 2 * N}))


def _verdict_exact(a, prof, size_factor: float, n_min: float) -> tuple[str, dict, dict]:
    """Rate and size readings from exact / quadrature evidence: the sup of the local exponent from ``n_min`` on."""
    from sapa.regime import exponent_windows
    from sapa.rules.like_softmax import A, TOL, LikeSoftmaxEvidence

    w = 0.5 * a.error_bound
    win = exponent_windows(prof, A + TOL, n_min)
    win.update({"n_lo": 2.0, "n_hi": 2.0**20, "n_hi_text": "2²⁰"})
    sup = win["sup_from_n_min"]
    ev = LikeSoftmaxEvidence(sup - w, sup + w, a.asymptotic_exponent,
                             a.constant_vs_softmax * (1 - w), a.constant_vs_softmax * (1 + w), a.method == "exact")
    return *_readings(ev, size_factor, win), ev.__dict__


def windows_words(win: dict) -> str:
    """Every window where the local exponent exceeds its edge, in words, over the examined range of ``win``
    (``n_lo``…``n_hi``): 'local exponent > 0.55 for N ≤ 7.52 (peak 0.838 at N = 2, below N_min = 16)' or 'never'."""
    n_lo, n_hi = win.get("n_lo", 2.0), win.get("n_hi", 2.0**20)
    hi_text = win.get("n_hi_text", f"{n_hi:g}")
    if not win["windows"]:
        return f"local exponent never above {win['edge']:.2f} for N = {n_lo:g}…{hi_text}"
    parts = []
    for x in win["windows"]:
        span = (f"N ≤ {x['to']:.3g}" if x["from"] <= n_lo * (1 + 1e-9) else
                f"N ≥ {x['from']:.3g}" if x["to"] >= n_hi * (1 - 1e-9) else f"N ≈ {x['from']:.4g}–{x['to']:.4g}")
        parts.append(f"{span} (peak {x['peak']:.3f} at N = {x['peak_at']:.3g}"
                     + (f", below N_min = {win['n_min']:g})" if x["below_n_min"] else ")"))
    return f"local exponent > {win['edge']:.2f} for " + "; ".join(parts)


def _readings(ev, size_factor: float, win: dict | None) -> tuple[str, dict]:
    """(like-softmax verdict, {"rate": …, "size": …, "why": …}) — the two readings apart, with the reading that failed.

    ``win`` (windows of the local exponent, :func:`sapa.regime.exponent_windows`'s keys plus the examined range
    ``n_lo``, ``n_hi``) is the same for every exact or quadrature audit, with or without a column index j: the rate
    is judged on the sup from ``n_min`` on, and a HOLDS_IN_REGIME names its regime
    (:func:`sapa.rules.like_softmax.regime_text`)."""
    from sapa.rules.like_softmax import A, TOL, combine, decide_rate, decide_size, regime_text, verdict_why

    rate, size = decide_rate(ev), decide_size(ev, size_factor)
    regime = ""
    if rate == "HOLDS_IN_REGIME":
        regime = (regime_text(win["windows"], win["n_min"], win.get("n_hi", 2.0**20)) if win is not None else
                  "N → ∞ (the asymptotic exponent alone)")
    rate_why = (f"sup of the local exponent for N ≥ {win['n_min']:g}: {win['sup_from_n_min']:.4f} (edge {A + TOL:g}); "
                f"{windows_words(win)}" if win is not None else
                f"exponent interval [{ev.exp_lo:.3f}, {ev.exp_hi:.3f}] (edge {A + TOL:g})")
    if regime:
        rate_why += f"; holds for {regime} (asymptotic exponent {ev.asymptotic:.4g})"
    out = {"rate": {"verdict": rate, "rule": "growth-upper-exact" if win is not None else "growth-upper",
                    "statement": f"E-RMS ‖φ(S)‖_F = O(√N): local exponent ≤ ½ + {TOL}", "why": rate_why},
           "size": {"verdict": size, "rule": "size-within-factor", "factor": size_factor,
                    "statement": f"E-RMS ‖φ(S)‖_F within {size_factor:g}× of softmax's bound √N",
                    "why": f"E-RMS ‖φ‖_F/√N in [{ev.ratio_lo:.4g}, {ev.ratio_hi:.4g}] against {size_factor:g}"},
           "why": verdict_why(rate, size, regime)}
    if regime:
        out["rate"]["regime"] = regime
    if win is not None:
        below = [w for w in win["windows"] if w["below_n_min"]]
        out["rate"].update({"windows": win["windows"], "n_min": win["n_min"], "judged_range": [win["n_min"],
                            win.get("n_hi", 2.0**20)], "judged_sup": win["sup_from_n_min"],
                            "judged_sup_at": win["sup_from_n_min_at"],
                            "excluded_peak": (max(below, key=lambda w: w["peak"]) if below else None)})
    return combine(rate, size), out


def judged_range_words(rate: dict) -> str:
    """Where the rate reading was judged, from what was computed: 'for N = 16…2^20' (exact profile from N_min on),
    'at N = 98, 196, 392 (Monte Carlo)' (the estimate's grid), or 'as N → ∞' (asymptotic exponent alone)."""
    if "judged_range" in rate:
        lo, hi = rate["judged_range"]
        return f"for N = {lo:g}…{'2^20' if hi == 2**20 else f'{hi:g}'}"
    if "estimated_at" in rate:
        return f"at N = {', '.join(str(n) for n in rate['estimated_at'])} (Monte Carlo)"
    return "as N → ∞"


def run_audit(act: Activation, spec: ModelSpec, N: int, *, trials: int = MC_TRIALS, seed: int = 0,
              sizes: bool = True, size_factor: float | None = None, n_min: float | None = None,
              logit_scale: str = "S", expr_as_given: str | None = None) -> dict:
    """Flat result of one audit (the ``--json`` object of ``sapa audit``).

    ``act`` is applied to x = S_ij (S = X W_Q W_Kᵀ Xᵀ); for ``logit_scale="S/sqrt(d)"`` the caller has substituted
    x → x/√d already (:func:`logit_substituted`) and passes the user's text as ``expr_as_given``.
    """
    t0 = time.perf_counter()
    from sapa.rules.like_softmax import N_MIN, SIZE_FACTOR, TOL

    K = SIZE_FACTOR if size_factor is None else float(size_factor)
    n_min = N_MIN if n_min is None else float(n_min)

    out: dict = {"activation": expr_as_given or act.text, "expression": str(act.expr),
                 "logit_scale": logit_scale,
                 "logit": ("x = S_ij, S = X W_Q W_Kᵀ Xᵀ (the paper's theory; no 1/√d)" if logit_scale == "S" else
                           f"x = S_ij/√d, d = {spec.d} (as transformers compute it); expression evaluated on S: "
                           f"{act.expr}"),
                 "normalize": act.normalize, "mask": act.mask,
                 "model": spec.name, "n": int(N), "d_model": spec.D, "d_head": spec.d,
                 "rho": float(spec.rho) if spec.name == "corr" else None,
                 "sigma": float(spec.sigma) if spec.name != "shared" else None}
    if "fro" in act.infinite or act.poles:
        out.update(_infinite_result(act, N) if "fro" in act.infinite else _pole_result(act))
        why = out["verdict_by_construction"]
        out.update({"size_factor": K, "n_min": n_min, "rate_verdict": "FAILS", "size_verdict": "FAILS",
                    "verdict_why": "by construction: the expectation is infinite",
                    "readings": {"rate": {"verdict": "FAILS", "rule": "by construction (sapa.theory.singular)", "why": why},
                                 "size": {"verdict": "FAILS", "rule": "by construction (sapa.theory.singular)", "why": why},
                                 "why": "by construction: the expectation is infinite"}})
        out["seconds"] = round(time.perf_counter() - t0, 3)
        return out
    if act.normalize == "none" and act.uses_j:  # relative-position logits: sums over pairs (sapa.theory.relpos)
        from sapa.commands.audit_relpos import relpos_result

        out.update(relpos_result(act, spec, N, n_min=n_min))
        wc = out.pop("_worst_case")
        out.pop("_verdict")
        ev = out.pop("_verdict_evidence")
        win = out.pop("_windows")
        from sapa.rules.like_softmax import LikeSoftmaxEvidence

        # the same rule as without j: the sup from n_min on (windows below it reported, not judged)
        verdict, readings = _readings(LikeSoftmaxEvidence(**ev), K, win)
    elif act.normalize == "none" and act.separable:
        prof = profile(act, spec)
        a = audit(act, spec, N, prof=prof)
        verdict, readings, ev = _verdict_exact(a, prof, K, n_min)
        rng_n = [n for n in RANGE_N]
        tot = prof.totals(rng_n)
        ex = prof.exponents(rng_n)
        out.update({
            "method": a.method,
            "error_bound": a.error_bound,
            "error_bounds": a.error_bounds,
            "error_bound_kind": ("none: closed form (exact rational moments)" if a.method == "exact" else
                                 "relative, a posteriori, at N: |rule − rule of half the order| in the laws of v and "
                                 "S_11, plus the last change on doubling the Hermite order in z; largest of the three"),
            "expected_fro2": a.expected_fro2, "expected_jac_s_fro2": a.expected_jac_s_fro2,
            "expected_jac_fro2": a.expected_jac_fro2,
            "growth_exponent": a.growth_exponent, "growth_exponent_jac_s": a.growth_exponent_jac_s,
            "growth_exponent_jac": a.growth_exponent_jac,
            "sup_growth_exponent": a.sup_growth_exponent, "sup_growth_at": {"quantity": a.sup_growth_at[0],
                                                                               "n": a.sup_growth_at[1]},
            "sup_range_n": [2, 2**20],
            "asymptotic_exponent": a.asymptotic_exponent,
            "crossover_n": a.crossover_n,
            "m_off": a.m_off, "m_diag": a.m_diag,
            "constant_vs_softmax": a.constant_vs_softmax, "constant_jac_s_vs_softmax": a.constant_jac_s_vs_softmax,
            "matching_scale": a.matching_scale, "matching_scale_exponent": a.matching_scale_exponent,
            "range": [{"n": int(n), "expected_fro2": float(tot["fro"][k]), "growth_exponent": float(ex["fro"][k]),
                       "constant_vs_softmax": math.sqrt(float(tot["fro"][k]) / n)} for k, n in enumerate(rng_n)],
        })
        wc = a.worst_case
    else:
        grid = mc_grid(N)
        mcs = {}
        from sapa.empirics.experiments.activation_sampling import sample_norms
        for n in grid:
            mcs[n] = sample_norms(act, spec, n, trials, seed=seed)
        m = mcs[N]
        from sapa.rules.like_softmax import decide, mc_evidence

        ev_o = mc_evidence(grid, [mcs[n].fro2 for n in grid], N)
        (verdict, readings), ev = _readings(ev_o, K, None), ev_o.__dict__
        readings["rate"]["estimated_at"] = [int(n) for n in grid]  # the only N the rate rests on
        readings["rate"]["why"] += f"; estimated from Monte Carlo at N = {', '.join(str(int(n)) for n in grid)} only"
        fit = {}
        for q, name in (("fro2", "growth_exponent"), ("jac_s2", "growth_exponent_jac_s"), ("jac2", "growth_exponent_jac")):
            y = [float(getattr(mcs[n], q).mean()) for n in grid]
            fit[name] = 0.5 * loglog_slope(grid, y)  # the RMS exponent of the mean squared norms
        fro2 = float(m.fro2.mean())
        rel_se = float(m.fro2.std(ddof=1) / math.sqrt(m.fro2.size) / fro2)
        out.update({
            "method": "monte_carlo", "error_bound": rel_se,
            "error_bound_kind": f"relative standard error of the mean over {trials} draws (exact kernels); no closed form "
                                "for row-normalised or non-separable i-dependent φ",
            "expected_fro2": fro2, "expected_jac_s_fro2": float(m.jac_s2.mean()), "expected_jac_fro2": float(m.jac2.mean()),
            **fit,
            "growth_exponent_interval": [ev_o.exp_lo, ev_o.exp_hi], "mc_grid": list(grid), "trials": trials, "seed": seed,
            "sup_growth_exponent": None, "asymptotic_exponent": None, "crossover_n": None,
            "constant_vs_softmax": math.sqrt(fro2 / N),
            "constant_vs_softmax_interval": [ev_o.ratio_lo, ev_o.ratio_hi],
            "constant_jac_s_vs_softmax": math.sqrt(float(m.jac_s2.mean())) / (math.sqrt(N) / 2),
            "matching_scale": math.sqrt(N / fro2), "matching_scale_exponent": 0.5 - fit["growth_exponent"],
        })
        if act.uses_j:
            from sapa.theory.relpos import relpos_worst_case

            wc = relpos_worst_case(act, N=N)
            wc = {"exponent": wc["exponent"], "exponent_is_exact": wc["exponent_is_exact"], "fro": wc,
                  "jac_s": None, "jac": None}
        else:
            wc = worst_case(act, N=N)
    out.update({
        "worst_case_exponent": wc["exponent"], "worst_case_exponent_is_exact": wc["exponent_is_exact"],
        "worst_case_exponent_jac_s": (wc["jac_s"] or {}).get("exponent"), "worst_case_exponent_jac": (wc["jac"] or {}).get("exponent"),
        "worst_case_witness": wc["fro"]["witness"], "worst_case_bracket": wc["fro"].get("bracket"),
        "verdict": verdict, "rule": "audit-like-softmax",
        "verdict_statement": f"grows like softmax: E-RMS ‖φ(S)‖_F = O(√N) (local exponent ≤ ½ + {TOL} "
                             f"{judged_range_words(readings['rate'])}) and within {K:g}× of softmax's bound √N at "
                             f"N = {N}",
        "readings": readings, "size_factor": K, "n_min": n_min,
        "rate_verdict": readings["rate"]["verdict"], "size_verdict": readings["size"]["verdict"],
        "verdict_why": readings["why"],
        "verdict_evidence": ev,
    })
    if act.infinite:  # only ∂φ/∂x: the norm of φ is finite, its Jacobian's expectation is not
        out.update({"expected_jac_s_fro2": math.inf, "expected_jac_fro2": math.inf, "growth_exponent_jac_s": None,
                    "growth_exponent_jac": None, "constant_jac_s_vs_softmax": math.inf,
                    "infinite": list(act.infinite), "infinite_because": [s.describe() for s in act.singular]})
    if sizes and spec.name in ("iid", "tied", "corr"):
        named = {}
        for name, (D, d, n) in NAMED_SIZES.items():
            sp2 = model_spec(spec.name, D, d, rho=float(spec.rho))
            if act.normalize == "none" and act.separable and not act.uses_j:
                at_d = act if logit_scale == "S" else parse_activation(  # x → x/√d at this size's own head width
                    logit_substituted(expr_as_given or act.text, logit_scale, d, act.normalize), act.normalize, act.mask)
                r = audit(at_d, sp2, n)
                named[name] = {"D": D, "d": d, "n": n, "growth_exponent": r.growth_exponent, "crossover_n": r.crossover_n,
                               "constant_vs_softmax": r.constant_vs_softmax}
        out["named_sizes"] = named or None
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def pole_words(poles) -> str:
    """``N = 1000`` / ``i = 5`` … in words: where φ is infinite for every logit."""
    parts = [f"N = {c}" if v == "N" else f"every N ≥ {c} (at {v} = {c})" for v, c in poles]
    return ", ".join(parts)


def _pole_result(act: Activation) -> dict:
    """The audit of a φ with a pole in the length or a position (x/(N − 1000)): E‖φ(S)‖²_F = ∞ there, by construction."""
    where = pole_words(act.poles)
    statement = (f"φ has a pole in {', '.join(sorted({v for v, _ in act.poles}))}: φ(S_ij) is infinite for every logit "
                 f"at {where}, so E‖φ(S)‖²_F = ∞ there and E-RMS ‖φ(S)‖_F is not O(√N) for every N")
    return {**_infinite_result(act, 0, statement=statement, why=f"a pole at {where}"),
            "infinite_because": [f"φ has a pole at {where}"], "poles": [list(p) for p in act.poles]}


def _infinite_result(act: Activation, N: int, statement: str | None = None, why: str | None = None) -> dict:
    """The audit of a φ whose E φ(S_ij)² is infinite (a non-integrable singularity on the real line): by construction."""
    why = why or "; ".join(s.describe() for s in act.singular)
    statement = statement or (f"E‖φ(S)‖²_F = ∞ at every N ≥ 2: {why}, and every logit S_ij has a positive density "
                              "on the whole real line; so E-RMS ‖φ(S)‖_F is not O(√N)")
    return {
        "method": "singularity (symbolic)", "error_bound": 0.0,
        "error_bound_kind": "none: the expectations are infinite by construction (sapa.theory.singular)",
        "expected_fro2": math.inf, "expected_jac_s_fro2": math.inf, "expected_jac_fro2": math.inf,
        "infinite": list(act.infinite), "infinite_because": [s.describe() for s in act.singular],
        "growth_exponent": None, "growth_exponent_jac_s": None, "growth_exponent_jac": None,
        "sup_growth_exponent": None, "asymptotic_exponent": None, "crossover_n": None,
        "constant_vs_softmax": math.inf, "constant_jac_s_vs_softmax": math.inf,
        "matching_scale": None, "matching_scale_exponent": None,  # no c > 0 brings an infinite norm to √N
        "worst_case_exponent": None, "worst_case_exponent_is_exact": None, "worst_case_exponent_jac_s": None,
        "worst_case_exponent_jac": None, "worst_case_witness": None, "worst_case_bracket": None,
        "verdict": "FAILS", "rule": "audit-like-softmax", "verdict_by_construction": statement,
        "verdict_statement": f"grows like softmax: E-RMS ‖φ(S)‖_F = O(√N); here E‖φ(S)‖²_F is infinite ({why})",
        "verdict_evidence": None, "named_sizes": None,
    }


def text_report(out: dict) -> str:
    """The human-readable form of :func:`run_audit`'s result: labelled, aligned, a missing value as ``— (why)``."""
    from sapa.display import key_values, sig, text_table, value_or_reason

    mc = out["method"] == "monte_carlo"
    no_form = "Monte Carlo: no closed form in N" if mc else "not defined here"
    wc_why = "no bound derived for a row-normalised φ's Jacobian" if out["normalize"] == "row" else "not derived"
    v = value_or_reason
    model = f"{out['model']} weights, N = {out['n']} tokens, D = {v(out['d_model'], 'from --w')}, " \
            f"d = {v(out['d_head'], 'from --w')}"
    if out.get("rho") is not None:
        model += f", ρ = {sig(out['rho'])}"
    method = {"exact": "exact: closed-form rational moments (no numerical error)",
              "quadrature": f"quadrature; error bound {sig(out['error_bound'], 2)} ({out['error_bound_kind']})",
              "monte_carlo": f"Monte Carlo, {out.get('trials')} draws per N (seed {out.get('seed')}); error bound "
                             f"{sig(out['error_bound'], 2)} ({out['error_bound_kind']})"}.get(
        out["method"], f"{out['method']} ({out['error_bound_kind']})")
    head = key_values([("activation", f"φ(x) = {out['activation']}  (normalize {out['normalize']}, mask {out['mask']})"),
                       ("logit convention", f"{out['logit_scale']}  ({out['logit']})"),
                       ("model", model), ("method", method)])
    size = key_values([(f"E‖φ(S)‖²_F at N = {out['n']}", v(out["expected_fro2"], no_form)),
                       ("E‖∂φ(S)/∂S‖²_F", v(out["expected_jac_s_fro2"], no_form)),
                       ("E‖∂φ(S)/∂X‖²_F", v(out["expected_jac_fro2"], no_form)),
                       ("E-RMS ‖φ‖_F / √N (softmax's bound: 1)", v(out["constant_vs_softmax"], no_form)),
                       ("scale c that brings it to √N", f"{v(out['matching_scale'], no_form)} "
                                                         f"(local exponent {v(out['matching_scale_exponent'], no_form)})")])
    sup_range = ("" if not out.get("sup_range_n") else " = 2…2^20" if out["sup_range_n"][1] == 2**20 else
                 f" = {out['sup_range_n'][0]}…{out['sup_range_n'][1]}")
    growth = key_values([("of ‖φ‖_F at N (softmax: ≤ ½)", v(out["growth_exponent"], no_form)),
                         ("of ‖∂φ/∂S‖_F, ‖∂φ/∂X‖_F at N", f"{v(out['growth_exponent_jac_s'], no_form)}, "
                                                           f"{v(out['growth_exponent_jac'], no_form)}"),
                         (f"largest over N{sup_range}", v(out["sup_growth_exponent"], no_form)),
                         ("as N → ∞", v(out["asymptotic_exponent"], no_form)),
                         ("crossover N* (√N growth beyond it)", v(out["crossover_n"], no_form)),
                         ("worst case over bounded tokens", v(out["worst_case_exponent"], "not pinned: see --json")),
                         ("worst case of ‖∂φ/∂X‖_F", v(out["worst_case_exponent_jac"], wc_why))])
    lines = head + ["", "size"] + ["  " + x for x in size] + ["", "growth exponent (½ d log E‖·‖² / d log N)"]
    lines += ["  " + x for x in growth]
    if out.get("range"):
        lines += ["", "over N"] + ["  " + x for x in text_table(
            ["N", "E‖φ‖²_F", "exponent", "‖φ‖/√N"],
            [[r["n"], sig(r["expected_fro2"], 4), f"{r['growth_exponent']:.3f}", sig(r["constant_vs_softmax"])]
             for r in out["range"]], right=[True] * 4)]
    if out.get("named_sizes"):
        lines += ["", "at named sizes"] + ["  " + x for x in text_table(
            ["size", "D", "d", "N", "exponent", "N*", "‖φ‖/√N"],
            [[name, r["D"], r["d"], r["n"], f"{r['growth_exponent']:.3f}", v(r["crossover_n"], "none"),
              sig(r["constant_vs_softmax"])] for name, r in out["named_sizes"].items()],
            right=[False] + [True] * 6)]
    from sapa.rules.like_softmax import TOL, K

    if mc:
        (elo, ehi), (clo, chi) = out["growth_exponent_interval"], out["constant_vs_softmax_interval"]
        decisive = (f"exponent in [{sig(elo)}, {sig(ehi)}] (limit ½ + {TOL}), ‖φ‖/√N in [{sig(clo)}, {sig(chi)}] "
                    f"(limit {out['size_factor']:g})")
    else:
        decisive = _decisive_exact(out, v, no_form)
    if out.get("infinite_because"):  # a non-integrable singularity (sapa.theory.singular): these expectations are ∞
        lines += ["", f"infinite: {', '.join(out['infinite'])}"] + [f"  {why}" for why in out["infinite_because"]]
        if "fro" in out["infinite"]:
            decisive = out["verdict_by_construction"]
    lines += ["", f"verdict: {out['verdict']} — rule {out['rule']}: {out['verdict_statement']} ({out['verdict_why']})",
              f"  decisive numbers: {decisive}"]
    for name in ("rate", "size"):
        r = out["readings"][name]
        lines.append(f"  {name} reading: {r['verdict']} — rule {r['rule']}: {r['why']}")
    from sapa.commands.audit_conventions import conventions_text

    return "\n".join(lines + conventions_text(out))


def _decisive_exact(out: dict, v, no_form: str) -> str:
    """The numbers the rule decided on (exact / quadrature): the sup of the exponent over the judged range N ≥ n_min,
    the asymptotic exponent when the verdict rests on a regime, the size ratio; a peak below n_min, which the rule
    does not judge, is named apart as context."""
    from sapa.display import sig
    from sapa.rules.like_softmax import TOL

    rate = out["readings"]["rate"]
    size = f"‖φ‖/√N = {v(out['constant_vs_softmax'], no_form)} (limit {out['size_factor']:g})"
    if "judged_sup" not in rate:
        return f"largest exponent {v(out['sup_growth_exponent'], no_form)} (limit ½ + {TOL}), {size}"
    lo, hi = rate["judged_range"]
    hi_text = "2^20" if hi == 2**20 else f"{hi:g}"
    parts = [f"largest exponent for N = {lo:g}…{hi_text}: {sig(rate['judged_sup'], 4)} (limit ½ + {TOL})"]
    if rate.get("regime"):
        parts.append(f"asymptotic exponent {v(out['asymptotic_exponent'], no_form)} (limit ½ + {TOL}; "
                     f"holds for {rate['regime']})")
    parts.append(size)
    text = ", ".join(parts)
    peak = rate.get("excluded_peak")
    if peak is not None:
        text += (f"; not judged: peak exponent {sig(peak['peak'], 4)} at N = {peak['peak_at']:.3g}, "
                 f"below N_min = {lo:g}")
    return text


def spec_from_args(args) -> ModelSpec:
    """A ModelSpec from ``sapa audit``'s options (the same as ``sapa exact``'s)."""
    from sapa.common.validate import InputError

    W = sigma_x = None
    if args.model == "shared":
        if args.w is None:
            raise InputError("--model shared needs --w W.npy")
        from sapa.npyfile import load_square_matrix

        W = load_square_matrix(args.w, "--w")
        if args.sigma_x is not None:
            sigma_x = load_square_matrix(args.sigma_x, "--sigma-x")
        D = args.D if args.D is not None else None
    else:
        if args.w is not None or args.sigma_x is not None:
            raise InputError("--w and --sigma-x apply to --model shared only")
        D = args.D
    if args.sigma is not None and args.sigma <= 0:
        raise InputError(f"--sigma must be positive, got {args.sigma}")
    if args.rho is not None and args.model != "corr":  # as sapa exact: never silently ignored
        raise InputError(f"--rho applies to --model corr only, not {args.model}")
    return model_spec(args.model, D, args.d, rho=0.5 if args.rho is None else args.rho, sigma=args.sigma, W=W,
                      sigma_x=sigma_x)


def check_work(act: Activation, spec: ModelSpec, N: int, trials: int, force: bool = False, audits: int = 1) -> None:
    """Refuse ``audits`` audits (one per logit convention) beyond sapa sweep's work limit or the available memory
    (unless ``force``): sapa.empirics.experiments.audit_workload. They run one after the other: the work adds up, the
    memory does not."""
    from dataclasses import replace

    from sapa.empirics.experiments.audit_workload import audit_work, check_audit_work

    if "fro" in act.infinite:
        return
    mc = act.normalize == "row" or not act.separable
    work = audit_work(mc, spec.name, spec.D, spec.d, mc_grid(N) if mc else (N,), trials, act.uses_i)
    if audits > 1:
        work = replace(work, flops=audits * work.flops, how=f"{work.how}, under both logit conventions")
    check_audit_work(work, force)


def audit_and_print(args) -> int:
    """``sapa audit EXPR``: parse, audit, print (text or one JSON object)."""
    if args.model not in ("paper", "shared") and args.D is None:
        args.D = 768
    import json

    from sapa.common.validate import InputError

    from sapa.theory.families import resolve

    args.expr, args.normalize, args.mask = resolve(args.expr, args.normalize, args.mask)  # a family id: its row
    from sapa.commands.audit_conventions import DEFAULT, activations, audit_both

    spec = spec_from_args(args)
    scale = getattr(args, "logit_scale", DEFAULT)
    acts = activations(args.expr, args.normalize, args.mask, spec.d or args.d)
    act = acts[scale]
    check_work(act, spec, args.N, args.trials, force=getattr(args, "force", False), audits=2)
    from sapa.common.progress import stage

    how = ("sums over the pairs (i, j)" if act.normalize == "none" and act.uses_j else
           "moments over N = 2…2²⁰ (closed form or quadrature)" if act.normalize == "none" and act.separable else
           f"Monte Carlo, {args.trials} trials per N")
    try:
        with stage(f"sapa audit {args.expr}", basis=how):  # a line whenever 10 s pass without output
            out = audit_both(args.expr, acts, spec, args.N, scale, spec.d or args.d, run_audit, trials=args.trials,
                             seed=args.seed, size_factor=getattr(args, "size_factor", None))
    except (OverflowError, ZeroDivisionError) as exc:  # a float64 limit no check above foresaw: one line, no traceback
        raise InputError(f"the audit of {act.text!r} leaves float64's range ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:100]}); rescale the activation or the weights") from None
    if args.json:
        print(json.dumps(_finite(out), default=_jsonable, allow_nan=False))
    else:
        print(text_report(out))
    return 0


def _finite(v):
    """JSON-safe copy: non-finite floats become None (NaN/inf are not JSON)."""
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    return v


def _jsonable(v):
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, np.bool_):
        return bool(v)
    return str(v)


_ = N_GRID  # the grid of the sup exponent (sapa.theory.activation_audit.N_GRID), named here for readers of the JSON
