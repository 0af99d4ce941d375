"""``sapa norms``: exact ‖φ(S)‖_F, ‖∂φ/∂S‖_F and ‖∂φ(S)/∂X‖_F of given matrices (a certified σ₁ with --spectral)."""

from __future__ import annotations

import argparse
import json

from sapa.common.validate import InputError
from sapa.commands.shared import below_reasons, finite_or_none, load_npy, mark_below_range, readable


def add_parser(sub) -> None:
    """Declare ``sapa norms`` and its arguments on the subparsers ``sub``."""
    from pathlib import Path
    from sapa.commands.arguments import finite_float, nonneg_int, positive_int

    n = sub.add_parser("norms", help="exact ‖φ(S)‖_F, ‖∂φ/∂S‖_F, ‖∂φ(S)/∂X‖_F for given X (N×D) and W (D×D) or heads; "
                                     "--spectral: certified σ₁")
    n.add_argument("--x", type=Path, required=True, help="X as a .npy file, shape (N, D)")
    n.add_argument("--w", type=Path, help="W = W_Q W_Kᵀ as a .npy file, shape (D, D)")
    n.add_argument("--activation", required=True,
                   help='softmax, poly, an activation family id (theory/families.py, e.g. x3_sqrtN) or any '
                        'expression sapa audit accepts, e.g. "sigmoid(x/8 - log(N))"')
    n.add_argument("--normalize", choices=("none", "row"), default="none",
                   help="expressions: row divides each row by its sum")
    n.add_argument("--p", type=positive_int, default=1, help="polynomial degree (poly only)")
    n.add_argument("--scale", type=finite_float, default=1.0,
                   help="softmax: the factor 1/τ of softmax(S/τ), temperature τ (2 is τ = 0.5); poly: coefficient "
                        "c of c·x^p")
    n.add_argument("--mask", choices=("none", "causal"), default="none")
    n.add_argument("--wq", type=Path, help="W_Q as .npy (D, H·d); with --wk, S_h = X W_Q^h W_K^hᵀ Xᵀ")
    n.add_argument("--wk", type=Path, help="W_K as .npy (D, H·d)")
    n.add_argument("--wv", type=Path, help="W_V as .npy (D, H·d_v): the layer Σ_h φ(S_h) X W_V^h W_O^h")
    n.add_argument("--wo", type=Path, help="W_O as .npy (H·d_v, D_out) (default: heads concatenated)")
    n.add_argument("--heads", type=positive_int, default=None,
                   help="number of heads the columns are split into (--wq/--wk: default 1; --safetensors: default "
                        "num_attention_heads of the config.json beside the file, which --heads must agree with; "
                        "without either, refused)")
    n.add_argument("--safetensors", type=Path, help="a layer's weights (wq/wk/wv/wo, or BERT's attention.* names)")
    n.add_argument("--prefix", help="with --safetensors: the layer's name prefix, e.g. encoder.layer.0.")
    n.add_argument("--spectral", action="store_true",
                   help="also σ₁ of ∂φ/∂X (per head) and of the layer, as a certified bracket")
    n.add_argument("--tol", type=finite_float, default=1e-8, help="--spectral: relative bracket width to stop at")
    n.add_argument("--max-steps", type=positive_int, default=200, help="--spectral: Lanczos vectors at most")
    n.add_argument("--seed", type=nonneg_int, default=0, help="--spectral: seed of the Lanczos start vectors")
    n.add_argument("--certificate", choices=("auto", "lanczos", "dense"), default="auto",
                   help="--spectral: Lanczos, then the dense Cholesky certificate where N·D ≤ 16 384 and Lanczos "
                        "stays open (auto); Lanczos only; or dense at once")
    n.add_argument("--json", action="store_true", help="print a flat JSON object")


