"""``sapa verify``: run the ledger's checks, print the table, write ledger.json, report.md and report.html."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from common.validate import InputError
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
    """``sapa verify``: run the ledger, print the table, write ledger.json and report.md atomically."""
    from sapa.commands.verify_progress import announce

    expected, basis = announce(args)  # the first line, the run's ETA: before the checks' imports (seconds when busy)
    from common.atomic import atomic_write_json, atomic_write_text
    from sapa import report
    from sapa.budget import budget_named
    from sapa.claims import all_claims
    from sapa.evidence.monte_carlo import close_run_pool, monte_carlo_summary
    from sapa.ledger import Context, ledger_dict, provenance, run_claim
    from sapa.commands.ledger_merge import ledger_entries, merge_into, prior_ledger
    from common.progress import say, stage

    budget = budget_named(args.budget, args.seed)
    claims = select(all_claims(), args.only, lambda c: c.id, "claim id")
    out_dir: Path = args.out
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir} exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    prior = prior_ledger(out_dir, budget, {c.id for c in claims}) if args.only else None  # merges: drops no verdict
    ctx = Context(budget=budget, out_dir=out_dir)
    started = time.time()
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the checks' tensors are small: a second thread costs CPU the workers need
    from sapa.evidence.training_study import prefetch_study, stop_prefetch

    if any(c.id in TRAINED for c in claims):
        prefetch_study(ctx)  # the training study trains in worker processes while the other checks run
    entries = []
    run_order = verify_order(claims)
    drawn = False
    try:
        for i, claim in enumerate(run_order, 1):
            if not drawn and (claim.id in TRAINED or claim.id == "overhead"):
                # the ledger's own figures illustrate earlier checks only: drawn while the study still trains
                _attach_figures(entries, out_dir, only=args.only)
                drawn = True
            tag = f"[{i}/{len(claims)}] {claim.id}"
            say(f"{tag} ...")
            with stage(tag, expected.get(claim.id), basis):  # a line whenever the log is silent for 10 s
                entry = run_claim(claim, ctx)
            say(f"{tag}: {entry.verdict} ({entry.seconds:.1f} s)")
            entries.append(entry)
        order = [c.id for c in claims]
        entries.sort(key=lambda e: order.index(e.id))  # the ledger keeps its own order
    except BaseException as exc:
        stop_prefetch(ctx)  # the training study's workers
        close_run_pool(ctx, now=True)  # and the run pool's: an interrupted run waits for no cell in flight
        if isinstance(exc, KeyboardInterrupt):  # main prints the one line: what was kept, and where
            raise KeyboardInterrupt(_keep_interrupted(entries, claims, ctx, budget, started, prior)) from None
        raise
    finally:
        torch.set_num_threads(threads)
        close_run_pool(ctx)
    if not drawn:
        _attach_figures(entries, out_dir, only=args.only)
    prov = provenance(budget, started)
    mc_summary = monte_carlo_summary(ctx)
    ledger = merge_into(prior, ledger_dict(entries, prov, mc_summary))
    if prior is not None:  # the report and the table show the whole merged ledger
        entries, prov = ledger_entries(ledger), ledger["provenance"]
    atomic_write_json(out_dir / "ledger.json", ledger)
    mc_all = ledger.get("monte_carlo") or mc_summary  # after --only: the merged ledger's, as ledger.json says
    atomic_write_text(out_dir / "report.md", report.markdown(entries, prov, mc_all))
    atomic_write_text(out_dir / "report.html", report.html(entries, prov, out_dir, mc_all))
    print(report.table(entries, mc=mc_all))
    print(f"\nwrote {out_dir / 'ledger.json'}, {out_dir / 'report.md'} and {out_dir / 'report.html'} "
          f"({prov['wall_seconds']:.1f} s)")
    return 0


def _keep_interrupted(entries: list, claims: list, ctx, budget, started: float, prior: dict | None) -> str:
    """An interrupted ``sapa verify``: write the finished verdicts and a report of them; return what was kept, where.

    Into ``ledger.json`` (merged into the ledger already there when it is of this budget, as ``--only`` merges; on
    its own when there is none), with ``provenance["interrupted"]`` naming the entries not run; beside it as
    ``ledger.interrupted.json`` when ``ledger.json`` holds another budget's ledger (it is never overwritten by a
    part of another run). Nothing finished: nothing is written.
    """
    from common.atomic import atomic_write_json, atomic_write_text
    from sapa import report
    from sapa.evidence.monte_carlo import monte_carlo_summary
    from sapa.ledger import ledger_dict, provenance
    from sapa.commands.ledger_merge import ledger_entries, merge_into, prior_ledger

    out_dir = ctx.out_dir
    if not entries:
        return (f"no ledger entry had finished, so no ledger was written; finished results below {out_dir} (sweep "
                "cells, training chunks) were kept, and a rerun resumes from them")
    done = {e.id for e in entries}
    order = [c.id for c in claims]
    entries = sorted(entries, key=lambda e: order.index(e.id))
    prov = {**provenance(budget, started), "interrupted": {"finished": [e.id for e in entries],
                                                           "not_run": [c for c in order if c not in done]}}
    fresh = ledger_dict(entries, prov, monte_carlo_summary(ctx))
    name, report_name = "ledger.json", "report"
    if prior is None and (out_dir / "ledger.json").exists():
        try:
            prior = prior_ledger(out_dir, budget, done)  # a full ledger of this budget: the finished entries replace theirs
        except InputError:  # another budget's, or unreadable: keep it, write beside it
            name, report_name = "ledger.interrupted.json", "report.interrupted"
    ledger = merge_into(prior, fresh) if name == "ledger.json" else fresh
    if prior is not None and name == "ledger.json":
        ledger["provenance"]["interrupted"] = prov["interrupted"]
    shown = ledger_entries(ledger)
    mc = ledger.get("monte_carlo")
    atomic_write_json(out_dir / name, ledger)
    atomic_write_text(out_dir / f"{report_name}.md", report.markdown(shown, ledger["provenance"], mc))
    atomic_write_text(out_dir / f"{report_name}.html", report.html(shown, ledger["provenance"], out_dir, mc))
    return (f"{len(entries)} of {len(order)} entries finished; their verdicts are in {out_dir / name} and "
            f"{out_dir / (report_name + '.md')} (not run: {', '.join(prov['interrupted']['not_run']) or 'none'})")


def _attach_figures(entries: list, out_dir: Path, only: list[str] | None) -> None:
    """Draw the ledger's figures into OUT/figures and list them (relative paths) on the claims they illustrate."""
    from figures.regenerate import JOBS, run_jobs

    ids = {e.id for e in entries}
    jobs = [j for j in JOBS if not only or ids & set(j.claims)]
    from common.progress import say, stage

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
