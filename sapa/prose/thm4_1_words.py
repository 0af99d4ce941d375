"""The words of the Theorem 4.1 entries (``thm4.1-norm``, ``thm4.1-jacobian``): their why, headline, corrected claim,
falsifiability and robustness rows, from the numbers their checks computed."""

from __future__ import annotations

from sapa.conditions import by_construction, could_fail, not_applicable, not_run, robustness, threshold_variants, varied

NORM_TESTED = ("For every N and every real S ∈ R^{N×N}: ‖softmax(S)‖_F ≤ √N (row-wise softmax); and √N is the supremum "
               "(approached as rows tend to one-hot).")
NORM_EXACT = ("‖softmax(S)‖²_F = Σ_i Σ_j P_ij² ≤ Σ_i (Σ_j P_ij)² = N, equality iff every row is one-hot (approached as "
              "logit gaps → ∞, never attained for finite S).")
JACOBIAN_TESTED = ("Reading tested for the verdict: for every N and every S ∈ R^{N×N}, the Jacobian of the row-softmax "
                   "map S ↦ softmax(S) with respect to S has ‖·‖_F ≤ 2√N (Eq. 4.2).")


def norm_why(sharp: float, found: float) -> str:
    return f"proven sup ratio {sharp:g}; largest found {found:.12f}; no input above the bound"


def norm_headline(worst: float, sup_reached: float) -> str:
    return f"max ‖P‖_F/√N = {worst:.6f} ≤ 1; one-hot limit reaches {sup_reached:.12f}"


def norm_falsifiability(ctrl: str, control: float, found: float) -> dict:
    """By construction (rows are probability vectors), with the control ‖softmax(S)‖_F ≤ control·√N through the rule."""
    fal = by_construction("‖softmax(S)‖²_F = Σ_i Σ_j P_ij² ≤ Σ_i (Σ_j P_ij)² = N for every S: rows are probability "
                          "vectors, so no input can exceed √N")
    fal["negative_control"] = {"statement": f"‖softmax(S)‖_F ≤ {control:g}·√N for every S (deliberately false)",
                               "verdict": ctrl, "control_ok": ctrl == "FAILS",
                               "how": f"the same search and rule bound: largest ratio found {found:.12f} > {control:g}"}
    return fal


def jacobian_why(sharp, claimed: float, worst: float) -> str:
    return (f"sharp constant {sharp} (proof + KKT + autograd), claimed {claimed:g} ({claimed / float(sharp):g}× loose); "
            f"largest found {worst:.6f}")


def jacobian_x_why(reading_x: dict) -> str:
    return (f"‖J_X‖_F/√N reaches {reading_x['max_ratio']:.3g} (N = {reading_x['N']}, tied-pair witness, W = 100·I) and "
            "grows linearly in the weight scale: no input-independent bound exists")


def jacobian_headline(sharp, claimed: float, worst: float, attained: float) -> str:
    return (f"sharp constant {sharp} (paper: {claimed:g}, {claimed / float(sharp):g}× loose); max seen {worst:.6f}, "
            f"{attained:.6f} at near-two-point rows (approached, attained only for N = 2)")


def jacobian_corrected(sharp, claimed: float) -> str:
    return (f"‖∂softmax(S)/∂S‖_F ≤ {sharp}·√N = √N/2 for all S (softmax(S/τ) at temperature τ: √N/(2τ)), "
            "sharp: approached as every row of softmax(S) tends to mass 1/2 on exactly two entries — attained for "
            "N = 2 (equal logits), never for N ≥ 3, where every softmax row is strictly positive. Per row, "
            "‖diag(s) − ssᵀ‖²_F = p2 − 2p3 + p2² ≤ p2 − p2² ≤ 1/4 (Cauchy–Schwarz p2² ≤ p3). "
            f"The paper's {claimed:g}√N is true but {claimed / float(sharp):g}× loose. With respect to X (S = XWXᵀ) no "
            "input-independent bound holds.")


def jacobian_falsifiability(ctrl: str, control: float, worst: float) -> dict:
    """A for-all bound can fail: the control claims the sharp constant slightly too small, through the same searches."""
    return could_fail(
        "a for-all bound is refuted by one input: the row and autograd searches look for inputs above the claimed "
        "constant (they reach the sharp ½ to 10⁻⁶)",
        f"‖∂softmax(S)/∂S‖_F ≤ {control:g}·√N for every S (deliberately false: the sharp constant is ½)", ctrl,
        how=f"the same searches and rule bound: largest ratio found {worst:.6f} > {control:g}")


def bound_robustness(verdict: str, claimed: float, sharp: float, found: float) -> dict:
    """The bound rule's verdict with its looseness threshold ±20 % (the logit convention and seed do not apply)."""
    from sapa.rules.bound import LOOSE, BoundEvidence
    from sapa.rules.bound import decide as decide_bound

    rows = [not_applicable("logit convention S/√d", "a for-all statement over every real S covers S/√d")]
    for t in threshold_variants(LOOSE):
        rows.append(varied(f"looseness threshold {t:.3g} (±20 % of {LOOSE})",
                           decide_bound(BoundEvidence(claimed=claimed, sharp=sharp, found=found), loose=t)))
    rows.append(not_applicable("seed", "exact (a proof, KKT maxima and adversarial searches; the random search's "
                                       "seed only moves the largest ratio found below the proven supremum)"))
    rows.append(not_run("budget full", "larger N and more random rows; the proven constant does not depend on it"))
    return robustness(verdict, rows)
