"""Ledger check ``real-model-regime``: does Cor 4.3 / 4.5 (x^p/√N grows like √N) describe a real model?

arXiv 2410.18613 derives the √N growth of ‖x^p/√N‖_F (p = 1, 3) under i.i.d. Gaussian X, W_Q,
W_K with A = XW_Q independent of B = XW_K; the reviews answer that A and B share X and that the
rate needs N ≫ D. This check puts the 72 heads of a trained transformer (all-MiniLM-L6-v2,
``empirics.real``, optional extra ``real``) on the regime map at the lengths it is used at
(N = 8 … 256, its max_seq_length): exact N* under Gaussian proxies of its own weights, and
growth exponents measured on its own hidden states.

Verdict rule (TOL = 0.05, interval level 0.9, the fit over N ∈ [8, 256]):

* UNDETERMINED when the extra is not installed, or a sanity check fails (‖softmax(S)‖_F ≤ √N on
  every measured input; biases exactly a token shift; all fits finite).
* per p ∈ {1, 3} and object ∈ {‖φ(S)‖_F, ‖∂φ(S)/∂X‖_F}: ``consistent`` = fraction of heads whose
  measured RMS-exponent interval meets [0.5 − TOL, 0.5 + TOL]; per p: ``in_regime`` = fraction
  of heads whose matched-Gaussian N_reg (first N with |e(N) − ½| ≤ TOL) is ≤ N_real = 128.
* HOLDS if every ``consistent`` ≥ 0.9 and every ``in_regime`` ≥ 0.9; FAILS if some
  ``consistent`` < 0.5 (most heads of this model do not grow like √N at its lengths);
  HOLDS_IN_REGIME otherwise (the evidence names the heads, p and objects for which it holds).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from sapa.ledger import Claim, Context, Contract, Outcome

TOL = 0.05
HOLD_FRAC = 0.9
FAIL_FRAC = 0.5
NOT_INSTALLED = {"status": "optional extra 'real' not installed"}

STATEMENT = ("Cor 4.3 / 4.5 (reviewers 1.2, 1.3): φ(x) = x/√N and x³/√N attention grows like √N, 'like softmax'; "
             "does this describe a real transformer's heads at its real sequence lengths?")

TESTED = (f"For every (layer, head) of all-MiniLM-L6-v2 (6 × 12 heads, D = 384, d = 32, biases included), on prefixes "
          f"of real English text: the RMS over texts of ‖x^p(S)/√N‖_F and of ‖∂(x^p(S)/√N)/∂X‖_F (p = 1, 3; "
          f"S = (XW_Q + b_Q)(XW_K + b_K)ᵀ/√d, X the layer's attention input) has growth exponent within {TOL} of 0.5 "
          f"over N ∈ [8, 256]; and, under the Gaussian proxy of each head (x ~ N(0, E[(x+s)(x+s)ᵀ]) with the head's own "
          f"W), the exact local exponent is within {TOL} of 0.5 at the model's training length N = 128.")


def _frac(mask) -> float:
    mask = np.asarray(mask, dtype=bool)
    return float(mask.mean()) if mask.size else math.nan


def _meets(ci, lo: float, hi: float) -> bool:
    return ci[0] <= hi and ci[1] >= lo


def judge(res: dict, tol: float = TOL) -> tuple[str, dict]:
    """Verdict and its inputs from an :func:`empirics.real.analyse` result, by the module's rule."""
    heads = res["heads"]
    N_real = res["meta"]["config"]["N_real"]
    sanity = {
        "softmax_norm_le_sqrt_n": bool(res["meta"]["softmax_norm_le_sqrt_n"]),
        "bias_is_token_shift": res["meta"]["max_shift_residual"] < 1e-8,
        "fits_finite": all(math.isfinite(h[f"meas_{t}_{k}_slope"]) for h in heads
                           for t in ("softmax", "p1", "p3") for k in ("fro", "jac")),
    }
    consistent, in_regime, below = {}, {}, {}
    for p in (1, 3):
        for kind in ("fro", "jac"):
            consistent[f"p{p}_{kind}"] = _frac([_meets(h[f"meas_p{p}_{kind}_ci"], 0.5 - tol, 0.5 + tol) for h in heads])
        in_regime[f"p{p}"] = _frac([h[f"matched_p{p}_n_reg"] <= N_real for h in heads])
        for proxy in ("identity", "measured", "matched"):
            below[f"p{p}_{proxy}"] = _frac([h[f"{proxy}_p{p}_n_star"] < N_real for h in heads])
    if not all(sanity.values()):
        verdict = "UNDETERMINED"
    elif min(consistent.values()) >= HOLD_FRAC and min(in_regime.values()) >= HOLD_FRAC:
        verdict = "HOLDS"
    elif min(consistent.values()) < FAIL_FRAC:
        verdict = "FAILS"
    else:
        verdict = "HOLDS_IN_REGIME"
    holding = {key: [[h["layer"], h["head"]] for h in heads
                     if _meets(h[f"meas_{key}_ci"], 0.5 - tol, 0.5 + tol)] for key in consistent}
    return verdict, {"sanity": sanity, "fraction_consistent_with_half": consistent,
                     "fraction_in_sqrt_n_regime_at_N_real_matched_proxy": in_regime,
                     "fraction_n_star_below_N_real": below, "heads_consistent_with_half": holding,
                     "rule": f"HOLDS if all consistent ≥ {HOLD_FRAC} and all in-regime ≥ {HOLD_FRAC}; "
                             f"FAILS if some consistent < {FAIL_FRAC}; else HOLDS_IN_REGIME; TOL = {tol}"}


