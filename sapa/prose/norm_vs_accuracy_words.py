"""The words of ``norm-vs-accuracy``: statement, tested contract, each reading's decisive numbers, the answer (with the
reviewers' x³/1 against x/16) and the descriptive findings. Nothing here decides a verdict."""

from __future__ import annotations

import math

NORMS = {"log10_attn_fro": "‖φ(S)‖_F", "log10_jac_x_fro": "‖∂φ(S)/∂X‖_F"}
POLY = ("x/c", "x³/c")


STATEMENT = ("Does accuracy follow the attention norm — within one activation family x^p/c, as the scale c moves "
             "‖φ(S)‖_F, and across families at matched norm (the reviewers' x³/1 against x/16)?")


TESTED = ("At each task's smallest N (digits 8×8 images, N = 16 patches; the causal character model, N = 64), x/c and "
          "x³/c over a log grid of c (1 … 128, including √N and the paper's 16) and softmax(S/τ) over a grid of τ, "
          "tiny transformers trained with the study's seeds, minibatches and learning-rate grid; per dose (the unit: "
          "c at its best lr, seeds averaged) the final ‖φ(S)‖_F, ‖∂φ(S)/∂X‖_F (exact, float64) and test accuracy. "
          "Within x/c and x³/c: Spearman ρ(log10 norm, accuracy) over the doses, exact permutation p (dose-association: "
          "HOLDS if a lower norm goes with a higher accuracy). Across them: x³/c minus x/c at matched ‖φ(S)‖_F "
          "(matched-norm: HOLDS if within ±0.02). Holm over the entry's readings. ANSWERED when every reading is "
          "decided.")


def _p(v: float) -> str:
    return "undefined" if not math.isfinite(v) else f"{v:.3g}"


def dose_why(t, fam: str, q: str, a, p_holds: float, p_fails: float) -> str:
    """The doses' norms and accuracies and the test, in one line."""
    d = t[t["family"] == fam].sort_values("dose")
    pts = ", ".join(f"c={c:g}: {n:+.2f}/{acc:.3f}" for c, n, acc in zip(d["dose"], d[q], d["test_acc"]))
    best = d.loc[d["test_acc"].idxmax()]
    how = f"exact over all {math.factorial(a.n)} pairings" if a.exact else "Monte Carlo pairings"
    return (f"ρ = {a.rho:+.2f} over {a.n} doses ({how}); Holm-adjusted p(ρ < 0) = {_p(p_holds)}, p(ρ > 0) = {_p(p_fails)}; log10 {NORMS[q]}/accuracy "
            f"per dose {{{pts}}}; the most accurate dose c = {best['dose']:g}")


def matched_why(m) -> str:
    c = m.contrast
    diffs = ", ".join(f"{v:+.3f}" for v in c.diffs)
    return (f"{c.n} doses of x³/c inside x/c's norm range; accuracy differences at matched norm {{{diffs}}}, mean "
            f"{c.mean:+.3f}, 90 % interval [{m.lo:+.3f}, {m.hi:+.3f}]; Holm-adjusted p(beyond ±0.02) = {_p(m.p_fails)}"
            if c.n else "x³/c and x/c reach no common norm: nothing to compare")


def reviewer_pair(t) -> str | None:
    """The reviewer's comparison from the dose table: x³/1 against x/16 (norms and accuracies, per seed)."""
    a = t[(t["family"] == "x³/c") & (t["dose"] == 1)]
    b = t[(t["family"] == "x/c") & (t["dose"] == 16)]
    if not (len(a) and len(b)):
        return None
    a, b = a.iloc[0], b.iloc[0]
    wins = sum(x < y for x, y in zip(a["test_acc_seeds"], b["test_acc_seeds"]))
    return (f"x³/1 ends with ‖φ(S)‖_F 10^{a['log10_attn_fro']:.2f} against x/16's 10^{b['log10_attn_fro']:.2f} "
            f"({'lower' if a['log10_attn_fro'] < b['log10_attn_fro'] else 'higher'}) and accuracy {a['test_acc']:.3f} "
            f"against {b['test_acc']:.3f} (lower in {wins} of {len(a['test_acc_seeds'])} paired seeds)")


def answer(tables: dict, rs: tuple[Reading, ...]) -> str:
    """The answer in sentences: per task the dose-association verdicts, the matched-norm reading and the pair."""
    parts = []
    for task, t in tables.items():
        mine = [r for r in rs if r.key[1] == task]
        dose = "; ".join(f"{r.key[2]} with {NORMS[r.key[3]]}: {_said(r.verdict)}" for r in mine if r.key[0] == "dose")
        m = next((r for r in mine if r.key[0] == "matched"), None)
        pair = reviewer_pair(t)
        parts.append(f"{task}: {dose}." + (f" At matched ‖φ(S)‖_F, x³/c against x/c: {_said_matched(m.verdict)}."
                                           if m else "") + (f" The reviewers' pair: {pair}." if pair else ""))
    return " ".join(parts)


def _said(v: str) -> str:
    return {"HOLDS": "a lower norm goes with a higher accuracy", "FAILS": "a higher norm goes with a higher accuracy",
            "UNDETERMINED": "no monotone association shown"}[v]


def _said_matched(v: str) -> str:
    return {"HOLDS": "the family does not matter (within ±0.02)", "FAILS": "the family matters beyond ±0.02",
            "UNDETERMINED": "undecided"}[v]


def findings(tables: dict) -> tuple[str, ...]:
    """The softmax temperature sweep and each family's most accurate dose (descriptive)."""
    from empirics.training.dose_response import exact_spearman

    out = []
    for task, t in tables.items():
        s = t[t["family"] == "softmax(S/τ)"].sort_values("dose")
        if len(s):
            a = exact_spearman(s["log10_attn_fro"], s["test_acc"])
            pts = ", ".join(f"τ={c:g}: {n:+.2f}/{acc:.3f}" for c, n, acc in zip(s["dose"], s["log10_attn_fro"],
                                                                             s["test_acc"]))
            out.append(f"{task}: softmax(S/τ), log10 ‖φ(S)‖_F/accuracy per τ {{{pts}}}; ρ = {a.rho:+.2f} (unadjusted "
                       f"p(ρ < 0) = {_p(a.p_less)}, {a.n} temperatures: a finding, not a verdict)")
        for fam in POLY:
            d = t[t["family"] == fam]
            best = d.loc[d["test_acc"].idxmax()]
            out.append(f"{task}: {fam} is most accurate at c = {best['dose']:g} ({best['test_acc']:.3f}, lr "
                       f"{best['lr']:g}); least at c = {d.loc[d['test_acc'].idxmin(), 'dose']:g} "
                       f"({d['test_acc'].min():.3f})")
    return tuple(out)
