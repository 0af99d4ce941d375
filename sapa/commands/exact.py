"""``sapa exact``: closed-form Gaussian moments E‖φ(S)‖²_F, E‖∂φ(S)/∂X‖²_F and N* of φ(x) = x^p."""

from __future__ import annotations

import argparse
import json

from sapa.common.validate import InputError
from sapa.commands.shared import finite_or_none, readable


def add_parser(sub) -> None:
    """Declare ``sapa exact`` and its arguments on the subparsers ``sub``."""
    from pathlib import Path
    from sapa.commands.arguments import finite_float, positive_int

    e = sub.add_parser("exact", help="exact E‖φ(S)‖²_F, E‖∂φ(S)/∂X‖²_F and the crossover N* for φ(x) = x^p")
    e.add_argument("--p", type=positive_int, required=True, help="power p of φ(x) = x^p (element-wise)")
    e.add_argument("--model", choices=("paper", "shared", "iid", "tied", "corr"), required=True,
                   help="paper: independent A, B; shared: fixed W (--w); iid/tied/corr: random W_Q, W_K")
    e.add_argument("--N", type=positive_int, required=True, help="sequence length")
    e.add_argument("--D", type=positive_int, help="token dimension (inferred from --w for shared)")
    e.add_argument("--d", type=positive_int, help="head dimension (paper, iid, tied, corr)")
    e.add_argument("--rho", type=finite_float, help="weight correlation for --model corr (default 0.5)")
    e.add_argument("--sigma", type=finite_float, help="weight std (default 1/√D; paper model: 1)")
    e.add_argument("--w", type=Path, help="W = W_Q W_Kᵀ as .npy (D, D), for --model shared")
    e.add_argument("--sigma-x", type=Path, help="token covariance Σ as .npy (D, D), for --model shared")
    e.add_argument("--json", action="store_true", help="print a flat JSON object")


def run(args: argparse.Namespace) -> int:
    """``sapa exact``: closed-form Gaussian moments of φ(x) = x^p attention (sapa.theory.moments)."""
    import math

    from sapa.theory.moments import exact_moments

    W = sigma_x = None
    if args.model == "shared":
        if args.w is None:
            raise InputError("--model shared needs --w W.npy")
        from sapa.npyfile import load_square_matrix

        W = load_square_matrix(args.w, "--w")
        if args.D is not None and args.D != W.shape[0]:
            raise InputError(f"--D {args.D} does not match --w of shape {W.shape}")
        if args.sigma_x is not None:
            sigma_x = load_square_matrix(args.sigma_x, "--sigma-x")
    else:
        if args.w is not None or args.sigma_x is not None:
            raise InputError("--w and --sigma-x apply to --model shared only")
        if args.model != "paper" and args.D is None:
            raise InputError(f"--model {args.model} needs --D")
        if args.d is None:
            raise InputError(f"--model {args.model} needs --d")
    if args.rho is not None and args.model != "corr":
        raise InputError(f"--rho applies to --model corr only, not {args.model}")
    rho = 0.5 if args.rho is None else args.rho
    if args.sigma is not None and args.sigma <= 0:
        raise InputError(f"--sigma must be positive, got {args.sigma}")
    sigma = args.sigma if args.sigma is not None else (1.0 if args.model in ("paper", "shared") else 1 / math.sqrt(args.D))
    m = exact_moments(args.p, args.model, args.N, args.D, args.d, rho=rho, sigma=sigma, W=W, sigma_x=sigma_x)
    out = {
        "p": m.p, "model": m.model, "n": m.N, "d_model": m.D, "d_head": m.d,
        "rho": rho if args.model == "corr" else None, "sigma": sigma if args.model != "shared" else None,
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
    if args.json:
        print(json.dumps(out))
    else:
        print(readable(out, {"rho": "--model corr only", "sigma": "--model shared: the weights are --w"}))
    return 0


def _exact_log10s(m) -> dict:
    """log10_expected_fro2, log10_expected_jac_fro2, log10_m_off, … of the exact moments (None for log₁₀ 0)."""
    from sapa.theory.log10 import log10_abs

    p2, N = m.p * m.p, m.N
    paper = m.model == "paper"
    fro2 = N * N * m.m_off if paper else N * (N - 1) * m.m_off + N * m.m_diag
    jac2 = p2 * N * N * m.j_off if paper else p2 * (N * (N - 1) * m.j_off + N * m.j_diag)
    vals = {"expected_fro2": fro2, "expected_jac_fro2": jac2, "m_off": m.m_off, "m_diag": m.m_diag,
            "j_off": m.j_off, "j_diag": m.j_diag}
    return {f"log10_{k}": finite_or_none(log10_abs(v)) for k, v in vals.items()}
