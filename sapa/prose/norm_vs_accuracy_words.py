"""The words of ``norm-vs-accuracy``: statement, tested contract, each reading's decisive numbers, the answer (with the
reviewers' x³/1 against x/16) and the descriptive findings. Nothing here decides a verdict."""

from __future__ import annotations

import math

POLY = ("x/c", "x³/c")


STATEMENT = ("Does accuracy follow the attention norm — within one activation family x^p/c, as the scale c moves "
             "‖φ(S)‖_F, and across families at matched norm (the reviewers' x³/1 against x/16)?")


TESTED = ("At each task's smallest N (digits 8×8 images, N = 16 patches; the causal character model, N = 64), x/c and "
          "x³/c over a log grid of c (1 … 128, including √N and the paper's 16) and softmax(S/τ) over a grid of τ, "
          "tiny transformers trained at every learning rate of the study's grid with its seeds and minibatches; per dose "
          "(the unit: c at one lr, seeds averaged) the final ‖φ(S)‖_F, ‖∂φ(S)/∂X‖_F (exact, float64) and test accuracy. "
          "Within x/c and x³/c at each lr: the least-squares slope b of accuracy on log10 ‖φ(S)‖_F over the doses, "
          "Student-t against −0.02 per decade (dose-association: HOLDS if at every lr a 10× lower norm buys at least "
          "0.02 accuracy, FAILS if at some lr it buys less or costs accuracy). Across them: x³/c minus x/c at matched "
          "‖φ(S)‖_F and the same lr (matched-norm: HOLDS if within ±0.02). Holm over the entry's p-values. In the full "
          "budget a stratum the grid leaves open, and that a finer grid of c fixed with the design (36 doses) can decide, is "
          "trained there and read on all its doses; each of the two looks at half the family-wise levels. ANSWERED "
          "when every reading is decided.")


def _p(v: float) -> str:
    return "undefined" if not math.isfinite(v) else f"{v:.3g}"


def _seeds(k: float) -> str:
    return "undefined" if math.isnan(k) else "out of reach by seeds (the doses' scatter alone)" if math.isinf(k) \
        else f"{k:g}"


def dose_why(t, fam: str, ev, m: int, verdict: str, n_looks: int = 1, look: int = 1) -> str:
    """Per lr: the slope with its se, Spearman's ρ and the adjusted p-values; which look decided (a design with two
    looks reads each at half the levels); the design's power and, undecided, the seeds per dose and the doses that
    would decide it, with the span of the final norm over the doses."""
    from sapa.rules.association import ALPHA_FAILS, ALPHA_HOLDS, DELTA, doses_to_decide, power_at_null, seeds_to_decide

    af, ah = ALPHA_FAILS / n_looks, ALPHA_HOLDS / n_looks
    parts = [f"lr {s.lr:g}: b = {s.b:+.3f} (se {s.se:.3f}, {s.n} doses, ρ = {s.rho:+.2f}); adjusted p(b ≤ −{DELTA:g}) "
             f"= {_p(pf)}, p(b ≥ −{DELTA:g}) = {_p(ph)}" for s, pf, ph in zip(ev.strata, ev.p_fails, ev.p_holds)]
    d = t[t["family"] == fam]
    best = d.loc[d["test_acc"].idxmax()]
    out = f"accuracy per decade of ‖φ(S)‖_F over the doses — {'; '.join(parts)}"
    if n_looks > 1:
        added = d[d["look"] == 2] if "look" in d else d.iloc[:0]
        where = ", ".join(f"lr {lr:g}" for lr in sorted(added["lr"].unique()))
        out += (f"; second look (each look at FAILS {af:g}, HOLDS {ah:g}): "
                + (f"{len(added)} doses added between the grid's at {where}, read with the grid's" if len(added)
                   else "none taken" if look == 1 and verdict == "UNDETERMINED" else "not needed"))
    out += (f"; the most accurate dose c = {best['dose']:.3g} at lr {best['lr']:g} ({best['test_acc']:.3f}); power "
            f"{100 * power_at_null(ev, m, af):.0f} % to say FAILS were the norm irrelevant (b = 0)")
    if verdict == "UNDETERMINED":
        need = [f"lr {s.lr:g}: {_seeds(seeds_to_decide(s, m, af, ah))}" for s in ev.strata]
        out += f"; seeds per dose for 80 % power to decide at the observed slope: {', '.join(need)}"
        doses = [f"lr {s.lr:g}: {_count(doses_to_decide(s, m, af, ah))} (norm span {_span(d, s.lr)} decades)"
                 for s in ev.strata]
        out += (f"; or, the dose being the unit, doses at {min(s.seeds for s in ev.strata)} seeds each over the same "
                f"norm span: {', '.join(doses)}")
    return out


def _count(k: float) -> str:
    return "undefined" if math.isnan(k) else "more than 1000" if math.isinf(k) else f"{k:g}"


