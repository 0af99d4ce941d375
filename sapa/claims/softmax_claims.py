"""Ledger checks for Theorem 4.1 of arXiv 2410.18613: the softmax norm and Jacobian bounds.

thm4.1-norm      ‖softmax(S)‖_F ≤ √N.
thm4.1-jacobian  Eq. 4.2: the Jacobian has Frobenius norm ≤ 2√N (the reviewers doubt the 2).

Evidence of three independent kinds: the sympy derivation in ``theory.softmax`` (exact
identity ‖J‖²_F = p2 − 2p3 + p2², the sharp constant and its KKT maximisers), numerics
over random and adversarial rows, and torch autograd Jacobians of the full N×N map.
"""

from __future__ import annotations

import math

from sapa.ledger import Claim, Context, Contract, Outcome, Reading
from sapa.rules.bound import BoundEvidence
from sapa.rules.bound import decide as decide_bound
from sapa.conditions import (by_construction, could_fail, not_applicable, not_run, robustness, threshold_variants,
                             varied)


def check_norm(ctx: Context) -> Outcome:
    """‖softmax(S)‖_F ≤ √N for every S: max ratio over random/adversarial S, and the supremum approached."""
    from empirics.experiments.softmax_bounds import norm_search
    from theory.softmax import softmax_matrix_bounds

    per_n, worst = norm_search(ctx.budget.Ns, ctx.budget.random_rows, ctx.budget.seed)
    bound = softmax_matrix_bounds(ctx.budget.Ns[-1])
    sup_reached = min(r["one_hot_limit_ratio_at_gaps_1_10_30_700"][-1] for r in per_n)
    # Theory: sup_S ‖softmax(S)‖_F/√N = 1 exactly (power sums); numerics: the largest ratio found.
    sharp = float(bound["fro_sup"]) / math.sqrt(ctx.budget.Ns[-1])
    verdict = decide_bound(BoundEvidence(claimed=1.0, sharp=sharp, found=max(worst, sup_reached)))
    reading = Reading(
        name="for all S (the paper's quantifier)", rule="bound", verdict=verdict,
        statement="for every N and every real S ∈ R^{N×N}: ‖softmax(S)‖_F ≤ √N",
        why=f"proven sup ratio {sharp:g}; largest found {max(worst, sup_reached):.12f}; no input above the bound")
    found = max(worst, sup_reached)
    fal = by_construction("‖softmax(S)‖²_F = Σ_i Σ_j P_ij² ≤ Σ_i (Σ_j P_ij)² = N for every S: rows are probability "
                          "vectors, so no input can exceed √N")
    ctrl = decide_bound(BoundEvidence(claimed=0.95, sharp=math.inf, found=found))
    fal["negative_control"] = {"statement": "‖softmax(S)‖_F ≤ 0.95·√N for every S (deliberately false)",
                               "verdict": ctrl, "control_ok": ctrl == "FAILS",
                               "how": f"the same search and rule bound: largest ratio found {found:.12f} > 0.95"}
    return Outcome(
        verdict=verdict,
        readings=(reading,),
        rule="bound",
        falsifiability=fal,
        robustness=_bound_robustness(verdict, claimed=1.0, sharp=sharp, found=found),
        headline=f"max ‖P‖_F/√N = {worst:.6f} ≤ 1; one-hot limit reaches {sup_reached:.12f}",
        tested_statement="For every N and every real S ∈ R^{N×N}: ‖softmax(S)‖_F ≤ √N (row-wise softmax); "
        "and √N is the supremum (approached as rows tend to one-hot).",
        evidence={
            "exact": "‖softmax(S)‖²_F = Σ_i Σ_j P_ij² ≤ Σ_i (Σ_j P_ij)² = N, equality iff every row is one-hot "
            "(approached as logit gaps → ∞, never attained for finite S).",
            "fro_sup_over_sqrtN": float(bound["fro_sup"]) / math.sqrt(ctx.budget.Ns[-1]),
            "max_observed_ratio": worst,
            "supremum_approached_ratio": sup_reached,
            "per_N": per_n,
            "checks": ["exact power-sum argument", "random and adversarial logits at temperatures 1e-3..1e4",
                       "near-one-hot limit"],
        },
    )


