"""``sapa sweep``: run or resume a Monte Carlo sweep from a TOML config into Parquet (serial, local or a Dask scheduler)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sapa.common.validate import InputError

KEPT = "finished sweep cells were kept; a rerun resumes from them"  # what an interrupt leaves (sapa.cli prints it)


def add_parser(sub) -> None:
    """Declare ``sapa sweep`` and its arguments on the subparsers ``sub``."""
    from sapa.commands.arguments import nonneg_int, path_arg, positive_int, positive_seconds

    s = sub.add_parser("sweep", help="run (or resume) a Monte Carlo sweep from a TOML config into Parquet")
    s.add_argument("config", help="TOML config path, or the name of a built-in config (quick, full)")
    s.add_argument("--out", type=path_arg, required=True, help="results directory (resumable)")
    s.add_argument("--seed", type=nonneg_int, help="override the config's seed")
    group = s.add_mutually_exclusive_group()
    group.add_argument("--workers", type=positive_int, default=1, help="local worker processes (K > 1: Dask)")
    group.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--force", action="store_true",
                   help="run even beyond the work limits (sapa.empirics.montecarlo.workload: 100 000 cells, 1e16 flops)")
    s.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                   help="with --scheduler: give up (exit 2) if no worker has joined within SECONDS (default: wait)")


def _sweep_guards(args: argparse.Namespace, cfg) -> int:
    """Refuse a blank --scheduler and absurd work (unless --force); return --workers capped by cores and memory."""
    from sapa.empirics.montecarlo.workload import SWEEP_WORKER_BYTES, cap_workers, check_sweep_work

    if args.scheduler is not None and not args.scheduler.strip():
        raise InputError("--scheduler is empty (an unset variable?); give an address like tcp://host:8786, "
                         "or leave --scheduler out to run here")
    if args.timeout is not None and args.scheduler is None:
        raise InputError("--timeout applies to --scheduler only")
    work = check_sweep_work(cfg, force=args.force)
    workers, note = cap_workers(args.workers, work.cells, SWEEP_WORKER_BYTES)
    if note:
        print(f"sapa: note: {note}", file=sys.stderr)
    return workers


def run(args: argparse.Namespace) -> int:
    """``sapa sweep``: run or resume a Monte Carlo sweep; serial, local Dask workers, or a remote scheduler."""
    from sapa.empirics.montecarlo.sweep import builtin_config, load_config, run_sweep, with_overrides

    path = Path(args.config)
    if not path.suffix and not path.exists():
        path = builtin_config(args.config)
    if not path.is_file():
        raise InputError(f"config not found: {args.config}")
    cfg = load_config(path)
    if args.seed is not None:
        cfg = with_overrides(cfg, seed=args.seed)
    if args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out} exists and is not a directory")
    workers = _sweep_guards(args, cfg)
    progress = False if args.no_progress else True
    t0 = time.time()
    if workers == 1 and args.scheduler is None:
        df = run_sweep(cfg, args.out, progress=progress)
    else:
        from sapa.empirics.montecarlo.distributed import executor_for, wait_for_workers

        with executor_for(workers=workers, scheduler=args.scheduler) as ex:
            if args.scheduler is not None and args.timeout is not None:
                wait_for_workers(ex, args.timeout)
            df = run_sweep(cfg, args.out, progress=progress, executor=ex)
    print(f"{len(df)} rows in {args.out / 'results.parquet'} ({time.time() - t0:.1f} s)")
    return 0


def output_guard(args: argparse.Namespace):
    """Hold ``--out`` (one run at a time), before any work starts."""
    from sapa.commands.shared import lock_out

    return lock_out(args.out)
