"""E‖φ(S)‖²_F = N(N−1)·E φ(S_12)² + N·E φ(S_11)² for any element-wise attention activation φ(x, N, i).

The paper (arXiv 2410.18613, Cor 4.3 / 4.5) fixes the scale of x^p by 1/√N so that the attention
norm "grows like softmax's" √N. Other papers make claims of the same shape with other activations
(ReLU/N, Wortsman et al. 2023; sigmoid with bias −log N, Ramapuram et al. 2024; normalised
polynomial kernels, Kacham et al., PolySketchFormer). This module audits any such φ, given as a
sympy expression in the logit ``x``, the sequence length ``N`` and (optionally) the row index
``i``:

* **polynomial φ** = Σ_k a_k(N, i) x^k (degree ≤ :data:`POLY_MAX_DEGREE`): exact.
  E φ(S_12)² = Σ_{k,l} a_k a_l E S_12^{k+l}, and the moments of every order come from the same
  quadratic-form cumulants as :mod:`sapa.theory.moments` (odd off-diagonal moments vanish, the diagonal's
  do not). The Jacobian w.r.t. X needs E[S_12^k (‖Wx_2‖² + ‖Wᵀx_1‖²)] and E[S_11^k ‖(W+Wᵀ)x_1‖²]
  (per-sample identity of :mod:`sapa.empirics.kernels.norms`), also exact for every k.
* **other element-wise φ**: quadrature. Given x_2 (and the weights) an off-diagonal logit is
  Gaussian, S_12 ~ N(0, v), v = ‖W x_2‖², so E φ(S_12)² = E_v ∫ φ(√v z)² dγ(z): Gauss–Hermite in z,
  averaged over v with the Gauss rule of v's law built from v's exact moments (Golub–Welsch on the
  Chebyshev-algorithm recurrence, in high precision). The diagonal S_11 = xᵀW_s x is not Gaussian:
  its law's Gauss rule comes from its exact moments too (under iid weights it is a Gaussian scale
  mixture, S_11 | ‖x‖, α_K ~ N(0, σ⁴‖x‖⁴‖α_K‖²), and gets Hermite in z as well). The Jacobian weights enter as measures
  v dP(v) and ‖(W+Wᵀ)x‖² dP(S_11), again from exact (mixed) moments. ``error_bound`` is the
  a-posteriori relative difference, at the audited N, to the rule of half the order in the laws of v
  and S_11, plus the last change when the Hermite order in z was doubled.
* causal mask (row i sees j ≤ i) and row-index dependence c(N, i)·ψ(x, N): exact sums over rows.
* row normalisation (divide each row by its sum) has no closed form: :mod:`sapa.empirics.experiments.activation_sampling` does
  Monte Carlo with exact kernels; this module supplies the worst case (rows are probability
  vectors).

Besides the expectations: the local growth exponent e(N) = ½ d log E‖φ‖²/d log N, the crossover N*
where the N(N−1) off-diagonal entries weigh as much as the N diagonal ones, the constant against
softmax's bound √N (Thm 4.1), the coefficient c(N) = √(N / E‖φ‖²) that would match that bound, and
the worst case over token-bounded inputs: |S_ij| ≤ ‖W‖₂ r² =: B gives ‖φ(S)‖_F ≤ N·max_{|s|≤B}|φ(s)|,
attained in rate by aligned tokens (every S_ij = s*).
"""


from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from sapa.common.validate import InputError
# The audit's parts, one module per idea; their names are re-exported here (sapa.theory.activation_audit is the entry point).
from sapa.theory.activation import (MASKS, N_, NORMALIZE, POLY_MAX_DEGREE, Activation, _lam, i_,  # noqa: F401
                               parse_activation, x_)
from sapa.theory.activation_worst_case import worst_case
from sapa.theory.entry_moments import (MODELS, EntryMoments, ModelSpec, _corr_v_moments,  # noqa: F401
                                  entry_moments, model_spec, v_moments)
