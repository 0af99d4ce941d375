"""Tests for `sapa/commands/verify_progress.py` and the stages of ``sapa verify`` (each entry and the figures get a stage)."""

from __future__ import annotations

import json

from sapa.budget import budget_named
from sapa.commands.verify_progress import expected_seconds


def _ledger(path, name="quick", seed=0):
    from dataclasses import asdict

    path.mkdir(parents=True, exist_ok=True)
    entry = {"statement": "s", "verdict": "HOLDS", "evidence": {}, "kind": "claim"}
    (path / "ledger.json").write_text(json.dumps({
        "claims": [{**entry, "id": "thm4.1-norm", "seconds": 0.6}, {**entry, "id": "thm4.2-linear", "seconds": 234.2}],
        "provenance": {"budget": asdict(budget_named(name, seed)), "seed": seed}}))


def test_expected_seconds_from_the_last_ledger_of_the_same_budget(tmp_path):
    _ledger(tmp_path)
    times, basis = expected_seconds(tmp_path, budget_named("quick", 0))
    assert times == {"thm4.1-norm": 0.6, "thm4.2-linear": 234.2} and basis.startswith("as long as the last quick run")


def test_without_a_matching_ledger_the_shipped_costs_give_the_estimate(tmp_path):
    ids, probe = ["thm4.1-norm", "thm4.2-linear"], lambda: 0.05
    times, basis = expected_seconds(tmp_path / "none", budget_named("quick"), ids, probe=probe)
    assert set(times) == set(ids) and basis.startswith("first quick run") and "shipped costs" in basis
    _ledger(tmp_path, name="full")
    times, basis = expected_seconds(tmp_path, budget_named("quick"), ids, probe=probe)
    assert set(times) == set(ids) and "another budget or seed" in basis
    (tmp_path / "ledger.json").write_text("{not json")
    assert set(expected_seconds(tmp_path, budget_named("quick"), ids, probe=probe)[0]) == set(ids)
    assert expected_seconds(tmp_path / "none", budget_named("full"), ids, probe=probe) == ({}, f"first full run in "
                                                                                             f"{tmp_path / 'none'}")


def test_verify_runs_every_entry_and_the_figures_inside_a_stage(tmp_path, capsys, monkeypatch):
    """Each entry's check runs inside progress.stage (named [i/n] id, with the last run's seconds as its ETA)."""
    import sapa.common.progress as progress
    import sapa.figures.regenerate as rg
    from sapa.cli import main

    _ledger(tmp_path)
    seen = []
    real_stage = progress.stage

    def spy(desc, expected_s=None, basis="", every_s=progress.EVERY_S):
        seen.append((desc, expected_s, basis))
        return real_stage(desc, expected_s, basis, every_s)

    monkeypatch.setattr(progress, "stage", spy)
    monkeypatch.setattr(rg, "JOBS", [])
    assert main(["verify", "--only", "thm4.1-norm", "--out", str(tmp_path)]) == 0
    assert seen[0] == ("sapa verify", None, "")  # the command's fallback stage (silent where an inner one speaks)
    assert seen[1] == ("[1/1] thm4.1-norm", 0.6, f"as long as the last quick run in {tmp_path}")
    assert seen[2][0] == "drawing 0 figures"
    err = capsys.readouterr().err
    assert "[1/1] thm4.1-norm ...\n[1/1] thm4.1-norm: HOLDS (" in err
