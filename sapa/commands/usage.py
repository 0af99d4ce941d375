"""One line of usage per ``sapa`` command, rendered from the argument parser: what the README's command table shows.

``usage(parser, "audit")`` gives ``sapa audit EXPR [--normalize none|row] ... [--json]``: required options bare,
optional ones in brackets, choices as ``a|b``, ``ID ...`` for a list, mutually exclusive options as
``[--workers K | --scheduler ADDR]``. A test renders every command and compares it with the README's table, so the
table cannot drift from the CLI; ``python3 -m sapa.commands.usage`` prints the rows to paste.
"""

from __future__ import annotations

import argparse
from pathlib import Path

_SKIP = (argparse._HelpAction, argparse._VersionAction)


def _metavar(a: argparse.Action) -> str:
    """The placeholder of an option's value: its metavar, its choices, or a name from its dest and type."""
    if a.metavar:
        return str(a.metavar)
    if a.choices:
        return "|".join(map(str, a.choices))
    help_ = (a.help or "").lower()
    from sapa.commands.arguments import path_arg  # a Path that refuses ''

    if a.type in (Path, path_arg):
        if ".npy" in help_:
            return a.dest.upper() + ".npy"
        return "DIR" if ("directory" in help_ or "folder" in help_) else "FILE"
    return a.dest if len(a.dest) == 1 else a.dest.upper()


def _one(a: argparse.Action) -> str:
    if not a.option_strings:  # a positional
        return str(a.metavar or a.dest.upper())
    opt = max(a.option_strings, key=len)
    if a.nargs == 0:  # store_true and the like
        return opt
    value = _metavar(a)
    return f"{opt} {value} ..." if a.nargs in ("+", "*") else f"{opt} {value}"


def usage(parser: argparse.ArgumentParser, command: str) -> str:
    """``sapa COMMAND ...`` for one subcommand, in the order its arguments were added."""
    sub = subparsers(parser)[command]
    groups = {id(a): g for g in sub._mutually_exclusive_groups for a in g._group_actions}
    parts, done = [], set()
    for a in sub._actions:
        if isinstance(a, _SKIP) or id(a) in done:
            continue
        g = groups.get(id(a))
        if g is not None:
            members = [x for x in g._group_actions if not isinstance(x, _SKIP)]
            done |= {id(x) for x in members}
            text = " | ".join(_one(x) for x in members)
            parts.append(text if g.required else f"[{text}]")
            continue
        done.add(id(a))
        parts.append(_one(a) if (a.required or not a.option_strings) else f"[{_one(a)}]")
    return " ".join([f"sapa {command}"] + parts)


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """{command name: its parser}, in the order the commands were added."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def rows(parser: argparse.ArgumentParser | None = None) -> list[tuple[str, str]]:
    """[(command, usage line)] for every command of ``sapa``."""
    if parser is None:
        from sapa.cli import build_parser

        parser = build_parser()
    return [(name, usage(parser, name)) for name in subparsers(parser)]


if __name__ == "__main__":  # pragma: no cover
    for _, line in rows():
        print(f"| `{line.replace('|', chr(92) + '|')}` | |")