from sapa.theory.gauss_rules import gauss_rule
from sapa.theory.norm_profile import Profile, _rat, profile  # noqa: F401

__all__ = [
    "MASKS",
    "MODELS",
    "NORMALIZE",
    "POLY_MAX_DEGREE",
    "Activation",
    "Audit",
    "EntryMoments",
    "ModelSpec",
    "audit",
    "entry_moments",
    "gauss_rule",
    "model_spec",
    "parse_activation",
    "profile",
    "v_moments",
    "worst_case",
]


N_GRID = tuple(float(v) for v in np.geomspace(2, 2**20, 61))  # where the sup of the local exponent is taken


# ----------------------------------------------------------------------------- one audit


def _monomial(act: Activation):
    """(p, c(N)) if φ = c(N)·x^p with 1 ≤ p ≤ 12, no mask and no row index; else None."""
    if not act.polynomial or act.uses_i or act.mask != "none":
        return None
    nz = [(k, c) for k, c in enumerate(act.coeffs) if c != 0]
    if len(nz) != 1 or nz[0][0] < 1:
        return None
    return nz[0]


@dataclass(frozen=True)
class Audit:
    """The audit of one activation under one model at one N (closed form or quadrature)."""

    activation: str
    normalize: str
    mask: str
    model: str
    N: int
    D: int | None
    d: int | None
    method: str               # "exact" | "quadrature"
    error_bound: float        # relative a-posteriori error of E‖φ‖², E‖∂φ/∂S‖², E‖∂φ/∂X‖² at N, the largest (0 exact)
    expected_fro2: float      # E‖φ(S)‖²_F
    expected_jac_s_fro2: float  # E‖∂φ(S)/∂S‖²_F
    expected_jac_fro2: float  # E‖∂φ(S)/∂X‖²_F (paper model: w.r.t. (A, B))
    growth_exponent: float    # ½ d log E‖φ‖²/d log N at N
    growth_exponent_jac_s: float
    growth_exponent_jac: float
    sup_growth_exponent: float  # max over N ∈ [2, 2²⁰] of the local exponent (norm and both Jacobians)
    sup_growth_at: tuple        # (quantity "fro" | "jac_s" | "jac", N) where that maximum is
    asymptotic_exponent: float  # local exponent at N = 2²⁰ (norm)
    asymptotic_exponent_all: float  # the largest local exponent at N = 2²⁰ over the norm and both Jacobians (O(·))
    crossover_n: float | None
    constant_vs_softmax: float  # √E‖φ‖² / √N (softmax's bound, Thm 4.1)
    constant_jac_s_vs_softmax: float  # √E‖∂φ/∂S‖² / (√N/2) (softmax's sharp Jacobian bound w.r.t. S)
    matching_scale: float     # c(N) = √(N / E‖φ‖²): c·φ has E-RMS norm √N
    matching_scale_exponent: float  # d log c / d log N = ½ − e(N)
    worst_case_exponent: float | None
    worst_case: dict
    error_bounds: dict = field(default_factory=dict)  # {fro, jac_s, jac}: relative error of each at N
    exact_fro2: object = None  # sympy exact value (polynomials without a mask)
    m_off: float = math.nan    # per-entry E ψ(S_12)² and E ψ(S_11)² at N
    m_diag: float = math.nan

    def as_dict(self) -> dict:
        from dataclasses import asdict

        d = asdict(self)
        d.pop("exact_fro2")
        return d


