"""Ledger question ``real-model-regime``: do real trained heads sit where x/√N and x³/√N grow like √N?

Cor 4.3 / 4.5 of arXiv 2410.18613 derive ‖x^p/√N‖_F = O(√N) (p = 1, 3) under i.i.d. Gaussian X,
W_Q, W_K with A = XW_Q independent of B = XW_K; the reviews ask whether that describes a real
model, whose A and B share X (point 1.2) at lengths that need not be ≫ D (point 1.3). The
paper never claims it, so this is a ``kind="question"`` entry with an answer.

Evidence: ``sapa.empirics.realmodel.real.analyse`` on all-MiniLM-L6-v2 (72 heads, 8 shipped passages,
N = 8 … 256, optional extra ``real``). The growth exponent of a head depends on how the
attention input at length N is formed, so everything is computed under four **protocols**
(special tokens in/out × each prefix re-encoded / one fixed-context pass; table in
``sapa.empirics.realmodel.real``), for the paper's x/√N and x³/√N and, as a **baseline**, the model's own
softmax (‖softmax(S)‖_F ≤ √N always: whatever criterion is used must pass it).

Judgement (rule ``head-fraction``, :mod:`sapa.rules.heads`, calibrated on synthetic heads shaped
like these): per (protocol, activation) one reading "at least 90 % of the heads are O(√N)":
HOLDS if ≥ 90 % of the heads' 90 % intervals lie wholly at or below ½ + TOL; FAILS if fewer than
60 % even reach down to it; else UNDETERMINED. The two-sided band 0.5 ± TOL is reported beside
it (same rule, band [½ − TOL, ½ + TOL]); it fails softmax itself, so it decides nothing.

The question is ``ANSWERED`` when, for x/√N and for x³/√N, all four protocols give the same
decided verdict and the softmax baseline HOLDS under each; the answer then states only what
holds under every protocol. Otherwise ``UNDETERMINED``, and the answer names the protocol
dependence. Findings: median exponents per protocol, N* per head, and the top canonical
correlation of A, B against independent random weights on the same hidden states.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from sapa.ledger import Claim, Context, Contract, Outcome
from sapa.prose import real_model_regime_words as words
from sapa.prose.real_model_regime_words import BASELINE, LABEL, POLY
from sapa.rules import heads as rule
from sapa.rules.growth import TOL

if TYPE_CHECKING:  # the model code (torch) is imported only when the check runs
    from sapa.empirics.realmodel.real_records import RealResult

NOT_INSTALLED = {"status": "optional extra 'real' not installed"}


@dataclass(frozen=True)
class Cell:
    """One (protocol, activation): the per-head exponents, both readings' fractions and verdicts."""

    protocol: str
    activation: str
    n_heads: int
    median_exponent: float
    exponent_quantiles: tuple[float, ...]  # 0, 10, 50, 90, 100 %
    within_upper: float       # fraction of heads with hi ≤ ½ + TOL
    consistent_upper: float   # fraction with lo ≤ ½ + TOL
    verdict_upper: str        # rule head-fraction, band (−∞, ½ + TOL]
    within_band: float        # fraction with [lo, hi] ⊂ [½ − TOL, ½ + TOL]
    consistent_band: float    # fraction with [lo, hi] ∩ [½ − TOL, ½ + TOL] ≠ ∅
    verdict_band: str         # rule head-fraction, band [½ − TOL, ½ + TOL]
    heads_above: tuple[tuple[int, int], ...]  # (layer, head) demonstrably above ½ + TOL


@dataclass(frozen=True)
class Judgement:
    """Sanity, the cells, the question's verdict and what the answer may say."""

    sanity: dict
    cells: tuple[Cell, ...]
    verdict: str                 # ANSWERED | UNDETERMINED
    agreed: dict                 # activation -> the verdict common to every protocol (None when they differ)
    baseline_holds: bool         # softmax HOLDS under every protocol

    def cell(self, protocol: str, activation: str) -> Cell:
        return next(c for c in self.cells if c.protocol == protocol and c.activation == activation)

    @property
    def protocols(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.protocol for c in self.cells))


