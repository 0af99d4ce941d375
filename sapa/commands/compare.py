"""``sapa compare A B …``: a scorecard of activations against softmax (the computation: :mod:`sapa.api.compare`).

``--out DIR`` is checked and held (one run at a time, no link followed below it) before any work, and written once, at
the end: the figure, then ``scorecard.json`` (each file atomically: a reader sees the old file or the new, never a
part), so a ``scorecard.json`` newer than the figure means both are this run's. An interrupt (Ctrl-C, SIGTERM) stops
the pool's workers at once and ends with one line saying what was written (exit 130), as every sapa command.
"""

from __future__ import annotations

KEPT = "nothing was written (--out is written once, at the end)"


def add_parser(sub) -> None:
    """Declare ``sapa compare`` and its arguments on the subparsers ``sub``."""
    from sapa.commands.arguments import nonneg_int, path_arg, positive_int
    from sapa.commands.audit_conventions import CONVENTIONS, DEFAULT

    a = sub.add_parser("compare", help="scorecard of activations against softmax: size, growth, worst case, "
                                       "Lipschitz, time, training")
    a.add_argument("activations", nargs="+", metavar="ACTIVATION",
                   help='family ids of sapa.theory.families (e.g. x3_sqrtN) or sympy expressions (e.g. "Max(x,0)**2/N";'
                        ' EXPR@row: row-normalised)')
    a.add_argument("--budget", choices=("quick", "full"), default="quick")
    a.add_argument("--logit-scale", choices=CONVENTIONS, default=DEFAULT,
                   help="what x is in the size and growth axes: an entry of S/√d (default) or of S")
    a.add_argument("--seed", type=nonneg_int, default=0)
    a.add_argument("--workers", type=positive_int, default=2,
                   help="processes for the audits, the Lipschitz ascents and the training probes (the timing runs "
                        "alone, before them)")
    g = a.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.add_argument("--markdown", action="store_true", help="print a markdown table and each cell's note")
    a.add_argument("--out", type=path_arg, help="folder for scorecard.json and the figure")


def run(args) -> int:
    """Compare ``args.activations`` with softmax; print the scorecard; write ``--out`` (atomically)."""
    import json

    from sapa.api.compare import compare, resolve_rows

    resolve_rows(args.activations)  # bad input: one line, exit 2, before any work
    sc = compare(args.activations, args.budget, logit_scale=args.logit_scale, seed=args.seed, workers=args.workers,
                 progress=True)
    d = sc.to_dict()
    if args.json:
        print(json.dumps(d, ensure_ascii=False, allow_nan=False))
    else:
        print(sc.markdown() if args.markdown else sc.table())
    if args.out is not None:
        _write(d, args.out)
    return 0


def _write(d: dict, out) -> None:
    """The figure, then scorecard.json, under ``out`` (each atomically); an interrupt meanwhile says what was
    written."""
    from sapa.common.atomic import atomic_write_json, make_dirs
    from sapa.common.interrupt import Stopped
    from sapa.figures import compare_scorecard

    folder = make_dirs(out)
    try:
        compare_scorecard.main(d, folder)
    except KeyboardInterrupt:
        raise Stopped(f"scorecard.json was not written; the figure files in {folder} may be this run's or older "
                      "(a rerun writes both)") from None
    try:
        atomic_write_json(folder / "scorecard.json", d)
    except KeyboardInterrupt:
        raise Stopped(f"the figure was written in {folder}, scorecard.json not (a rerun writes both)") from None


def output_guard(args):
    """Hold ``--out`` (checked, one run at a time, no link followed below it) before any work starts."""
    import contextlib

    from sapa.commands.shared import lock_out

    return lock_out(args.out) if args.out is not None else contextlib.ExitStack()