def _q(values, qs=(0.0, 0.1, 0.5, 0.9, 1.0)) -> list[float]:
    return [round(float(v), 4) for v in np.quantile(np.asarray(values, float), qs)]


def _evidence(res: dict, rule: dict) -> dict:
    from empirics import real

    heads = res["heads"]
    tab = real.layer_table(res)
    col = lambda key: [h[key] for h in heads]  # noqa: E731
    exps = {}
    for tag in ("softmax", "p1", "p3"):
        for kind in ("fro", "jac"):
            k = f"meas_{tag}_{kind}"
            cis = np.array(col(k + "_ci"))
            exps[f"{tag}_{kind}"] = {"quantiles_0_10_50_90_100": _q(col(k + "_slope")),
                                     "median_ci_width": round(float(np.median(cis[:, 1] - cis[:, 0])), 4),
                                     **({"quantiles_to512": _q(col(k + "_slope_all"))} if k + "_slope_all" in heads[0] else {})}
    vs_proxy = {}
    for p in (1, 3):
        for kind, suf in (("fro", ""), ("jac", "_jac")):
            meas = np.array(col(f"meas_p{p}_{kind}_slope"))
            cis = np.array(col(f"meas_p{p}_{kind}_ci"))
            for proxy in real.PROXIES:
                pred = np.array(col(f"{proxy}_p{p}_grid_slope{suf}"))
                vs_proxy[f"p{p}_{kind}_{proxy}"] = {
                    "median_measured_minus_predicted": round(float(np.median(meas - pred)), 4),
                    "fraction_prediction_in_ci": _frac((cis[:, 0] <= pred) & (pred <= cis[:, 1]))}
    # non-stationary scores: if the typical |S_ij| grows like N^γ, ‖x^p/√N‖ gains ≈ pγ over the Gaussian
    # prediction. γ from p = 1 (measured minus matched-proxy slope); then test it on p = 3.
    gamma = np.array(col("meas_p1_fro_slope")) - np.array(col("matched_p1_grid_slope"))
    p3 = np.array(col("meas_p3_fro_slope"))
    p3_pred = np.array(col("matched_p3_grid_slope")) + 3 * gamma
    out = {
        "model": res["meta"]["model"],
        "config": res["meta"]["config"],
        "Ns_fit": res["Ns_real"], "Ns_measured": res["Ns"],
        "texts": res["meta"]["passages"], "n_tokens_covariance": res["meta"]["n_tokens_covariance"],
        "scores_and_jacobian": res["meta"]["scores"],
        "proxies": res["meta"]["proxies"],
        "per_layer": {str(l): {k: round(float(v), 4) for k, v in row.items()} for l, row in tab.iterrows()},
        "n_star_all_heads": {f"p{p}_{proxy}": _q(col(f"{proxy}_p{p}_n_star")) for p in (1, 3) for proxy in real.PROXIES},
        "measured_exponents": exps,
        "measured_vs_exact": vs_proxy,
        "score_scale_growth": {
            "gamma_quantiles": _q(gamma),
            "p3_residual_quantiles": _q(p3 - p3_pred),
            "p3_correlation_with_prediction": round(float(np.corrcoef(p3, p3_pred)[0, 1]), 4),
            "note": "γ = measured p = 1 exponent − matched-Gaussian p = 1 slope: the growth of the typical score "
                    "|S_ij| with N (0 for i.i.d. tokens); p3 residual = measured p = 3 exponent − (matched p = 3 "
                    "slope + 3γ)",
        },
        "ab_correlation": {k: _q(col("ab_" + k)) for k in ("matched_abs_mean", "canonical_top", "cov_norm_ratio",
                                                            "null_canonical_top", "identity_canonical_top",
                                                            "diag_logit_excess_sd")},
        "vit_references": real.vit_references(res["Ns_real"]),
        "analysis_seconds": res["meta"]["seconds"], "from_cache": res["meta"]["from_cache"],
        **rule,
    }
    return out


