"""Tests for `sapa/commands/verify_eta.py`: the ETA's arithmetic, the shipped costs (every entry has one), and a first run's first
line."""

from __future__ import annotations

import json
import time

import pytest

from sapa.commands import verify_eta as C


def test_expected_wall_is_cpu_seconds_scaled_by_the_probe_over_the_workers():
    assert C.scale(0.3, 0.1) == pytest.approx(3.0)
    got = C.expected_wall({"a": 120.0, "b": 7.0}, C.scale(0.3, 0.1), cores=16)
    assert got == pytest.approx({"a": 120.0 * 3 / C.WORKERS, "b": 7.0 * 3 / C.WORKERS})  # never more than WORKERS
    assert C.expected_wall({"a": 120.0}, 1.0, cores=1) == {"a": 120.0}  # one core: no parallel work


def test_eta_line_sums_the_run_entries_and_names_those_without_an_estimate():
    assert C.eta_line({"a": 30.0, "b": 100.0, "z": 1e6}, ["a", "b"], "why", outside=0.0) == \
        "sapa verify: 2 entries, expected ~2.2 min (why)"
    assert C.eta_line({"a": 30.0, "b": 100.0}, ["a", "b"], "why", outside=0.5) == \
        "sapa verify: 2 entries, expected ~3.2 min (why)"  # the start, figures and report: half as long again
    assert C.eta_line({}, ["a"], "why", 0.0) == "sapa verify: 1 entries, expected ~0 s (why; no estimate for a)"


def test_shipped_seconds_scale_by_the_probe(tmp_path):
    f = tmp_path / "costs.json"
    f.write_text(json.dumps({"probe": {"reference_cpu_s": 0.05}, "budgets": {"quick": {"entries": {"a": 10.0, "b": 4.0}}}}))
    got, basis = C.shipped_seconds("quick", ["a"], probe=lambda: 0.1, path=f)
    assert got == pytest.approx({"a": 10.0 * 2 / min(C.WORKERS, __import__("os").cpu_count())}) and "× 2.00" in basis
    assert C.shipped_seconds("full", None, probe=lambda: 0.1, path=f) == ({}, "no shipped costs of the full budget")


def test_the_probe_is_sub_second_and_reproducible():
    t0 = time.perf_counter()
    p = C.probe_seconds(time.process_time)
    assert 0 < p and time.perf_counter() - t0 < 30  # 4 workloads; ~0.2 s on a quiet core, more under load
    assert C._workload() == C._workload()  # a fixed workload: the same arithmetic every time


def test_a_process_probes_once_and_a_run_without_a_ledger_reads_that_probe(tmp_path, monkeypatch):
    from sapa.budget import budget_named
    from sapa.commands import verify_progress

    calls = []
    monkeypatch.setattr(C, "probe_seconds", lambda: calls.append(1) or 0.05)
    C.probe_once.cache_clear()
    try:
        assert C.probe_once() == C.probe_once() == 0.05 and len(calls) == 1
        _, why = verify_progress.expected_seconds(tmp_path, budget_named("quick"), ["thm4.1-norm"])
        assert len(calls) == 1 and "shipped costs ×" in why
    finally:
        C.probe_once.cache_clear()  # the next caller measures this machine, not the stand-in


def test_every_ledger_entry_has_a_shipped_quick_cost():
    from sapa.claim_ids import ORDER

    shipped = C.load_costs()
    assert shipped is not None, "sapa/costs.json is missing: python3 tools/write_costs.py"
    entries = shipped["budgets"]["quick"]["entries"]
    assert set(ORDER) <= set(entries) and all(v >= 0 for v in entries.values())
    assert shipped["probe"]["reference_cpu_s"] > 0 and shipped["reference"]["machine"]


def test_costs_from_a_ledger_keep_each_entry_cpu_seconds():
    led = {"provenance": {"budget": {"name": "quick"}, "git_commit": "abc", "wall_seconds": 15.0},
           "claims": [{"id": "a", "cpu_seconds": 3.5, "seconds": 6.0}, {"id": "b", "cpu_seconds": 1.0, "seconds": 4.0},
                      {"id": "c"}]}
    got = C.costs_from_ledger(led, "m", "quiet", 0.04)
    assert got["budgets"] == {"quick": {"entries": {"a": 3.5, "b": 1.0}, "total_cpu_s": 4.5}}
    assert got["reference"]["outside_entries_fraction"] == 0.5  # 15 s in all, 10 s inside the entries
    assert got["probe"]["reference_cpu_s"] == 0.04 and got["reference"]["machine"] == "m"
    with pytest.raises(ValueError):
        C.costs_from_ledger({"provenance": {}, "claims": [{"id": "a"}]}, "m", "q", 0.04)


def test_a_first_run_prints_its_eta_on_its_first_line(tmp_path, capsys, monkeypatch):
    import sapa.figures.regenerate as rg
    from sapa.cli import main

    import sapa.common.progress

    monkeypatch.setattr(rg, "JOBS", [])
    monkeypatch.setattr(sapa.common.progress, "FALLBACK_S", 1e6)  # a busy machine's "running 11 s" line is not the test
    assert main(["verify", "--only", "thm4.1-norm", "--out", str(tmp_path / "new")]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("sapa verify: 1 entries, expected ~") and "shipped costs" in first, first
    assert "no estimate" not in first
