"""Ledger question ``causal-masking`` (the reviewers; arXiv 2410.18613 is silent): under a causal mask row i sees i
tokens — should the scale follow the effective length?

Tested: whether a global 1/√N keeps per-row norms as uniform in i as softmax's; the exact row formula
E‖c_i(S^{∘p})_i‖² = c_i²[(i−1) m_off + m_diag] against Monte Carlo (``sapa.empirics.experiments.causal``); the whole
masked matrix under 1/√N (``growth-upper-exact``, exact); the row profiles under 1/√N against softmax's row bound and
its typical rows, and under the per-row 1/√i (``uniform-profile``: slope of the row profile in i, 99 % bootstrap
intervals, p ∈ {1, 3}); and the train-length transfer for generation. ANSWERED when every reading is decided and the
Monte Carlo agrees with the exact row formula on the first pass (``mc-agreement``); UNDETERMINED otherwise.
"""

from __future__ import annotations

import math

from sapa.evidence import monte_carlo as mc
from sapa.ledger import Claim, Context, Contract, Outcome, store_figure_data
from sapa.prose import causal_masking_words as words
from sapa.rules.profile import TOL, ProfileEvidence, case_shape
from sapa.rules.profile import decide as decide_profile
from sapa.theory.families import INV_I, INV_SQRT_I, INV_SQRT_N

LEVEL = 0.99  # bootstrap interval level for every exponent used by a verdict
POLICIES = (INV_SQRT_N, INV_SQRT_I, INV_I)  # global 1/√N, per-row 1/√i, and 1/i (softmax's typical rows' shape)


def causal_config(ctx: Context) -> dict:
    """The lengths, trials and the train-length transfer's design of the budget."""
    if ctx.budget.name == "quick":
        return dict(Ns=(256, 1024), trials=(16, 8), max_trials=512, N_train=128, transfer_trials=4,
                    transfer_max_trials=128)
    return dict(Ns=(256, 1024), trials=(64, 32), max_trials=4096, N_train=256, transfer_trials=16,
                transfer_max_trials=1024)


def check(ctx: Context) -> Outcome:
    """Row profiles under a causal mask: global 1/√N against softmax's rows, and the per-row 1/√i (module docstring)."""
    from sapa.empirics.experiments.causal import causal_agreement, run_causal_masking

    cfg = causal_config(ctx)
    res = run_causal_masking(seed=ctx.budget.seed, policies=POLICIES, level=LEVEL, **cfg)
    agreement = causal_agreement(res, POLICIES)  # first pass only: no rerun
    gate, _, _ = mc.gate(ctx, "causal-masking", agreement, LEVEL)
    profiles, cases, corrected_cases = _profiles(res)
    exact, whole = _exact_per_model(res, cfg), _whole_matrix(res, cfg)
    sup_whole = max(w["sup_local_exponent"] for w in whole.values())
    verdicts = _verdicts(res, sup_whole)
    readings = words.readings(verdicts, whole, profiles, exact, cfg)
    from sapa.labels import question_verdict

    verdict = question_verdict(readings, gates_ok=gate == "HOLDS")
    transfer = _transfer(res)
    return Outcome(
        verdict=verdict,
        readings=readings,
        answer=words.answer(whole, exact, transfer, cfg),
        falsifiability=words.falsifiability(profile_verdict(res, "inv_i", "bound")),
        robustness=_robustness(res, readings, sup_whole, verdict, gate == "HOLDS"),
        findings=words.findings(whole),
        headline=words.headline(profiles, exact, cfg),
        tested_statement=words.tested(cfg, res.d, LEVEL),
        corrected_claim=words.corrected(profiles, exact, transfer, cfg),
        figures=_figure(ctx, res),
        evidence={"whole_matrix_under_mask": whole, f"cases_global_{INV_SQRT_N}": cases,
                  "corrected_claim_cases": corrected_cases,
                  "corrected_claim_holds_in_iid_model": all(c["inv_sqrt_i/bound"] == "uniform"
                                                            for c in corrected_cases.values()),
                  "profile_exponents": profiles, "exact_row_formula": words.EXACT_ROW_FORMULA,
                  "exact_per_model": exact, "softmax_row1_is_exactly_1": True,
                  "monte_carlo_agreement": agreement,
                  "monte_carlo_gate": {"rule": "mc-agreement", "verdict": gate, "first_pass": True},
                  "train_length_transfer": {"N_train": cfg["N_train"], "p": res.transfer_p, "series": transfer},
                  "tolerance": TOL, "interval_level": LEVEL,
                  "design": {"N": list(cfg["Ns"]), "trials_at_last_bin": list(cfg["trials"]),
                             "max_trials": cfg["max_trials"], "bins": words.BINS, "seed": ctx.budget.seed}},
    )


