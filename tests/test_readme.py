"""Tests for README.md: the front door says what sapa answers, gives the two commands and a bottom line, is a guide
and not a log, defines every term before or where it is used, shows real `sapa audit` output; and the command
table of docs/commands.md is the argument parser's."""

from __future__ import annotations

import re
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
SETUP = ("python3 -m venv .venv && . .venv/bin/activate && python3 -m pip install -c requirements.lock -e . "
         "&& sapa verify --budget quick --out results")
TESTS = '. .venv/bin/activate && python3 -m pip install -c requirements.lock -e ".[dev]" && python3 -m pytest'


def _readme_check():
    """tools/readme_check.py as a module (tools/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_check", ROOT / "tools" / "readme_check.py")
    rc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rc)
    return rc


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
    assert block == [SETUP, TESTS]


def test_the_first_screen_says_what_the_commands_cost_and_how_torch_is_chosen():
    """Before the commands: the venv, the time of each on 2 cores, the download, the CPU build of torch; after
    them, the install without the lock."""
    before = _section("Two commands").split("```bash")[0]
    for said in ("virtual environment", "2-core", "min", "MB", "torch's CPU", "https://download.pytorch.org/whl/cpu",
                 "--find-links"):
        assert said in before, said
    assert 'python3 -m pip install -e ".[dev]"' in _section("Two commands").split("```")[-1]


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


def test_glossary_defines_every_label_and_term_of_the_ledger():
    from sapa.glossary import TERMS, VERDICTS

    words = _section("Words the ledger uses")
    for label in (*VERDICTS, "ANSWERED"):
        assert f"`{label}` —" in words, label
    defined = set(_readme_check().glossary_terms(README))
    for term in TERMS:
        assert term.replace("*", "\\*") in defined, term


def test_every_term_is_defined_before_or_where_it_is_first_used():
    """tools/readme_check.py finds no glossary term or label used before its definition, none defined in passing
    only, none defined and never used."""
    assert _readme_check().term_problems(README) == []


def test_the_term_check_finds_each_kind_of_misuse():
    """A term used before its italic definition, one defined in passing but missing from the glossary, one defined
    and never used, a label used before its definition; a term wrapped over two lines still counts."""
    rc = _readme_check()
    page = ("# t\n\nIntro *Title*.\n\n## Bottom line\n\n**Holds** (`HOLDS`: true). A *slow\ndown* and a "
            "*dose* of N\\*; *extra*.\n\n## Words the ledger uses\n\n`HOLDS` — true.\n\n"
            "- **slow down** — s.\n- **dose** — d.\n- **N\\*** — n.\n- **spare** — never used.\n\n## End\n\n"
            "A dose. `FAILS` here.\n")
    assert rc.glossary_terms(page) == ["slow down", "dose", "N\\*", "spare"]
    assert rc.term_problems(page) == [
        "'extra' is defined in passing but not in the glossary", "'N\\\\*' is used before it is defined",
        "'spare' is defined but never used", "HOLDS_LOOSE is never defined", "HOLDS_IN_REGIME is never defined",
        "UNDETERMINED is never defined", "ANSWERED is never defined"]
    assert rc.term_problems(page.replace("of N\\*;", "of *N\\**;")).count("'N\\\\*' is used before it is defined") == 0
    early = page.replace("**Holds** (`HOLDS`: true).", "It HOLDS: `HOLDS` and `FAILS`.")
    assert "HOLDS is used before it is defined" in rc.term_problems(early)
    assert "FAILS is used before it is defined" in rc.term_problems(early)


def _ledger_of_the_readme(rc) -> dict:
    """A ledger whose verdicts and commit are the README's, with the ALiBi profile computed now (exact, ~4 s)."""
    from sapa.claims.alibi_scaling import additive_profile

    rows, commit = rc.table_verdicts(README), rc.quoted_commit(README)
    claims = [{"id": i, "verdict": v} for i, v in rows]
    for c in claims:
        if c["id"] == "alibi-scaling":
            c["evidence"] = {"additive_profile": {"3": additive_profile(3)}}
    return {"claims": claims, "provenance": {"git_commit": commit + "0" * 33}}


def test_the_readme_check_reads_the_tables_and_the_quoted_commit():
    """tools/readme_check.py (run against a real ledger before a README's numbers are quoted) finds every row and
    reports a changed verdict, a missing entry and a wrong commit."""
    rc = _readme_check()
    rows = rc.table_verdicts(README)
    commit = rc.quoted_commit(README)
    assert len(rows) >= 19 and commit is not None
    ledger = _ledger_of_the_readme(rc)
    assert rc.disagreements(README, ledger) == []
    first, verdict = rows[0]
    other = "FAILS" if verdict != "FAILS" else "HOLDS"
    changed = {**ledger, "claims": [{"id": first, "verdict": other}] + ledger["claims"][1:]}
    assert rc.disagreements(README, changed) == [f"{first}: README says {verdict}, ledger says {other}"]
    extra = {**ledger, "claims": ledger["claims"] + [{"id": "new-entry", "verdict": "HOLDS"}]}
    assert rc.disagreements(README, extra) == ["new-entry: no row in the README (ledger: HOLDS)"]
    moved = {**ledger, "provenance": {"git_commit": "f" * 40}}
    assert rc.disagreements(README, moved) == [f"the README quotes commit {commit}, the ledger ran on {'f' * 40}"]


def test_every_alibi_exponent_the_readme_quotes_names_its_lengths_rightly():
    """Each "e (N = a → b)" quoted for ALiBi is x³/√N's exact additive profile over a → b (computed here, not read
    from a stored ledger); a quote moved to other lengths, or a ledger without the profile, is reported."""
    rc = _readme_check()
    quotes = rc.profile_quotes(README)
    assert {(lo, hi) for _, lo, hi in quotes} >= {(128, 256), (512, 1024)}
    ledger = _ledger_of_the_readme(rc)
    assert rc.profile_problems(README, ledger) == []
    value = next(v for v, lo, hi in quotes if (lo, hi) == (512, 1024))
    moved = README.replace(f"{value} (N = 512 → 1 024)", f"{value} (N = 256 → 512)", 1)
    assert [p.split(", the ledger")[0] for p in rc.profile_problems(moved, ledger)] == [
        f"alibi-scaling: the README quotes {value} for N = 256 → 512"]
    bare = {**ledger, "claims": [{k: v for k, v in c.items() if k != "evidence"} for c in ledger["claims"]]}
    assert rc.profile_problems(README, bare) == [
        "alibi-scaling: the README quotes growth exponents by N, the ledger has no additive profile"]


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
    """The README's `sapa audit` block is what the command prints today: each run of lines between elided ones (a
    line "…") appears in the output, whole lines, in order, and the block ends where the output ends."""
    from sapa.cli import main

    m = re.search(r'```console\n\$ sapa audit "([^"]+)"\n(.*?)\n```', README, re.S)
    assert m is not None
    assert main(["audit", m.group(1)]) == 0
    out = capsys.readouterr().out.rstrip("\n")
    shown = [chunk.strip("\n") for chunk in re.split(r"(?m)^…$", m.group(2))]
    assert len(shown) >= 2 and all(shown[1:])
    at = 0
    for chunk in shown:
        found = out.find(chunk, at)
        assert found >= 0 and (found == 0 or out[found - 1] == "\n"), chunk[:60]
        at = found + len(chunk)
    assert at == len(out)
