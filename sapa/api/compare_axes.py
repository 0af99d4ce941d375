"""E-RMS ‖φ‖_F/√N, growth and worst-case exponents (one audit per row), σ₁ exponents on two balls, time ÷ SDPA.

The scorecard's non-training axes (:mod:`sapa.api.compare`): each function returns {row id: {axis: Cell}}; a cell
that cannot be computed for a row carries the documented refusal (InputError) as its reason.
"""

from __future__ import annotations

import math

from sapa.api.compare import Cell, CompareBudget, Row, not_computed
from sapa.common.validate import InputError

__all__ = ["audits", "lipschitz", "timing"]

VIT = (768, 64, 196)  # D, d, N of ViT-Base


# --------------------------------------------------------------------------- (a) (b) (c): one audit per row


def audits(rows: list[Row], b: CompareBudget, logit_scale: str, seed: int, say) -> dict:
    """{row: {size, growth, worst_case}} from :func:`sapa.commands.audit_activation.run_audit` under both logit
    conventions (iid weights at ViT-Base); ∂φ/∂X is reported relative to softmax's own E-RMS."""
    from sapa.commands.audit_activation import run_audit
    from sapa.commands.audit_conventions import activations, audit_both
    from sapa.theory.activation_audit import model_spec

    D, d, N = VIT
    spec = model_spec("iid", D, d)
    outs, out = {}, {}
    for r in rows:
        say(f"[compare] audit {r.label}")
        try:
            acts = activations(r.expr, r.normalize, r.mask, d)
            outs[r.id] = audit_both(r.expr, acts, spec, N, logit_scale, d, run_audit, trials=b.audit_trials, seed=seed)
        except InputError as exc:
            why = " ".join(str(exc).split())
            out[r.id] = {a: not_computed(a, why) for a in ("size", "growth", "worst_case")}
    soft_jac = outs.get("softmax", {}).get("expected_jac_fro2")
    for rid, o in outs.items():
        out[rid] = {"size": _size(o, soft_jac), "growth": _growth(o), "worst_case": _worst(o)}
    return out


def _size(o: dict, soft_jac: float | None) -> Cell:
    v, method = o.get("constant_vs_softmax"), o.get("method", "by construction")
    if method == "monte_carlo":
        iv, kind = tuple(o["constant_vs_softmax_interval"]), "Monte Carlo t 99 %"
    elif method == "quadrature" and v is not None:
        w = 0.5 * o["error_bound"]
        iv, kind = (v * (1 - w), v * (1 + w)), "quadrature a-posteriori"
    else:
        iv, kind = None, "exact" if method == "exact" else method
    jac = o.get("expected_jac_fro2")
    extra = {"method": method, "expected_fro2": o.get("expected_fro2"), "expected_jac_fro2": jac,
             "jac_x_ratio_to_softmax": math.sqrt(jac / soft_jac) if (jac is not None and soft_jac) else None,
             "jac_s_ratio_to_sqrtN_half": o.get("constant_jac_s_vs_softmax"),
             "other_convention": o.get("conventions", {})}
    size = o["readings"]["size"]
    return Cell("size", v, iv, kind, size["verdict"], size["rule"],
                f"{method}; {size['why']}; ‖∂φ/∂X‖ ratio to softmax's E-RMS: a finding (no rule)", extra)


def _growth(o: dict) -> Cell:
    rate = o["readings"]["rate"]
    iv = tuple(o["growth_exponent_interval"]) if o.get("growth_exponent_interval") else None
    note = rate["why"]
    if o.get("method") == "monte_carlo":
        note += "; N → ∞ and N* not estimated (Monte Carlo at N/2, N, 2N only)"
    extra = {"asymptotic_exponent": o.get("asymptotic_exponent"), "sup_growth_exponent": o.get("sup_growth_exponent"),
             "crossover_n": o.get("crossover_n"), "n_reg": rate.get("regime"),
             "growth_exponent_jac": o.get("growth_exponent_jac"), "like_softmax": o.get("verdict")}
    return Cell("growth", o.get("growth_exponent"), iv, "Monte Carlo t 99 %" if iv else "exact", rate["verdict"],
                rate["rule"], note, extra)


