"""E-RMS ‖φ‖_F/√N, growth and worst-case exponents (one audit per row), σ₁ exponents on two balls, time ÷ SDPA.

The scorecard's non-training axes (:mod:`sapa.api.compare`). The audits and the ascents are jobs of the pool that
also trains (``*_jobs``: the jobs and the rows refused before any work; ``*_cells``: the cells from the jobs'
results); the timing runs alone, in this process, on one thread. Every function's cells are {row id: {axis: Cell}};
a cell that cannot be computed for a row carries the documented refusal (InputError) as its reason.
"""

from __future__ import annotations

import math

from sapa.api.compare_types import Cell, CompareBudget, Job, builtin_degree, expr_form, not_computed, table_id
from sapa.common.validate import InputError

__all__ = ["audit_cells", "audit_jobs", "audit_row", "ball_cells", "ball_jobs", "ball_run", "timing"]

VIT = (768, 64, 196)  # D, d, N of ViT-Base
BETAS = (4.0, 1.0)    # the balls, by their largest logit
# expected CPU-s of one job at the quick budget (one thread, measured on 2 cores: docs/performance.md): the pool's
# order (longest first) and its ETA
AUDIT_COST = 1.2
BALL_COST = 0.5


# --------------------------------------------------------------------------- (a) (b) (c): one audit per row


def audit_jobs(rows: list[Family], b: CompareBudget, logit_scale: str, seed: int) -> tuple[list[Job], dict]:
    """One job per row (:func:`audit_row`, under both logit conventions, iid weights at ViT-Base) and the rows refused
    before any work ({row: {size, growth, worst_case}}, each cell saying why)."""
    from sapa.api.conventions import activations

    jobs, refused = [], {}
    for r in rows:
        try:
            activations(r.expr, r.normalize, r.mask, VIT[1])  # a refusal now, in this process: one clear reason
        except InputError as exc:
            refused[r.id] = _refused(("size", "growth", "worst_case"), exc)
            continue
        jobs.append(Job("audit", r.id, audit_row, (r, b.audit_trials, logit_scale, seed), cost=AUDIT_COST))
    return jobs, refused


def audit_row(r: Family, trials: int, logit_scale: str, seed: int) -> dict:
    """The audit of one row: :func:`sapa.api.conventions.audit_both` of :func:`sapa.api.audit.run_audit` (a job)."""
    from sapa.api.audit import run_audit
    from sapa.api.conventions import activations, audit_both
    from sapa.theory.activation_audit import model_spec

    D, d, N = VIT
    acts = activations(r.expr, r.normalize, r.mask, d)
    return audit_both(r.expr, acts, model_spec("iid", D, d), N, logit_scale, d, run_audit, trials=trials, seed=seed)


def audit_cells(rows: list[Family], done: dict) -> dict:
    """{row: {size, growth, worst_case}} from the audits ``done`` ({row: (result, error)}); ∂φ/∂X is reported
    relative to softmax's own E-RMS."""
    out = {}
    soft = done.get("softmax", (None, None))[0] or {}
    soft_jac = soft.get("expected_jac_fro2")
    for r in rows:
        if r.id not in done:
            continue
        o, why = done[r.id]
        out[r.id] = {a: not_computed(a, why) for a in ("size", "growth", "worst_case")} if o is None else \
            {"size": _size(o, soft_jac), "growth": _growth(o), "worst_case": _worst(o)}
    return out


