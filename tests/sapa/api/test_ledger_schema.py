"""Tests for `sapa/api/ledger_schema.py`: a tampered ledger.json is one line before anything is written, and
whatever the schema admits, the merge, the table and both reports can show (issue 52, item 11)."""

from __future__ import annotations

import json
import random

import pytest

from sapa.cli import main

BAD = ("zzz", 5, None, [], {}, True, -1.5)  # a wrong type for every field: text, number, null, list, object, bool


@pytest.fixture(scope="module")
def real_ledger(tmp_path_factory) -> dict:
    """A real ledger of thm4.1-norm (every field a check writes), with a Monte Carlo summary of two comparisons."""
    out = tmp_path_factory.mktemp("real")
    assert main(["verify", "--only", "thm4.1-norm", "--out", str(out)]) == 0
    doc = json.loads((out / "ledger.json").read_text())
    doc["monte_carlo"] = {"first_pass_coverage": 1.0, "nominal": 0.99, "series": 2, "checks": [
        {"name": "growth/x/fro", "covered": True, "nominal": 0.99, "detail": {"draws": "p=1"}},
        {"name": "growth/x/jac", "covered": True, "nominal": 0.99, "detail": {}}]}
    doc["provenance"]["earlier_runs"] = [{"started_utc": "T0"}]
    return doc


@pytest.mark.parametrize("where,value,why", [
    (("monte_carlo", "checks"), "garbage", "monte_carlo.checks: 'garbage' is not of type 'array'"),
    (("provenance", "earlier_runs"), 5, "provenance.earlier_runs: 5 is not of type 'array'"),
    (("claims", 0, "readings", 0, "calibration"), "zzz",
     "whose entry 'thm4.1-norm' is malformed (readings[0].calibration: 'zzz' is not of type 'object', 'null')")])
def test_a_tampered_ledger_is_one_line_and_nothing_is_written(tmp_path, capsys, real_ledger, where, value, why):
    """These were a TypeError, a TypeError, and an AttributeError after ledger.json was rewritten (report.html stale)."""
    doc = json.loads(json.dumps(real_ledger))
    doc["claims"].append({**doc["claims"][0], "id": "thm4.1-jacobian"})  # kept: the rerun replaces thm4.1-norm
    doc["claims"][0], doc["claims"][1] = doc["claims"][1], doc["claims"][0]
    node = doc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    if where[0] == "claims":
        doc["claims"][0]["id"] = "thm4.1-norm-kept"  # the tampered entry is one that is kept
        why = why.replace("'thm4.1-norm'", "'thm4.1-norm-kept'")
    (tmp_path / "ledger.json").write_text(json.dumps(doc))
    (tmp_path / "report.html").write_text("old report")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(["verify", "--only", "thm4.1-norm", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("sapa: error: --only would merge into ") and why in err[-1]
    assert not any(line.startswith("Traceback") for line in err) and not any("thm4.1-norm ..." in x for x in err)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != ".sapa.lock"} == before


def _paths(node, at=()):
    """Every (path, value) below ``node`` except inside an entry's free-form ``evidence`` and the budget."""
    yield at, node
    if isinstance(node, dict):
        for k, v in node.items():
            if k not in ("evidence", "budget", "decision_logic_check"):
                yield from _paths(v, at + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, at + (i,))


def _mutations(doc: dict) -> list:
    return [(p, bad) for p, _ in _paths(doc) if p for bad in BAD]


def _check_admitted_renders(tmp_path, doc: dict, path, bad) -> bool:
    """Set ``path`` to ``bad``; if the reader admits the ledger (the tampered entry kept, another rerun), merge it
    with a fresh entry and render the table and both reports. True when it was admitted."""
    from dataclasses import asdict

    from sapa.common.validate import InputError
    from sapa import report
    from sapa.budget import budget_named
    from sapa.claim_ids import ORDER
    from sapa.commands.ledger_merge import ledger_entries, merge_into, prior_ledger
    from sapa.commands.verify_keep import with_partial
    from sapa.ledger import Entry, ledger_dict

    doc = json.loads(json.dumps(doc))
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = bad
    (tmp_path / "ledger.json").write_text(json.dumps(doc))
    try:
        prior = prior_ledger(tmp_path, budget_named("quick", 0), {"other-powers"})
    except InputError:
        return False
    rerun = Entry(id="other-powers", statement="s", verdict="ANSWERED", evidence={}, kind="question")
    fresh = ledger_dict([rerun], {"started_utc": "T1", "wall_seconds": 1.0}, {})
    merged = with_partial(merge_into(prior, fresh), ORDER)
    shown, prov, mc = ledger_entries(merged), merged["provenance"], merged.get("monte_carlo")
    report.table(shown, mc=mc)
    report.markdown(shown, prov, mc)
    report.html(shown, prov, tmp_path, mc)
    return True


def test_whatever_the_schema_admits_renders_sampled(tmp_path, real_ledger):
    """Every field set to a wrong type (a seeded sample of them): refused in one line, or shown without an error."""
    muts = _mutations(real_ledger)
    sample = random.Random(52).sample(muts, 60)
    admitted = sum(_check_admitted_renders(tmp_path, real_ledger, p, bad) for p, bad in sample)
    assert 0 < admitted < len(sample)  # both outcomes occur: the schema is neither empty nor everything


@pytest.mark.slow  # every field × 7 wrong values: ~2 000 renders
def test_whatever_the_schema_admits_renders_everywhere(tmp_path, real_ledger):
    for p, bad in _mutations(real_ledger):
        _check_admitted_renders(tmp_path, real_ledger, p, bad)