def profile_verdict(res, pol: str, crit: str, tol: float = TOL) -> str:
    """uniform-profile over every (N, p) for one scale policy and reading of softmax's rows."""
    cases_ = []
    for (N, p), x in res.expo.items():
        x = x.set_index(["policy", "criterion"])
        cases_.append((f"N{N}/p{p}", float(x.loc[(pol, crit), "ci_lo"]), float(x.loc[(pol, crit), "ci_hi"])))
    return decide_profile(ProfileEvidence(tuple(cases_)), tol=tol)


def _verdicts(res, sup_whole: float, tol_profile: float = TOL, tol_growth: float | None = None) -> dict:
    """The four readings' verdicts, keyed as the readings (tolerances varied only for robustness)."""
    from sapa.rules.growth import UpperEvidence, decide_upper

    ev = UpperEvidence(0.5, sup_whole, sup_whole, True)
    return {"whole": decide_upper(ev) if tol_growth is None else decide_upper(ev, tol=tol_growth),
            words.G_BOUND: profile_verdict(res, INV_SQRT_N, "bound", tol_profile),
            words.G_TYPICAL: profile_verdict(res, INV_SQRT_N, "typical", tol_profile),
            "inv_sqrt_i/bound": profile_verdict(res, "inv_sqrt_i", "bound", tol_profile)}


def _profiles(res) -> tuple[dict, dict, dict]:
    """Per (N, p): every policy's row-profile slope with its interval; the shapes of the global and corrected cases."""
    profiles, cases, corrected_cases = {}, {}, {}
    for (N, p), e in res.expo.items():
        e = e.set_index(["policy", "criterion"])
        key = f"N{N}/p{p}"
        profiles[key] = {
            f"{pol}/{crit}": {"slope": round(float(e.loc[(pol, crit), "slope"]), 4),
                              "ci": [round(float(e.loc[(pol, crit), "ci_lo"]), 4), round(float(e.loc[(pol, crit), "ci_hi"]), 4)],
                              "exact_slope": None if math.isnan(e.loc[(pol, crit), "exact_slope"])
                              else round(float(e.loc[(pol, crit), "exact_slope"]), 4),
                              "last_bin_over_row1": float(f"{e.loc[(pol, crit), 'last_over_first']:.4g}")}
            for pol, crit in e.index}
        shape = lambda pol, crit: case_shape(float(e.loc[(pol, crit), "ci_lo"]), float(e.loc[(pol, crit), "ci_hi"]))  # noqa: E731
        cases[key] = {c: shape(INV_SQRT_N, c) for c in ("bound", "typical")}
        corrected_cases[key] = {"inv_sqrt_i/bound": shape("inv_sqrt_i", "bound"), "inv_i/typical": shape("inv_i", "typical")}
    return profiles, cases, corrected_cases


def _exact_per_model(res, cfg: dict) -> dict:
    """Exact per-row facts, every model: last-row / first-row E-RMS and the row from which 1/√i is flat."""
    from sapa.empirics.experiments.causal import exact_row_ms, regime_start, row_moments

    exact, N = {}, max(cfg["Ns"])
    for m in ("paper", "iid", "tied"):
        for p in (1, 3):
            m_off, m_diag = row_moments(p, m, res.D, res.d)
            r = m_diag / m_off
            g = exact_row_ms(p, m, N, res.D, res.d, INV_SQRT_N)
            dyn = exact_row_ms(p, m, N, res.D, res.d, "inv_sqrt_i")
            exact[f"{m}/p{p}"] = {"m_off": float(f"{m_off:.6g}"), "m_diag": float(f"{m_diag:.6g}"), "r": float(f"{r:.6g}"),
                                  f"global_last_over_first_N{N}": float(f"{math.sqrt(g[-1] / g[0]):.4g}"),
                                  f"per_row_last_over_first_N{N}": float(f"{math.sqrt(dyn[-1] / dyn[0]):.4g}"),
                                  "per_row_flat_from_row": regime_start(r, TOL)}
    return exact


