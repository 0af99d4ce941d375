"""The ``sapa`` command: the only place that wires theory, empirics, figures and the ledger.

User errors (bad sizes, non-finite input, unknown options, missing files) print one line
``sapa: error: ...`` on stderr and exit with code 2 — never a traceback, never a partial file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import warnings
from pathlib import Path

from common.validate import InputError
from sapa.cli_parser import EXIT_USAGE, build_parser  # noqa: F401  (build_parser re-exported: tests call sapa.cli's)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sapa`` command; returns the exit code."""
    import os

    os.environ.setdefault("MPLBACKEND", "Agg")  # the command draws files, never windows (a user's setting wins)
    if "MPLCONFIGDIR" not in os.environ:  # matplotlib's font cache: in the temporary folder, never in $HOME
        import tempfile

        os.environ["MPLCONFIGDIR"] = os.path.join(tempfile.gettempdir(), f"sapa-matplotlib-{os.getuid()}")
    from common.allocator import keep_freed_memory
    from common.collector import collect_less_often

    keep_freed_memory()  # freed tensors' pages are reused instead of faulted in again (numbers unchanged)
    collect_less_often()  # fewer full passes of the cyclic collector over a heap of ~10⁶ objects (numbers unchanged)
    from common.interrupt import sigterm_as_interrupt

    command = None
    try:
        args = build_parser().parse_args(argv)
        command = args.command
        _check_input_files(args)  # a missing --x is one line before torch, sympy or scipy is imported
        from common.progress import FALLBACK_S, stage

        # SIGTERM: the same clean path as Ctrl-C; a command silent for FALLBACK_S seconds (no bar or inner stage of
        # its own speaking) still gets a line saying it runs
        with sigterm_as_interrupt(), _output_guard(args), stage(f"sapa {args.command}", every_s=FALLBACK_S), \
                warnings.catch_warnings():
            # numpy's "divide by zero" from generated code (56 lines on an x/(N − 1000) audit): sapa reports
            # every non-finite value it meets in words, so the command's output is its own lines only
            warnings.simplefilter("ignore", RuntimeWarning)
            return _COMMANDS[args.command](args)
    except InputError as exc:
        print(f"sapa: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as exc:
        print(f"sapa: error: file not found: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # permission denied, not a directory, disk full, ...
        where = f": {exc.filename}" if exc.filename else ""
        print(f"sapa: error: {exc.strerror or _one_line(exc)}{where}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError as exc:  # numpy's _ArrayMemoryError too: a request past --force's own judgement
        print(f"sapa: error: out of memory ({_one_line(exc)[:200] or 'an allocation failed'}); ask for less "
              "(a smaller N, fewer trials or heads)", file=sys.stderr)
        return EXIT_USAGE
    except RuntimeError as exc:
        if not _allocation_failure(exc):
            raise
        print(f"sapa: error: out of memory ({_one_line(exc)[-160:]}); ask for less (a smaller N, fewer trials or "
              "heads)", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:  # a command may say what it kept (sapa verify: which verdicts, where)
        kept = exc.args[0] if exc.args and isinstance(exc.args[0], str) else _KEPT.get(
            command, "nothing was written")
        print(f"sapa: interrupted; {kept}", file=sys.stderr)
        return 130


def _allocation_failure(exc: RuntimeError) -> bool:
    """torch's failed CPU or GPU allocation (``DefaultCPUAllocator: can't allocate memory``, ``OutOfMemoryError``)."""
    text = str(exc)
    return type(exc).__name__ == "OutOfMemoryError" or ("allocate" in text and "memory" in text)


# what an interrupted command leaves (sapa verify says it itself: which verdicts, where)
_KEPT = {"sweep": "finished sweep cells were kept; a rerun resumes from them",
         "train": "finished training chunks were kept; a rerun resumes from them",
         "figures": "the figures already drawn were kept", "notebooks": "the notebooks already written were kept"}
INPUT_FILES = ("x", "w", "wq", "wk", "wv", "wo", "safetensors", "sigma_x")  # options naming files a command reads


def _check_input_files(args: argparse.Namespace) -> None:
    """Each input file given exists and is a regular file (InputError naming the option otherwise); the loaders
    check the contents later, and their own size limits."""
    from common.readfile import require_regular

    for name in INPUT_FILES:
        path = getattr(args, name, None)
        if path is not None:
            require_regular(path, "--" + name.replace("_", "-"), limit=2**62)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _output_guard(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """Check where the command writes before any work starts; hold its results directories (one run at a time).

    verify / sweep / train: ``--out`` locked (verify also its ``sweep`` and ``train`` subdirectories, which
    ``sapa sweep`` / ``sapa train`` may target); bench: ``--out`` a writable file; figures: the figure directory.
    """
    from common.outdir import check_dir, check_file, exclusive, refuse_foreign

    stack = contextlib.ExitStack()
    if args.command in ("verify", "sweep", "train"):
        with contextlib.ExitStack() as taking:  # a refused sub-lock releases what was taken
            taking.enter_context(exclusive(args.out, "--out"))
            for sub in ("sweep", "train") if args.command == "verify" else ():
                taking.enter_context(exclusive(args.out / sub, "--out"))
            stack = taking.pop_all()
    elif args.command == "bench" and args.out is not None:
        check_file(args.out, "--out")
    elif args.command == "figures" and args.results.is_dir():  # else cmd_figures says what --results lacks
        check_dir(args.out or args.results / "figures", "--out" if args.out else "figure directory")
        refuse_foreign(args.out or args.results / "figures", "--out" if args.out else "figure directory")
    return stack

def _load_npy(path: Path, name: str):
    """A numeric array from a user's .npy: header, dtype and size are checked before loading (sapa.npyfile)."""
    from sapa.npyfile import load_npy

    return load_npy(path, name)


def _finite_or_none(v: float) -> float | None:
    """``v``, or None for ±inf/NaN (log₁₀ 0 = −inf is not valid JSON)."""
    import math

    return v if math.isfinite(v) else None


def cmd_norms(args: argparse.Namespace) -> int:
    """``sapa norms``: exact norms of φ(S) and its Jacobian w.r.t. X, S = X W Xᵀ."""
    from empirics.kernels.norms import Activation, attention_norms
    from common.validate import finite_matrix, positive_float

    X = finite_matrix("--x", _load_npy(args.x, "--x"), (None, None))
    plain = (args.activation in ("softmax", "poly") and args.w is not None and not args.spectral
             and args.normalize == "none" and args.heads == 1
             and all(getattr(args, k) is None for k in ("wq", "wk", "wv", "wo", "safetensors")))
    if not plain:  # expressions, heads, values, --spectral: sapa.norms_expr
        from sapa.norms_expr import activation_from_args, layer_from_args, run_norms

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
        if args.json:
            print(json.dumps(out))
        else:
            print(_readable(out, {}))
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
        "log10_fro_norm": _finite_or_none(r.log10_fro),  # exact even where the norm is below float64's range
        "log10_jac_fro_norm": _finite_or_none(r.log10_jac_fro),
        "log10_jac_s_fro_norm": _finite_or_none(r.log10_jac_s_fro),
        "max_abs": r.max_abs,
        "dtype": "float64",
        "logit_scale": "S",
        "logit": "S = X W Xᵀ as given (no 1/√d); --scale multiplies: softmax(τ·S), c·S^p (τ = 1/√d or c = d^(-p/2) "
                 "gives the S/√d convention)",
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(_readable(out, {"p": "softmax has no degree", "log10_fro_norm": "the norm is 0",
                              "log10_jac_fro_norm": "the norm is 0", "log10_jac_s_fro_norm": "the norm is 0"}))
    return 0


def _readable(out: dict, why_missing: dict[str, str]) -> str:
    """A command's flat result as aligned ``key : value`` lines; a missing value as ``— (why)``."""
    from sapa.display import key_values, value_or_reason

    return "\n".join(key_values((k, value_or_reason(v, why_missing.get(k, "not applicable"), digits=6))
                                for k, v in out.items()))


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


def cmd_verify(args: argparse.Namespace) -> int:
    """``sapa verify``: run the ledger, print the table, write ledger.json and report.md atomically."""
    from common.atomic import atomic_write_json, atomic_write_text
    from sapa import report
    from sapa.budget import budget_named
    from sapa.claims import all_claims
    from sapa.claims.mc import close_run_pool, monte_carlo_summary
    from sapa.ledger import Context, ledger_dict, provenance, run_claim
    from sapa.ledger_merge import ledger_entries, merge_into, prior_ledger
    from sapa.verify_progress import expected_seconds
    from common.progress import say, stage

    budget = budget_named(args.budget, args.seed)
    claims = _select(all_claims(), args.only, lambda c: c.id, "claim id")
    out_dir: Path = args.out
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir} exists and is not a directory")
    expected, basis = expected_seconds(out_dir, budget)  # ETAs: the last ledger of this budget in --out
    out_dir.mkdir(parents=True, exist_ok=True)
    prior = prior_ledger(out_dir, budget, {c.id for c in claims}) if args.only else None  # merges: drops no verdict
    ctx = Context(budget=budget, out_dir=out_dir)
    started = time.time()
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the checks' tensors are small: a second thread costs CPU the workers need
    from sapa.claims.scale_keeps_training_stable import prefetch_study, stop_prefetch

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
    from sapa.claims.mc import monte_carlo_summary
    from sapa.ledger import ledger_dict, provenance
    from sapa.ledger_merge import ledger_entries, merge_into, prior_ledger

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


def cmd_exact(args: argparse.Namespace) -> int:
    """``sapa exact``: closed-form Gaussian moments of φ(x) = x^p attention (theory.moments)."""
    import math

    from theory.moments import exact_moments

    W = sigma_x = None
    if args.model == "shared":
        if args.w is None:
            raise InputError("--model shared needs --w W.npy")
        from sapa.npyfile import load_square_matrix

        W = load_square_matrix(args.w, "--w")
        if args.D is not None and args.D != W.shape[0]:
            raise InputError(f"--D {args.D} does not match --w of shape {W.shape}")
        if args.sigma_x is not None:
            sigma_x = load_square_matrix(args.sigma_x, "--sigma-x")
    else:
        if args.w is not None or args.sigma_x is not None:
            raise InputError("--w and --sigma-x apply to --model shared only")
        if args.model != "paper" and args.D is None:
            raise InputError(f"--model {args.model} needs --D")
        if args.d is None:
            raise InputError(f"--model {args.model} needs --d")
    if args.rho is not None and args.model != "corr":
        raise InputError(f"--rho applies to --model corr only, not {args.model}")
    rho = 0.5 if args.rho is None else args.rho
    if args.sigma is not None and args.sigma <= 0:
        raise InputError(f"--sigma must be positive, got {args.sigma}")
    sigma = args.sigma if args.sigma is not None else (1.0 if args.model in ("paper", "shared") else 1 / math.sqrt(args.D))
    m = exact_moments(args.p, args.model, args.N, args.D, args.d, rho=rho, sigma=sigma, W=W, sigma_x=sigma_x)
    out = {
        "p": m.p, "model": m.model, "n": m.N, "d_model": m.D, "d_head": m.d,
        "rho": rho if args.model == "corr" else None, "sigma": sigma if args.model != "shared" else None,
        "expected_fro2": float(m.expected_fro2), "expected_jac_fro2": float(m.expected_jac_fro2),
        "crossover_n": float(m.crossover_n), "crossover_n_jac": float(m.crossover_n_jac),
        "growth_exponent": float(m.growth_exponent), "growth_exponent_jac": float(m.growth_exponent_jac),
        "growth_exponent_of": "d log √E‖x^p/√N‖²_F / d log N at N (the 1/√N-scaled norm; _jac: its Jacobian w.r.t. X)",
        "m_off": float(m.m_off), "m_diag": float(m.m_diag), "j_off": float(m.j_off), "j_diag": float(m.j_diag),
        "formula": m.formula,
        "logit_scale": "S",
        "logit": "S = X W_Q W_Kᵀ Xᵀ (or ABᵀ), no 1/√d: the paper's theory",
    }
    out.update(_exact_log10s(m))  # exact where float64 underflows (σ = 1e-300: E‖φ‖² ≈ 1e-1800 prints as 0.0)
    if m.d is not None:  # the same moments under S/√d: E‖(S/√d)^{∘p}‖² = d^(−p)·E‖S^{∘p}‖², Jacobians alike, N* unchanged
        from sapa.conditions import scaled_by_logit_convention as conv

        out["at_logit_scale_s_over_sqrt_d"] = {
            "expected_fro2": conv(out["expected_fro2"], m.p, m.d, squared=True),
            "expected_jac_fro2": conv(out["expected_jac_fro2"], m.p, m.d, squared=True),
            "factor": f"d^(-p) = {m.d}^(-{m.p})", "crossover_n": out["crossover_n"],
            "growth_exponent": out["growth_exponent"]}
    if args.json:
        print(json.dumps(out))
    else:
        print(_readable(out, {"rho": "--model corr only", "sigma": "--model shared: the weights are --w"}))
    return 0


def _exact_log10s(m) -> dict:
    """log10_expected_fro2, log10_expected_jac_fro2, log10_m_off, … of the exact moments (None for log₁₀ 0)."""
    from theory.log10 import log10_abs

    p2, N = m.p * m.p, m.N
    paper = m.model == "paper"
    fro2 = N * N * m.m_off if paper else N * (N - 1) * m.m_off + N * m.m_diag
    jac2 = p2 * N * N * m.j_off if paper else p2 * (N * (N - 1) * m.j_off + N * m.j_diag)
    vals = {"expected_fro2": fro2, "expected_jac_fro2": jac2, "m_off": m.m_off, "m_diag": m.m_diag,
            "j_off": m.j_off, "j_diag": m.j_diag}
    return {f"log10_{k}": _finite_or_none(log10_abs(v)) for k, v in vals.items()}


def _sweep_guards(args: argparse.Namespace, cfg) -> int:
    """Refuse a blank --scheduler and absurd work (unless --force); return --workers capped by cores and memory."""
    from empirics.montecarlo.workload import SWEEP_WORKER_BYTES, cap_workers, check_sweep_work

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


def cmd_sweep(args: argparse.Namespace) -> int:
    """``sapa sweep``: run or resume a Monte Carlo sweep; serial, local Dask workers, or a remote scheduler."""
    from empirics.montecarlo.sweep import builtin_config, load_config, run_sweep, with_overrides

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
        from empirics.montecarlo.distributed import executor_for, wait_for_workers

        with executor_for(workers=workers, scheduler=args.scheduler) as ex:
            if args.scheduler is not None and args.timeout is not None:
                wait_for_workers(ex, args.timeout)
            df = run_sweep(cfg, args.out, progress=progress, executor=ex)
    print(f"{len(df)} rows in {args.out / 'results.parquet'} ({time.time() - t0:.1f} s)")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """``sapa bench``: exact kernels vs torch.func.jacrev, and vs the cost of forming S once."""
    from common.atomic import atomic_write_json
    from empirics.timing.bench import bench_all
    from empirics.timing.overhead import bench_overhead, flat_summary

    if args.out is not None and args.out.is_dir():
        raise InputError(f"--out {args.out} is a directory; give a file name for the JSON")
    from common.progress import stage

    if args.part in ("all", "kernels"):
        with stage("bench kernels (exact norms vs jacrev, vs forming S)"):
            res: dict = bench_all(quick=args.quick)
    else:
        res = {"vs_autograd": [], "vs_gemm": []}
    if args.part in ("all", "overhead"):
        res["overhead"] = bench_overhead(quick=args.quick, progress=not args.json, threads=1)
    if args.part in ("all", "training"):
        from empirics.training.train_bench import bench_training

        with stage("bench training (ensemble vs one member at a time)"):
            res["training"] = bench_training(quick=args.quick)
    if args.scaling:
        from figures.bench_scaling import scaling_benchmark

        with stage("bench scaling (a fixed sweep on 1 and 2 workers)"):
            res["scaling"] = scaling_benchmark((1, 2), small=args.quick)
    flat = {
        "speedup_vs_autograd": {f"{r['activation']}@N={r['N']}": r["speedup_vs_autograd"] for r in res["vs_autograd"]},
        "cost_vs_gemm": {f"{r['kernel']}@N={r['N']}": r["cost_vs_gemm"] for r in res["vs_gemm"]},
        "peak_memory_mib": {f"{r['kernel']}@N={r['N']}": r["peak_mem_bytes"] / 2**20 for r in res["vs_gemm"]},
        **(flat_summary(res["overhead"]) if "overhead" in res else {}),
        **({"ensemble_speedup": res["training"]["ensemble_speedup"], "speedup_ceiling": res["training"]["speedup_ceiling"],
            "member_steps_per_s": {f"N={r['N']}": r["member_steps_per_s"] for r in res["training"]["member_steps_per_s"]}}
           if "training" in res else {}),
        **res,
    }
    if args.out:
        atomic_write_json(args.out, flat)
    if args.json:
        print(json.dumps(flat, default=float))
    else:
        from sapa.display import ratio, sig

        for r in res["vs_autograd"]:
            print(f"N={r['N']:>5} D={r['D']:>4} {r['activation']:<22} kernel {r['kernel_s']:.4g} s  "
                  f"jacrev {r['autograd_s']:.4g} s  speedup {ratio(r['speedup_vs_autograd'])}")
        for r in res["vs_gemm"]:
            print(f"N={r['N']:>5} D={r['D']:>4} {r['kernel']:<22} {r['seconds']:.4g} s  "
                  f"cost vs forming S {ratio(r['cost_vs_gemm'])}  peak {sig(r['peak_mem_bytes'] / 2**20, 3)} MiB")
        if "overhead" in res:
            from empirics.timing.overhead import summary_lines

            print("\n".join(summary_lines(res["overhead"])))
        if "training" in res:
            for r in res["training"]["cells"]:
                print(f"training {r['task']} N={r['N']}: {r['members']} members × {r['steps']} steps, ensemble "
                      f"{r['ensemble_members_per_s']:.3g} members/s vs one at a time {r['loop_members_per_s']:.3g}: "
                      f"{ratio(r['speedup'])} (GEMM {r['loop_gemm_fraction']:.0%} of the loop's time: ceiling "
                      f"{ratio(r['speedup_ceiling'])}; ensemble's GEMM {r['ensemble_gemm_fraction']:.0%})")
            print("member-steps per second (one thread, ensemble of 6, text shape): " + ", ".join(
                f"N={r['N']} {r['member_steps_per_s']:.0f}" for r in res["training"]["member_steps_per_s"]))
            print(f"ensemble_speedup {ratio(res['training']['ensemble_speedup'])} ({res['training']['note']})")
        if args.scaling:
            sc = res["scaling"]
            print(f"sweep of {sc['cells']} cells: serial {sc['seconds'][0]:.2f} s, LocalCluster(2) {sc['seconds'][1]:.2f} s "
                  f"(+{sc['startup_s'][1]:.1f} s start-up), efficiency T1/(2·T2) = {sc['efficiency'][1]:.0%}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """``sapa train``: the training study across N (resumable), or ``--activation EXPR`` on the mechanism tasks."""
    from empirics.training.mechanism import resolve_device
    from empirics.training.train_study import plan_chunks, study_config
    from sapa.rules.learning import verdicts_line
    from empirics.montecarlo.workload import TRAIN_WORKER_BYTES, cap_workers

    if args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out} exists and is not a directory")
    if args.scheduler is not None and not args.scheduler.strip():
        raise InputError("--scheduler is empty (an unset variable?); give an address like tcp://host:8786")
    resolve_device(args.device)
    cfg = study_config(args.budget, args.seed)
    if args.seeds is not None and args.activation is not None:
        raise InputError("--seeds sets the study's replicates; --activation trains the mechanism probes (their own seeds)")
    workers = args.workers
    if args.scheduler is None:
        chunks = sum(len(plan_chunks(cfg, t, N, {1: 1.0, 3: 1.0})) for t in cfg.tasks for N in cfg.plan(t).Ns)
        workers, note = cap_workers(args.workers, chunks, TRAIN_WORKER_BYTES)
        if note:
            print(f"sapa: note: {note}", file=sys.stderr)
    if args.activation is not None:
        from empirics.training.activation_train import main_activation

        return main_activation(args.activation, args.budget, args.out, seed=args.seed, workers=workers,
                               scheduler=args.scheduler, device=args.device, decide=verdicts_line,
                               progress=not args.no_progress)
    from sapa.train_summary import main_train

    return main_train(args.budget, args.out, seed=args.seed, workers=workers, progress=not args.no_progress,
                      scheduler=args.scheduler, device=args.device, seeds=args.seeds)


def cmd_figures(args: argparse.Namespace) -> int:
    """``sapa figures``: redraw every figure from a results directory, without recomputing."""
    from figures.regenerate import JOBS, STORED_JOBS, run_jobs

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


def cmd_notebooks(args: argparse.Namespace) -> int:
    """``sapa notebooks``: regenerate the shipped notebooks with outputs, or check them (sapa.notebooks)."""
    from sapa.notebooks import main as notebooks_main

    return notebooks_main(args.dir, args.only, args.check, args.timeout)


def _select(items, wanted: list[str] | None, name_of, what: str) -> list:
    """``items`` whose name is in ``wanted`` (all when None), in their own order; an unknown name is an InputError."""
    items = list(items)
    if not wanted:
        return items
    known = {name_of(x) for x in items}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise InputError(f"unknown {what} {unknown[0]!r}; known: {', '.join(sorted(known))}")
    return [x for x in items if name_of(x) in wanted]


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``sapa calibrate``: false-FAILS / false-HOLDS rates and power of every verdict rule on synthetic truth."""
    from common.progress import say, stage
    from sapa.rules import FALSE_FAILS_TARGET, FALSE_HOLDS_TARGET, all_rules, calibrate

    rules = _select(all_rules(), args.rule, lambda r: r.name, "rule")
    results = []
    for i, rule in enumerate(rules, 1):
        say(f"[{i}/{len(rules)}] calibrating {rule.name} ...")  # notes the log's clock: no stage line right after
        with stage(f"[{i}/{len(rules)}] calibrating {rule.name}"):
            results.append(calibrate(rule, trials=args.trials, seed=args.seed))
    if args.store:
        from sapa.rules.store import SEED, write_store

        if args.seed != SEED or args.trials is not None:
            raise InputError(f"--store keeps the ledger's calibrations only: seed {SEED}, each rule's default trials")
        write_store(list(zip(rules, results)))
    from sapa.rules.base import EXACT_NOTE

    if args.json:
        print(json.dumps({"rules": [{**c.as_dict(), "evidence": r.evidence,
                                     **({"note": EXACT_NOTE} if r.evidence == "exact" else {})}
                                    for r, c in zip(rules, results)],
                          "targets": {"false_fails_rate": FALSE_FAILS_TARGET, "false_holds_rate": FALSE_HOLDS_TARGET}}))
        return 0
    w = max(len(c.rule) for c in results)
    print(f"{'rule':<{w}}  false FAILS  false HOLDS   power  undetermined (null)  trials  targets")
    for r, c in zip(rules, results):
        if r.evidence == "exact":  # rates of 0 / 0 / 100 % would only restate the decision logic
            print(f"{c.rule:<{w}}  {EXACT_NOTE} (decision logic on synthetic exact evidence: {c.false_fails_rate:.2%} / "
                  f"{c.false_holds_rate:.2%} / {c.power:.1%}, {c.trials} trials)")
            continue
        print(f"{c.rule:<{w}}  {c.false_fails_rate:>11.2%}  {c.false_holds_rate:>11.2%}  {c.power:>6.1%}  "
              f"{c.undetermined_rate_null:>19.1%}  {c.trials:>6}  {'met' if c.meets_targets else 'MISSED'}")
    print(f"targets: false FAILS ≤ {FALSE_FAILS_TARGET:.0%} (statement true, least favourable case), "
          f"false HOLDS ≤ {FALSE_HOLDS_TARGET:.0%} (designed effect)")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """``sapa audit EXPR``: growth, crossover, constant vs softmax and worst case of any activation (sapa.audit)."""
    from sapa.audit import cmd

    if args.model not in ("paper", "shared") and args.D is None:
        args.D = 768
    return cmd(args)


_COMMANDS = {"verify": cmd_verify, "norms": cmd_norms, "exact": cmd_exact, "sweep": cmd_sweep,
             "train": cmd_train, "bench": cmd_bench, "figures": cmd_figures, "calibrate": cmd_calibrate,
             "audit": cmd_audit, "notebooks": cmd_notebooks}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
