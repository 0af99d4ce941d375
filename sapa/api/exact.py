"""Closed-form Gaussian moments of φ(x) = x^p attention: E‖φ(S)‖²_F, E‖∂φ(S)/∂X‖²_F and the crossover N*.

:func:`exact` (``sapa.exact``) is ``sapa exact``'s computation (:func:`sapa.theory.moments.exact_moments`, Thms
4.2–4.5 of arXiv 2410.18613 in closed form) with its checks, returning an :class:`ExactResult`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sapa.api.inputs import PY, Names, matrix
from sapa.api.results import Result
from sapa.common.validate import InputError, choice, positive_float, positive_int, unit_interval

__all__ = ["ExactResult", "exact", "exact_dict"]

MODELS = ("paper", "shared", "iid", "tied", "corr")


@dataclass(frozen=True, repr=False)
class ExactResult(Result):
    """The exact moments of x^p attention (:func:`exact`); no verdict: the numbers are the answer.

    ``growth_exponent`` is d log √E‖x^p/√N‖²_F / d log N at N (½: √N growth); ``crossover_n`` the N* beyond which it
    grows like √N; ``data`` / ``to_dict()`` is the whole ``sapa exact --json`` object (log10 fields, the S/√d
    convention's values, the formula)."""

    p: int
    model: str
    n: int
    expected_fro2: float
    expected_jac_fro2: float
    crossover_n: float
    growth_exponent: float
    growth_exponent_jac: float
    formula: str = field(repr=False)


def exact(p: int, model: str, N: int, D: int | None = None, d: int | None = None, *, rho: float | None = None,
          sigma: float | None = None, W=None, sigma_x=None) -> ExactResult:
    """E‖(S^{∘p})‖²_F, E‖∂S^{∘p}/∂X‖²_F and N* for S = X W_Q W_Kᵀ Xᵀ, exactly (``sapa exact``).

    Args:
      p: the power of φ(x) = x^p (element-wise), 1 ≤ p.
      model: "paper" (independent A, B; needs d), "iid", "tied", "corr" (random W_Q, W_K; need D, d), "shared" (a
        fixed ``W``).
      N, D, d: tokens, token width, head width.
      rho, sigma: weight correlation (corr only, default 0.5); weight std (default 1/√D; paper, shared: 1).
      W, sigma_x: (D, D) numpy arrays or torch tensors for ``model="shared"``: W = W_Q W_Kᵀ, the token covariance.
    Returns:
      :class:`ExactResult`; a bad argument raises :class:`sapa.common.validate.InputError` (one line).
    """
    choice("model", model, MODELS)
    p, N = positive_int("p", p), positive_int("N", N)
    D = positive_int("D", D) if D is not None else None
    d = positive_int("d", d) if d is not None else None
    sigma = positive_float("sigma", sigma) if sigma is not None else None
    rho = unit_interval("rho", rho) if rho is not None else None
    return ExactResult.of(exact_dict(p, model, N, D, d, rho=rho, sigma=sigma, W=W, sigma_x=sigma_x))


def _square(a, name: str):
    from sapa.npyfile import square_matrix

    return square_matrix(name, matrix(name, a))


def exact_dict(p: int, model: str, N: int, D: int | None, d: int | None, *, rho: float | None = None,
               sigma: float | None = None, W=None, sigma_x=None, load=_square, names: Names = PY) -> dict:
    """The flat result of ``sapa exact`` (its ``--json`` object). ``W`` and ``sigma_x`` are what ``load`` turns into
    square matrices (arrays by default; the command passes file paths and a file loader); a refusal names the
    argument as ``names`` spells it."""
    from sapa.theory.moments import exact_moments

    if model == "shared":
        if W is None:
            raise InputError(f"{names.setting('model', 'shared')} needs {names.file('w', 'W')}")
        W = load(W, names("w"))
        if D is not None and D != W.shape[0]:
            raise InputError(f"{names('D')} {D} does not match {names('w')} of shape {W.shape}")
        sigma_x = load(sigma_x, names("sigma_x")) if sigma_x is not None else None
    else:
        if W is not None or sigma_x is not None:
            raise InputError(f"{names('w')} and {names('sigma_x')} apply to {names.setting('model', 'shared')} only")
        if model != "paper" and D is None:
            raise InputError(f"{names.setting('model', model)} needs {names('D')}")
        if d is None:
            raise InputError(f"{names.setting('model', model)} needs {names('d')}")
    if rho is not None and model != "corr":
        raise InputError(f"{names('rho')} applies to {names.setting('model', 'corr')} only, not {model}")
    rho = 0.5 if rho is None else rho
    if sigma is not None and sigma <= 0:
        raise InputError(f"{names('sigma')} must be positive, got {sigma}")
    sigma = sigma if sigma is not None else (1.0 if model in ("paper", "shared") else 1 / math.sqrt(D))
    m = exact_moments(p, model, N, D, d, rho=rho, sigma=sigma, W=W, sigma_x=sigma_x)
    return _moments_dict(m, model, rho, sigma)


def _moments_dict(m, model: str, rho: float, sigma: float) -> dict:
    """``sapa exact --json``'s object from :class:`sapa.theory.moments.ExactMoments`."""
    out = {
        "p": m.p, "model": m.model, "n": m.N, "d_model": m.D, "d_head": m.d,
        "rho": rho if model == "corr" else None, "sigma": sigma if model != "shared" else None,
        "expected_fro2": float(m.expected_fro2), "expected_jac_fro2": float(m.expected_jac_fro2),
        "crossover_n": float(m.crossover_n), "crossover_n_jac": float(m.crossover_n_jac),
        "growth_exponent": float(m.growth_exponent), "growth_exponent_jac": float(m.growth_exponent_jac),
        "growth_exponent_of": "d log √E‖x^p/√N‖²_F / d log N at N (the 1/√N-scaled norm; _jac: its Jacobian w.r.t. X)",
        "m_off": float(m.m_off), "m_diag": float(m.m_diag), "j_off": float(m.j_off), "j_diag": float(m.j_diag),
        "formula": m.formula,
        "logit_scale": "S",
        "logit": "S = X W_Q W_Kᵀ Xᵀ (or ABᵀ), no 1/√d: the paper's theory",
    }
    out.update(_exact_log10s(m))  # exact where float64 underflows (σ = 1e-300: E‖φ‖² ≈ 1e-1800 prints as 0.0)
    if m.d is not None:  # the same moments under S/√d: E‖(S/√d)^{∘p}‖² = d^(−p)·E‖S^{∘p}‖², Jacobians alike, N* unchanged
        from sapa.conditions import scaled_by_logit_convention as conv

        out["at_logit_scale_s_over_sqrt_d"] = {
            "expected_fro2": conv(out["expected_fro2"], m.p, m.d, squared=True),
            "expected_jac_fro2": conv(out["expected_jac_fro2"], m.p, m.d, squared=True),
            "factor": f"d^(-p) = {m.d}^(-{m.p})", "crossover_n": out["crossover_n"],
            "growth_exponent": out["growth_exponent"]}
    return out


def _exact_log10s(m) -> dict:
    """log10_expected_fro2, log10_expected_jac_fro2, log10_m_off, … of the exact moments (None for log₁₀ 0)."""
    from sapa.api.floats import finite_or_none
    from sapa.theory.log10 import log10_abs

    p2, N = m.p * m.p, m.N
    paper = m.model == "paper"
    fro2 = N * N * m.m_off if paper else N * (N - 1) * m.m_off + N * m.m_diag
    jac2 = p2 * N * N * m.j_off if paper else p2 * (N * (N - 1) * m.j_off + N * m.j_diag)
    vals = {"expected_fro2": fro2, "expected_jac_fro2": jac2, "m_off": m.m_off, "m_diag": m.m_diag,
            "j_off": m.j_off, "j_diag": m.j_diag}
    return {f"log10_{k}": finite_or_none(log10_abs(v)) for k, v in vals.items()}
