"""Tests for `tools/ledger_compare.py`: a changed number is found, a run's clock and a new reading key are not."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ledger_compare", ROOT / "tools" / "ledger_compare.py")
lc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lc)

LEDGER = {
    "claims": [
        {"id": "thm4.1-norm", "verdict": "HOLDS", "seconds": 1.5, "evidence": {"max": 0.99, "per_N": [1, 2]},
         "readings": [{"name": "r", "verdict": "HOLDS", "why": "largest 0.99"}]},
        {"id": "overhead", "verdict": "ANSWERED", "seconds": 9.0, "statement": "runtime",
         "evidence": {"best_ratio": {"p1": 1.2}}, "headline": "1.2×"},
    ],
    "monte_carlo": {"series": 3},
    "provenance": {"started_utc": "t0", "wall_seconds": 10.0, "git_commit": "abc", "seed": 0},
}


def test_identical_ledgers_with_another_clock_and_new_keys_agree():
    after = copy.deepcopy(LEDGER)
    after["provenance"].update(started_utc="t1", wall_seconds=12.0, git_commit="def")
    after["claims"][0]["seconds"] = 2.0
    after["claims"][0]["readings"][0]["key"] = ["for-all-S"]
    g = lc.compare(LEDGER, after)
    assert g["differs"] == [] and len(g["ignored"]) == 5


def test_a_changed_number_a_verdict_and_a_lost_field_differ():
    after = copy.deepcopy(LEDGER)
    after["claims"][0]["evidence"]["max"] = 0.98
    after["claims"][0]["readings"][0]["verdict"] = "FAILS"
    del after["monte_carlo"]["series"]
    got = {p for p, _, _ in lc.compare(LEDGER, after)["differs"]}
    assert got == {("claims", 0, "evidence", "max"), ("claims", 0, "readings", 0, "verdict"), ("monte_carlo", "series")}


def test_timings_of_the_overhead_entry_are_listed_apart_but_its_statement_is_compared():
    after = copy.deepcopy(LEDGER)
    after["claims"][1]["evidence"]["best_ratio"]["p1"] = 1.3
    after["claims"][1]["headline"] = "1.3×"
    g = lc.compare(LEDGER, after)
    assert g["differs"] == [] and len(g["timing"]) == 2
    after["claims"][1]["statement"] = "changed"
    assert [p for p, _, _ in lc.compare(LEDGER, after)["differs"]] == [("claims", 1, "statement")]


def test_main_reads_directories_and_exits_by_the_differences(tmp_path, capsys):
    for name, led in (("a", LEDGER), ("b", LEDGER)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "ledger.json").write_text(json.dumps(led))
    assert lc.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "differs: 0" in capsys.readouterr().out
    changed = copy.deepcopy(LEDGER)
    changed["claims"][0]["verdict"] = "FAILS"
    (tmp_path / "b" / "ledger.json").write_text(json.dumps(changed))
    assert lc.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert lc.main([str(tmp_path / "nowhere"), str(tmp_path / "b")]) == 2


def test_a_design_fixed_at_another_time_is_ignored_and_another_design_differs():
    led = {"claims": [{"id": "norm-vs-accuracy", "evidence": {"design": {"sha256": "a", "fixed_at": "t0",
                                                                         "first_data_at": "t1"}}}], "provenance": {}}
    later = copy.deepcopy(led)
    later["claims"][0]["evidence"]["design"].update(fixed_at="t5", first_data_at="t6")
    assert lc.compare(led, later)["differs"] == [] and len(lc.compare(led, later)["ignored"]) == 2
    later["claims"][0]["evidence"]["design"]["sha256"] = "b"
    assert [p[-1] for p, _, _ in lc.compare(led, later)["differs"]] == ["sha256"]
