"""``sapa audit EXPR``: the audit (:mod:`sapa.api.audit`, ``sapa.audit``) printed as text or one JSON object.

The computation lives in :mod:`sapa.api.audit`; ``run_audit``, ``mc_grid`` and the other names it had here are
importable from here too, as before.
"""

from __future__ import annotations

from sapa.api.audit import (MC_TRIALS, NAMED_SIZES, RANGE_N, audit_spec, check_work, judged_range_words,  # noqa: F401
                            mc_grid, method_words, pole_words, run_audit)
from sapa.theory.activation_audit import ModelSpec

__all__ = ["NAMED_SIZES", "RANGE_N", "mc_grid", "run_audit", "text_report", "audit_and_print"]


def text_report(out: dict) -> str:
    """The human-readable form of :func:`run_audit`'s result: labelled, aligned, a missing value as ``— (why)``."""
    from sapa.display import sig, text_table, value_or_reason

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
    lines = _number_lines(out, model, method, v, no_form, wc_why)
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
    lines += _verdict_lines(out, v, no_form, mc)
    from sapa.commands.audit_conventions import conventions_text

    return "\n".join(lines + conventions_text(out))


def _number_lines(out: dict, model: str, method: str, v, no_form: str, wc_why: str) -> list[str]:
    """The setting, size and growth-exponent blocks of :func:`text_report`."""
    from sapa.display import key_values

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
    return lines


def _verdict_lines(out: dict, v, no_form: str, mc: bool) -> list[str]:
    """The infinite expectations (if any), the verdict, its decisive numbers and both readings of :func:`text_report`."""
    from sapa.display import sig
    from sapa.rules.like_softmax import TOL

    lines: list[str] = []
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
    return lines


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
    from sapa.api.inputs import CLI
    from sapa.npyfile import load_square_matrix

    return audit_spec(args.model, args.D, args.d, rho=args.rho, sigma=args.sigma, W=args.w, sigma_x=args.sigma_x,
                      load=load_square_matrix, names=CLI)


def audit_and_print(args) -> int:
    """``sapa audit EXPR``: parse, audit, print (text or one JSON object)."""
    if args.model not in ("paper", "shared") and args.D is None:
        args.D = 768
    import json

    from sapa.api.audit import float64_range
    from sapa.api.results import jsonable
    from sapa.theory.families import resolve

    args.expr, args.normalize, args.mask = resolve(args.expr, args.normalize, args.mask)  # a family id: its row
    from sapa.commands.audit_conventions import DEFAULT, activations, audit_both

    spec = spec_from_args(args)
    scale = getattr(args, "logit_scale", DEFAULT)
    acts = activations(args.expr, args.normalize, args.mask, spec.d or args.d)
    act = acts[scale]
    check_work(act, spec, args.N, args.trials, force=getattr(args, "force", False), audits=2)
    from sapa.common.progress import stage

    with float64_range(act), stage(f"sapa audit {args.expr}", basis=method_words(act, args.trials)):
        out = audit_both(args.expr, acts, spec, args.N, scale, spec.d or args.d, run_audit, trials=args.trials,
                         seed=args.seed, size_factor=getattr(args, "size_factor", None))
    print(json.dumps(jsonable(out), allow_nan=False) if args.json else text_report(out))
    return 0
