"""``sapa train``: the training study across N (resumable), or one expression on the mechanism tasks."""

from __future__ import annotations

import argparse
import sys

from sapa.common.interrupt import Stopped
from sapa.common.validate import InputError

# what an interrupt leaves, when run() could not count it (sapa.cli prints it); run() says how many were kept, and where
KEPT = "every training chunk that had finished is kept; a rerun resumes from them"


def add_parser(sub) -> None:
    """Declare ``sapa train`` and its arguments on the subparsers ``sub``."""
    import argparse
    from pathlib import Path
    from sapa.commands.arguments import nonneg_int, path_arg, positive_int

    t = sub.add_parser("train", help="the training study: softmax vs x^p scale rules across N, each arm with its own "
                                     "learning-rate sweep, as vectorised ensembles (resumable)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    t.add_argument("--budget", choices=("quick", "full"), default="quick")
    t.add_argument("--out", type=path_arg, default=Path("results/train"), help="results directory (resumable)")
    t.add_argument("--seed", type=nonneg_int, default=0)
    t.add_argument("--seeds", type=positive_int, metavar="K",
                   help="replicates per (task, N, arm, lr) of the digits and text study instead of the budget's (a new "
                        "study: its chunks are not the budget's); the mechanism probes keep theirs. The text readings "
                        "say how many would decide them")
    tw = t.add_mutually_exclusive_group()
    tw.add_argument("--workers", type=positive_int, default=2,
                    help="ensemble chunks in parallel (K processes, 1 thread each, that die with sapa; 1: serial "
                         "here; identical numbers)")
    tw.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://host:8786 or a scheduler file): "
                                        "train the chunks on its workers (docs/cluster.md)")
    t.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the mechanism chunks train (float32; cuda only when present)")
    t.add_argument("--activation", metavar="EXPR",
                   help="train φ(x, N, i) (any expression `sapa audit` accepts) beside softmax on the mechanism tasks "
                        "across N and print its learning-curve statistics")
    t.add_argument("--force", action="store_true",
                   help="train even beyond the work limit of sapa sweep or the available memory (estimated up front)")
    t.add_argument("--export-evidence", nargs="?", const="shipped", metavar="DIR",
                   help="after training (a finished --out only assembles), seal the study's tables into DIR (default: "
                        "the package's empirics/data/training/BUDGET, which `sapa verify` reads instead of training; "
                        "docs/training.md)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """``sapa train``: the training study across N (resumable), or ``--activation EXPR`` on the mechanism tasks."""
    from sapa.empirics.training.mechanism import resolve_device
    from sapa.empirics.training.train_study import plan_chunks, study_config
    from sapa.empirics.montecarlo.workload import TRAIN_WORKER_BYTES, cap_workers

    if args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out} exists and is not a directory")
    if args.scheduler is not None and not args.scheduler.strip():
        raise InputError("--scheduler is empty (an unset variable?); give an address like tcp://host:8786")
    resolve_device(args.device)
    cfg = study_config(args.budget, args.seed)
    if getattr(args, "export_evidence", None) and (args.seeds is not None or args.activation is not None):
        raise InputError("--export-evidence ships the budget's own study: not with --seeds or --activation")
    if args.seeds is not None and args.activation is not None:
        raise InputError("--seeds sets the study's replicates; --activation trains the mechanism probes (their own seeds)")
    if args.seeds is not None:  # estimated before anything of the study's size is planned (as sapa audit)
        from dataclasses import replace

        from sapa.empirics.montecarlo.workload import check_cost
        from sapa.empirics.training.train_study import study_cost

        check_cost(study_cost(replace(cfg, seeds=args.seeds)), "the study", "reduce --seeds", force=args.force)
    workers = args.workers
    if args.scheduler is None:
        chunks = sum(len(plan_chunks(cfg, t, N, {1: 1.0, 3: 1.0})) for t in cfg.tasks for N in cfg.plan(t).Ns)
        workers, note = cap_workers(args.workers, chunks, TRAIN_WORKER_BYTES)
        if note:
            print(f"sapa: note: {note}", file=sys.stderr)
    try:
        return _train(args, workers)
    except KeyboardInterrupt:
        raise Stopped(kept_chunks(args.out)) from None


def kept_chunks(out) -> str:
    """What an interrupted ``sapa train`` leaves in ``out``: the finished chunk files (written atomically), counted.

    >>> kept_chunks("/nonexistent")
    'no training chunk had finished, so none was kept; a rerun starts from the beginning'
    """
    from pathlib import Path

    out = Path(out)
    found = [p for p in out.rglob("*.json") if p.parent.name in ("chunks", "mechanism") and not p.name.startswith(".")] \
        if out.is_dir() else []
    if not found:
        return "no training chunk had finished, so none was kept; a rerun starts from the beginning"
    where = sorted({str(p.parent.relative_to(out)) for p in found})
    return (f"{len(found)} finished training chunk{'s are' if len(found) > 1 else ' is'} kept in {out} "
            f"({', '.join(where)}); a rerun resumes from them")


def _train(args: argparse.Namespace, workers: int) -> int:
    """The study (or ``--activation``'s mechanism tasks) with ``workers`` processes."""
    if args.activation is not None:
        from sapa.empirics.training.activation_train import main_activation
        from sapa.rules.learning import verdicts_line

        return main_activation(args.activation, args.budget, args.out, seed=args.seed, workers=workers,
                               scheduler=args.scheduler, device=args.device, decide=verdicts_line,
                               progress=not args.no_progress)
    from sapa.commands.train_summary import main_train

    rc = main_train(args.budget, args.out, seed=args.seed, workers=workers, progress=not args.no_progress,
                    scheduler=args.scheduler, device=args.device, seeds=args.seeds)
    if rc == 0 and getattr(args, "export_evidence", None):
        from pathlib import Path

        from sapa.empirics.training.evidence_pack import SHIPPED, export

        dest = SHIPPED / args.budget if args.export_evidence == "shipped" else Path(args.export_evidence)
        man = export(args.out, dest)
        print(f"sealed the study's evidence into {dest} ({len(man['files'])} files, manifest sha256 "
              f"{man['sha256'][:12]}…)")
    return rc


def output_guard(args: argparse.Namespace):
    """Hold ``--out`` (one run at a time), before any work starts."""
    from sapa.commands.shared import lock_out

    return lock_out(args.out)
