"""The N-scaling audit of any attention activation φ(x, N, i, j), wired from theory, empirics and the rules.

Exact (polynomial φ) or quadrature (other element-wise φ) expectations come from
:mod:`sapa.theory.activation_audit`; row-normalised φ, and φ whose row-index dependence is not a factor, go to Monte
Carlo with exact kernels (:mod:`sapa.empirics.experiments.activation_sampling`); the verdict "grows like softmax" is the calibrated
rule ``audit-like-softmax`` (:mod:`sapa.rules.like_softmax`). Every result says which ``method`` produced it.
:func:`audit` (``sapa.audit``) audits an expression under both logit conventions (:mod:`sapa.api.conventions`), as
``sapa audit`` does, and returns an :class:`AuditResult`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from sapa.api.conventions import DEFAULT, activations, audit_both, logit_substituted
from sapa.api.inputs import PY, Names, matrix, nonneg_int
from sapa.api.results import Result
from sapa.common.validate import InputError, choice, positive_float, positive_int, unit_interval
from sapa.empirics.montecarlo.stats import loglog_slope
from sapa.regime import windows_text
from sapa.theory.activation_audit import (
    N_GRID,
    Activation,
    ModelSpec,
    audit as audit_moments,
    model_spec,
    parse_activation,
    profile,
    worst_case,
)

__all__ = ["AuditResult", "MC_TRIALS", "NAMED_SIZES", "RANGE_N", "audit", "audit_spec", "check_work", "mc_grid",
           "method_words", "run_audit"]

# Named sizes (token width D, head width d, tokens N): ViT-Base/Small at 224² with 16² patches, and
# all-MiniLM-L6-v2's heads (D = 384, d = 32) at the ledger's longest real-text prefix.
NAMED_SIZES = {"ViT-B": (768, 64, 196), "ViT-S": (384, 64, 196), "MiniLM head": (384, 32, 256)}
RANGE_N = (16, 64, 196, 1024, 4096, 16384)
MC_TRIALS = 200  # default Monte Carlo trials per N (row-normalised activations)


def mc_grid(N: int) -> tuple[int, ...]:
    """The Monte Carlo grid around N for the local exponent: N/2, N, 2N (at least 2 tokens)."""
    return tuple(sorted({max(2, N // 2), N, 2 * N}))


def _verdict_exact(a, prof, size_factor: float, n_min: float) -> tuple[str, dict, dict]:
    """Rate and size readings from exact / quadrature evidence: the sup of the local exponent from ``n_min`` on."""
    from sapa.regime import exponent_windows
    from sapa.rules.like_softmax import A, TOL, LikeSoftmaxEvidence

    w = 0.5 * a.error_bound
    win = exponent_windows(prof, A + TOL, n_min)
    win.update({"n_lo": 2.0, "n_hi": 2.0**20, "n_hi_text": "2²⁰"})
    sup = win["sup_from_n_min"]
    ev = LikeSoftmaxEvidence(sup - w, sup + w, a.asymptotic_exponent,
                             a.constant_vs_softmax * (1 - w), a.constant_vs_softmax * (1 + w), a.method == "exact")
    return *_readings(ev, size_factor, win), ev.__dict__


def _readings(ev, size_factor: float, win: dict | None) -> tuple[str, dict]:
    """(like-softmax verdict, {"rate": …, "size": …, "why": …}) — the two readings apart, with the reading that failed.

    ``win`` (windows of the local exponent, :func:`sapa.regime.exponent_windows`'s keys plus the examined range
    ``n_lo``, ``n_hi``) is the same for every exact or quadrature audit, with or without a column index j: the rate
    is judged on the sup from ``n_min`` on, and a HOLDS_IN_REGIME names its regime
    (:func:`sapa.rules.like_softmax.regime_text`)."""
    from sapa.rules.like_softmax import A, TOL, combine, decide_rate, decide_size, regime_text, verdict_why

    rate, size = decide_rate(ev), decide_size(ev, size_factor)
    regime = ""
    if rate == "HOLDS_IN_REGIME":
        regime = (regime_text(win["windows"], win["n_min"], win.get("n_hi", 2.0**20)) if win is not None else
                  "N → ∞ (the asymptotic exponent alone)")
    rate_why = (f"sup of the local exponent for N ≥ {win['n_min']:g}: {win['sup_from_n_min']:.4f} (edge {A + TOL:g}); "
                f"{windows_text(win)}" if win is not None else
                f"exponent interval [{ev.exp_lo:.3f}, {ev.exp_hi:.3f}] (edge {A + TOL:g})")
    if regime:
        rate_why += f"; holds for {regime} (asymptotic exponent {ev.asymptotic:.4g})"
    out = {"rate": {"verdict": rate, "rule": "growth-upper-exact" if win is not None else "growth-upper",
                    "statement": f"E-RMS ‖φ(S)‖_F = O(√N): local exponent ≤ ½ + {TOL}", "why": rate_why},
           "size": {"verdict": size, "rule": "size-within-factor", "factor": size_factor,
                    "statement": f"E-RMS ‖φ(S)‖_F within {size_factor:g}× of softmax's bound √N",
                    "why": f"E-RMS ‖φ‖_F/√N in [{ev.ratio_lo:.4g}, {ev.ratio_hi:.4g}] against {size_factor:g}"},
           "why": verdict_why(rate, size, regime)}
    if regime:
        out["rate"]["regime"] = regime
    if win is not None:
        below = [w for w in win["windows"] if w["below_n_min"]]
        out["rate"].update({"windows": win["windows"], "n_min": win["n_min"], "judged_range": [win["n_min"],
                            win.get("n_hi", 2.0**20)], "judged_sup": win["sup_from_n_min"],
                            "judged_sup_at": win["sup_from_n_min_at"],
                            "excluded_peak": (max(below, key=lambda w: w["peak"]) if below else None)})
    return combine(rate, size), out


def judged_range_words(rate: dict) -> str:
    """Where the rate reading was judged, from what was computed: 'for N = 16…2^20' (exact profile from N_min on),
    'at N = 98, 196, 392 (Monte Carlo)' (the estimate's grid), or 'as N → ∞' (asymptotic exponent alone)."""
    if "judged_range" in rate:
        lo, hi = rate["judged_range"]
        return f"for N = {lo:g}…{'2^20' if hi == 2**20 else f'{hi:g}'}"
    if "estimated_at" in rate:
        return f"at N = {', '.join(str(n) for n in rate['estimated_at'])} (Monte Carlo)"
    return "as N → ∞"



def pole_words(poles) -> str:
    """``N = 1000`` / ``i = 5`` … in words: where φ is infinite for every logit."""
    parts = [f"N = {c}" if v == "N" else f"every N ≥ {c} (at {v} = {c})" for v, c in poles]
    return ", ".join(parts)


def _pole_result(act: Activation) -> dict:
    """The audit of a φ with a pole in the length or a position (x/(N − 1000)): E‖φ(S)‖²_F = ∞ there, by construction."""
    where = pole_words(act.poles)
    statement = (f"φ has a pole in {', '.join(sorted({v for v, _ in act.poles}))}: φ(S_ij) is infinite for every logit "
                 f"at {where}, so E‖φ(S)‖²_F = ∞ there and E-RMS ‖φ(S)‖_F is not O(√N) for every N")
    return {**_infinite_result(act, 0, statement=statement, why=f"a pole at {where}"),
            "infinite_because": [f"φ has a pole at {where}"], "poles": [list(p) for p in act.poles]}


def _infinite_result(act: Activation, N: int, statement: str | None = None, why: str | None = None) -> dict:
    """The audit of a φ whose E φ(S_ij)² is infinite (a non-integrable singularity on the real line): by construction."""
    why = why or "; ".join(s.describe() for s in act.singular)
    statement = statement or (f"E‖φ(S)‖²_F = ∞ at every N ≥ 2: {why}, and every logit S_ij has a positive density "
                              "on the whole real line; so E-RMS ‖φ(S)‖_F is not O(√N)")
    return {
        "method": "singularity (symbolic)", "error_bound": 0.0,
        "error_bound_kind": "none: the expectations are infinite by construction (sapa.theory.singular)",
        "expected_fro2": math.inf, "expected_jac_s_fro2": math.inf, "expected_jac_fro2": math.inf,
        "infinite": list(act.infinite), "infinite_because": [s.describe() for s in act.singular],
        "growth_exponent": None, "growth_exponent_jac_s": None, "growth_exponent_jac": None,
        "sup_growth_exponent": None, "asymptotic_exponent": None, "crossover_n": None,
        "constant_vs_softmax": math.inf, "constant_jac_s_vs_softmax": math.inf,
        "matching_scale": None, "matching_scale_exponent": None,  # no c > 0 brings an infinite norm to √N
        "worst_case_exponent": None, "worst_case_exponent_is_exact": None, "worst_case_exponent_jac_s": None,
        "worst_case_exponent_jac": None, "worst_case_witness": None, "worst_case_bracket": None,
        "verdict": "FAILS", "rule": "audit-like-softmax", "verdict_by_construction": statement,
        "verdict_statement": f"grows like softmax: E-RMS ‖φ(S)‖_F = O(√N); here E‖φ(S)‖²_F is infinite ({why})",
        "verdict_evidence": None, "named_sizes": None,
    }



def check_work(act: Activation, spec: ModelSpec, N: int, trials: int, force: bool = False, audits: int = 1) -> None:
    """Refuse ``audits`` audits (one per logit convention) beyond sapa sweep's work limit or the available memory
    (unless ``force``): sapa.empirics.experiments.audit_workload. They run one after the other: the work adds up, the
    memory does not."""
    from dataclasses import replace

    from sapa.empirics.experiments.audit_workload import audit_work, check_audit_work

    if "fro" in act.infinite:
        return
    mc = act.normalize == "row" or not act.separable
    work = audit_work(mc, spec.name, spec.D, spec.d, mc_grid(N) if mc else (N,), trials, act.uses_i)
    if audits > 1:
        work = replace(work, flops=audits * work.flops, how=f"{work.how}, under both logit conventions")
    check_audit_work(work, force)


def run_audit(act: Activation, spec: ModelSpec, N: int, *, trials: int = MC_TRIALS, seed: int = 0,
              sizes: bool = True, size_factor: float | None = None, n_min: float | None = None,
              logit_scale: str = "S", expr_as_given: str | None = None) -> dict:
    """Flat result of one audit (the ``--json`` object of ``sapa audit``).

    ``act`` is applied to x = S_ij (S = X W_Q W_Kᵀ Xᵀ); for ``logit_scale="S/sqrt(d)"`` the caller has substituted
    x → x/√d already (:func:`logit_substituted`) and passes the user's text as ``expr_as_given``.
    """
    t0 = time.perf_counter()
    from sapa.rules.like_softmax import N_MIN, SIZE_FACTOR

    K = SIZE_FACTOR if size_factor is None else float(size_factor)
    n_min = N_MIN if n_min is None else float(n_min)
    out = _setting(act, spec, N, logit_scale, expr_as_given)
    if "fro" in act.infinite or act.poles:
        out.update(_by_construction(act, N, K, n_min))
        out["seconds"] = round(time.perf_counter() - t0, 3)
        return out
    if act.normalize == "none" and act.uses_j:  # relative-position logits: sums over pairs (sapa.theory.relpos)
        verdict, readings, ev, wc = _relpos_part(act, spec, N, K, n_min, out)
    elif act.normalize == "none" and act.separable:
        verdict, readings, ev, wc = _exact_part(act, spec, N, K, n_min, out)
    else:
        verdict, readings, ev, wc = _monte_carlo_part(act, spec, N, K, trials, seed, out)
    out.update(_verdict_keys(wc, verdict, readings, ev, K, n_min, N))
    if act.infinite:  # only ∂φ/∂x: the norm of φ is finite, its Jacobian's expectation is not
        out.update({"expected_jac_s_fro2": math.inf, "expected_jac_fro2": math.inf, "growth_exponent_jac_s": None,
                    "growth_exponent_jac": None, "constant_jac_s_vs_softmax": math.inf,
                    "infinite": list(act.infinite), "infinite_because": [s.describe() for s in act.singular]})
    if sizes and spec.name in ("iid", "tied", "corr"):
        out["named_sizes"] = _named_sizes(act, spec, logit_scale, expr_as_given) or None
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def _setting(act: Activation, spec: ModelSpec, N: int, logit_scale: str, expr_as_given: str | None) -> dict:
    """The keys that say what was audited: the activation, the logit convention, the model and the sizes."""
    return {"activation": expr_as_given or act.text, "expression": str(act.expr),
            "logit_scale": logit_scale,
            "logit": ("x = S_ij, S = X W_Q W_Kᵀ Xᵀ (the paper's theory; no 1/√d)" if logit_scale == "S" else
                      f"x = S_ij/√d, d = {spec.d} (as transformers compute it); expression evaluated on S: "
                      f"{act.expr}"),
            "normalize": act.normalize, "mask": act.mask,
            "model": spec.name, "n": int(N), "d_model": spec.D, "d_head": spec.d,
            "rho": float(spec.rho) if spec.name == "corr" else None,
            "sigma": float(spec.sigma) if spec.name != "shared" else None}


def _by_construction(act: Activation, N: int, K: float, n_min: float) -> dict:
    """The keys of a φ whose expectation is infinite (a singularity or a pole): FAILS by construction."""
    out = _infinite_result(act, N) if "fro" in act.infinite else _pole_result(act)
    why = out["verdict_by_construction"]
    reading = {"verdict": "FAILS", "rule": "by construction (sapa.theory.singular)", "why": why}
    out.update({"size_factor": K, "n_min": n_min, "rate_verdict": "FAILS", "size_verdict": "FAILS",
                "verdict_why": "by construction: the expectation is infinite",
                "readings": {"rate": reading, "size": dict(reading),
                             "why": "by construction: the expectation is infinite"}})
    return out


def _relpos_part(act: Activation, spec: ModelSpec, N: int, K: float, n_min: float, out: dict) -> tuple:
    """Relative-position logits (a column index j): :func:`sapa.api.relpos.relpos_result`'s keys into ``out``;
    (verdict, readings, evidence, worst case), judged by the same rule as without j (the sup from n_min on)."""
    from sapa.api.relpos import relpos_result
    from sapa.rules.like_softmax import LikeSoftmaxEvidence

    out.update(relpos_result(act, spec, N, n_min=n_min))
    wc = out.pop("_worst_case")
    out.pop("_verdict")
    ev = out.pop("_verdict_evidence")
    win = out.pop("_windows")
    verdict, readings = _readings(LikeSoftmaxEvidence(**ev), K, win)
    return verdict, readings, ev, wc


def _exact_part(act: Activation, spec: ModelSpec, N: int, K: float, n_min: float, out: dict) -> tuple:
    """Separable φ: exact or quadrature moments over N = 2…2²⁰ into ``out``; (verdict, readings, evidence, worst case)."""
    prof = profile(act, spec)
    a = audit_moments(act, spec, N, prof=prof)
    verdict, readings, ev = _verdict_exact(a, prof, K, n_min)
    rng_n = list(RANGE_N)
    tot = prof.totals(rng_n)
    ex = prof.exponents(rng_n)
    out.update({
        "method": a.method,
        "error_bound": a.error_bound,
        "error_bounds": a.error_bounds,
        "error_bound_kind": ("none: closed form (exact rational moments)" if a.method == "exact" else
                             "relative, a posteriori, at N: |rule − rule of half the order| in the laws of v and "
                             "S_11, plus the last change on doubling the Hermite order in z; largest of the three"),
        "expected_fro2": a.expected_fro2, "expected_jac_s_fro2": a.expected_jac_s_fro2,
        "expected_jac_fro2": a.expected_jac_fro2,
        "growth_exponent": a.growth_exponent, "growth_exponent_jac_s": a.growth_exponent_jac_s,
        "growth_exponent_jac": a.growth_exponent_jac,
        "sup_growth_exponent": a.sup_growth_exponent, "sup_growth_at": {"quantity": a.sup_growth_at[0],
                                                                           "n": a.sup_growth_at[1]},
        "sup_range_n": [2, 2**20],
        "asymptotic_exponent": a.asymptotic_exponent,
        "crossover_n": a.crossover_n,
        "m_off": a.m_off, "m_diag": a.m_diag,
        "constant_vs_softmax": a.constant_vs_softmax, "constant_jac_s_vs_softmax": a.constant_jac_s_vs_softmax,
        "matching_scale": a.matching_scale, "matching_scale_exponent": a.matching_scale_exponent,
        "range": [{"n": int(n), "expected_fro2": float(tot["fro"][k]), "growth_exponent": float(ex["fro"][k]),
                   "constant_vs_softmax": math.sqrt(float(tot["fro"][k]) / n)} for k, n in enumerate(rng_n)],
    })
    return verdict, readings, ev, a.worst_case


def _monte_carlo_part(act: Activation, spec: ModelSpec, N: int, K: float, trials: int, seed: int, out: dict) -> tuple:
    """Row-normalised or non-separable φ: Monte Carlo with exact kernels on :func:`mc_grid` into ``out``;
    (verdict, readings, evidence, worst case)."""
    from sapa.empirics.experiments.activation_sampling import sample_norms
    from sapa.rules.like_softmax import mc_evidence

    grid = mc_grid(N)
    mcs = {n: sample_norms(act, spec, n, trials, seed=seed) for n in grid}
    m = mcs[N]
    ev_o = mc_evidence(grid, [mcs[n].fro2 for n in grid], N)
    (verdict, readings), ev = _readings(ev_o, K, None), ev_o.__dict__
    readings["rate"]["estimated_at"] = [int(n) for n in grid]  # the only N the rate rests on
    readings["rate"]["why"] += f"; estimated from Monte Carlo at N = {', '.join(str(int(n)) for n in grid)} only"
    fit = {}
    for q, name in (("fro2", "growth_exponent"), ("jac_s2", "growth_exponent_jac_s"), ("jac2", "growth_exponent_jac")):
        y = [float(getattr(mcs[n], q).mean()) for n in grid]
        fit[name] = 0.5 * loglog_slope(grid, y)  # the RMS exponent of the mean squared norms
    fro2 = float(m.fro2.mean())
    rel_se = float(m.fro2.std(ddof=1) / math.sqrt(m.fro2.size) / fro2)
    out.update({
        "method": "monte_carlo", "error_bound": rel_se,
        "error_bound_kind": f"relative standard error of the mean over {trials} draws (exact kernels); no closed form "
                            "for row-normalised or non-separable i-dependent φ",
        "expected_fro2": fro2, "expected_jac_s_fro2": float(m.jac_s2.mean()), "expected_jac_fro2": float(m.jac2.mean()),
        **fit,
        "growth_exponent_interval": [ev_o.exp_lo, ev_o.exp_hi], "mc_grid": list(grid), "trials": trials, "seed": seed,
        "sup_growth_exponent": None, "asymptotic_exponent": None, "crossover_n": None,
        "constant_vs_softmax": math.sqrt(fro2 / N),
        "constant_vs_softmax_interval": [ev_o.ratio_lo, ev_o.ratio_hi],
        "constant_jac_s_vs_softmax": math.sqrt(float(m.jac_s2.mean())) / (math.sqrt(N) / 2),
        "matching_scale": math.sqrt(N / fro2), "matching_scale_exponent": 0.5 - fit["growth_exponent"],
    })
    if act.uses_j:
        from sapa.theory.relpos import relpos_worst_case

        wc = relpos_worst_case(act, N=N)
        return verdict, readings, ev, {"exponent": wc["exponent"], "exponent_is_exact": wc["exponent_is_exact"],
                                       "fro": wc, "jac_s": None, "jac": None}
    return verdict, readings, ev, worst_case(act, N=N)


def _verdict_keys(wc: dict, verdict: str, readings: dict, ev: dict, K: float, n_min: float, N: int) -> dict:
    """The worst-case exponents, the verdict, its statement and both readings (the keys after the numbers)."""
    from sapa.rules.like_softmax import TOL

    return {
        "worst_case_exponent": wc["exponent"], "worst_case_exponent_is_exact": wc["exponent_is_exact"],
        "worst_case_exponent_jac_s": (wc["jac_s"] or {}).get("exponent"),
        "worst_case_exponent_jac": (wc["jac"] or {}).get("exponent"),
        "worst_case_witness": wc["fro"]["witness"], "worst_case_bracket": wc["fro"].get("bracket"),
        "verdict": verdict, "rule": "audit-like-softmax",
        "verdict_statement": f"grows like softmax: E-RMS ‖φ(S)‖_F = O(√N) (local exponent ≤ ½ + {TOL} "
                             f"{judged_range_words(readings['rate'])}) and within {K:g}× of softmax's bound √N at "
                             f"N = {N}",
        "readings": readings, "size_factor": K, "n_min": n_min,
        "rate_verdict": readings["rate"]["verdict"], "size_verdict": readings["size"]["verdict"],
        "verdict_why": readings["why"],
        "verdict_evidence": ev,
    }


def _named_sizes(act: Activation, spec: ModelSpec, logit_scale: str, expr_as_given: str | None) -> dict:
    """{name: the exponent, N* and size ratio at that named size} (separable φ without j; else empty)."""
    named = {}
    for name, (D, d, n) in NAMED_SIZES.items():
        sp2 = model_spec(spec.name, D, d, rho=float(spec.rho))
        if act.normalize == "none" and act.separable and not act.uses_j:
            at_d = act if logit_scale == "S" else parse_activation(  # x → x/√d at this size's own head width
                logit_substituted(expr_as_given or act.text, logit_scale, d, act.normalize), act.normalize, act.mask)
            r = audit_moments(at_d, sp2, n)
            named[name] = {"D": D, "d": d, "n": n, "growth_exponent": r.growth_exponent, "crossover_n": r.crossover_n,
                           "constant_vs_softmax": r.constant_vs_softmax}
    return named


def audit_spec(model: str, D: int | None, d: int, *, rho: float | None = None, sigma: float | None = None, W=None,
               sigma_x=None, load=None, names: Names = PY) -> ModelSpec:
    """The :class:`ModelSpec` of an audit's weight model; ``W`` and ``sigma_x`` (shared model only) are what ``load``
    turns into square matrices (arrays by default; the command passes file paths and a file loader). A refusal names
    the argument as ``names`` spells it."""
    from sapa.npyfile import square_matrix

    load = load or (lambda a, name: square_matrix(name, matrix(name, a)))
    if model == "shared":
        if W is None:
            raise InputError(f"{names.setting('model', 'shared')} needs {names.file('w', 'W')}")
        W = load(W, names("w"))
        sigma_x = load(sigma_x, names("sigma_x")) if sigma_x is not None else None
    elif W is not None or sigma_x is not None:
        raise InputError(f"{names('w')} and {names('sigma_x')} apply to {names.setting('model', 'shared')} only")
    if sigma is not None and sigma <= 0:
        raise InputError(f"{names('sigma')} must be positive, got {sigma}")
    if rho is not None and model != "corr":  # as sapa exact: never silently ignored
        raise InputError(f"{names('rho')} applies to {names.setting('model', 'corr')} only, not {model}")
    return model_spec(model, D, d, rho=0.5 if rho is None else rho, sigma=sigma, W=W, sigma_x=sigma_x)


def method_words(act: Activation, trials: int) -> str:
    """How the audit of ``act`` computes, in words (what a long audit's progress lines say)."""
    return ("sums over the pairs (i, j)" if act.normalize == "none" and act.uses_j else
            "moments over N = 2…2²⁰ (closed form or quadrature)" if act.normalize == "none" and act.separable else
            f"Monte Carlo, {trials} trials per N")


class float64_range:
    """Turns an OverflowError or ZeroDivisionError inside (a float64 limit no check foresaw) into one InputError line."""

    def __init__(self, act: Activation):
        self.act = act

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is not None and issubclass(kind, (OverflowError, ZeroDivisionError)):
            raise InputError(f"the audit of {self.act.text!r} leaves float64's range ({kind.__name__}: "
                             f"{' '.join(str(exc).split())[:100]}); rescale the activation or the weights") from None
        return False


@dataclass(frozen=True, repr=False)
class AuditResult(Result):
    """The audit of one activation (:func:`audit`): "grows like softmax", its two readings and the numbers.

    ``verdict`` is the rule ``audit-like-softmax``'s (HOLDS, HOLDS_IN_REGIME, FAILS, …) under the headline logit
    convention; ``conventions`` holds both conventions' verdicts; ``data`` / ``to_dict()`` is the whole
    ``sapa audit --json`` object (ranges over N, named sizes, the readings' reasons)."""

    verdict: str
    activation: str
    logit_scale: str
    method: str
    rate_verdict: str
    size_verdict: str
    growth_exponent: float | None
    sup_growth_exponent: float | None
    asymptotic_exponent: float | None
    constant_vs_softmax: float | None
    crossover_n: float | None
    expected_fro2: float | None
    conventions: dict | None


def audit(expr: str, *, normalize: str = "none", mask: str = "none", model: str = "iid", N: int = 196,
          D: int | None = None, d: int = 64, rho: float | None = None, sigma: float | None = None, W=None,
          sigma_x=None, trials: int = MC_TRIALS, seed: int = 0, logit_scale: str = DEFAULT,
          size_factor: float | None = None, force: bool = False) -> AuditResult:
    """Does φ = ``expr`` grow like softmax, E-RMS ‖φ(S)‖_F = O(√N) and within ``size_factor``× of √N? (``sapa audit``)

    Args:
      expr: a sympy expression in x (a logit), N, i, j (e.g. ``"x**3/sqrt(N)"``) or an activation family id.
      normalize, mask: "none" or "row"; "none" or "causal".
      model: "iid", "tied", "corr" (random W_Q, W_K, with D default 768), "paper" or "shared" (with ``W``).
      N, D, d: tokens, token width, head width.
      rho, sigma: weight correlation (corr only), weight std (default 1/√D).
      W, sigma_x: (D, D) numpy arrays or torch tensors for ``model="shared"`` (read as float64).
      trials, seed: Monte Carlo draws per N and their seed (row-normalised φ).
      logit_scale: the headline convention, "S/sqrt(d)" (default) or "S"; the other is audited beside it.
      size_factor: the size reading's threshold (default 10); force: run beyond the estimated work limit.
    Returns:
      :class:`AuditResult`; a bad argument raises :class:`sapa.common.validate.InputError` (one line).
    """
    from sapa.theory.families import resolve

    N, d, trials = positive_int("N", N), positive_int("d", d), positive_int("trials", trials)
    seed = nonneg_int("seed", seed)
    for name, value, options in (("normalize", normalize, ("none", "row")), ("mask", mask, ("none", "causal")),
                                 ("model", model, ("paper", "shared", "iid", "tied", "corr")),
                                 ("logit_scale", logit_scale, ("S/sqrt(d)", "S"))):
        choice(name, value, options)
    if not isinstance(expr, str):
        raise InputError(f"expr must be a string (an expression or a family id), got {expr!r}")
    D = positive_int("D", D) if D is not None else (768 if model not in ("paper", "shared") else None)
    size_factor = positive_float("size_factor", size_factor) if size_factor is not None else None
    sigma = positive_float("sigma", sigma) if sigma is not None else None
    rho = unit_interval("rho", rho) if rho is not None else None
    expr, normalize, mask = resolve(expr, normalize, mask)  # a family id: its row
    spec = audit_spec(model, D, d, rho=rho, sigma=sigma, W=W, sigma_x=sigma_x)
    acts = activations(expr, normalize, mask, spec.d or d)
    check_work(acts[logit_scale], spec, N, trials, force=force, audits=2)
    with float64_range(acts[logit_scale]):
        out = audit_both(expr, acts, spec, N, logit_scale, spec.d or d, run_audit, trials=trials, seed=seed,
                         size_factor=size_factor)
    return AuditResult.of(out)


_ = N_GRID  # the grid of the sup exponent (sapa.theory.activation_audit.N_GRID), named here for readers of the JSON
