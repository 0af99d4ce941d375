"""Ledger claim ``lipschitz-on-a-ball``: sup_{X ∈ B_R^n} σ₁(∂f/∂X) against n, softmax beside x/√N and x³/√N.

Castin, Ablin & Peyré (ICML 2024, arXiv 2312.14820) state rates for softmax self-attention on a compact set: √n up
to a constant, tight for reasonable lengths, n-independent in the mean-field regime. Their constants are not
needed to check the rates: this entry measures the adversarial Lipschitz constant of one head
f(X) = φ(XW_QW_KᵀXᵀ/√d) X W_V on the token ball ‖x_i‖ ≤ R (certified lower bounds from a seeded ascent,
:mod:`sapa.empirics.experiments.lipschitz_ball`), proves an upper bound for each φ (:mod:`sapa.theory.lipschitz_ball`) that no
input may exceed, fits growth exponents, and reads the real-input constant of all-MiniLM-L6-v2's layers
(:mod:`sapa.empirics.realmodel.layer_lipschitz`) against the reported n^{1/4}. Every reading is decided by a rule.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from sapa.empirics.experiments.lipschitz_ball import BallConfig
from sapa.empirics.kernels.ball_ascent import AscentConfig
from sapa.ledger import Claim, Context, Contract, Outcome
from sapa.prose import lipschitz_on_a_ball_words as words
from sapa.theory.families import family

ID = "lipschitz-on-a-ball"
QUICK = {"ball": BallConfig(ns=(2, 4, 8, 11, 16, 22, 32, 45, 64), betas=(4.0, 1.0), ascent=AscentConfig(steps=80)),
         "minilm_Ns": (8, 32), "max_steps": 20}
FULL = {"ball": BallConfig(ns=(2, 4, 8, 11, 16, 22, 32, 45, 64, 90, 128, 181, 256), betas=(4.0, 1.0),
                           ascent=AscentConfig(restarts=8, steps=150)),
        "minilm_Ns": (8, 16, 32, 64, 128, 256), "max_steps": 150}
TIGHT_NS = (8, 16, 32, 64, 128, 256)  # the half-attention family's lengths (both budgets: one J·E product each)
FIT_FROM = 8          # exponents are fitted on n ≥ 8 (below it the √n mechanism has too few queries to act)
BIG, SMALL = 4.0, 1.0  # the balls: √n regime through the grid (e^{2β} ≈ 3 000) and mean-field from n ≈ e² ≈ 7
NAMES = {"softmax": family("softmax").label, "poly1": family("x_sqrtN").label, "poly3": family("x3_sqrtN").label}

def _fit(res, act: str, beta: float, fit_from: int = FIT_FROM):
    from sapa.empirics.experiments.lipschitz_ball import fit_exponent
    from sapa.rules.growth import LEVEL

    s = res.series(act, beta)
    keep = s["n"] >= fit_from
    return fit_exponent(s["n"][keep], s["sigma_lower"][keep], LEVEL)


def _bound_exponent(act: str, betas) -> float:
    """sup over n ≥ 1 (a geometric grid to 10⁹) and over the balls of U_φ's local exponent, and its limit."""
    from sapa.theory.lipschitz_ball import asymptotic_exponent, local_exponent

    grid = np.geomspace(1.0, 1e9, 600)
    return max(max(local_exponent(act, float(x), b) for x in grid for b in betas), asymptotic_exponent(act))


def _ratios(res, act: str) -> float:
    return max(r["sigma_lower"] / r["bound"] for r in res.rows if r["activation"] == act)


