"""The argument parser of the ``sapa`` command: ``build_parser()``, from every command's ``add_parser`` (light: no heavy
import)."""

from __future__ import annotations

import argparse

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