def _worst(o: dict) -> Cell:
    from sapa.rules.growth import UpperEvidence, decide_upper

    e = o.get("worst_case_exponent")
    if e is None:
        return not_computed("worst_case", o.get("verdict_why", "no worst case for this activation"))
    exact = bool(o.get("worst_case_exponent_is_exact"))
    br = o.get("worst_case_bracket")
    lo, hi = (e, e) if exact or not br else (min(br), max(br))
    return Cell("worst_case", e, None if exact else (lo, hi), "exact" if exact else "bracket",
                decide_upper(UpperEvidence(0.5, lo, hi, exact)), "growth-upper-exact" if exact else "growth-upper",
                f"sup of ‖φ(S)‖_F over |S_ij| ≤ 1 against softmax's √N; witness: {o.get('worst_case_witness')}",
                {"jac_exponent": o.get("worst_case_exponent_jac")})


# --------------------------------------------------------------------------- (d) Lipschitz σ₁ on two balls


def ball_activation(r: Row) -> str:
    """The head's activation name: softmax, poly<p> (c·x^p, c = 1/√N), else expr:<φ> / row:<ψ>."""
    if r.id == "softmax":
        return "softmax"
    if r.p is not None:
        return f"poly{r.p}"
    return ("row:" if r.normalize == "row" else "expr:") + r.expr


def lipschitz(rows: list[Row], b: CompareBudget, seed: int, say) -> dict:
    """{row: {lipschitz}}: slope of σ̲(n) on β = 4 (value) and β = 1 (extra), each judged by growth-upper at ½."""
    from sapa.empirics.experiments.lipschitz_ball import BallConfig, run_ball
    from sapa.empirics.kernels.ball_ascent import AscentConfig

    out = {}
    for r in rows:
        if r.mask == "causal":
            out[r.id] = {"lipschitz": not_computed("lipschitz", "defined under a causal mask only; the ball's head is "
                                                                "unmasked")}
            continue
        say(f"[compare] Lipschitz ascent {r.label}")
        act = ball_activation(r)
        cfg = BallConfig(ns=b.ball_ns, activations=(act,), ascent=AscentConfig(b.ball_restarts, b.ball_steps,
                                                                                 polish_iters=b.ball_polish), seed=seed)
        try:
            res = run_ball(cfg)
        except InputError as exc:
            out[r.id] = {"lipschitz": not_computed("lipschitz", " ".join(str(exc).split()))}
            continue
        out[r.id] = {"lipschitz": _ball_cell(res, act, b)}
    return out


def _ball_cell(res, act: str, b: CompareBudget) -> Cell:
    from sapa.empirics.experiments.lipschitz_ball import fit_exponent
    from sapa.rules.growth import LEVEL, UpperEvidence, decide_upper

    fits, verdicts, extra = {}, {}, {}
    for beta in (4.0, 1.0):
        s = res.series(act, beta)
        f = fit_exponent(s["n"], s["sigma_lower"], LEVEL)
        fits[beta] = f
        verdicts[beta] = decide_upper(UpperEvidence(0.5, f.lo, f.hi, False))
        extra[f"beta{beta:g}"] = {"slope": f.slope, "lo": f.lo, "hi": f.hi, "verdict": verdicts[beta],
                                  "sigma_at_nmax": float(s["sigma_lower"][-1]),
                                  "bound_at_nmax": float(s["bound"][-1]) if math.isfinite(s["bound"][-1]) else None}
    worst = next(v for v in ("FAILS", "UNDETERMINED", "HOLDS") if v in verdicts.values())
    f4 = fits[4.0]
    return Cell("lipschitz", f4.slope, (f4.lo, f4.hi), f"OLS t {LEVEL:.0%}", worst, "growth-upper",
                f"certified lower bounds σ̲ (ascent) on the balls β = 4 and 1, n = {b.ball_ns[0]}…{b.ball_ns[-1]} "
                "(a lower bound's slope can understate the rate); verdict: the worse of the two balls"
                + ("" if act.startswith(("softmax", "poly")) else "; no upper bound U_φ derived for this φ"), extra)


