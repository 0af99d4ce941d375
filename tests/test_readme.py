"""Tests for README.md: the front door says what sapa answers, gives the two commands, defines its words before
its tables, shows real `sapa audit` output, and its command table is the argument parser's."""

from __future__ import annotations

import re
from pathlib import Path


README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
SETUP = 'python3 -m pip install -e ".[dev]" && sapa verify --budget quick --out results'
TESTS = "python3 -m pytest"


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def test_opens_with_what_sapa_answers_and_a_bottom_line_then_the_two_commands():
    head = README[:README.index("\n## ")]
    assert "sapa answers" in head and "**Bottom line**" in head
    for lead in ("**Holds.**", "**Holds only with a correction.**", "**Fails.**", "**Not settled.**"):
        assert lead in head
    block = re.search(r"```bash\n(.*?)```", README, re.S).group(1).splitlines()
    assert block[0].startswith(SETUP + " ") and block[1].startswith(TESTS + " ")
    assert README.index(SETUP) < README.index("\n## Words the ledger uses")


def test_glossary_defines_every_label_and_term_before_the_first_table():
    from sapa.glossary import TERMS, VERDICTS

    words = _section("Words the ledger uses")
    first_table = README.index("\n| ")
    assert README.index("\n## Words the ledger uses") < first_table
    for label in VERDICTS:
        assert f"`{label}`" in words
    for term in TERMS:
        if term in ("paper", "shared", "iid", "tied", "corr"):
            assert f"**{term}** —" in words
        else:
            assert f"**{term.replace('*', chr(92) + '*')}** —" in words, term


def test_command_table_is_the_argument_parser():
    """Every command has one row whose usage is rendered from build_parser(): options, which are required (bare)
    or optional ([...]), choices (a|b), lists (ID ...) and exclusive pairs ([a | b])."""
    from sapa.cli_usage import rows

    table = _section("Commands")
    cells = [c.replace("\\|", "|") for c in re.findall(r"^\| `(sapa [^`]+)` \|", table, re.M)]
    assert cells == [line for _, line in rows()]


def test_usage_rendering_marks_required_optional_choices_and_lists():
    from sapa.cli import build_parser
    from sapa.cli_usage import usage

    p = build_parser()
    exact = usage(p, "exact")
    assert exact.startswith("sapa exact --p p --model paper|shared|iid|tied|corr --N N [--D D] [--d d]")
    assert "[--model" in usage(p, "audit") and "[--N N]" in usage(p, "audit")  # optional there, with defaults
    assert "[--workers WORKERS | --scheduler SCHEDULER]" in usage(p, "sweep") and "[--only ID ...]" in usage(p, "verify")
    assert usage(p, "norms").startswith("sapa norms --x X.npy [--w W.npy] --activation ACTIVATION")


def test_worked_audit_example_is_real_output(capsys):
    """The README's `sapa audit` block is what the command prints today."""
    from sapa.cli import main

    m = re.search(r'```console\n\$ sapa audit "([^"]+)"\n(.*?)\n```', README, re.S)
    assert m is not None
    assert main(["audit", m.group(1)]) == 0
    assert capsys.readouterr().out.rstrip("\n") == m.group(2)