def _headline(ev: dict, verdict: str) -> str:
    f = ev["fraction_consistent_with_half"]
    q1 = ev["measured_exponents"]["p1_fro"]["quantiles_0_10_50_90_100"]
    q3 = ev["measured_exponents"]["p3_fro"]["quantiles_0_10_50_90_100"]
    ns = ev["n_star_all_heads"]["p3_measured"]
    return (f"all-MiniLM-L6-v2, 72 heads, N 8–256: exponent of ‖x/√N‖ median {q1[2]:.2f} (range {q1[0]:.2f}–{q1[4]:.2f}), "
            f"‖x³/√N‖ {q3[2]:.2f} ({q3[0]:.2f}–{q3[4]:.2f}); CI meets 0.5±{TOL}: p=1 {f['p1_fro']:.0%}, "
            f"p=3 {f['p3_fro']:.0%} of heads; N* (measured Σ) p=3 median {ns[2]:.3g}, max {ns[4]:.3g}")


def check_real_model_regime(ctx: Context) -> Outcome:
    """Run (or reuse from ``OUT/real``) the real-model analysis, judge it, draw the figure."""
    from empirics import real

    if not real.available():
        return Outcome(verdict="UNDETERMINED", evidence=dict(NOT_INSTALLED), tested_statement=TESTED,
                       headline=f"optional extra 'real' not installed (missing: {', '.join(real.missing_modules())})")
    real.set_offline()
    cfg = real.QUICK if ctx.budget.name == "quick" else real.FULL
    res = real.analyse(replace(cfg, seed=ctx.budget.seed), cache_dir=ctx.out_dir / "real")
    verdict, rule = judge(res)
    ev = _evidence(res, rule)
    figures = ()
    try:
        from figures import real_heads

        paths = real_heads.draw(res, ctx.out_dir / "figures")
        figures = tuple(str(p.relative_to(ctx.out_dir)) for p in paths)
    except AssertionError as exc:  # the figure asserts its own consistency; a failure is evidence, not a crash
        ev["figure_assertion_failed"] = str(exc)
    e = ev["measured_exponents"]
    corrected = None
    if verdict != "HOLDS":
        g = ev["score_scale_growth"]["gamma_quantiles"]
        corrected = (
            "For a trained BERT (all-MiniLM-L6-v2) at N = 8–256 the growth of x^p/√N attention is set per head, not by "
            f"the √N law: exponents of ‖x/√N‖_F span {e['p1_fro']['quantiles_0_10_50_90_100'][0]:.2f}–"
            f"{e['p1_fro']['quantiles_0_10_50_90_100'][4]:.2f} and of ‖x³/√N‖_F "
            f"{e['p3_fro']['quantiles_0_10_50_90_100'][0]:.2f}–{e['p3_fro']['quantiles_0_10_50_90_100'][4]:.2f}. "
            "Two effects the i.i.d. theory omits decide it: (i) shared X makes the diagonal S_ii special, so under "
            "a Gaussian proxy of each head E‖S^{∘p}‖²_F = N(N−1)m_off + N m_diag and x^p/√N grows like √N only for "
            f"N ≫ N* = 1 + m_diag/m_off (per head in the evidence; up to {ev['n_star_all_heads']['p3_measured'][4]:.3g} "
            "for p = 3 with the measured token covariance); (ii) real hidden states are not i.i.d. in N: the typical "
            f"score |S_ij| grows like N^γ, γ per head in [{g[0]:.2f}, {g[4]:.2f}] (median {g[2]:.2f}), adding ≈ pγ "
            "(p = 3 exponent ≈ Gaussian prediction + 3γ, correlation "
            f"{ev['score_scale_growth']['p3_correlation_with_prediction']:.2f}). A 1/√N scale does not make this "
            "model's x^p attention grow like softmax's; a per-head scale from the measured ‖S‖ growth would.")
    return Outcome(verdict=verdict, evidence=ev, tested_statement=TESTED, headline=_headline(ev, verdict),
                   corrected_claim=corrected, figures=figures)


CONTRACT = Contract(
    object="φ(S) = x/√N and x³/√N element-wise (and the model's softmax, reported), S = (XW_Q+b_Q)(XW_K+b_K)ᵀ/√d of "
           "each of the 72 heads of all-MiniLM-L6-v2; and the Jacobian ∂φ(S)/∂X, X the layer's attention input",
    norm="Frobenius; RMS over texts",
    randomness="real weights; real hidden states of 8 shipped English passages (prefixes, each run through the model); "
               "exact moments under Gaussian proxies N(0, I), N(0, Σ̂_l), N(0, E[(x+s)(x+s)ᵀ]) with the head's own W",
    quantifier="per head, at the model's lengths; fraction of heads",
    n_range="N ∈ {8, 16, 32, 64, 128, 256} (quick) or 13 lengths 8–512 (full; verdict from 8–256); N_real = 128",
    predicted_exponent="0.5 (∝ √N)",
    refuted_by=f"measured 90% intervals of fewer than {FAIL_FRAC:.0%} of heads meeting [0.45, 0.55] for some p and object",
)

CLAIMS = [Claim("real-model-regime", STATEMENT, CONTRACT, check_real_model_regime)]
