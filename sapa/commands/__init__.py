"""The ``sapa`` commands, one module each, listed once in :data:`COMMANDS` (the order ``sapa --help`` shows).

A command module ``sapa/commands/NAME.py`` defines ``add_parser(subparsers)`` (its arguments, with the types of
:mod:`sapa.commands.arguments`) and ``run(args) -> int`` (the exit code); it may define ``KEPT`` (one line: what an
interrupt leaves behind; ``run`` may say it more precisely in ``KeyboardInterrupt(line)`` or in a note on any
exception it raises) and ``output_guard(args)`` (check, and hold, where it writes before any work starts).
:func:`sapa.cli_parser.build_parser` builds the parser from this list and :func:`sapa.cli.main` dispatches to
``run``; helpers a command alone uses live beside it (``verify_progress``, ``verify_keep``, ``ledger_merge``,
``norms_expr``, ``norms_layerfile``, ``train_summary``), helpers several share in :mod:`sapa.commands.shared`; the
computations live in :mod:`sapa.api`, which the commands print. Importing a command module is light: heavy imports
happen inside ``run``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

COMMANDS: tuple[str, ...] = ("verify", "norms", "exact", "sweep", "train", "bench", "figures", "notebooks", "calibrate",
                             "audit", "compare")


def command_module(name: str) -> ModuleType:
    """The module of command ``name`` (``sapa.commands.NAME``)."""
    if name not in COMMANDS:
        raise KeyError(f"unknown command {name!r}; known: {', '.join(COMMANDS)}")
    return importlib.import_module(f"sapa.commands.{name}")