def _refused(axes: tuple[str, ...], exc: Exception) -> dict:
    why = " ".join(str(exc).split())
    return {a: not_computed(a, why) for a in axes}


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
    kind = "Monte Carlo t 99 %" if iv else ("exact" if o.get("method") == "exact" else o.get("method", "exact"))
    return Cell("growth", o.get("growth_exponent"), iv, kind, rate["verdict"],
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


def ball_activation(r: Family) -> str:
    """The head's activation name: softmax, poly<p> (c·x^p, c = 1/√N), else expr:<φ> / row:<ψ>."""
    if r.id == "softmax":
        return "softmax"
    if builtin_degree(r) is not None:
        return f"poly{builtin_degree(r)}"
    return expr_form(r)


def ball_jobs(rows: list[Family], b: CompareBudget, seed: int) -> tuple[list[Job], dict]:
    """One job per (row, ball) (:func:`ball_run`: the two balls' ascents are independent, so splitting them changes no
    number) and the rows refused before any work ({row: {lipschitz}})."""
    jobs, refused = [], {}
    for r in rows:
        if r.mask == "causal":
            refused[r.id] = {"lipschitz": not_computed("lipschitz", "defined under a causal mask only; the ball's "
                                                                    "head is unmasked")}
            continue
        jobs += [Job("lipschitz", r.id, ball_run, (ball_activation(r), b, beta, seed), cost=BALL_COST)
                 for beta in BETAS]
    return jobs, refused


def ball_run(act: str, b: CompareBudget, beta: float, seed: int):
    """σ̲(n) of ``act`` on the ball β (:func:`sapa.empirics.experiments.lipschitz_ball.run_ball`; a job)."""
    from sapa.empirics.experiments.lipschitz_ball import BallConfig, run_ball
    from sapa.empirics.kernels.ball_ascent import AscentConfig

    return run_ball(BallConfig(ns=b.ball_ns, betas=(float(beta),), activations=(act,), seed=seed,
                               ascent=AscentConfig(b.ball_restarts, b.ball_steps, polish_iters=b.ball_polish)))


def ball_cells(rows: list[Family], b: CompareBudget, done: dict) -> dict:
    """{row: {lipschitz}}: slope of σ̲(n) on β = 4 (value) and β = 1 (extra), each judged by growth-upper at ½, from
    ``done`` ({row: [(BallResult, error) per ball]})."""
    from sapa.empirics.experiments.lipschitz_ball import BallResult

    out = {}
    for r in rows:
        if r.id not in done:
            continue
        got = done[r.id]
        why = next((e for _, e in got if e is not None), None)
        if why is not None:
            out[r.id] = {"lipschitz": not_computed("lipschitz", why)}
            continue
        first = got[0][0]
        res = BallResult([x for res, _ in got for x in res.rows], first.v, first.w,
                         dict(first.config, betas=[x for res, _ in got for x in res.config["betas"]]))
        out[r.id] = {"lipschitz": _ball_cell(res, ball_activation(r), b)}
    return out


def _ball_cell(res, act: str, b: CompareBudget) -> Cell:
    from sapa.empirics.experiments.lipschitz_ball import fit_exponent
    from sapa.rules.growth import LEVEL, UpperEvidence, decide_upper

    fits, verdicts, extra = {}, {}, {}
    for beta in BETAS:
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


def timing(rows: list[Family], b: CompareBudget, seed: int, say) -> dict:
    """{row: {time}}: the best form's median time ÷ SDPA's per (mask, pass), the worst of the four as the value."""
    from sapa.common.pool import one_thread

    out = {"softmax": {"time": Cell("time", 1.0, None, "exact", None, None,
                                    "the reference: torch's fused scaled_dot_product_attention (SDPA)")}}
    for k, r in enumerate(rows[1:], 1):
        say(f"[compare] timing {k}/{len(rows) - 1}: {r.label} (alone, one thread)")
        with one_thread():
            try:
                out[r.id] = {"time": _time_row(r, b, seed)}
            except InputError as exc:
                out[r.id] = {"time": not_computed("time", " ".join(str(exc).split()))}
    return out


def _time_row(r: Family, b: CompareBudget, seed: int) -> Cell:
    import os
    import statistics

    from sapa.empirics.timing.overhead import OverheadGrid, time_cells
    from sapa.rules import timing as T

    form = builtin_degree(r) if builtin_degree(r) is not None else expr_form(r)
    methods = ("naive", "causal_blocked") + (("linearised",) if builtin_degree(r) is not None else ())
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
    ev = T.TimingEvidence(tuple((k, tuple(v["rounds"])) for k, v in best.items()), T.FACTOR,
                          round(os.getloadavg()[0], 2), os.cpu_count(), "process")
    worst = max(best, key=lambda k: best[k]["ratio"])
    for k, v in best.items():
        t = T.cell_test(v["rounds"])
        v["interval"] = None if t is None else _t_interval(t)
    iv = best[worst]["interval"]
    return Cell("time", best[worst]["ratio"], iv, "t 95 % of the mean log ratio (drift included)", T.decide(ev),
                "timing-ratio", f"worst of 4 (mask, pass) at {worst}: {T.why(ev)}; CPU, 1 thread, float32, batch 1, "
                f"one head, d = 64, N = {b.timing_N}, process clock; best of the forms {', '.join(methods)}",
                {"cells": best, "load_1min": ev.load, "cores": ev.cores})


def _t_interval(t) -> tuple[float, float]:
    from scipy import stats

    q = float(stats.t.ppf(0.975, max(t.df, 1.0))) if math.isfinite(t.df) else 1.96
    return math.exp(t.m - q * t.se), math.exp(t.m + q * t.se)
