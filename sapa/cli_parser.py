"""The argument parser of the ``sapa`` command: ``build_parser()``, from every command's ``add_parser`` (light: no heavy
import)."""

from __future__ import annotations

import argparse
import functools

from sapa.commands.arguments import EXIT_USAGE, Parser  # noqa: F401  (EXIT_USAGE re-exported: sapa.cli's exit code)


def build_parser() -> argparse.ArgumentParser:
    """The full ``sapa`` argument parser: one subparser per command of :data:`sapa.commands.COMMANDS`, in its order."""
    import sapa
    from sapa.commands import COMMANDS, command_module

    p = Parser(prog="sapa", description="Check the claims of arXiv 2410.18613 with exact theory and numerics.")
    p.add_argument("--version", action="version", version=f"sapa {sapa.__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMANDS:
        command_module(name).add_parser(sub)
    return p


def parser() -> argparse.ArgumentParser:
    """:func:`build_parser`, built once per process for the commands as they are now.

    ``sapa.cli.main`` called from Python again and again (a notebook, a script, the tests: ~600 calls) built it each
    time, ~4 ms. Parsing leaves a parser as it was (argparse writes only the namespace, and every default here is
    immutable), so one serves every call; the key holds each command's ``add_parser``, so a command added or replaced
    gets a parser of its own."""
    from sapa.commands import COMMANDS, command_module

    return _built(tuple((name, command_module(name).add_parser) for name in COMMANDS))


@functools.lru_cache(maxsize=4)
def _built(commands: tuple) -> argparse.ArgumentParser:
    return build_parser()