def _real_slopes(real) -> dict:
    """Per MiniLM layer: lower-bound slope, the rigorous interval of σ₁'s secant exponent (brackets' ends), the same
    with the random-start upper bounds (:mod:`sapa.empirics.kernels.lanczos_random_start`), and the secant slope of the
    published estimator's √‖JᵀF(X)‖ on the same inputs (:mod:`sapa.empirics.realmodel.peer_estimator`)."""
    from sapa.empirics.realmodel.layer_lipschitz import KW_DELTA

    out = {}
    for l in sorted({r["layer"] for r in real.rows if r["model"] == "all-MiniLM-L6-v2"}):
        s = real.series("all-MiniLM-L6-v2", l)
        if s["N"].size < 2:
            continue
        lr = math.log(s["N"][-1] / s["N"][0])
        out[f"layer {l}"] = {
            "N": [float(s["N"][0]), float(s["N"][-1])],
            "lower_bound_slope": math.log(s["sigma_lower"][-1] / s["sigma_lower"][0]) / lr,
            "sigma_exponent_interval": [math.log(s["sigma_lower"][-1] / s["sigma_upper"][0]) / lr,
                                        math.log(s["sigma_upper"][-1] / s["sigma_lower"][0]) / lr],
            # the same secant with the random-start upper bounds (each fails with probability ≤ KW_DELTA)
            "sigma_exponent_interval_prob": [math.log(s["sigma_lower"][-1] / s["sigma_upper_prob"][0]) / lr,
                                             math.log(s["sigma_upper_prob"][-1] / s["sigma_lower"][0]) / lr],
            "kw_delta": KW_DELTA}
        pub = s["published_estimator"]
        if np.all(np.isfinite(pub)):
            out[f"layer {l}"]["published_estimator"] = {
                "values": [float(x) for x in pub], "slope": math.log(pub[-1] / pub[0]) / lr,
                "over_sigma_lower": [float(x) for x in pub / s["sigma_lower"]]}
    return out


def half_attention(seed: int, ball: BallConfig) -> dict:
    """The explicit family on the big ball's softmax head (:mod:`sapa.empirics.kernels.half_attention_family`) at TIGHT_NS,
    with its exponent fitted over the lengths inside its regime (n ≤ 1 + e^{a_max})."""
    import torch

    from sapa.empirics.experiments.lipschitz_ball import fit_exponent, make_head, radius_for
    from sapa.empirics.kernels.half_attention_family import family_series
    from sapa.rules.growth import LEVEL
    from sapa.theory.lipschitz_ball import ball_bound

    h = make_head(seed, ball.D, ball.d, ball.d_v, "softmax")
    out = family_series(h, radius_for(h, BIG), TIGHT_NS, seed=seed)
    v = float(torch.linalg.matrix_norm(h.W_V, 2))
    out["over_bound"] = [s / ball_bound("softmax", n, BIG, v) for n, s in zip(out["n"], out["sigma_lower"])]
    keep = [i for i, ok in enumerate(out["in_regime"]) if ok]
    if len(keep) >= 3:
        f = fit_exponent(np.array([out["n"][i] for i in keep], float),
                         np.array([out["sigma_lower"][i] for i in keep]), LEVEL)
        out["fit"] = {"slope": f.slope, "lo": f.lo, "hi": f.hi, "level": f.level, "n": [out["n"][i] for i in keep]}
    out["c_min"] = min(out["closed_form"][i] / math.sqrt(out["n"][i] - 1) for i in keep) if keep else None
    return out


