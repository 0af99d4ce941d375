"""Tests for README.md: the front door says what sapa answers, gives the two commands and a bottom line, is a guide
and not a log, defines every term before or where it is used, shows real `sapa audit` output; and the command
table of docs/commands.md is the argument parser's."""

from __future__ import annotations

import re
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
SETUP = 'python3 -m pip install -e ".[dev]" && sapa verify --budget quick --out results'
TESTS = "python3 -m pytest"


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def test_opens_with_what_sapa_answers_the_two_commands_then_a_bottom_line():
    head = README[:README.index("\n## Words the ledger uses")]
    assert "sapa answers" in README[:README.index("\n## ")]
    assert README.index("\n## Two commands") < README.index("\n## Bottom line")
    for lead in ("**Holds**", "**Holds only with a correction**", "**Fails**", "**Answered**", "**Not settled**"):
        assert f"\n{lead} (" in head, lead
    block = re.search(r"```bash\n(.*?)```", README, re.S).group(1).splitlines()
    assert block[0].startswith(SETUP + " ") and block[1].startswith(TESTS + " ")


def test_a_guide_not_a_log():
    """At most 2 500 words; no commit outside the reproduce section; no history of its own development."""
    assert len(README.split()) <= 2500
    reproduce = _section("Reproducing")
    outside = README.replace(reproduce, "")
    assert re.findall(r"`[0-9a-f]{7,40}`", outside) == []
    assert len(re.findall(r"`[0-9a-f]{7,40}`", reproduce)) == 1
    for word in ("session", "this round", "issue ", "previous run", "earlier run"):
        assert word not in README.lower(), word


def test_table_rows_are_one_line_each_and_link_their_report_section():
    rows = [line for line in README.splitlines() if line.startswith("| [`")]
    assert len(rows) >= 19
    for line in rows:
        assert len(line) <= 300, line[:60]
        entry = re.match(r"\| \[`([^`]+)`\]\(results/report\.html#([^)]+)\)", line)
        assert entry is not None and entry.group(2) == entry.group(1).replace(".", ""), line[:60]


def _glossary_terms() -> list[str]:
    """The glossary's defined terms, in order: every **term** that a dash follows."""
    return re.findall(r"\*\*([^*]+(?:\\\*)?)\*\* —", _section("Words the ledger uses"))


def test_glossary_defines_every_label_and_term_of_the_ledger():
    from sapa.glossary import TERMS, VERDICTS

    words = _section("Words the ledger uses")
    for label in (*VERDICTS, "ANSWERED"):
        assert f"`{label}` —" in words, label
    defined = set(_glossary_terms())
    for term in TERMS:
        assert term.replace("*", "\\*") in defined, term


def test_every_term_is_defined_before_or_where_it_is_first_used():
    """Each glossary term (and label) first appears where it is defined: in *italics* (a definition in passing,
    before the glossary) or in the glossary itself; every term defined in passing is in the glossary too."""
    from sapa.glossary import VERDICTS

    body = README[README.index("\n## Bottom line"):]
    glossary_at = body.index("\n## Words the ledger uses")
    in_passing = re.findall(r"(?<![*\w])\*([^*\n]+?(?:\\\*)?)\*(?![*\w])", body[:glossary_at])
    terms = _glossary_terms()
    for term in in_passing:
        assert term in terms, f"{term!r} is defined in passing but not in the glossary"
    common = {"paper", "shared", "corr", "reading", "power", "weight models"}  # also plain English words
    for term in terms:
        if term in common:
            continue
        first = body.find(term)
        italic = body.find(f"*{term}*")
        assert first >= glossary_at or (italic >= 0 and first == italic + 1), f"{term!r} used before it is defined"
    for label in (*VERDICTS, "ANSWERED"):
        first = body.index(f"`{label}`")
        assert first > glossary_at or body.startswith(f"`{label}`:", first), f"{label} used before it is defined"


def test_the_readme_check_reads_the_tables_and_the_quoted_commit():
    """tools/readme_check.py (run against a real ledger before a README's numbers are quoted) finds every row and
    reports a changed verdict, a missing entry and a wrong commit."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_check", ROOT / "tools" / "readme_check.py")
    rc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rc)
    rows = rc.table_verdicts(README)
    commit = rc.quoted_commit(README)
    assert len(rows) >= 19 and commit is not None
    ledger = {"claims": [{"id": i, "verdict": v} for i, v in rows], "provenance": {"git_commit": commit + "0" * 33}}
    assert rc.disagreements(README, ledger) == []
    first, verdict = rows[0]
    other = "FAILS" if verdict != "FAILS" else "HOLDS"
    changed = {**ledger, "claims": [{"id": first, "verdict": other}] + ledger["claims"][1:]}
    assert rc.disagreements(README, changed) == [f"{first}: README says {verdict}, ledger says {other}"]
    extra = {**ledger, "claims": ledger["claims"] + [{"id": "new-entry", "verdict": "HOLDS"}]}
    assert rc.disagreements(README, extra) == ["new-entry: no row in the README (ledger: HOLDS)"]
    moved = {**ledger, "provenance": {"git_commit": "f" * 40}}
    assert rc.disagreements(README, moved) == [f"the README quotes commit {commit}, the ledger ran on {'f' * 40}"]


def test_command_table_is_the_argument_parser():
    """Every command has one row whose usage is rendered from build_parser(): options, which are required (bare)
    or optional ([...]), choices (a|b), lists (ID ...) and exclusive pairs ([a | b])."""
    from sapa.commands.usage import rows

    table = COMMANDS
    cells = [c.replace("\\|", "|") for c in re.findall(r"^\| `(sapa [^`]+)` \|", table, re.M)]
    assert cells == [line for _, line in rows()]


def test_usage_rendering_marks_required_optional_choices_and_lists():
    from sapa.cli import build_parser
    from sapa.commands.usage import usage

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
