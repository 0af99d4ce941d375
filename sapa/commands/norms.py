"""``sapa norms``: exact ‖φ(S)‖_F, ‖∂φ/∂S‖_F and ‖∂φ(S)/∂X‖_F of given matrices (a certified σ₁ with --spectral)."""

from __future__ import annotations

import argparse
import json

from sapa.commands.shared import below_reasons, load_npy, readable


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
    """``sapa norms``: exact norms of φ(S) and its Jacobian w.r.t. X, S = X W Xᵀ (the computation: :mod:`sapa.api.norms`)."""
    from sapa.api.inputs import CLI
    from sapa.api.norms import is_plain, plain_norms
    from sapa.common.validate import finite_matrix

    X = finite_matrix("--x", load_npy(args.x, "--x"), (None, None))
    if not is_plain(args.activation, args.w is not None, args.spectral, args.normalize, args.heads,
                    any(getattr(args, k) is not None for k in ("wq", "wk", "wv", "wo", "safetensors"))):
        return _expression(args, X)  # expressions, heads, values, --spectral
    from sapa.npyfile import load_square_matrix

    out = plain_norms(X, load_square_matrix(args.w, "--w"), args.activation, args.p, args.scale, args.mask, names=CLI)
    if args.json:
        print(json.dumps(out))
    else:
        print(readable(out, {"p": "softmax has no degree", "log10_fro_norm": "the norm is 0",
                              "log10_jac_fro_norm": "the norm is 0", "log10_jac_s_fro_norm": "the norm is 0",
                              **below_reasons(out)}))
    return 0


def _expression(args: argparse.Namespace, X) -> int:
    """``sapa norms`` with an expression, heads, values or ``--spectral`` (:func:`sapa.api.norms.run_norms`)."""
    from sapa.api.inputs import CLI
    from sapa.api.norms import check_expression_options, run_norms
    from sapa.commands.norms_expr import activation_from_args, layer_from_args

    check_expression_options(args.activation, args.normalize, args.p, args.scale, args.tol, names=CLI)
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
