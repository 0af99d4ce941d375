"""``sapa exact``: closed-form Gaussian moments E‖φ(S)‖²_F, E‖∂φ(S)/∂X‖²_F and N* of φ(x) = x^p (the computation:
:mod:`sapa.api.exact`, ``sapa.exact``)."""

from __future__ import annotations

import argparse
import json

from sapa.commands.shared import readable


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
    """``sapa exact``: closed-form Gaussian moments of φ(x) = x^p attention (:func:`sapa.api.exact.exact_dict`)."""
    from sapa.api.exact import exact_dict
    from sapa.api.inputs import CLI
    from sapa.npyfile import load_square_matrix

    out = exact_dict(args.p, args.model, args.N, args.D, args.d, rho=args.rho, sigma=args.sigma, W=args.w,
                     sigma_x=args.sigma_x, load=load_square_matrix, names=CLI)
    if args.json:
        print(json.dumps(out))
    else:
        print(readable(out, {"rho": "--model corr only", "sigma": "--model shared: the weights are --w"}))
    return 0