def run(args: argparse.Namespace) -> int:
    """``sapa norms``: exact norms of φ(S) and its Jacobian w.r.t. X, S = X W Xᵀ."""
    from sapa.empirics.kernels.norms import Activation, attention_norms
    from sapa.common.validate import finite_matrix, positive_float

    X = finite_matrix("--x", load_npy(args.x, "--x"), (None, None))
    plain = (args.activation in ("softmax", "poly") and args.w is not None and not args.spectral
             and args.normalize == "none" and args.heads in (None, 1)
             and all(getattr(args, k) is None for k in ("wq", "wk", "wv", "wo", "safetensors")))
    if not plain:  # expressions, heads, values, --spectral: sapa.commands.norms_expr
        from sapa.commands.norms_expr import activation_from_args, layer_from_args, run_norms

        if args.activation in ("softmax", "poly") and args.normalize != "none":
            raise InputError(f"--normalize applies to expressions; {args.activation} fixes its own")
        if args.activation not in ("softmax", "poly") and (args.p != 1 or args.scale != 1.0):
            raise InputError("--p and --scale apply to softmax/poly; write them into the expression")
        if not 0 < args.tol < 1:
            raise InputError(f"--tol must be in (0, 1), got {args.tol}")
        act = activation_from_args(args)
        layer = layer_from_args(args, X.shape[1])
        out = run_norms(X, layer, act, spectral=args.spectral, tol=args.tol, max_steps=args.max_steps, seed=args.seed,
                        certificate=args.certificate)
        if getattr(args, "heads_from", None):  # a layer file: where its head count came from
            out = {**out, "heads_from": args.heads_from}
        if args.json:
            print(json.dumps(out))
        else:
            shown = {**out, "heads": f"{out['heads']} (from {out['heads_from']})"} if "heads_from" in out else out
            print(readable({k: v for k, v in shown.items() if k != "heads_from"}, below_reasons(out)))
        return 0
    from sapa.npyfile import load_square_matrix

    W = load_square_matrix(args.w, "--w")
    if W.shape[0] != X.shape[1]:  # neither file is wrong alone: S = X W Xᵀ needs W to be D × D for X's D
        raise InputError(f"--x and --w do not match: --x has D = {X.shape[1]} columns (shape {X.shape}) but --w is "
                         f"{W.shape[0]} × {W.shape[1]}; S = X W Xᵀ needs W of shape ({X.shape[1]}, {X.shape[1]})")
    scale = positive_float("--scale", args.scale)
    act = Activation(args.activation, args.p, scale)
    r = attention_norms(X, W, act, mask=args.mask)
    out = {
        "activation": args.activation,
        "p": args.p if args.activation == "poly" else None,
        "scale": scale,
        "mask": args.mask,
        "n": int(X.shape[0]),
        "d_model": int(X.shape[1]),
        "fro_norm": r.fro,
        "jac_fro_norm": r.jac_fro,
        "jac_s_fro_norm": r.jac_s_fro,
        "log10_fro_norm": finite_or_none(r.log10_fro),  # exact even where the norm is below float64's range
        "log10_jac_fro_norm": finite_or_none(r.log10_jac_fro),
        "log10_jac_s_fro_norm": finite_or_none(r.log10_jac_s_fro),
        "max_abs": r.max_abs,
        "dtype": "float64",
        "logit_scale": "S",
        "logit": "S = X W Xᵀ as given (no 1/√d); --scale multiplies: softmax(S/τ) with 1/τ = --scale, c·S^p "
                 "(--scale 1/√d, i.e. τ = √d, or c = d^(-p/2) gives the S/√d convention)",
    }
    below = mark_below_range(out, ("fro_norm", "jac_fro_norm", "jac_s_fro_norm"))
    if args.json:
        print(json.dumps(out))
    else:
        print(readable(out, {"p": "softmax has no degree", "log10_fro_norm": "the norm is 0",
                              "log10_jac_fro_norm": "the norm is 0", "log10_jac_s_fro_norm": "the norm is 0", **below}))
    return 0
