"""``sapa verify``: run the ledger's checks, print the table, write ledger.json, report.md and report.html."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sapa.common.interrupt import Stopped
from sapa.commands.shared import select


def add_parser(sub) -> None:
    """Declare ``sapa verify`` and its arguments on the subparsers ``sub``."""
    import argparse
    from pathlib import Path
    from sapa.claim_ids import ORDER  # the light registry: no claim is imported
    from sapa.commands.arguments import nonneg_int, path_arg

    v = sub.add_parser("verify", help="run every claim of the ledger; write ledger.json, report.md, figures",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    v.add_argument("--budget", choices=("quick", "full"), default="quick", help="how hard every check samples")
    v.add_argument("--out", type=path_arg, default=Path("results"), help="results directory")
    v.add_argument("--seed", type=nonneg_int, default=0, help="seed of every random stream")
    v.add_argument("--only", nargs="+", metavar="ID", help="run only these entries: " + ", ".join(ORDER))


TRAINED = ("scale-keeps-training-stable", "norm-vs-accuracy", "mechanism-across-n")  # read the training study


def verify_order(claims: list) -> list:
    """The order ``sapa verify`` runs its entries in: the rest, then those reading the training study, then timings.

    The training study trains in worker processes from the start; the entries that read it wait for it, so they run
    after every other check (which keeps the second core busy meanwhile), and the figures of the earlier checks are
    drawn before them. The timings run last, when the study's workers have finished and the machine is quiet. The
    ledger keeps its own order whatever the run order.
    """
    def rank(c) -> int:
        return 2 if c.id == "overhead" else 1 if c.id in TRAINED else 0

    return sorted(claims, key=rank)  # stable: ledger order within each group


def run(args: argparse.Namespace) -> int:
    """``sapa verify``: run the ledger, print the table, write ledger.json and report.md atomically.

    Each verdict is kept as it finishes (:mod:`sapa.commands.verify_keep`), before it is printed; a run that ends
    early (any exception, an interrupt, a full disk) says in one line what was kept and where.
    """
    from sapa.commands.verify_progress import announce

    expected, basis = announce(args)  # the first line, the run's ETA: before the checks' imports (seconds when busy)
    from sapa import report
    from sapa.budget import budget_named
    from sapa.claims import all_claims
    from sapa.evidence.monte_carlo import close_run_pool
    from sapa.ledger import Context, provenance
    from sapa.commands.ledger_merge import ledger_entries
    from sapa.commands.verify_keep import Keeper, choose_target

    budget = budget_named(args.budget, args.seed)
    claims = select(all_claims(), args.only, lambda c: c.id, "claim id")
    out_dir: Path = args.out  # announce refused an --out that is not a directory
    out_dir.mkdir(parents=True, exist_ok=True)
    # where the verdicts go, checked before any work: merged, never dropping one (a refusal is one line)
    target = choose_target(out_dir, budget, {c.id for c in claims}, only=bool(args.only))
    ctx = Context(budget=budget, out_dir=out_dir)
    started = time.time()
    keeper = Keeper(out_dir, target, [c.id for c in claims], provenance(budget, started), started)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the checks' tensors are small: a second thread costs CPU the workers need
    from sapa.evidence.training_study import prefetch_study

    if any(c.id in TRAINED for c in claims):
        prefetch_study(ctx)  # the training study trains in worker processes while the other checks run
    try:
        ledger = _run_claims(claims, ctx, keeper, expected, basis, only=args.only)
    finally:
        torch.set_num_threads(threads)
        close_run_pool(ctx)
    shown, prov = ledger_entries(ledger), ledger["provenance"]  # the table shows the whole (merged) ledger
    print(report.table(shown, mc=ledger.get("monte_carlo")))
    if "partial" in prov:
        print("\n" + report.partial_line(prov["partial"]["not_run"]))
    print(f"\nwrote {out_dir / 'ledger.json'}, {out_dir / 'report.md'} and {out_dir / 'report.html'} "
          f"({prov['wall_seconds']:.1f} s)")
    return 0


def _run_claims(claims: list, ctx, keeper, expected: dict, basis, only: list[str] | None) -> dict:
    """Run ``claims`` in :func:`verify_order`, keeping each verdict as it finishes; the finished (merged) ledger.

    The ledger's figures are drawn before the first entry that reads the training study (or at the end). Whatever
    ends the run early, the finished verdicts are on disk already and the exception says which, first."""
    from sapa.common.progress import say, stage
    from sapa.evidence.monte_carlo import close_run_pool, monte_carlo_summary
    from sapa.evidence.training_study import stop_prefetch
    from sapa.ledger import run_claim

    entries = []
    drawn = False
    try:
        for i, claim in enumerate(verify_order(claims), 1):
            if not drawn and (claim.id in TRAINED or claim.id == "overhead"):
                # the ledger's own figures illustrate earlier checks only: drawn while the study still trains
                _attach_figures(entries, ctx.out_dir, only=only)
                drawn = True
            tag = f"[{i}/{len(claims)}] {claim.id}"
            say(f"{tag} ...")
            with stage(tag, expected.get(claim.id), basis):  # a line whenever the log is silent for 10 s
                entry = run_claim(claim, ctx)
            entries.append(entry)
            keeper.keep(entries, monte_carlo_summary(ctx))  # on disk before it is printed
            say(f"{tag}: {entry.verdict} ({entry.seconds:.1f} s)")
        if not drawn:
            _attach_figures(entries, ctx.out_dir, only=only)
        return keeper.finish(entries, monte_carlo_summary(ctx), merge=bool(only))
    except BaseException as exc:
        # whatever surfaced (a KeyboardInterrupt, numpy's SystemError around one, a full disk, a failing entry):
        # the finished verdicts are on disk already; say which, first, so a second interrupt cannot lose the line
        kept = keeper.line()
        exc.add_note(kept)
        stop_prefetch(ctx)  # the training study's workers
        close_run_pool(ctx, now=True)  # and the run pool's: an interrupted run waits for no cell in flight
        if isinstance(exc, KeyboardInterrupt):  # main prints the one line: what was kept, and where
            raise Stopped(kept) from None
        raise


def _attach_figures(entries: list, out_dir: Path, only: list[str] | None) -> None:
    """Draw the ledger's figures into OUT/figures and list them (relative paths) on the claims they illustrate."""
    from sapa.figures.regenerate import JOBS, run_jobs

    ids = {e.id for e in entries}
    jobs = [j for j in JOBS if not only or ids & set(j.claims)]
    from sapa.common.progress import say, stage

    say(f"drawing {len(jobs)} figures ...")
    with stage(f"drawing {len(jobs)} figures"):
        done = run_jobs(out_dir, None, jobs=jobs)  # OUT/figures, refused if it is a symbolic link
    for job in jobs:
        paths, error = done[job.name]
        for e in entries:
            if e.id in job.claims:
                e.figures += [str(p.relative_to(out_dir)) for p in paths if str(p.relative_to(out_dir)) not in e.figures]
                if error:
                    e.evidence.setdefault("figure_errors", {})[job.name] = error


def output_guard(args: argparse.Namespace):
    """Hold ``--out`` (one run at a time) and its ``sweep`` and ``train`` folders (which ``sapa sweep`` / ``sapa train`` may target), before any work starts."""
    from sapa.commands.shared import lock_out

    return lock_out(args.out, ("sweep", "train"))