def check_jacobian(ctx: Context) -> Outcome:
    """Eq. 4.2: ‖∂softmax(S)/∂S‖_F ≤ 2√N; compute the sharp constant and test both readings."""
    from empirics.experiments.softmax_bounds import (
        autograd_jacobian_search,
        jacobian_wrt_x_growth,
        row_jacobian_search,
    )
    from theory.softmax import (
        jacobian_fro2_in_power_sums,
        kkt_maxima,
        reviewer_one_hot_example,
        sharp_row_jacobian_fro_bound,
        softmax_matrix_bounds,
    )

    sharp = sharp_row_jacobian_fro_bound()  # exact sympy Rational
    c_sharp = float(sharp)
    c_paper = 2.0
    kkt = {n: max(float(v) for _, v in kkt_maxima(n)) for n in (2, 3, 4)}

    rows_checked, worst_row = row_jacobian_search(ctx.budget.Ns, ctx.budget.random_rows, ctx.budget.seed)
    # Matrix level, independent of the theory module: torch autograd Jacobian of the full map.
    autograd, worst_matrix = autograd_jacobian_search(ctx.budget.seed)
    attained = min(a["ratio_at_two_point_rows"] for a in autograd)
    worst = max(worst_row, worst_matrix)

    # The other reading: Jacobian with respect to X, S = X W Xᵀ — depends on the scale of X and W.
    reading_x = jacobian_wrt_x_growth(ctx.budget.seed)

    verdict = decide_bound(BoundEvidence(claimed=c_paper, sharp=c_sharp, found=worst))
    # Negative control: the sharp constant claimed slightly too small (0.45 < ½), through the same search and rule.
    ctrl = decide_bound(BoundEvidence(claimed=0.45, sharp=math.inf, found=worst))
    fal = could_fail(
        "a for-all bound is refuted by one input: the row and autograd searches look for inputs above the claimed "
        "constant (they reach the sharp ½ to 10⁻⁶)",
        "‖∂softmax(S)/∂S‖_F ≤ 0.45·√N for every S (deliberately false: the sharp constant is ½)", ctrl,
        how=f"the same searches and rule bound: largest ratio found {worst:.6f} > 0.45")
    x_found = reading_x["max_ratio"]
    verdict_x = decide_bound(BoundEvidence(claimed=c_paper, sharp=math.inf, found=x_found))
    readings = (
        Reading(name="w.r.t. S (Eq. 4.2's object)", rule="bound", verdict=verdict,
                statement="for every N and S ∈ R^{N×N}: ‖∂softmax(S)/∂S‖_F ≤ 2√N",
                why=f"sharp constant {sharp} (proof + KKT + autograd), claimed 2 ({c_paper / c_sharp:g}× loose); "
                    f"largest found {worst:.6f}"),
        Reading(name="w.r.t. X, S = XWXᵀ (second reading)", rule="bound", verdict=verdict_x,
                statement="for every X, W: ‖∂softmax(XWXᵀ)/∂X‖_F ≤ 2√N",
                why=f"‖J_X‖_F/√N reaches {x_found:.3g} (N = {reading_x['N']}, tied-pair witness, W = 100·I) and grows "
                    "linearly in the weight scale: no input-independent bound exists"),
    )
    N_show = ctx.budget.Ns[-1]
    bounds = softmax_matrix_bounds(N_show)
    return Outcome(
        verdict=verdict,
        readings=readings,
        rule="bound",
        falsifiability=fal,
        robustness=_bound_robustness(verdict, claimed=c_paper, sharp=c_sharp, found=worst),
        headline=f"sharp constant {sharp} (paper: 2, {c_paper / c_sharp:g}× loose); max seen {worst:.6f}, "
        f"{attained:.6f} at near-two-point rows (approached, attained only for N = 2)",
        tested_statement="Reading tested for the verdict: for every N and every S ∈ R^{N×N}, the Jacobian of the "
        "row-softmax map S ↦ softmax(S) with respect to S has ‖·‖_F ≤ 2√N (Eq. 4.2).",
        corrected_claim=f"‖∂softmax(S)/∂S‖_F ≤ {sharp}·√N = √N/2 for all S (with temperature τ: τ√N/2), sharp: "
        "approached as every row of softmax(S) tends to mass 1/2 on exactly two entries — attained for N = 2 (equal "
        "logits), never for N ≥ 3, where every softmax row is strictly positive. Per row, "
        "‖diag(s) − ssᵀ‖²_F = p2 − 2p3 + p2² ≤ p2 − p2² ≤ 1/4 (Cauchy–Schwarz p2² ≤ p3). "
        "The paper's 2√N is true but 4× loose. With respect to X (S = XWXᵀ) no input-independent bound holds.",
        evidence={
            "sharp_constant": c_sharp,
            "sharp_constant_exact": str(sharp),
            "paper_constant": c_paper,
            "looseness_factor": c_paper / c_sharp,
            "identity_row_jacobian_fro2": str(jacobian_fro2_in_power_sums()),
            "kkt_max_row_jacobian_fro2_n2_n3_n4": kkt,
            "reviewer_one_hot_example": {k: str(v) for k, v in reviewer_one_hot_example(4).items()},
            "max_observed_row_jacobian_fro": worst_row,
            "rows_checked": rows_checked,
            "max_observed_matrix_ratio_autograd": worst_matrix,
            "ratio_at_two_point_rows_autograd": attained,
            "autograd": autograd,
            f"bounds_at_N={N_show}": {k: float(v) for k, v in bounds.items()},
            "reading_wrt_X": reading_x,
            "attention_lipschitz_wrt_X": _lipschitz(ctx),
            "checks": ["sympy identity and KKT maxima (n = 2, 3, 4)", "Cauchy–Schwarz proof for all n",
                       "random/adversarial rows", "torch autograd Jacobian of the N×N map",
                       "Jacobian w.r.t. X",
                       "Lipschitz constant of softmax attention w.r.t. X (ascent, tokens of norm r)"],
        },
    )