def _whole_matrix(res, cfg: dict) -> dict:
    """The whole matrix under the mask, global c = 1/√N: E‖·‖² = c²[N(N−1)/2·m_off + N·m_diag], exactly."""
    from sapa.empirics.experiments.causal import masked_matrix_exponent, masked_matrix_sup_exponent

    return {f"{m}/p{p}": {"sup_local_exponent": masked_matrix_sup_exponent(p, m, res.D, res.d),
                          "exponent_on_grid": masked_matrix_exponent(p, m, cfg["Ns"], res.D, res.d)}
            for m in ("paper", "iid", "tied") for p in (1, 3)}


def _transfer(res) -> dict:
    """Per (policy, quantity): the norm at N ≠ N_train over its value at N_train, exact and Monte Carlo."""
    out = {}
    for (pol, q), g in res.transfer.groupby(["policy", "quantity"]):
        g = g.sort_values("N")
        out[f"{pol}/{q}"] = {
            "N": [int(n) for n in g["N"]],
            "exact_ratio": None if pol == "softmax" else [round(float(v), 4) for v in g["exact_ratio"]],
            "mc_ratio": [round(float(v), 4) for v in g["mc_ratio"]],
            "mc_ci95": [[round(float(a), 4), round(float(b), 4)] for a, b in zip(g["mc_lo"], g["mc_hi"])],
            "trials": [int(t) for t in g["trials"]]}
    return out


def _robustness(res, readings, sup_whole: float, verdict: str, gates_ok: bool) -> dict:
    """The answer under the other logit convention and both tolerances ±20 %."""
    from sapa.conditions import not_run, robustness, threshold_variants, varied
    from sapa.labels import question_verdict
    from sapa.rules.growth import TOL as G_TOL

    rows = [varied("logit convention S/√d", verdict, "row-profile slopes and exponents invariant (constant factor "
                                                     "d^(−p/2) per p)")]
    for k, (tp, tg) in enumerate(zip(threshold_variants(TOL), threshold_variants(G_TOL))):
        vs = list(_verdicts(res, sup_whole, tp, tg).values())
        fake = [{"name": r.name, "verdict": v} for r, v in zip(readings, vs)]
        rows.append(varied(f"tolerances {'−' if k == 0 else '+'}20 % (profile ±{tp:.3g}, growth {tg:.3g})",
                           question_verdict(fake, gates_ok), "readings: " + ", ".join(vs)))
    rows.append(not_run("seed", "a second Monte Carlo of the row bins is not run (its cost equals the first)"))
    rows.append(not_run("budget full", "more trials per bin; not run in this budget"))
    return robustness(verdict, rows)


def _figure(ctx: Context, res) -> tuple[str, ...]:
    from sapa.figures import causal_masking as fig

    stem = fig.stored_stem(res, ctx.budget.name)
    store_figure_data(ctx, fig.NAME, res.to_json(), stem)
    return tuple(str(p.relative_to(ctx.out_dir)) for p in fig.draw(res, ctx.out_dir / "figures", stem))


CLAIM = Claim(
    id="causal-masking",
    statement="(reviewers; the paper is silent) Under a causal mask row i sees i tokens; should the scale follow "
              "the effective length?",
    contract=Contract(
        object="per-row norms ‖φ(S)_i‖ under a causal mask, φ = softmax(S/√d) or c_i·x^p (p = 1, 3) with c = 1/√N, "
               "c_i = 1/√i or c_i = 1/i; and the whole matrix / newest row at N ≠ N_train with c fixed at 1/√N_train",
        norm="Euclidean per row, Frobenius per matrix; root of the expected square",
        randomness="shared X: rows N(0, I_D), W_Q, W_K N(0, 1/D) iid (exact formulas also for tied and paper)",
        quantifier="in expectation",
        n_range="N ∈ {256, 1024}; transfer N_train/8…8·N_train",
        predicted_exponent="row-profile slope β in i: 0 (uniform, as softmax's bound) for the tested global 1/√N",
        refuted_by=f"β's interval outside ±{TOL:g} under both readings of softmax's row size, for every N and p",
        logit_scale="S",
        logit_note="row profiles' slopes in i do not depend on the convention (a constant factor per p)",
    ),
    check=check,
    kind="question",
)
