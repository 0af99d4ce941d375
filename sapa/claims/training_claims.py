"""Ledger check ``norm-vs-accuracy``: does a lower attention norm predict better training (arXiv 2410.18613)?

The paper: softmax works because it regularizes ‖φ(S)‖_F, and x^p/√N regularizes it the same
way. The review: x³ (unscaled) has lower attention norms than x/16 yet trains worse. Tested
(``empirics.training``, ``empirics.norm_accuracy``): tiny transformers on two real tasks
(8×8 digits, N = 16; character-level English prose, N = 64), each activation (softmax, x/√N,
x³/√N, x/16, x³; text also x³/√i) with AdamW weight decay 0 and 0.05, several seeds; final
‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F (exact, float64, mean over layers and heads on a fixed probe
batch) against final test accuracy.

Verdict rule. The thesis predicts ρ < 0 for the Spearman correlation between final norm and
final test accuracy across runs. Cells: task ∈ {digits, text} × norm ∈ {‖φ(S)‖_F,
‖∂φ(S)/∂X‖_F} × subset ∈ {all runs (diverged: norm ∞, accuracy at chance), finite runs only};
in each cell, ρ is the run-weighted mean of the within-weight-decay ρ's with a stratified
percentile-bootstrap interval, so weight decay cannot produce the association. Every interval the
rule reads is at the family level 1 − 0.05/k (Bonferroni; k = 10: the 8 cells and the 2 contrasts).

* UNDETERMINED if the runs could not be completed, or some ρ is undefined;
* FAILS if some interval lies above 0 (a higher norm goes with better accuracy), or in some task the
  reviewer's contrast is reproduced: x³ has a lower final ‖φ(S)‖_F than x/16 and a lower final
  accuracy, both paired-difference intervals excluding 0;
* HOLDS if every interval lies below 0 (including the finite runs: the association is not only
  "diverged runs fail");
* HOLDS_IN_REGIME if some but not all intervals lie below 0 (the evidence names which);
* UNDETERMINED if every interval contains 0.

Honesty: these are 2-layer, width-32 models trained for minutes, with 3 (quick) or 5 (full)
seeds per arm; an interval containing 0 means "not shown", not "no effect". The correlation is
across activations: it measures whether the norm predicts accuracy, not whether it causes it.
"""

from __future__ import annotations

import math

from sapa.ledger import Claim, Context, Contract, Outcome

LEVEL = 0.95  # reported intervals; the rule reads the Bonferroni family level (analysis["family_level"])
CONTRAST = ("x3", "x_16")  # the reviewer's pair: x³/1 against x/16
SUBSETS = ("stratified", "finite_stratified")  # all runs, finite runs only; both within weight decay

STATEMENT = "Softmax works because it regularizes the attention norm."

TESTED = ("Across training runs of tiny transformers (2 layers, 2 heads, width 32; sklearn 8×8 digits with N = 16 "
          "patches and a causal character model of Python's documentation prose with N = 64), with attention "
          "φ ∈ {softmax, x/√N, x³/√N, x/16, x³ (+ x³/√i causal)}, AdamW weight decay 0 or 0.05 and several seeds: the "
          "final attention norm ‖φ(S)‖_F (and, separately, ‖∂φ(S)/∂X‖_F), exact in float64 and averaged over layers, "
          "heads and a fixed probe batch, is negatively rank-correlated with the final test accuracy within each "
          "weight-decay stratum (Spearman ρ < 0; stratified bootstrap, Bonferroni family level); and x³, if its norm "
          "is lower than x/16's, does not train worse.")


