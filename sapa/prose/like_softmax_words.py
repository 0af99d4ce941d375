"""The words of the other papers' entries (relu-over-n, sigmoid-bias-logn, poly4-normalised): readings, headline,
findings, tested statement, controls and condition rows, from ``sapa.claims.like_softmax_check``'s numbers."""

from __future__ import annotations

import math

from sapa.conditions import by_construction, could_fail, not_applicable, not_run, varied
from sapa.ledger import Reading
from sapa.regime import windows_text
from sapa.rules.growth import TOL as G_TOL
from sapa.rules.like_softmax import K, TOL

SIZE_CONTROL_FACTOR = 1.05  # the size control: a bound 5 % below the computed ratio


def _ratio_text(pm: dict) -> str:
    if pm["method"] == "monte_carlo":
        lo, hi = pm["constant_interval_at_128"]
        return f"[{lo:.3g}, {hi:.3g}] (99 % interval, N = 128)"
    return f"{pm['constant_vs_softmax']:.4g}"


def model_why(pm: dict, win, n_min: float, mc_size: tuple) -> str:
    """One model's decisive numbers, and why it is not like softmax when it is not."""
    if pm["method"] == "monte_carlo":
        text = (f"MC (D={mc_size[0]}, d={mc_size[1]}): exponent [{pm['exponent_interval'][0]:.3f}, "
                f"{pm['exponent_interval'][1]:.3f}], ‖P‖/√N at N=128 [{pm['constant_interval_at_128'][0]:.3g}, "
                f"{pm['constant_interval_at_128'][1]:.3g}]")
    else:
        cn = pm["crossover_n"]
        text = (f"{pm['method']} at ViT-B: exponent {pm['growth_exponent_at_196']:.3f} (sup for N ≥ {n_min:g} "
                f"{pm['sup_exponent_from_n_min']:.3f}; {windows_text(win)}; N→∞ {pm['asymptotic_exponent']:.3f}), "
                f"N* = {'none' if cn is None else f'{cn:.4g}'}, ‖φ‖/√N = {pm['constant_vs_softmax']:.3g}")
    return text + (f" — {pm['why_not_like_softmax']}" if pm["why_not_like_softmax"] else "")


def readings(act, norm: str, n_min: float, per_model: dict, profiles: dict, rate: dict, v_wc: str, wc: dict,
             design: dict) -> tuple[Reading, ...]:
    """Like softmax (iid headline, tied), rate and size per model, the rate alone, the worst case, the uniform rate.

    ``design``: the check's sizes (``mc_size``, ``row_ns``, ``vit_b``, ``z_gate``)."""
    row_ns = design["row_ns"]
    why = {m: model_why(per_model[m], profiles[m][2], n_min, design["mc_size"]) for m in per_model}
    rate_why = ("local exponent at N = 2²⁰ (norm, Jacobians w.r.t. S and X): " + ", ".join(
        f"{m} {pm['asymptotic_exponent_all']:.3f}" for m, pm in per_model.items()) if norm == "none" else
        "; ".join(f"{m} exponent interval [{pm['exponent_interval'][0]:.3f}, {pm['exponent_interval'][1]:.3f}]"
                  for m, pm in per_model.items()))
    wc_e = wc["exponent"]
    out = (
        Reading(name="like softmax, independent W_Q, W_K (the papers' initialisation)", rule="audit-like-softmax",
                verdict=per_model["iid"]["verdict"], key=("like-softmax", "iid"),
                statement=f"E-RMS ‖φ(S)‖_F = O(√N) and within {K:g}× of softmax's √N, φ = {act.expr}"
                          + (" (row-normalised)" if norm == "row" else ""), why=why["iid"]),
        Reading(name="like softmax, tied W_Q = W_K", rule="audit-like-softmax", verdict=per_model["tied"]["verdict"],
                key=("like-softmax", "tied"), statement="the same with tied query and key weights", why=why["tied"]),
    ) + tuple(r for m in ("iid", "tied") for r in (
        Reading(name=f"rate, {m}: O(√N) from N = {n_min:g} on", rule=rate["rule"], verdict=per_model[m]["rate_verdict"],
                key=("rate", m),
                statement=f"the local growth exponent of E-RMS ‖φ(S)‖_F and its Jacobians ≤ ½ + {TOL} for N ≥ "
                          f"{n_min:g} (HOLDS_IN_REGIME: only as N → ∞)",
                why=(windows_text(profiles[m][2]) if profiles[m][2] is not None else
                     f"exponent interval {per_model[m]['exponent_interval']}")),
        Reading(name=f"size, {m}: within {K:g}× of softmax's √N", rule="size-within-factor",
                verdict=per_model[m]["size_verdict"], key=("size", m),
                statement=f"E-RMS ‖φ(S)‖_F ≤ {K:g}·√N at ViT-Base (N = {design['vit_b'][2]})" if norm == "none" else
                          f"E-RMS ‖φ(S)‖_F ≤ {K:g}·√N at N = {row_ns[1]}",
                why=f"ratio {_ratio_text(per_model[m])} against {K:g}"))) + (
        Reading(name="rate only: O(√N) in expectation", rule=rate["rule"], verdict=rate["verdict"], key=("rate",),
                statement=f"the growth exponent as N → ∞ does not exceed ½ (+{G_TOL}), iid and tied", why=rate_why),
        Reading(name="worst case, every token ‖x_i‖ ≤ r", rule="growth-upper-exact", verdict=v_wc,
                key=("worst-case", "token"),
                statement="max over token-bounded inputs of ‖φ(S)‖_F grows no faster than √N",
                why=f"exponent {wc_e:.3g} ({'exact: a witness attains it' if wc['exponent_is_exact'] else 'upper end of the bracket ' + str(wc['fro'].get('bracket'))}); "
                    + wc["fro"].get("why", wc["fro"]["witness"])),
    )
    if rate["uniform"] is None:
        return out
    return out + (Reading(
        name="uniformly: local exponent ≤ ½ at every N ≥ 2", rule="growth-upper-exact", verdict=rate["uniform"],
        key=("uniform",),
        statement=f"the local growth exponent of the norm and both Jacobians never exceeds ½ (+{G_TOL}), N = 2…2²⁰",
        why="sup over N: " + ", ".join(f"{m} {pm['sup_exponent']:.3f} ({pm['sup_at'][0]} at N = {pm['sup_at'][1]:.3g})"
                                      for m, pm in per_model.items())),)