def decide_readings(res, real_sl: dict, tol: float | None = None, fit_from: int = FIT_FROM,
                    fam: dict | None = None) -> dict:
    """Every reading's verdict by its rule, keyed as the readings, with the fits and exponents they read (``tol`` and
    ``fit_from`` varied only for robustness). "√n is tight" reads the half-attention family's exponent when ``fam``
    has a fit (an explicit family of certified lower bounds), else the ascent's."""
    from sapa.rules.bound import BoundEvidence
    from sapa.rules.bound import decide as decide_bound
    from sapa.rules.growth import TOL, UpperEvidence, decide_upper

    tol = TOL if tol is None else tol
    up = lambda a, lo, hi, exact=False: decide_upper(UpperEvidence(a, lo, hi, exact), tol=tol)  # noqa: E731
    fs = {(a, b): _fit(res, a, b, fit_from) for a in res.config["activations"] for b in res.config["betas"]}
    soft, soft_s = fs[("softmax", BIG)], fs[("softmax", SMALL)]
    e_soft = _bound_exponent("softmax", res.config["betas"])
    e_poly = max(_bound_exponent(a, res.config["betas"]) for a in ("poly1", "poly3"))
    v = {("softmax", "ball"): up(0.5, soft.lo, soft.hi), ("softmax", "bound"): up(0.5, e_soft, e_soft, True),
         ("softmax", "small-ball"): up(0.0, soft_s.lo, soft_s.hi)}
    tight = (fam or {}).get("fit") or {"lo": soft.lo, "hi": soft.hi}
    v[("softmax", "tight")] = up(0.0, 0.5 - tight["hi"], 0.5 - tight["lo"])
    for a in ("poly1", "poly3"):
        if (a, BIG) in fs:
            v[(a, "ball")] = up(0.5, fs[(a, BIG)].lo, fs[(a, BIG)].hi)
            v[(a, "small-ball")] = up(0.0, fs[(a, SMALL)].lo, fs[(a, SMALL)].hi)
    v[("polynomials", "bound")] = up(0.5, e_poly, e_poly, True)
    ratios = {a: _ratios(res, a) for a in res.config["activations"]}
    if fam and "softmax" in ratios:  # the family's certified lower bounds are inputs tried too
        ratios["softmax"] = max(ratios["softmax"], max(fam["over_bound"]))
    for a, r in ratios.items():
        v[(a, "bound-holds")] = decide_bound(BoundEvidence(claimed=1.0, sharp=r, found=r))
    if real_sl:  # every layer within n^¼ ⇔ the largest layer exponent is: the layers' largest interval ends
        key = "sigma_exponent_interval_prob"
        v[("real", "minilm")] = up(0.25, max(x[key][0] for x in real_sl.values()),
                                   max(x[key][1] for x in real_sl.values()))
    return {"verdicts": v, "fits": fs, "e_soft": e_soft, "e_poly": e_poly, "ratios": ratios}


def headline_verdict(res, real_sl: dict, tol: float | None = None, fit_from: int = FIT_FROM) -> str:
    """The headline reading's verdict: softmax is O(√n) on the ball (adversarial lower bounds)."""
    return decide_readings(res, real_sl, tol, fit_from)["verdicts"][("softmax", "ball")]


def _control(res) -> tuple[str, dict]:
    """A bound with one √n factor dropped, U_φ(n)/√n, on the big ball: rule ``bound`` on max_n σ̲(n)√n/U_φ(n)."""
    from sapa.rules.bound import BoundEvidence
    from sapa.rules.bound import decide as decide_bound

    per = {}
    for a in res.config["activations"]:
        found = max(r["sigma_lower"] * math.sqrt(r["n"]) / r["bound"] for r in res.rows
                    if r["activation"] == a and r["beta"] == BIG)
        per[NAMES[a]] = {"found_over_claimed": found,
                         "verdict": decide_bound(BoundEvidence(claimed=1.0, sharp=math.inf, found=found))}
    v = "FAILS" if all(p["verdict"] == "FAILS" for p in per.values()) else "HOLDS"
    return v, per