def audit(act: Activation, spec: ModelSpec, N: int, *, prof: Profile | None = None) -> Audit:
    """Closed-form (polynomial) or quadrature audit of ``act`` under ``spec`` at ``N`` (see module docstring)."""
    from sapa.theory.moments import _size

    N = _size("N", N)
    prof = prof or profile(act, spec)
    tot = prof.totals([N])
    ex = prof.exponents([N])
    grid = np.array(N_GRID)
    eg = prof.exponents(grid)
    finite = [q for q in ("fro", "jac_s", "jac") if np.any(np.isfinite(eg[q]))]  # a constant φ has no Jacobian
    if not finite:
        raise InputError(f"the expectations of {act.text!r} under this model are 0 or beyond float64's range at every N "
                         "(underflow or overflow); rescale the activation or the weights (--sigma)")
    sup_q = max(finite, key=lambda q: float(np.nanmax(eg[q])))
    sup = float(np.nanmax(eg[sup_q]))
    sup_n = float(grid[int(np.nanargmax(eg[sup_q]))])
    fro2 = float(tot["fro"][0])
    exact = None
    if prof.exact_exprs is not None and not act.uses_i and act.mask == "none":
        exact = sp.nsimplify(N * (N - 1)) * prof.exact_exprs["fro_off"].subs(N_, N) + N * prof.exact_exprs["fro_diag"].subs(N_, N)
        exact = sp.simplify(exact)
        fro2 = float(exact)
    jac2 = float(tot["jac"][0])
    if exact is not None:
        ej = prof.exact_exprs
        jac2 = float(sp.nsimplify(N * (N - 1)) * ej["jac_off"].subs(N_, N) + N * ej["jac_diag"].subs(N_, N))
    for k, v in (("E‖φ‖²", fro2), ("E‖∂φ/∂X‖²", jac2)):
        if not math.isfinite(v):
            raise InputError(f"{k} overflows float64 for {act.text!r} at N = {N}; rescale the activation")
    e_n = prof.entries([N])
    errs = {q: float(v) for q, v in prof.errors([N]).items()}
    wc = worst_case(act, N=N)
    e = float(ex["fro"][0])
    e_s, e_j = float(ex["jac_s"][0]), float(ex["jac"][0])
    cross = prof.crossover()
    mono = _monomial(act)
    if mono is not None and prof.method == "exact":  # c(N)·x^p: the very numbers of sapa.theory.moments (sapa exact)
        from sapa.theory.moments import exact_moments

        p, c = mono
        em = exact_moments(p, spec.name, N, spec.D, spec.d, rho=float(spec.rho), sigma=float(spec.sigma),
                           W=spec.W, sigma_x=spec.sigma_x)
        dlogc = float(sp.simplify(N_ * sp.diff(c, N_) / c).subs(N_, N)) if c.has(N_) else 0.0
        e = em.growth_exponent + (0.5 + dlogc)
        e_j = em.growth_exponent_jac + (0.5 + dlogc)
        cross = em.crossover_n
    return Audit(
        activation=act.text, normalize=act.normalize, mask=act.mask, model=spec.name, N=N, D=spec.D, d=spec.d,
        method=prof.method, error_bound=max(errs.values()), error_bounds=errs,
        expected_fro2=fro2, expected_jac_s_fro2=float(tot["jac_s"][0]), expected_jac_fro2=jac2,
        growth_exponent=e, growth_exponent_jac_s=e_s, growth_exponent_jac=e_j,
        sup_growth_exponent=sup, sup_growth_at=(sup_q, sup_n), asymptotic_exponent=float(eg["fro"][-1]),
        asymptotic_exponent_all=max(float(eg[q][-1]) for q in finite), crossover_n=cross,
        constant_vs_softmax=math.sqrt(fro2 / N), constant_jac_s_vs_softmax=math.sqrt(float(tot["jac_s"][0])) / (math.sqrt(N) / 2),
        matching_scale=math.sqrt(N / fro2) if fro2 > 0 else math.inf, matching_scale_exponent=0.5 - e,
        worst_case_exponent=wc["exponent"], worst_case=wc, exact_fro2=exact,
        m_off=float(e_n["fro_off"][0]), m_diag=float(e_n["fro_diag"][0]),
    )
