"""Ledger question ``lipschitz-vs-published-bound``: measured local Lipschitz constants of whole attention layers.

Castin, Ablin & Peyré (ICML 2024, "How Smooth Is Attention?") bound the Lipschitz constant of multi-head
self-attention on bounded inputs (√n up to a constant, their abstract). The question: at a real model's
layers (all-MiniLM-L6-v2, every layer and head, with W_O) and at random ViT-Base-sized layers, what is the
measured local Lipschitz constant σ₁(∂F/∂X) against N, how far is the published bound above it, and does
the gap grow with N? The measurement is the certified bracket of :mod:`empirics.kernels.spectral`
(:mod:`empirics.realmodel.layer_lipschitz`); the published bound is not computed (its statement was not available to
this session, and sapa does not guess a formula), so the entry stays UNDETERMINED on the gap and reports
the measured side.
"""

from __future__ import annotations

import math

from sapa.ledger import Claim, Context, Contract, Outcome

QUICK = {"minilm_Ns": (8, 32), "vit_Ns": (8, 16), "max_steps": 20}
FULL = {"minilm_Ns": (8, 16, 32, 64, 128), "vit_Ns": (8, 16, 32, 64, 128, 196), "max_steps": 150}


def _figure(ctx: Context, res) -> tuple[str, ...]:
    from figures import layer_lipschitz as fig
    from sapa.ledger import store_figure_data

    fig.check(res)
    stem = fig.stored_stem(res)
    store_figure_data(ctx, fig.NAME, res.to_json(), stem)
    paths = fig.draw(res, ctx.out_dir / "figures", stem)
    return tuple(str(p.relative_to(ctx.out_dir)) for p in paths)


def _slopes(res) -> dict:
    """Per (model, layer): log-log slope of the lower bounds and the rigorous interval of σ₁'s secant exponent."""
    out = {}
    for key in sorted({(r["model"], r["layer"]) for r in res.rows}):
        s = res.series(*key)
        if s["N"].size < 2:
            continue
        n1, n2 = s["N"][0], s["N"][-1]
        lr = math.log(n2 / n1)
        out[f"{key[0]} / {key[1]}"] = {
            "N": [float(n1), float(n2)],
            "lower_bound_slope": math.log(s["sigma_lower"][-1] / s["sigma_lower"][0]) / lr,
            "sigma_exponent_interval": [math.log(s["sigma_lower"][-1] / s["sigma_upper"][0]) / lr,
                                        math.log(s["sigma_upper"][-1] / s["sigma_lower"][0]) / lr],
            "upper_over_lower_at_largest_N": float(s["sigma_upper"][-1] / s["sigma_lower"][-1]),
        }
    return out