def _lipschitz(ctx: Context) -> dict:
    """Softmax attention's Lipschitz constant w.r.t. X vs N (reported, not asserted): quick N = 4…16, full 4…32."""
    from empirics.experiments.softmax_bounds import lipschitz_search

    Ns = [n for n in (4, 8, 16, 32) if 2 * n <= max(ctx.budget.worst_Ns)]
    return lipschitz_search(Ns, ctx.budget.seed, ctx.budget.worst_steps, ctx.budget.worst_restarts)


def _bound_robustness(verdict: str, claimed: float, sharp: float, found: float) -> dict:
    """The bound rule's verdict with its looseness threshold ±20 % (the logit convention and seed do not apply)."""
    from sapa.rules.bound import LOOSE

    rows = [not_applicable("logit convention S/√d", "a for-all statement over every real S covers S/√d")]
    for t in threshold_variants(LOOSE):
        rows.append(varied(f"looseness threshold {t:.3g} (±20 % of {LOOSE})",
                           decide_bound(BoundEvidence(claimed=claimed, sharp=sharp, found=found), loose=t)))
    rows.append(not_applicable("seed", "exact (a proof, KKT maxima and adversarial searches; the random search's "
                                       "seed only moves the largest ratio found below the proven supremum)"))
    rows.append(not_run("budget full", "larger N and more random rows; the proven constant does not depend on it"))
    return robustness(verdict, rows)


CLAIMS = [
    Claim(
        id="thm4.1-norm",
        statement="‖softmax(S)‖_F ≤ √N (Theorem 4.1).",
        contract=Contract(
            object="row-softmax attention matrix P = softmax(S), S ∈ R^{N×N}",
            norm="Frobenius",
            randomness="none: a worst-case statement over all real S (checked on random and adversarial S)",
            quantifier="for all inputs",
            n_range="every N ≥ 1",
            predicted_exponent="bound √N (exponent 0.5 of the bound, not a growth rate of typical values)",
            refuted_by="any S with ‖softmax(S)‖_F > √N",
            logit_scale="S",
            logit_note="invariant: a for-all statement over every real S, so it covers S/√d (and any temperature)",
        ),
        check=check_norm,
    ),
    Claim(
        id="thm4.1-jacobian",
        statement="Eq. 4.2: the Jacobian of softmax attention has Frobenius norm ≤ 2√N.",
        contract=Contract(
            object="Jacobian of S ↦ softmax(S) (row-wise) with respect to S; also reported: w.r.t. X for S = XWXᵀ",
            norm="Frobenius",
            randomness="none: a worst-case statement over all real S",
            quantifier="for all inputs",
            n_range="every N ≥ 2",
            predicted_exponent="bound 2√N",
            refuted_by="any S with ‖∂softmax(S)/∂S‖_F > 2√N; the bound is loose if the sharp constant is < 2",
            logit_scale="S",
            logit_note="invariant for the Jacobian w.r.t. S (a for-all statement over every real S); w.r.t. X it "
                       "scales with the logit scale (the reading w.r.t. X has no bound under either convention)",
        ),
        check=check_jacobian,
    ),
]