def headline(source: str, rs, per_model: dict, profiles: dict, n_min: float, wc_e: float, comparisons: list,
             missed: int, norm: str, design: dict) -> str:
    z_gate = design["z_gate"]
    zs = [abs(c["z"]) for c in comparisons if math.isfinite(c["z"])]
    mc_words = (f"MC vs theory max |z| = {max(zs):.2f} over {len(comparisons)} comparisons ({missed} beyond "
                f"{z_gate:.2f})" if norm == "none" else
                f"every Monte Carlo draw within the theory's bound ‖P‖_F ≤ √N ({len(comparisons) - missed}/"
                f"{len(comparisons)} series)")
    why = {m: model_why(per_model[m], profiles[m][2], n_min, design["mc_size"]) for m in ("iid", "tied")}
    return (f"{source}: iid {rs[0].verdict} ({why['iid']}); tied {rs[1].verdict} ({why['tied']}); worst case "
            f"(token-bounded) exponent {wc_e:.3g}; {mc_words}")


def findings(per_model: dict, norm: str, N: int) -> tuple[str, ...]:
    return (f"constant vs softmax's √N at ViT-B (N={N}): " + ", ".join(
        f"{m} {pm.get('constant_vs_softmax', float('nan')):.3g}" for m, pm in per_model.items()
        if "constant_vs_softmax" in pm) if norm == "none" else
        "normalised rows are probability vectors: ‖P‖_F ≤ √N for every input (the same bound as softmax)",)


def tested(source: str, claimed: str, act, norm: str, vit_b: tuple) -> str:
    D, d, N = vit_b
    return (f"{source}: {claimed}. Read as: E-RMS ‖φ(S)‖_F (S = XW_QW_KᵀXᵀ, x_i ~ N(0, I_D), W entries "
            f"N(0, 1/D)) grows like softmax's — local exponent ≤ ½ + {TOL} for every N and the norm within "
            f"{K:g}× of softmax's bound √N at ViT-Base (D={D}, d={d}, N={N}); φ = {act.expr}"
            + (", row-normalised" if norm == "row" else "") + ".")


def command(text: str, norm: str) -> str:
    """The ``sapa audit`` command that reproduces the entry's numbers (``text`` divides x by √d itself: logits S)."""
    return (f"sapa audit \"{text}\"" + (" --normalize row" if norm == "row" else "")
            + " --model iid --logit-scale S --json")


def regime_boundary(windows: dict, n_min: float) -> str:
    """Where the rate holds: from the practical minimum on, except every window above the edge."""
    parts = []
    for m, ws in windows.items():
        above = [w for w in ws if not w["below_n_min"]]
        if above:
            parts.append(f"{m}: the rate holds for N ≥ {n_min:g} except " + "; ".join(
                f"N ≈ {w['from']:.4g}–{w['to']:.4g} (peak exponent {w['peak']:.3f})" for w in above))
    return "; ".join(parts) or f"N ≥ {n_min:g}"


