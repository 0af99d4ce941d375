"""Tests for `sapa/api/ledger.py`: ``sapa.load_ledger`` reads what sapa.ledger writes, and refuses a missing or
malformed file in one line."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

import sapa
from sapa.budget import budget_named
from sapa.common.validate import InputError
from sapa.ledger import Entry, ledger_dict


def _write(path, entries, budget="quick"):
    doc = ledger_dict(entries, {"budget": asdict(budget_named(budget, 0)), "seed": 0})
    path.write_text(json.dumps(doc))
    return doc


def test_reads_back_what_the_ledger_writes(tmp_path):
    doc = _write(tmp_path / "ledger.json", [Entry("a", "claim a", "HOLDS", {"n": 1}),
                                            Entry("b", "claim b", "FAILS", {}), Entry("c", "claim c", "HOLDS", {})])
    led = sapa.load_ledger(tmp_path / "ledger.json")
    assert dict(led.verdicts) == {"a": "HOLDS", "b": "FAILS", "c": "HOLDS"}
    assert dict(led.counts) == {"HOLDS": 2, "FAILS": 1}
    assert led.budget == "quick" and led.seed == 0 and led.entry("a")["evidence"]["n"] == 1
    assert led.to_dict() == json.loads(json.dumps(doc))
    assert repr(led).startswith(f"Ledger(path='{tmp_path / 'ledger.json'}', budget='quick', seed=0,")
    with pytest.raises(KeyError, match="no claim 'z'"):
        led.entry("z")


@pytest.mark.parametrize("text, words", [
    ("{not json", "cannot be read (Expecting property name"),
    ('{"claims": [], "provenance": {"earlier_runs": 5}}', "provenance.earlier_runs: 5 is not of type 'array'"),
    ('{"claims": [{"id": "a"}], "provenance": {}}', "entry 'a' is malformed"),
])
def test_a_malformed_ledger_is_one_line(tmp_path, text, words):
    (tmp_path / "ledger.json").write_text(text)
    with pytest.raises(InputError) as e:
        sapa.load_ledger(str(tmp_path / "ledger.json"))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(InputError) as e:
        sapa.load_ledger(tmp_path / "none.json")
    assert "none.json" in str(e.value) and "\n" not in str(e.value)
