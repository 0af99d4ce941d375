"""Tests for `sapa/cli_parser.py`: one parser per process serves every call, unchanged by parsing; a command replaced
gets a parser of its own."""

from __future__ import annotations

import argparse

import pytest

from sapa import cli_parser
from sapa.commands import COMMANDS, command_module
from sapa.common.validate import InputError

ARGVS = (["audit", "x**3/sqrt(N)", "--json"], ["verify", "--budget", "quick", "--only", "thm4.1"],
         ["calibrate", "--rule", "growth", "--rule", "association"], ["norms", "--N", "64"])


def _parsed(argv: list[str]) -> dict | str:
    try:
        return vars(cli_parser.parser().parse_args(argv))
    except InputError as exc:
        return f"InputError: {exc}"


def test_one_parser_serves_every_call_and_parses_as_a_fresh_one():
    assert isinstance(cli_parser.parser(), argparse.ArgumentParser) and cli_parser.parser() is cli_parser.parser()
    fresh = cli_parser.build_parser()
    for argv in ARGVS:
        first = _parsed(argv)
        try:
            want = vars(fresh.parse_args(argv))
        except InputError as exc:
            want = f"InputError: {exc}"
        assert first == want and _parsed(argv) == want, argv  # twice: the first parse changed nothing
    lists = _parsed(["calibrate", "--rule", "growth"])
    lists["rule"].append("mutated by the caller")  # a caller's change to its namespace stays in its namespace
    assert _parsed(["calibrate"])["rule"] is None and _parsed(["calibrate", "--rule", "growth"])["rule"] == ["growth"]


def test_a_replaced_command_gets_a_parser_of_its_own(monkeypatch):
    before = cli_parser.parser()
    name = COMMANDS[0]
    real = command_module(name).add_parser

    def add_parser(sub):
        p = real(sub)
        (p or sub.choices[name]).add_argument("--planted", action="store_true")
        return p

    monkeypatch.setattr(command_module(name), "add_parser", add_parser)
    after = cli_parser.parser()
    assert after is not before
    with pytest.raises(InputError):
        before.parse_args([name, "--planted"])
    monkeypatch.undo()
    assert cli_parser.parser() is before