def decide(analysis: dict | None, complete: bool = True) -> tuple[str, dict]:
    """Apply the module's verdict rule to :func:`empirics.norm_accuracy.analyse` output.

    Returns:
      (verdict, details) with the cell lists ``below`` / ``above`` / ``contains_0`` / ``undefined``
      ("task/norm/subset"), ``contrast_reproduced`` (tasks) and ``why``.
    """
    if not complete or analysis is None:
        return "UNDETERMINED", {"why": "the training runs could not be completed"}
    key = analysis["family_key"]
    below, above, zero, undefined = [], [], [], []
    for task, t in analysis["tasks"].items():
        for q in analysis["norms"]:
            for sub in SUBSETS:
                name = f"{task}/{q}/{'all' if sub == 'stratified' else 'finite'}"
                c = t["correlations"][q].get(sub)
                if c is None or c["rho"] is None or None in c[key]:
                    undefined.append(name)
                    continue
                lo, hi = c[key]
                (below if hi < 0 else above if lo > 0 else zero).append(name)
    reproduced = [task for task, t in analysis["tasks"].items() if t["contrast"].get("reproduced_family")]
    details = {"below": below, "above": above, "contains_0": zero, "undefined": undefined,
               "contrast_reproduced": reproduced, "interval": key}
    if undefined:
        verdict, why = "UNDETERMINED", f"ρ undefined in {', '.join(undefined)}"
    elif above or reproduced:
        verdict = "FAILS"
        why = "; ".join(([f"higher norm goes with better accuracy in {', '.join(above)}"] if above else [])
                        + ([f"x³ has a lower norm than x/16 and trains worse in {', '.join(reproduced)}"]
                           if reproduced else []))
    elif zero == [] and below:
        verdict, why = "HOLDS", "every within-weight-decay interval lies below 0, also over finite runs"
    elif below:
        verdict, why = "HOLDS_IN_REGIME", f"ρ < 0 only in {', '.join(below)}; interval contains 0 in {', '.join(zero)}"
    else:
        verdict, why = "UNDETERMINED", "every interval contains 0: these runs do not show an association"
    details["why"] = why
    return verdict, details


def _fmt(c: dict, key: str = "ci") -> str:
    lo, hi = c[key]
    f = lambda v, nd=3: "nan" if v is None else f"{v:+.{nd}f}"  # noqa: E731
    return f"{f(c['rho'], 2)} [{f(lo)}, {f(hi)}]"


def _n(v) -> str:
    if isinstance(v, str):
        return "∞" if v == "inf" else v
    return f"{v:.3g}"


def _headline(analysis: dict, div: dict) -> str:
    key = analysis["family_key"]
    parts = []
    for task, t in analysis["tasks"].items():
        cs = t["correlations"]
        c = t["contrast"]
        con = ""
        if "test_acc" in c:
            con = (f"; x³ − x/16: Δlog10‖φ‖ {_n(c['log10_attn_fro']['median_diff'])}, "
                   f"Δacc {_n(c['test_acc']['median_diff'])}")
        parts.append(f"{task}: ρ(‖φ(S)‖, acc) = {_fmt(cs['attn_fro']['stratified'], key)}, "
                     f"ρ(‖∂φ/∂X‖, acc) = {_fmt(cs['jac_fro']['stratified'], key)} "
                     f"(finite runs {_fmt(cs['attn_fro'].get('finite_stratified', cs['attn_fro']['stratified']), key)})"
                     f"{con}; diverged {div[task]}")
    return f"within weight decay, {analysis['family_level']:.4g} intervals — " + " | ".join(parts)


def _contrast_sentence(task: str, c: dict) -> str:
    """What the paired x³ − x/16 differences say, in words, from the numbers."""
    if "test_acc" not in c:
        return ""
    init, fin, acc = c["log10_attn_fro_init"], c["log10_attn_fro"], c["test_acc"]

    def times(v) -> str:
        if isinstance(v, str):
            return "∞×"
        return f"{10 ** abs(v):.3g}× {'smaller' if v < 0 else 'larger'}"

    lo, hi = acc["ci"]
    word = ("higher" if isinstance(lo, (int, float)) and lo > 0 else
            "lower" if isinstance(hi, (int, float)) and hi < 0 else "indistinguishable")
    return (f"{task}: x³ starts {times(init['median_diff'])} in ‖φ(S)‖_F than x/16 and ends {times(fin['median_diff'])}; "
            f"its accuracy is {word} (Δ = {_n(acc['median_diff'])}, 95% [{_n(lo)}, {_n(hi)}])")


