"""``sapa figures``: redraw every figure from a results directory, without recomputing."""

from __future__ import annotations

import argparse
import sys

from sapa.common.validate import InputError

KEPT = "the figures already drawn were kept"  # what an interrupt leaves (sapa.cli prints it)


def add_parser(sub) -> None:
    """Declare ``sapa figures`` and its arguments on the subparsers ``sub``."""
    from pathlib import Path
    from sapa.commands.arguments import path_arg

    f = sub.add_parser("figures", help="regenerate every figure from stored results, without recomputing")
    f.add_argument("--results", type=path_arg, default=Path("results"), help="a directory written by sapa verify")
    f.add_argument("--out", type=path_arg, help="figure directory (default RESULTS/figures)")


def run(args: argparse.Namespace) -> int:
    """``sapa figures``: redraw every figure from a results directory, without recomputing."""
    from sapa.figures.regenerate import JOBS, STORED_JOBS, run_jobs

    if not args.results.is_dir():
        raise InputError(f"--results {args.results} is not a directory (run sapa verify first)")
    done = run_jobs(args.results, args.out, jobs=JOBS + STORED_JOBS, report=False, progress=True)
    paths = [p for drawn, _ in done.values() for p in drawn]
    for p in paths:
        print(p)
    skipped = {name: why for name, (_, why) in done.items() if why}
    for name, why in skipped.items():
        print(f"sapa: skipped figure {name!r}: {why}", file=sys.stderr)
    if not paths:
        raise InputError(f"no figure could be written ({len(skipped)} skipped: see above)")
    return 0


def output_guard(args: argparse.Namespace):
    """The figure directory is a writable folder sapa owns (else ``run`` says what ``--results`` lacks), held for
    the run so that no write below it follows a link planted meanwhile (:func:`sapa.common.atomic.confined`)."""
    import contextlib

    from sapa.common.atomic import confined
    from sapa.common.outdir import check_dir, refuse_foreign

    guard = contextlib.ExitStack()
    if args.results.is_dir():
        out = args.out or args.results / "figures"
        check_dir(out, "--out" if args.out else "figure directory")
        refuse_foreign(out, "--out" if args.out else "figure directory")
        guard.enter_context(confined(args.out or args.results))  # RESULTS/figures: its own name is guarded too
    return guard