def check(ctx: Context) -> Outcome:
    """Adversarial Lipschitz constants on two token balls, sapa's proven bound, real MiniLM layers (module docstring)."""
    from sapa.empirics.experiments.lipschitz_ball import run_ball
    from sapa.empirics.experiments.peer_adversarial import compare as peer_compare
    from sapa.empirics.realmodel.layer_lipschitz import run_layer_lipschitz

    cfg = QUICK if ctx.budget.name == "quick" else FULL
    res = run_ball(replace(cfg["ball"], seed=ctx.budget.seed))
    real = run_layer_lipschitz(cfg["minilm_Ns"], (), max_steps=cfg["max_steps"], seed=ctx.budget.seed)
    real_sl = _real_slopes(real)
    fam = half_attention(ctx.budget.seed, cfg["ball"])
    b = cfg["ball"]
    peer = peer_compare(res, ctx.budget.seed, b.D, b.d, b.d_v)
    readings = words.readings(res, real_sl, decide_readings(res, real_sl, fam=fam), FIT_FROM, BIG, SMALL, NAMES, fam)
    figures = _figure(ctx, res, real, fam)
    fits = {f"{NAMES[a]}, β = {b:g}": _fit(res, a, b).__dict__ for a in res.config["activations"]
            for b in res.config["betas"]}
    ctrl, ctrl_per = _control(res)
    fal, robust = _conditions(ctx, cfg, res, real_sl, readings, ctrl, ctrl_per)
    ratios = {NAMES[a]: _ratios(res, a) for a in res.config["activations"]}
    powers = _powers()
    return Outcome(
        verdict=readings[0].verdict,
        rule=readings[0].rule,
        readings=tuple(readings),
        falsifiability=fal,
        robustness=robust,
        headline=words.headline(_fit(res, "softmax", BIG), _fit(res, "softmax", SMALL), _fit(res, "poly1", BIG),
                                _fit(res, "poly3", BIG), ratios, real_sl, BIG, SMALL),
        findings=words.findings(res, fits, real_sl, powers, NAMES, BIG, FIT_FROM) + words.peer_finding(peer),
        tested_statement=words.tested(res, BIG, SMALL, FIT_FROM),
        figures=figures,
        evidence={"published_statement": words.PUBLISHED, "ball": res.to_json(), "fits": fits, "bound_ratios": ratios,
                  "real_rows": real.rows, "real_slopes": real_sl, "rule_powers": powers, "half_attention_family": fam,
                  "peer_adversarial": peer,
                  "budget": {"ns": list(res.config["ns"]), "betas": list(res.config["betas"]),
                             "ascent": res.config["ascent"], "minilm_Ns": list(cfg["minilm_Ns"]),
                             "max_steps": cfg["max_steps"], "fit_from": FIT_FROM},
                  "certificate": words.CERTIFICATE},
    )


def _powers() -> dict:
    """Measured power of each sampled rule the readings use (exact rules have none)."""
    from sapa.rules import cached_calibration

    c = cached_calibration("growth-upper")
    return {"growth-upper": f"{c.power:.1%} (false FAILS {c.false_fails_rate:.1%}, false HOLDS {c.false_holds_rate:.1%})",
            "growth-upper-exact": "exact: no sampling error", "bound": "exact: no sampling error"}


def _figure(ctx: Context, res, real, fam: dict | None = None) -> tuple[str, ...]:
    from sapa.figures import lipschitz_ball as fig
    from sapa.ledger import store_figure_data

    data = {"ball": res.to_json(), "real": real.to_json(), **({"family": fam} if fam else {})}
    fig.check(data)
    stem = fig.stored_stem(data)
    store_figure_data(ctx, fig.NAME, data, stem)
    paths = fig.draw(data, ctx.out_dir / "figures", stem)
    return tuple(str(p.relative_to(ctx.out_dir)) for p in paths)