def _corrected(verdict: str, analysis: dict, details: dict, arms: dict) -> str | None:
    if verdict == "HOLDS":
        return None
    key = analysis["family_key"]
    rhos = [(task, q, t["correlations"][q]["stratified"]) for task, t in analysis["tasks"].items()
            for q in analysis["norms"]]
    signs = [c["rho"] > 0 for _, _, c in rhos if c["rho"] is not None]
    rho_txt = ", ".join(f"{task} {'‖φ(S)‖_F' if q == 'attn_fro' else '‖∂φ/∂X‖_F'} {c['rho']:+.2f} "
                        f"[{c[key][0]:+.3f}, {c[key][1]:+.3f}]" for task, q, c in rhos if c["rho"] is not None)
    lead = {"FAILS": "a lower final attention norm does not predict better accuracy across activations",
            "HOLDS_IN_REGIME": "a lower final attention norm predicts better accuracy only in part of the cases",
            }.get(verdict, "these runs do not show that a lower final attention norm predicts better accuracy")
    txt = (f"In these tiny transformers {lead}: "
           f"within weight decay ρ(norm, accuracy) = {rho_txt} ({analysis['family_level']:.3g} intervals); "
           f"{sum(signs)} of {len(signs)} point estimates have the sign opposite to the thesis. ")
    if details["below"]:
        txt += f"Lower norms go with better accuracy only in {', '.join(details['below'])}. "
    n_div = sum(t["n_diverged"] for t in analysis["tasks"].values())
    if n_div:
        only_div = [c for c in details["below"] if c.endswith("/all") and c.replace("/all", "/finite") in details["contains_0"]]
        txt += f"{n_div} runs diverged (norm ∞, chance accuracy)"
        txt += (f"; in {', '.join(only_div)} the association rests on them alone: an unbounded norm fails, a larger "
                "bounded one does not. " if only_div else ". ")
    con = [_contrast_sentence(task, t["contrast"]) for task, t in analysis["tasks"].items()]
    txt += "The review's pair: " + "; ".join(c for c in con if c) + ". "
    best = {task: max(rows, key=lambda r: r["test_acc"]["median"]) for task, rows in arms.items()}
    txt += "Best arms: " + "; ".join(f"{task} {r['label']} (wd {r['weight_decay']:g}, median accuracy "
                                     f"{r['test_acc']['median']:.3f}, ‖φ(S)‖_F {_n(r['attn_fro']['median'])})"
                                     for task, r in best.items()) + ". "
    return txt + ("Verdict from 2-layer, width-32 models, minutes of training and few seeds: it bounds what the thesis "
                  "can claim, not what larger models do.")


