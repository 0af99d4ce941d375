"""The ``sapa`` command: parse, check the input files and the output folder, dispatch to ``sapa.commands.NAME.run``.

User errors (bad sizes, non-finite input, unknown options, missing files) print one line
``sapa: error: ...`` on stderr and exit with code 2 — never a traceback, never a partial file.
The commands themselves live in :mod:`sapa.commands`, one module each.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings

from sapa.common.validate import InputError
from sapa.cli_parser import EXIT_USAGE, build_parser, parser  # noqa: F401  (build_parser re-exported for the tests)
from sapa.commands import command_module


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sapa`` command; returns the exit code."""
    import os

    os.environ.setdefault("MPLBACKEND", "Agg")  # the command draws files, never windows (a user's setting wins)
    if "MPLCONFIGDIR" not in os.environ:  # matplotlib's font cache: in the temporary folder, never in $HOME
        import tempfile

        from sapa.common.privatedir import private_dir  # a folder of this user's alone, never a planted link

        wanted = os.path.join(tempfile.gettempdir(), f"sapa-matplotlib-{os.getuid()}")
        got = private_dir(wanted)
        os.environ["MPLCONFIGDIR"] = str(got)
        if str(got) != wanted:  # a fresh folder (the usual one is another's, or a link): removed when the process ends
            import atexit
            import shutil

            atexit.register(shutil.rmtree, got, ignore_errors=True)
    from sapa.common.allocator import keep_freed_memory
    from sapa.common.collector import collect_less_often

    keep_freed_memory()  # freed tensors' pages are reused instead of faulted in again (numbers unchanged)
    collect_less_often()  # fewer full passes of the cyclic collector over a heap of ~10⁶ objects (numbers unchanged)
    from sapa.common.interrupt import Stopped, stop_signals, stopped_by_interrupt

    command = None
    try:
        args = parser().parse_args(argv)
        command = args.command
        _check_input_files(args)  # a missing --x is one line before torch, sympy or scipy is imported
        from sapa.common.progress import FALLBACK_S, stage

        # SIGTERM: the same clean path as Ctrl-C; a command silent for FALLBACK_S seconds (no bar or inner stage of
        # its own speaking) still gets a line saying it runs
        with stop_signals() as stops, _output_guard(args), stage(f"sapa {args.command}", every_s=FALLBACK_S), \
                warnings.catch_warnings():
            # numpy's "divide by zero" from generated code (56 lines on an x/(N − 1000) audit): sapa reports
            # every non-finite value it meets in words, so the command's output is its own lines only
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                return command_module(args.command).run(args)
            except Exception as exc:  # a stop signal that surfaced as another exception (numpy's SystemError)
                if not (stops.received or stopped_by_interrupt(exc)):
                    raise
                raise Stopped(_kept(exc) or "") from None
    except InputError as exc:
        print(f"sapa: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as exc:
        print(f"sapa: error: file not found: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # permission denied, not a directory, disk full, ...
        where = f": {exc.filename}" if exc.filename else ""
        kept = f"; {_kept(exc)}" if _kept(exc) else ""  # a command may say what it kept (sapa verify's verdicts)
        print(f"sapa: error: {exc.strerror or _one_line(exc)}{where}{kept}", file=sys.stderr)
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
        kept = exc.args[0] if exc.args and isinstance(exc.args[0], str) and exc.args[0] else _kept(exc) or getattr(
            command_module(command), "KEPT", "nothing was written") if command else "nothing was written"
        print(f"sapa: interrupted; {kept}", file=sys.stderr)
        return 130


def _allocation_failure(exc: RuntimeError) -> bool:
    """torch's failed CPU or GPU allocation (``DefaultCPUAllocator: can't allocate memory``, ``OutOfMemoryError``)."""
    text = str(exc)
    return type(exc).__name__ == "OutOfMemoryError" or ("allocate" in text and "memory" in text)


# options naming files a command reads
INPUT_FILES = ("x", "w", "wq", "wk", "wv", "wo", "safetensors", "sigma_x")


def _check_input_files(args: argparse.Namespace) -> None:
    """Each input file given exists and is a regular file (InputError naming the option otherwise); the loaders
    check the contents later, and their own size limits."""
    from sapa.common.readfile import require_regular

    for name in INPUT_FILES:
        path = getattr(args, name, None)
        if path is not None:
            require_regular(path, "--" + name.replace("_", "-"), limit=2**62)


def _kept(exc: BaseException) -> str | None:
    """What a command kept, as it noted on the exception (``add_note``) or on one it was handling; None: no note."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        notes = getattr(exc, "__notes__", None)
        if notes:
            return _one_line(notes[-1])
        seen.add(id(exc))
        exc = exc.__context__
    return None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _output_guard(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """Check where the command writes before any work starts, and hold its results directories (one run at a time):
    the command module's ``output_guard`` (verify / sweep / train lock ``--out``, verify also its ``sweep`` and
    ``train`` subdirectories; bench checks its ``--out`` file; figures its figure directory), else nothing."""
    guard = getattr(command_module(args.command), "output_guard", None)
    return guard(args) if guard is not None else contextlib.ExitStack()


def console(argv: list[str] | None = None):
    """The process's entry (the ``sapa`` script and ``python -m sapa.cli``): :func:`main`, then exit with its code.

    Stops raise :class:`sapa.common.interrupt.Stopped` for the whole life of the process, and after :func:`main` returns a
    stop is discarded (:func:`sapa.common.interrupt.exit_with`): one that lands after the command finished leaves its exit
    code alone; one that lands while :func:`main` returns says so in one line (130)."""
    from sapa.common.interrupt import exit_with, process_stops

    code = 130
    try:
        process_stops()
        code = main(argv)
    except KeyboardInterrupt:  # after main's own handling, before its return: everything it wrote is complete
        print("sapa: interrupted; the command had finished: everything it wrote is complete", file=sys.stderr)
    exit_with(code)


if __name__ == "__main__":  # pragma: no cover
    console()