def row_falsifiability() -> dict:
    return by_construction("each row of the normalised matrix is a probability vector, so ‖P‖²_F = Σ_ij P_ij² ≤ "
                           "Σ_i (Σ_j P_ij)² = N: ‖P‖_F ≤ √N for every input, softmax's own bound (rate ½, ratio ≤ 1)")


def row_convention_row(verdict: str) -> dict:
    return varied("logit convention S (no 1/√d)", verdict,
                  "x⁴/Σ_j x_j⁴ = (x/8)⁴/Σ_j (x_j/8)⁴ exactly: row normalisation cancels 8⁴, so the same draws "
                  "give the same matrix and the same verdict")


def row_seed_and_budget_rows(verdict: str, trials: int, n_lengths: int, cid: str) -> list[dict]:
    return [varied("another seed (an independent second Monte Carlo stream)", verdict,
                   f"{trials} trials × {n_lengths} N, iid; stream rng_for(seed, 'ledger', '{cid}', 'robustness')"),
            not_run("budget full", "the Monte Carlo design is the same in both budgets")]


def element_wise_falsifiability(text: str, shift: float, ctrl: str, e_ctrl: float, n_min: float, ratio: float,
                                size_ctrl: str) -> dict:
    return could_fail(
        "the rate is a computed local exponent (closed form or quadrature) and the size a computed ratio: a scale rule "
        "that grows faster than √N or sits far above softmax's √N is caught by the same rule",
        f"φ·N^{shift:g} = ({text})·N^{shift:g} grows like softmax, O(√N) (deliberately false)", ctrl,
        how=f"the same profile and windows, every local exponent + {shift:g} (E‖φ‖² × N^{2 * shift:g} exactly), rule "
            f"audit-like-softmax's rate reading: sup exponent for N ≥ {n_min:g} = {e_ctrl:.3f}",
        size_control={"statement": f"E-RMS ‖φ‖_F ≤ {ratio / SIZE_CONTROL_FACTOR:.4g}·√N (a bound "
                                   f"{round(100 * (SIZE_CONTROL_FACTOR - 1)):g} % below the computed ratio)",
                      "verdict": size_ctrl})


def relu_convention_row(verdict: str, ratio: float) -> dict:
    return varied("logit convention S (no 1/√d)", verdict,
                  f"ReLU(x)/N = 8·ReLU(x/8)/N exactly: ratio {ratio:.3g}, exponents unchanged")


def no_convention_row() -> dict:
    return not_run("logit convention S (no 1/√d)", "sigmoid is not homogeneous: the other convention needs a new "
                                                   "quadrature (minutes); `sapa audit EXPR --logit-scale S` computes it")


def exact_seed_and_budget_rows() -> list[dict]:
    return [not_applicable("seed", "the headline reading is exact or quadrature (the Monte Carlo is its gate)"),
            not_run("budget full", "the audit's numbers are the same in both budgets (only the figure's trials differ)")]


def contract(text: str, norm: str, design: dict):
    """What an other-paper entry tests (its activation ``text``, row-normalised or not) and what would refute it."""
    from sapa.ledger import Contract
    from sapa.rules.like_softmax import A

    D, d, N = design["vit_b"]
    return Contract(
        object=f"attention matrix φ(S) = {text}" + (" row-normalised" if norm == "row" else "") + " element-wise, and its "
               "Jacobians w.r.t. S and X",
        norm="Frobenius, E-RMS",
        randomness="shared X, rows N(0, I_D); W_Q, W_K N(0, 1/D) independent (headline) or tied",
        quantifier="in expectation (headline); worst case over ‖x_i‖ ≤ r beside it",
        n_range=f"N = 2…2²⁰ (closed form / quadrature) at ViT-Base D={D}, d={d}; Monte Carlo at D=d={design['mc_size'][0]}, "
                f"N = {min(design['mc_ns'] + design['row_ns'])}…{max(design['mc_ns'] + design['row_ns'])}",
        predicted_exponent=f"≤ {A:g}, constant within {K:g}× of √N",
        refuted_by=f"a local exponent above {A + TOL:g}, or E-RMS ‖φ‖_F above {K:g}·√N at N = {N}; Monte Carlo that "
                   f"disagrees with the closed form / quadrature (|z| ≥ {design['z_gate']:.2f} more often than "
                   f"{round(100 * (1 - design['nominal'])):g} %)",
        logit_scale="S/sqrt(d)",
        logit_note="the papers' own logits qᵀk/√d: the expression divides x = S_ij by 8 = √64",
    )