def check_norm_vs_accuracy(ctx: Context) -> Outcome:
    """Run (or resume) the training experiment, correlate final norms with final accuracy, apply the rule."""
    import time

    from empirics.norm_accuracy import analyse
    from empirics.training import run_experiment
    from figures import training_norms as fig
    from sapa.ledger import store_figure_data

    t0 = time.perf_counter()
    try:
        results = run_experiment(ctx.budget.name, ctx.out_dir / "train", seed=ctx.budget.seed)
    except Exception as exc:  # runs that cannot complete are evidence of nothing: say why
        msg = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        verdict, details = decide(None, complete=False)
        return Outcome(verdict=verdict, tested_statement=TESTED, headline=f"training runs failed: {msg}",
                       evidence={"status": "runs could not be completed", "error": msg, "rule": _RULE})
    wall = time.perf_counter() - t0
    final = results["final"]
    analysis = analyse(final, level=LEVEL, seed=ctx.budget.seed, contrast=CONTRAST)
    verdict, details = decide(analysis, complete=True)

    res = fig.compute(results, analysis)
    stem = fig.file_stem(res["config"])
    store_figure_data(ctx, "training_norms", res, stem)
    paths = fig.draw(res, ctx.out_dir / "figures", stem)
    figures = tuple(str(p.relative_to(ctx.out_dir)) for p in paths)

    arms = {task: t["arms"] for task, t in analysis["tasks"].items()}
    div = {task: f"{t['n_diverged']}/{t['n_runs']}" for task, t in analysis["tasks"].items()}
    diverged_runs = [f"{r.task}/{r.arm}/wd{r.weight_decay:g}/s{r.seed} at step {r.diverged_step}"
                     for r in final[final["diverged"].astype(bool)].itertuples()]
    prov = results.get("provenance", {})
    cpu = final["cpu_s"].to_numpy(float) if "cpu_s" in final else []
    return Outcome(
        verdict=verdict,
        headline=_headline(analysis, div),
        tested_statement=TESTED,
        corrected_claim=_corrected(verdict, analysis, details, arms),
        figures=figures,
        evidence={
            "rule": _RULE,
            "why_this_verdict": details["why"],
            "cells": {k: details[k] for k in ("below", "above", "contains_0", "undefined")},
            "family_level": analysis["family_level"],
            "reported_level": LEVEL,
            "correlations": {task: t["correlations"] for task, t in analysis["tasks"].items()},
            "reviewer_contrast_x3_vs_x16": {task: t["contrast"] for task, t in analysis["tasks"].items()},
            "per_arm": arms,
            "diverged": {"per_task": div, "runs": diverged_runs},
            "config": prov.get("config"),
            "config_hash": prov.get("config_hash"),
            "text_corpus": prov.get("text_source"),
            "dtype": "training float32; norms measured in float64 (exact kernels, empirics.norms)",
            "wall_seconds": round(wall, 1),
            "runs_trained_now": prov.get("ran_now"),
            "cpu_seconds_per_run": None if not len(cpu) or not any(math.isfinite(v) for v in cpu) else
            {"median": round(float(sorted(cpu)[len(cpu) // 2]), 2), "total": round(float(sum(cpu)), 1)},
            "caveats": "tiny models (2 layers, width 32), minutes of training, few seeds per arm; an interval "
                       "containing 0 means the association is not shown, not that it is absent. Correlation across "
                       "activations: predictive, not causal. Pairs share initial weights and minibatches.",
        },
    )


_RULE = ("thesis: ρ_Spearman(final norm, final test accuracy) < 0. Cells: task × {‖φ(S)‖_F, ‖∂φ(S)/∂X‖_F} × {all runs "
         "(diverged = norm ∞, chance accuracy), finite runs}; ρ = run-weighted mean of within-weight-decay ρ's, "
         "stratified percentile bootstrap, read at the Bonferroni family level 1 − 0.05/10. UNDETERMINED if runs did "
         "not complete or ρ is undefined; FAILS if an interval lies above 0 or x³ has a lower ‖φ(S)‖_F than x/16 and "
         "lower accuracy (paired-difference intervals excluding 0); HOLDS if every interval lies below 0; "
         "HOLDS_IN_REGIME if some do; UNDETERMINED if all contain 0.")


CLAIMS = [
    Claim(
        id="norm-vs-accuracy",
        statement=STATEMENT,
        contract=Contract(
            object="final ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F (S = X W_Q W_Kᵀ Xᵀ/√d, X = LayerNorm'd attention input; mean over "
                   "layers, heads and a fixed probe batch) against final test accuracy, across trained runs",
            norm="Frobenius (exact kernels, float64)",
            randomness="trained weights: seeded N(0, 0.02²) inits, AdamW (weight decay 0 / 0.05), seeded minibatches; "
                       "sklearn 8×8 digits (TinyViT) and Python documentation prose (causal char LM)",
            quantifier="across runs (activations × weight decay × seeds), within weight-decay strata",
            n_range="N = 16 (digits), N = 64 (text)",
            predicted_exponent="not a rate: Spearman ρ(norm, accuracy) < 0",
            refuted_by="a within-weight-decay ρ interval above 0, or x³ with a lower ‖φ(S)‖_F than x/16 and a lower "
                       "accuracy (both paired intervals excluding 0)",
        ),
        check=check_norm_vs_accuracy,
    ),
]