def check_layer_lipschitz(ctx: Context) -> Outcome:
    from empirics.realmodel.layer_lipschitz import PUBLISHED_BOUND, run_layer_lipschitz

    cfg = QUICK if ctx.budget.name == "quick" else FULL
    res = run_layer_lipschitz(cfg["minilm_Ns"], cfg["vit_Ns"], max_steps=cfg["max_steps"], seed=ctx.budget.seed)
    figures = _figure(ctx, res)
    slopes = _slopes(res)
    conv = sum(r["converged"] for r in res.rows)
    mini = {k: v for k, v in slopes.items() if k.startswith("all-MiniLM")}
    vit = {k: v for k, v in slopes.items() if k.startswith("ViT")}
    rng = (lambda d: (f"{min(v['lower_bound_slope'] for v in d.values()):.2f}…"
                      f"{max(v['lower_bound_slope'] for v in d.values()):.2f}") if d else "not measured")
    answer = (
        f"Measured (certified brackets, whole layer with W_O): σ₁ lower bounds grow like N^({rng(mini)}) across "
        f"MiniLM's layers on real text and like N^({rng(vit)}) at random ViT-B layers (N = "
        f"{cfg['minilm_Ns'][0]}…{cfg['minilm_Ns'][-1]}); {conv} of {len(res.rows)} brackets closed to 1e-6 — at these "
        "sizes the value path spreads JᵀJ's spectrum, the unexplored trace exceeds the top Ritz value and the certified "
        "upper bound stays near ‖J‖_F. The gap to the published bound is not answered: " + PUBLISHED_BOUND + ".")
    fal, robust = _conditions(cfg)
    return Outcome(
        verdict="UNDETERMINED",
        falsifiability=fal,
        robustness=robust,
        answer=answer,
        headline=(f"σ₁ lower-bound slopes: MiniLM {rng(mini)}, ViT-B random {rng(vit)}; published bound not computed "
                  "(statement unavailable)"),
        findings=tuple(f"{k}: lower-bound slope {v['lower_bound_slope']:.3f}, σ₁ exponent within "
                       f"[{v['sigma_exponent_interval'][0]:.2f}, {v['sigma_exponent_interval'][1]:.2f}]"
                       for k, v in slopes.items()),
        tested_statement=(
            "The question made precise: σ₁(∂F/∂X) of F(X) = Σ_h softmax((XW_Q^h + b_Q^h)(XW_K^h + b_K^h)ᵀ/√d) X W_V^h W_O^h "
            "(a) at every layer of all-MiniLM-L6-v2 on its hidden states for a text prefix of N tokens, (b) at random "
            "ViT-Base-sized layers (W entries N(0, 1/D), tokens N(0, I_D)), as a certified bracket, against N; beside "
            "the published upper bound of Castin, Ablin & Peyré (ICML 2024) — not computed here."),
        figures=figures,
        evidence={"rows": res.rows, "slopes": slopes, "published_bound": PUBLISHED_BOUND, "budget": cfg,
                  "brackets_closed": conv,
                  "certificate": "lower: ‖Jx‖ at the top Ritz vector; upper: λ_max[[T, UΣ], [ΣUᵀ, t_⊥I]]^½, "
                                 "t_⊥ = ‖J‖²_F − tr T, and ≤ ‖J‖_F (empirics.kernels.spectral)"},
    )


def _conditions(cfg: dict) -> tuple[dict, dict]:
    """Falsifiability: the verdict cannot be anything but UNDETERMINED (no bound is computed) — said so, with the
    one-line reason; robustness: no condition can change it, and the measured side's conditions listed."""
    from sapa.conditions import by_construction, not_applicable, not_run, robustness, varied

    fal = by_construction(
        "the verdict is UNDETERMINED by construction: the published bound is not computed (its statement was not "
        "available), so no measurement can decide the gap — no false variant could move it; the measured side (the "
        "certified σ₁ brackets) is checked against dense Jacobians in the spectral kernel's tests")
    rows = [varied("every condition (seed, budget, thresholds, convention)", "UNDETERMINED",
                   "by construction: without the bound no condition decides the gap"),
            not_applicable("logit convention", "the layers' own logits QKᵀ/√d; a model's convention is part of the model"),
            not_applicable("thresholds", "no rule decides this entry (the bound is not computed)"),
            not_run("seed (random ViT-B layers)", "another draw of the random layers; the MiniLM side has no seed"),
            not_run("budget " + ("full" if cfg is QUICK else "quick"), "the other budget's lengths are not part of "
                                                                         "this ledger")]
    return fal, robustness("UNDETERMINED", rows)


CONTRACT = Contract(
    object="σ₁ of the Jacobian w.r.t. X of a whole multi-head softmax attention layer with W_O (biases of Q, K included; "
           "V, O biases are constant)",
    norm="spectral (local Lipschitz constant at the given input), certified bracket",
    randomness="none for MiniLM (its weights, shipped text); random ViT-B layers: W N(0, 1/D), tokens N(0, I_D), seeded",
    quantifier="at the measured inputs (local), against N",
    n_range="quick: MiniLM N = 8, 32, ViT-B N = 8, 16; full: MiniLM 8…128, ViT-B 8…196",
    predicted_exponent="the published bound's rate √N (abstract); its constant is not available",
    refuted_by="(not decidable here: the published bound is not computed)",
    logit_scale="S/sqrt(d)",
    logit_note="the layers' own logits QKᵀ/√d (MiniLM and random ViT-B layers)",
)

CLAIMS = [Claim("lipschitz-vs-published-bound",
                "(question; Castin, Ablin & Peyré, ICML 2024) How loose is the published Lipschitz bound of multi-head "
                "self-attention at real and ViT-Base-sized layers, and does the gap grow with N?", CONTRACT,
                check_layer_lipschitz, kind="question")]