def _conditions(ctx, cfg, res, real_sl, readings, ctrl, ctrl_per) -> tuple[dict, dict]:
    """Falsifiability: a bound with its √n dropped must FAIL on the same inputs; robustness of the headline."""
    from sapa.empirics.experiments.lipschitz_ball import run_ball
    from sapa.conditions import could_fail, not_applicable, not_run, robustness, threshold_variants, varied
    from sapa.rules.growth import TOL

    fal = could_fail(
        "sapa's bound is checked against every certified lower bound found, by rule `bound`; the same inputs must "
        "refute a bound that is too small",
        f"Lip(f; B_R^n) ≤ U_φ(n)/√n at every n on β = {BIG:g} (sapa's bound with one √n factor dropped), for every φ",
        ctrl, how="rule bound on max_n σ̲(n)√n/U_φ(n): " + "; ".join(f"{k} {v['found_over_claimed']:.2f} → {v['verdict']}"
                                                                  for k, v in ctrl_per.items()),
        per_activation=ctrl_per)
    head = readings[0].verdict
    rows = [varied(f"exponent tolerance {t:.3g} (±20 % of {TOL})", headline_verdict(res, real_sl, tol=t))
            for t in threshold_variants(TOL)]
    for ff in (4, 16):
        cond = f"fit window n ≥ {ff} (headline n ≥ {FIT_FROM})"
        if sum(n >= ff for n in res.config["ns"]) < 3:
            rows.append(not_run(cond, "fewer than 3 lengths in the window"))
            continue
        rows.append(varied(cond, headline_verdict(res, real_sl, fit_from=ff)))
    from sapa.common.seeds import rng_for

    # another head and other starts: a root seed drawn from a named stream of the ledger's seed
    seed2 = int(rng_for(ctx.budget.seed, "ledger", "lipschitz-on-a-ball", "robustness").integers(2**31))
    other = run_ball(replace(cfg["ball"], seed=seed2, activations=("softmax",), betas=(BIG,)))
    f2 = _fit(other, "softmax", BIG)
    from sapa.rules.growth import UpperEvidence, decide_upper

    rows.append(varied(f"another seed ({seed2}, from the stream rng_for(seed, 'ledger', 'lipschitz-on-a-ball', "
                       "'robustness'): another head and other starts)",
                       decide_upper(UpperEvidence(0.5, f2.lo, f2.hi, False)),
                       f"softmax exponent {f2.slope:.3f} [{f2.lo:.3f}, {f2.hi:.3f}]"))
    rows.append(not_applicable("logit convention", "the head computes S/√d; the other convention is the same ball "
                                                   "with β multiplied by √d (β names the ball)"))
    rows.append(not_run("budget " + ("full" if cfg is QUICK else "quick"), "the other budget's n grid and ascent"))
    return fal, robustness(head, rows)


CONTRACT = Contract(
    object="σ₁ of the Jacobian w.r.t. X of one attention head f(X) = φ(XW_QW_KᵀXᵀ/√d) X W_V, sup over the token ball; "
           "real inputs: whole all-MiniLM-L6-v2 layers with W_O",
    norm="spectral (Lipschitz constant on B_R^n in the Frobenius norm)",
    randomness="W_Q, W_K, W_V entries N(0, 1/D), seeded; inputs adversarial (seeded ascent with restarts)",
    quantifier="for all inputs of the ball (sup), bracketed: certified lower bounds ≤ Lip ≤ sapa's proven bound",
    n_range="quick: n = 2…64 (fit n = 8…64); full: n = 2…256; the half-attention family n = 8…256 (both); real: "
            "MiniLM prefixes 8…32 (quick), 8…256 (full)",
    predicted_exponent="softmax ½ (Castin et al.: √n up to a constant, tight), 0 in the mean-field regime; x^p/√N: "
                       "none published",
    refuted_by="a softmax exponent interval above ½ + 0.05; any input above sapa's bound",
    logit_scale="S/sqrt(d)",
    logit_note="the head's logits S/√d; the ball is named by β = ‖W_QW_Kᵀ‖₂R²/√d, so S instead of S/√d is β·√d",
)

CLAIM = Claim(ID, "(claim; Castin, Ablin & Peyré, ICML 2024, arXiv 2312.14820) On inputs of length n in a compact "
                "set, the Lipschitz constant of self-attention is bounded by √n up to a constant, tight for reasonable "
                "lengths and n-independent in the mean-field regime — and how do x/√N and x³/√N grow on the same ball?",
                CONTRACT, check, kind="claim")