def _q(values, qs=(0.0, 0.1, 0.5, 0.9, 1.0)) -> list[float]:
    return [round(float(v), 4) for v in np.quantile(np.asarray(values, float), qs)]


def _cell(fits, tol: float = TOL, fail_below: float = rule.FAIL_BELOW) -> Cell:
    lo, hi = tuple(f.lo for f in fits), tuple(f.hi for f in fits)
    upper = rule.HeadFractionEvidence(lo=lo, hi=hi, band_hi=rule.A + tol)
    band = rule.HeadFractionEvidence(lo=lo, hi=hi, band_lo=rule.A - tol, band_hi=rule.A + tol)
    slopes = [f.slope for f in fits]
    above = tuple((f.layer, f.head) for f, ok in zip(fits, upper.consistent()) if not ok)
    return Cell(protocol=fits[0].protocol, activation=fits[0].activation, n_heads=len(fits),
                median_exponent=float(np.median(slopes)), exponent_quantiles=tuple(_q(slopes)),
                within_upper=upper.fraction_within, consistent_upper=upper.fraction_consistent,
                verdict_upper=rule.decide(upper, fail_below=fail_below), within_band=band.fraction_within,
                consistent_band=band.fraction_consistent, verdict_band=rule.decide(band, fail_below=fail_below),
                heads_above=above)


def judge(res: RealResult, tol: float = TOL, fail_below: float = rule.FAIL_BELOW) -> Judgement:
    """Cells, sanity and the question's verdict from an :func:`sapa.empirics.realmodel.real.analyse` result, by rule
    head-fraction. ``tol`` and ``fail_below`` are varied only for robustness (the ledger's are the rule's).
    """
    fits = [f for f in res.head_fits("real") if f.kind == "fro"]
    protocols = tuple(dict.fromkeys(f.protocol for f in fits))
    cells = []
    for pr in protocols:
        for act in (BASELINE,) + POLY:
            sel = [f for f in fits if f.protocol == pr and f.activation == act]
            if sel:
                cells.append(_cell(sel, tol, fail_below))
    sanity = {
        "softmax_norm_le_sqrt_n": bool(res.meta.softmax_norm_le_sqrt_n),
        "bias_is_token_shift": res.meta.max_shift_residual < 1e-8,
        "fits_finite": all(math.isfinite(v) for f in fits for v in (f.slope, f.lo, f.hi)),
        "interval_level_is_the_rule's": math.isclose(res.meta.config.level, rule.LEVEL),
        "every_cell_present": len(cells) == 3 * len(protocols) > 0,
    }
    agreed = {}
    for act in POLY:
        vs = {c.verdict_upper for c in cells if c.activation == act}
        agreed[act] = vs.pop() if len(vs) == 1 and "UNDETERMINED" not in vs else None
    baseline = all(c.verdict_upper == "HOLDS" for c in cells if c.activation == BASELINE)
    ok = all(sanity.values()) and baseline and all(v is not None for v in agreed.values())
    return Judgement(sanity=sanity, cells=tuple(cells), verdict="ANSWERED" if ok else "UNDETERMINED", agreed=agreed,
                     baseline_holds=baseline)


# --------------------------------------------------------------------------- evidence


def canonical_summary(res: RealResult) -> dict:
    """Real top canonical correlation vs the random-independent-weight baseline, per token set (all / content)."""
    recs = res.canonical
    out = {}
    for ts in dict.fromkeys(r.tokens for r in recs):
        rs = [r for r in recs if r.tokens == ts]
        layer_random = {l: float(np.median([r.random_top for r in rs if r.layer == l])) for l in {r.layer for r in rs}}
        excess = [r.real_top - layer_random[r.layer] for r in rs]
        rmax = {l: max(r.random_top for r in rs if r.layer == l) for l in layer_random}
        out[ts] = {
            "real_median": float(np.median([r.real_top for r in rs])), "real_quantiles": _q([r.real_top for r in rs]),
            "random_median": float(np.median([r.random_top for r in rs])),
            "random_min": min(r.random_top for r in rs), "random_max": max(r.random_top for r in rs),
            "random_quantiles": _q([r.random_top for r in rs]),
            "excess_median": float(np.median(excess)), "excess_quantiles": _q(excess),
            "fraction_above_every_random_draw_of_its_layer": float(np.mean([r.real_top > rmax[r.layer] for r in rs])),
            "pr_min": min(r.participation_ratio for r in rs), "pr_max": max(r.participation_ratio for r in rs),
            "participation_ratio_per_layer": {str(l): round(next(r.participation_ratio for r in rs if r.layer == l), 2)
                                              for l in sorted(layer_random)},
            "n_tokens": rs[0].n_tokens,
        }
    return out