def _span(d, lr: float) -> str:
    """max − min of the doses' mean log10 ‖φ(S)‖_F at one lr: how far the dose moved the final norm."""
    x = d.loc[d["lr"] == lr, "log10_attn_fro"]
    x = x[x.notna()]
    return f"{float(x.max() - x.min()):.2f}" if len(x) else "undefined"


def matched_why(m) -> str:
    c = m.contrast
    diffs = ", ".join(f"{v:+.3f}" for v in c.diffs)
    return (f"{c.n} (lr, dose) cells of x³/c inside x/c's norm range at their lr; accuracy differences at matched "
            f"norm {{{diffs}}}, mean {c.mean:+.3f}, 90 % interval [{m.lo:+.3f}, {m.hi:+.3f}]; Holm-adjusted p(beyond "
            f"±0.02) = {_p(m.p_fails)}"
            if c.n else "x³/c and x/c reach no common norm: nothing to compare")


def reviewer_pair(t) -> str | None:
    """The reviewer's comparison from the dose table: x³/1 against x/16 at each lr (norms and accuracies)."""
    out = []
    for lr, g in t.groupby("lr", sort=True) if "lr" in t else [(None, t)]:
        a = g[(g["family"] == "x³/c") & (g["dose"] == 1)]
        b = g[(g["family"] == "x/c") & (g["dose"] == 16)]
        if not (len(a) and len(b)):
            continue
        a, b = a.iloc[0], b.iloc[0]
        wins = sum(x < y for x, y in zip(a["test_acc_seeds"], b["test_acc_seeds"]))
        out.append(f"{'' if lr is None else f'at lr {lr:g}, '}x³/1 ends with ‖φ(S)‖_F 10^{a['log10_attn_fro']:.2f} "
                   f"against x/16's 10^{b['log10_attn_fro']:.2f} "
                   f"({'lower' if a['log10_attn_fro'] < b['log10_attn_fro'] else 'higher'}) and accuracy "
                   f"{a['test_acc']:.3f} against {b['test_acc']:.3f} (lower in {wins} of {len(a['test_acc_seeds'])} "
                   f"paired seeds)")
    return "; ".join(out) or None


def answer(tables: dict, rs: tuple) -> str:
    """The answer in sentences: per task the dose-association verdicts, the matched-norm reading and the pair."""
    parts = []
    for task, t in tables.items():
        mine = [r for r in rs if r.key[1] == task]
        dose = "; ".join(f"{r.key[2]}: {_said(r.verdict)}" for r in mine if r.key[0] == "dose")
        m = next((r for r in mine if r.key[0] == "matched"), None)
        pair = reviewer_pair(t)
        parts.append(f"{task}: {dose}." + (f" At matched ‖φ(S)‖_F, x³/c against x/c: {_said_matched(m.verdict)}."
                                           if m else "") + (f" The reviewers' pair: {pair}." if pair else ""))
    return " ".join(parts)


def _said(v: str) -> str:
    return {"HOLDS": "at every lr a 10× lower norm buys at least 0.02 accuracy",
            "FAILS": "at some lr a 10× lower norm buys less than 0.02 accuracy, or costs it",
            "UNDETERMINED": "undecided"}[v]


def _said_matched(v: str) -> str:
    return {"HOLDS": "the family does not matter (within ±0.02)", "FAILS": "the family matters beyond ±0.02",
            "UNDETERMINED": "undecided"}[v]


def findings(tables: dict) -> tuple[str, ...]:
    """The softmax temperature sweep per lr and each family's most and least accurate dose (descriptive)."""
    from sapa.empirics.training.dose_response import exact_spearman

    out = []
    for task, t in tables.items():
        for lr, s in t[t["family"] == "softmax(S/τ)"].groupby("lr", sort=True):
            s = s.sort_values("dose")
            a = exact_spearman(s["log10_attn_fro"], s["test_acc"])
            pts = ", ".join(f"τ={c:g}: {n:+.2f}/{acc:.3f}" for c, n, acc in zip(s["dose"], s["log10_attn_fro"],
                                                                             s["test_acc"]))
            out.append(f"{task}, lr {lr:g}: softmax(S/τ), log10 ‖φ(S)‖_F/accuracy per τ {{{pts}}}; ρ = {a.rho:+.2f} "
                       f"({a.n} temperatures: a finding, not a verdict)")
        for fam in POLY:
            d = t[t["family"] == fam]
            best, worst = d.loc[d["test_acc"].idxmax()], d.loc[d["test_acc"].idxmin()]
            out.append(f"{task}: {fam} is most accurate at c = {best['dose']:g}, lr {best['lr']:g} "
                       f"({best['test_acc']:.3f}); least at c = {worst['dose']:g}, lr {worst['lr']:g} "
                       f"({worst['test_acc']:.3f})")
    return tuple(out)