# --------------------------------------------------------------------------- (e) CPU time against SDPA


PASSES = (("none", "fwd"), ("none", "fwd+bwd"), ("causal", "fwd"), ("causal", "fwd+bwd"))


def timing(rows: list[Row], b: CompareBudget, seed: int, say) -> dict:
    """{row: {time}}: the best form's median time ÷ SDPA's per (mask, pass), the worst of the four as the value."""
    from sapa.common.pool import one_thread

    out = {"softmax": {"time": Cell("time", 1.0, None, "exact", None, None,
                                    "the reference: torch's fused scaled_dot_product_attention (SDPA)")}}
    for r in rows[1:]:
        say(f"[compare] timing {r.label} (alone, one thread)")
        with one_thread():
            try:
                out[r.id] = {"time": _time_row(r, b, seed)}
            except InputError as exc:
                out[r.id] = {"time": not_computed("time", " ".join(str(exc).split()))}
    return out


def _time_row(r: Row, b: CompareBudget, seed: int) -> Cell:
    import os
    import statistics

    from sapa.empirics.timing.overhead import OverheadGrid, time_cells
    from sapa.rules import timing as T

    form = r.p if r.p is not None else ("row:" if r.normalize == "row" else "expr:") + r.expr
    methods = ("naive", "causal_blocked") + (("linearised",) if r.p is not None else ())
    g = OverheadGrid(Ns=(b.timing_N,), repeats=b.timing_repeats, block_s=b.timing_block_s, crossover_ds=(),
                     memory=False, seed=seed, time_cap_s=1.0, methods=methods)
    best: dict = {}
    for m in methods:
        cells = [{"p": form, "mask": k, "pass": s, "N": b.timing_N, "method": m} for k, s in PASSES
                 if m != "causal_blocked" or k == "causal"]
        res = time_cells(g, cells, device="cpu")
        for c in cells:
            got = res[f"p{c['p']}/{c['mask']}/{c['pass']}@N={c['N']}"]
            if got["status"] == "ok" and got["ratio_rounds"]:
                med = statistics.median(got["ratio_rounds"])
                key = f"{c['mask']}/{c['pass']}"
                if key not in best or med < best[key]["ratio"]:
                    best[key] = {"method": m, "ratio": med, "rounds": got["ratio_rounds"]}
    if len(best) < 4:
        return Cell("time", None, None, "none", None, None, "not computed: a (mask, pass) had no timed form")
    ev = T.TimingEvidence(tuple((k, tuple(v["rounds"])) for k, v in best.items()), 1.5,
                          round(os.getloadavg()[0], 2), os.cpu_count(), "process")
    worst = max(best, key=lambda k: best[k]["ratio"])
    t = T.cell_test(best[worst]["rounds"])
    iv = None if t is None else _t_interval(t)
    for k, v in best.items():
        v["interval"] = _t_interval(T.cell_test(v["rounds"])) if T.cell_test(v["rounds"]) else None
    return Cell("time", best[worst]["ratio"], iv, "t 95 % of the mean log ratio (drift included)", T.decide(ev),
                "timing-ratio", f"worst of 4 (mask, pass) at {worst}: {T.why(ev)}; CPU, 1 thread, float32, batch 1, "
                f"one head, d = 64, N = {b.timing_N}, process clock; best of the forms {', '.join(methods)}",
                {"cells": best, "load_1min": ev.load, "cores": ev.cores})


def _t_interval(t) -> tuple[float, float]:
    from scipy import stats

    q = float(stats.t.ppf(0.975, max(t.df, 1.0))) if math.isfinite(t.df) else 1.96
    return math.exp(t.m - q * t.se), math.exp(t.m + q * t.se)