def _measured_vs_exact(res: RealResult) -> dict:
    """Per p, kind and proxy: median (measured − exact grid slope) and how often the exact slope is in the interval."""
    from sapa.empirics.realmodel import real

    out = {}
    for p, act in ((1, "x/sqrt(N)"), (3, "x^3/sqrt(N)")):
        for kind in ("fro", "jac"):
            pairs = [(res.fit("prefix", act, kind, h.layer, h.head), h) for h in res.heads]
            if not pairs or any(f is None for f, _ in pairs):
                continue
            meas = np.array([f.slope for f, _ in pairs])
            lo, hi = np.array([f.lo for f, _ in pairs]), np.array([f.hi for f, _ in pairs])
            for proxy in real.PROXIES:
                m = [h.proxy(proxy, p) for _, h in pairs]
                pred = np.array([x.grid_slope if kind == "fro" else x.grid_slope_jac for x in m])
                out[f"p{p}_{kind}_{proxy}"] = {
                    "median_measured_minus_predicted": round(float(np.median(meas - pred)), 4),
                    "fraction_prediction_in_ci": float(np.mean((lo <= pred) & (pred <= hi)))}
    return out


def _evidence(res: RealResult, j: Judgement, canon: dict) -> dict:
    from sapa.empirics.realmodel import real

    heads = res.heads
    meta = res.meta
    tab = real.layer_table(res)
    slope = lambda act, h: res.fit("prefix", act, "fro", h.layer, h.head).slope  # noqa: E731
    # non-stationary scores (protocol "prefix"): if the typical |S_ij| grows like N^γ, ‖x^p/√N‖ gains ≈ pγ
    gamma = np.array([slope("x/sqrt(N)", h) - h.proxy("matched", 1).grid_slope for h in heads])
    p3 = np.array([slope("x^3/sqrt(N)", h) for h in heads])
    p3_pred = np.array([h.proxy("matched", 3).grid_slope for h in heads]) + 3 * gamma
    jac, whole = {}, {}
    for f in res.head_fits("real"):
        if f.kind == "jac":
            jac.setdefault(f"{f.protocol}:{f.activation}", []).append(f.slope)
    for f in res.head_fits("all"):  # full budget: the fit over the whole grid (to N = 512), beside the verdict's
        whole.setdefault(f"{f.protocol}:{f.activation}:{f.kind}", []).append(f.slope)
    ab = {"matched_abs_mean": [h.ab.sample.matched_abs_mean for h in heads],
          "canonical_top": [h.ab.sample.canonical_top for h in heads],
          "cov_norm_ratio": [h.ab.sample.cov_norm_ratio for h in heads],
          "null_canonical_top": [h.ab.null.canonical_top for h in heads],
          "identity_canonical_top": [h.ab.identity.canonical_top for h in heads],
          "diag_logit_excess_sd": [h.ab.diag_logit_excess_sd for h in heads]}
    return {
        "model": meta.model,
        "config": asdict(meta.config),
        "Ns_fit": list(res.Ns_real), "Ns_measured": list(res.Ns),
        "texts": list(meta.passages), "n_tokens_covariance": meta.n_tokens_covariance,
        "protocols": meta.protocols,
        "scores_and_jacobian": meta.scores,
        "sanity": j.sanity,
        "cells": [{**asdict(c), "heads_above": [list(h) for h in c.heads_above]} for c in j.cells],
        "agreed_across_protocols": j.agreed,
        "baseline_softmax_holds_everywhere": j.baseline_holds,
        "question_rule": ("ANSWERED iff for x/√N and x³/√N every protocol gives the same decided head-fraction verdict "
                          "and softmax HOLDS under every protocol; else UNDETERMINED"),
        "jacobian_exponent_quantiles": {k: _q(v) for k, v in jac.items()},
        **({"exponent_quantiles_whole_grid": {k: _q(v) for k, v in whole.items()}} if whole else {}),
        "canonical_correlation": canon,
        "canonical_baseline": meta.canonical_baseline,
        "proxies": meta.proxies,
        "per_layer": {str(l): {k: round(float(v), 4) for k, v in row.items()} for l, row in tab.iterrows()},
        "n_star_all_heads": {f"p{p}_{proxy}": _q([h.proxy(proxy, p).n_star for h in heads]) for p in (1, 3)
                             for proxy in real.PROXIES},
        "measured_vs_exact": _measured_vs_exact(res),
        "score_scale_growth": {
            "gamma_quantiles": _q(gamma),
            "p3_residual_quantiles": _q(p3 - p3_pred),
            "p3_correlation_with_prediction": round(float(np.corrcoef(p3, p3_pred)[0, 1]), 4),
            "note": "protocol prefix: γ = measured p = 1 exponent − matched-Gaussian p = 1 slope (the growth of the "
                    "typical score |S_ij| with N; 0 for i.i.d. tokens); p3 residual = measured p = 3 exponent − "
                    "(matched p = 3 slope + 3γ)",
        },
        "ab_correlation": {k: _q(v) for k, v in ab.items()},
        "vit_references": real.vit_references(res.Ns_real),
        "analysis_seconds": meta.seconds, "from_cache": meta.from_cache,
    }


