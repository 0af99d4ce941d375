"""The ``sapa`` command: the only place that wires theory, empirics, figures and the ledger.

User errors (bad sizes, non-finite input, unknown options, missing files) print one line
``sapa: error: ...`` on stderr and exit with code 2 — never a traceback, never a partial file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from theory.validate import InputError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line and exits 2."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse hook
        raise InputError(message)


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def _finite_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


def _int_nonneg(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The full ``sapa`` argument parser."""
    p = _Parser(prog="sapa", description="Check the claims of arXiv 2410.18613 with exact theory and numerics.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    v = sub.add_parser("verify", help="run every claim of the ledger; write ledger.json, report.md, figures")
    v.add_argument("--budget", choices=("quick", "full"), default="quick")
    v.add_argument("--out", type=Path, default=Path("results"))
    v.add_argument("--seed", type=_int_nonneg, default=0)
    v.add_argument("--only", nargs="+", metavar="CLAIM", help="run only these claim ids")

    n = sub.add_parser("norms", help="exact ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F for given X (N×D) and W (D×D)")
    n.add_argument("--x", type=Path, required=True, help="X as a .npy file, shape (N, D)")
    n.add_argument("--w", type=Path, required=True, help="W = W_Q W_Kᵀ as a .npy file, shape (D, D)")
    n.add_argument("--activation", choices=("softmax", "poly"), required=True)
    n.add_argument("--p", type=_positive_int, default=1, help="polynomial degree (poly only)")
    n.add_argument("--scale", type=_finite_float, default=1.0,
                   help="softmax: temperature τ inside softmax(τS); poly: coefficient c of c·x^p")
    n.add_argument("--mask", choices=("none", "causal"), default="none")
    n.add_argument("--json", action="store_true", help="print a flat JSON object")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sapa`` command; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
        return _COMMANDS[args.command](args)
    except InputError as exc:
        print(f"sapa: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as exc:
        print(f"sapa: error: file not found: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("sapa: interrupted; finished results were kept", file=sys.stderr)
        return 130


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _load_npy(path: Path, name: str):
    import numpy as np

    if not path.is_file():
        raise InputError(f"{name}: file not found: {path}")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise InputError(f"{name}: cannot read {path} as .npy ({_one_line(exc)})") from None


def cmd_norms(args: argparse.Namespace) -> int:
    """``sapa norms``: exact norms of φ(S) and its Jacobian w.r.t. X, S = X W Xᵀ."""
    from empirics.norms import Activation, attention_norms
    from theory.validate import finite_matrix, positive_float

    X = finite_matrix("--x", _load_npy(args.x, "--x"), (None, None))
    W = finite_matrix("--w", _load_npy(args.w, "--w"), (X.shape[1], X.shape[1]))
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
        "max_abs": r.max_abs,
        "dtype": "float64",
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, val in out.items():
            print(f"{k:>12}: {val}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """``sapa verify``: run the ledger, print the table, write ledger.json and report.md atomically."""
    from empirics.atomic import atomic_write_json, atomic_write_text
    from sapa import report
    from sapa.budget import budget_named
    from sapa.claims import all_claims
    from sapa.ledger import Context, ledger_dict, provenance, run_claim

    budget = budget_named(args.budget, args.seed)
    claims = all_claims()
    if args.only:
        known = {c.id for c in claims}
        unknown = [c for c in args.only if c not in known]
        if unknown:
            raise InputError(f"unknown claim id {unknown[0]!r}; known: {', '.join(sorted(known))}")
        claims = [c for c in claims if c.id in args.only]
    out_dir: Path = args.out
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir} exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(budget=budget, out_dir=out_dir)
    started = time.time()
    entries = []
    for i, claim in enumerate(claims, 1):
        print(f"[{i}/{len(claims)}] {claim.id} ...", file=sys.stderr, flush=True)
        entry = run_claim(claim, ctx)
        print(f"[{i}/{len(claims)}] {claim.id}: {entry.verdict} ({entry.seconds:.1f} s)", file=sys.stderr, flush=True)
        entries.append(entry)
    prov = provenance(budget, started)
    atomic_write_json(out_dir / "ledger.json", ledger_dict(entries, prov))
    atomic_write_text(out_dir / "report.md", report.markdown(entries, prov))
    print(report.table(entries))
    print(f"\nwrote {out_dir / 'ledger.json'} and {out_dir / 'report.md'} ({prov['wall_seconds']:.1f} s)")
    return 0


_COMMANDS = {"verify": cmd_verify, "norms": cmd_norms}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
