"""The worst-case side of the growth claims (Thm 4.2 – Cor 4.5 of arXiv 2410.18613), shared by their checks.

The paper's growth claims are in expectation. Beside them the ledger reports the worst case
over two input sets of equal energy (``sapa.theory.worst_case``: exact exponents and brackets;
``sapa.empirics.experiments.worst_case``: witnesses and gradient ascent), computed once per ``sapa verify``
run for p = 1 and 3 with c = 1 and rescaled per claim.

Worst-case verdict per input set (reported in the evidence; the entry's verdict stays the one
for the paper's quantifier, in expectation): ``HOLDS`` if the exact worst-case exponents of
‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F both equal the claimed one (then max ‖·‖ = Θ(N^e) uniformly in N),
``FAILS`` otherwise. Theory and numerics agree when every witness attains the exact lower end,
no input found exceeds the upper bound, and each fitted slope lies in the slope range the
bracket allows; if they do not, the growth claim is UNDETERMINED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sapa.ledger import Context

if TYPE_CHECKING:
    from sapa.empirics.experiments.worst_case import WorstCaseResult

PS = (1, 3)
JUDGED = ("fro", "jac_fro")  # the paper's two objects; the spectral norm (Lipschitz reading) is reported only
SETS = {"token": "every token on a sphere, ‖x_i‖ = r (as after LayerNorm)",
        "fro": "only the total energy, ‖X‖_F = r√N (energy may sit on one or two tokens)"}


def computed(ctx: Context) -> tuple[WorstCaseResult, tuple[str, ...]]:
    """(the worst-case result, figure paths) for this run (computed once, cached, stored)."""
    if "worst_case" not in ctx.cache:
        from sapa.empirics.experiments.worst_case import run_worst_case
        from sapa.figures import worst_case as fig
        from sapa.evidence.monte_carlo import run_pool
        from sapa.ledger import store_figure_data

        b = ctx.budget
        res = run_worst_case(PS, Ns=b.worst_Ns, steps=b.worst_steps, restarts=b.worst_restarts, seed=b.seed,
                             executor=run_pool(ctx))
        stem = fig.stored_stem(res)
        store_figure_data(ctx, fig.NAME, res.to_json(), stem)
        paths = fig.draw(res, ctx.out_dir / "figures", stem)
        ctx.cache["worst_case"] = (res, tuple(str(p.relative_to(ctx.out_dir)) for p in paths))
    return ctx.cache["worst_case"]


def evidence(ctx: Context, p: int, scaled: bool) -> tuple[dict, tuple[str, ...]]:
    """Worst-case evidence for x^p (scaled by 1/√N or not): per input set, exponents, checks and verdict."""
    from sapa.empirics.experiments.worst_case import summarise

    res, figures = computed(ctx)
    gamma = 0.5 if scaled else 0.0
    pred = 1.0 - gamma
    per_set, agree = {}, True
    for s in summarise(res.frames[p], gamma):
        lo, hi = s["bracket_slope_range"]
        s["slope_in_bracket_range"] = bool(lo - 1e-9 <= s["measured_slope"] <= hi + 1e-9)
        agree &= s["witness_attains_lower"] and s["never_above_upper"] and s["slope_in_bracket_range"]
        per_set.setdefault(s["constraint"], {})[s["quantity"]] = s
    verdicts = {}
    for c, qs in per_set.items():
        holds = all(abs(qs[q]["exact_exponent"] - pred) < 1e-12 for q in JUDGED)
        verdicts[c] = "HOLDS" if holds else "FAILS"
    return {
        "quantifier": "max over the input set (worst case), for each N",
        "input_sets": SETS,
        "predicted_exponent": pred,
        "verdict_worst_case": verdicts,
        "exact_exponents": {c: {q: qs[q]["exact_exponent"] for q in qs} for c, qs in per_set.items()},
        "series": per_set,
        "theory_and_numerics_agree": bool(agree),
        "config": res.config_dict(),
        "W": "W_Q W_Kᵀ, D × D, entries N(0, 1/D), seeded; c = 1 in the search, rescaled by N^(−γ)",
    }, figures


def headline(ev: dict) -> str:
    """One line: worst-case exponents of ‖φ‖_F and ‖J‖_F per input set."""
    parts = []
    for c, label in (("token", "‖x_i‖=r"), ("fro", "‖X‖_F=r√N")):
        e = ev["exact_exponents"][c]
        parts.append(f"{label}: N^{e['fro']:g} / N^{e['jac_fro']:g} ({ev['verdict_worst_case'][c]})")
    return "worst case ‖φ‖/‖J‖ " + ", ".join(parts)