def check(ctx: Context) -> Outcome:
    """Run (or reuse from ``OUT/real``) the real-model analysis under every protocol, judge it, draw the figures."""
    from sapa.empirics.realmodel import real

    if not real.available():
        return Outcome(verdict="UNDETERMINED", evidence=dict(NOT_INSTALLED), tested_statement=words.TESTED,
                       headline=f"optional extra 'real' not installed (missing: {', '.join(real.missing_modules())})")
    real.set_offline()
    cfg = real.QUICK if ctx.budget.name == "quick" else real.FULL
    res = real.analyse(replace(cfg, seed=ctx.budget.seed, level=rule.LEVEL), cache_dir=ctx.out_dir / "real")
    j = judge(res)
    canon = canonical_summary(res)
    ev = _evidence(res, j, canon)
    figures = ()
    try:
        from sapa.figures import real_heads

        paths = real_heads.draw(res.to_dict(), ctx.out_dir / "figures")  # figures draw from the stored form
        figures = tuple(str(p.relative_to(ctx.out_dir)) for p in paths)
    except AssertionError as exc:  # the figure asserts its own consistency; a failure is evidence, not a crash
        ev["figure_assertion_failed"] = str(exc)
    dist = distances(res)
    ev["distance_to_flip"] = dist
    closest = min(dist, key=lambda d: d["heads_to_flip"])
    near = (f" The closest reading is {closest['heads_to_flip']} head(s) from {closest['flips_to']}: "
            f"{closest['cell']} has {closest['consistent']}/{closest['heads']} heads consistent with O(√N) and "
            f"{closest['within']}/{closest['heads']} within it, against the thresholds "
            f"{closest['fail_threshold']:.1f} (FAILS below) and {closest['high_threshold']:.1f} (HOLDS from).")
    fal, robust = _conditions(res, j)
    robust["distance"] = near.strip()
    return Outcome(verdict=j.verdict, evidence=ev, tested_statement=words.TESTED, headline=words.headline(j, canon),
                   figures=figures, readings=tuple(words.reading_of(c) for c in j.cells), rule=rule.HEAD_FRACTION.name,
                   answer=words.answer_text(j, canon) + near, findings=words.findings(j, ev), falsifiability=fal, robustness=robust)


def distances(res: RealResult) -> list[dict]:
    """Per cell (protocol · activation): how many heads from a different verdict (``rule.heads_to_flip``)."""
    fits = [f for f in res.head_fits("real") if f.kind == "fro"]
    out = []
    for pr in dict.fromkeys(f.protocol for f in fits):
        for act in (BASELINE,) + POLY:
            sel = [f for f in fits if f.protocol == pr and f.activation == act]
            if sel:
                ev = rule.HeadFractionEvidence(lo=tuple(f.lo for f in sel), hi=tuple(f.hi for f in sel))
                out.append({"cell": f"{pr} · {LABEL[act]}", **rule.heads_to_flip(ev)})
    return out


def _conditions(res: RealResult, j: Judgement) -> tuple[dict, dict]:
    """Falsifiability (softmax's heads × N^0.5 through the same rule) and robustness (tolerance, FAILS threshold ±20 %)."""
    from sapa.conditions import could_fail, not_applicable, not_run, robustness, threshold_variants, varied

    fits = [f for f in res.head_fits("real") if f.kind == "fro" and f.activation == BASELINE]
    first = fits[0].protocol if fits else None
    sel = [f for f in fits if f.protocol == first]
    ev = rule.HeadFractionEvidence(lo=tuple(f.lo + 0.5 for f in sel), hi=tuple(f.hi + 0.5 for f in sel))
    ctrl = rule.decide(ev) if sel else "UNDETERMINED"
    fal = could_fail("per-head exponents are bootstrap intervals on real hidden states; a head fraction can fall "
                     "either side of the rule's thresholds",
                     f"softmax·N^0.5 (protocol {first}) is O(√N) in ≥ {rule.HIGH:.0%} of heads (deliberately false: "
                     "every exponent + 0.5)", ctrl,
                     how="the same per-head intervals (× N^0.5 shifts each by exactly 0.5) and rule head-fraction")
    rows = [not_applicable("logit convention", "per-head exponents do not depend on a constant factor of the logits")]
    for t in threshold_variants(TOL):
        rows.append(varied(f"tolerance {t:.3g} (±20 % of {TOL})", judge(res, tol=t).verdict))
    for fb in threshold_variants(rule.FAIL_BELOW):
        rows.append(varied(f"FAILS below {fb:.0%} of heads (±20 % of {rule.FAIL_BELOW:.0%})",
                           judge(res, fail_below=fb).verdict))
    rows.append(not_run("seed", "a second bootstrap of the per-head intervals is not run (the shipped texts are fixed)"))
    rows.append(not_run("budget full", "13 lengths up to 512; not run in this budget"))
    return fal, robustness(j.verdict, rows)


CONTRACT = Contract(
    object="φ(S) = x/√n and x³/√n element-wise, and the model's softmax as a baseline, S = (XW_Q+b_Q)(XW_K+b_K)ᵀ/√d "
           "of each of the 72 heads of all-MiniLM-L6-v2 (n tokens; X the layer's attention input)",
    norm="Frobenius; RMS over texts (Jacobian ∂φ/∂X reported for protocol prefix, all protocols at the full budget)",
    randomness="real weights; real hidden states of 8 shipped English passages under 4 protocols (special tokens "
               "in/out × prefixes re-encoded / one fixed-context pass); random independent W_Q, W_K (seeded) as the "
               "canonical-correlation baseline",
    quantifier=f"per head (90 % paired-bootstrap interval over texts), then the fraction of heads: ≥ {rule.HIGH:.0%} "
               "of heads, per protocol and activation",
    n_range="N ∈ {8, 16, 32, 64, 128, 256} (quick) or 13 lengths 8–512 (full; verdict from 8–256); n = N or N − 2",
    predicted_exponent=f"≤ 0.5 + {TOL} (O(√N), the paper's notation); 0.5 ± {TOL} for the two-sided reading",
    refuted_by=f"(question) 'the heads sit in the regime' is refuted, for a protocol and activation, when fewer than "
               f"{rule.FAIL_BELOW:.0%} of heads have an interval reaching down to 0.5 + {TOL}; the answer is "
               "protocol-dependent when the verdicts differ between protocols",
    logit_scale="S/sqrt(d)",
    logit_note="the model's own logits (XW_Q+b_Q)(XW_K+b_K)ᵀ/√d; exponents do not depend on the convention",
)

CLAIM = Claim("real-model-regime", words.STATEMENT, CONTRACT, check, kind="question")
