"""Tests for `sapa verify` interrupted (sapa/cli.py `_keep_interrupted`): the finished verdicts and a report stay."""

from __future__ import annotations

import json

import pytest

from sapa.cli import main


def _interrupt_at(monkeypatch, claim_id: str) -> None:
    """Ctrl-C as ``claim_id`` starts (the entries before it finish)."""
    import sapa.ledger as L

    real = L.run_claim

    def run(claim, ctx):
        if claim.id == claim_id:
            raise KeyboardInterrupt
        return real(claim, ctx)

    monkeypatch.setattr(L, "run_claim", run)


def test_an_interrupted_run_keeps_its_finished_verdicts_and_a_report(tmp_path, monkeypatch, capsys):
    _interrupt_at(monkeypatch, "other-powers")
    code = main(["verify", "--only", "thm4.1-norm", "other-powers", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 130
    ledger = json.loads((tmp_path / "ledger.json").read_text())
    assert [c["id"] for c in ledger["claims"]] == ["thm4.1-norm"] and ledger["claims"][0]["verdict"] == "HOLDS"
    assert ledger["provenance"]["interrupted"] == {"finished": ["thm4.1-norm"], "not_run": ["other-powers"]}
    assert "thm4.1-norm" in (tmp_path / "report.md").read_text() and (tmp_path / "report.html").is_file()
    assert err.splitlines()[-1].startswith(f"sapa: interrupted; 1 of 2 entries finished; their verdicts are in "
                                           f"{tmp_path / 'ledger.json'} and {tmp_path / 'report.md'} (not run: other-powers)")
    assert not (tmp_path / ".sapa.lock").exists()


def test_into_a_ledger_of_the_same_budget_the_finished_entries_are_merged(tmp_path, monkeypatch, capsys):
    assert main(["verify", "--only", "thm4.1-norm", "poly4-normalised", "--out", str(tmp_path)]) == 0
    before = json.loads((tmp_path / "ledger.json").read_text())
    _interrupt_at(monkeypatch, "poly4-normalised")
    assert main(["verify", "--only", "thm4.1-norm", "poly4-normalised", "--out", str(tmp_path)]) == 130
    after = json.loads((tmp_path / "ledger.json").read_text())
    assert [c["id"] for c in after["claims"]] == [c["id"] for c in before["claims"]]  # nothing lost
    by = {c["id"]: c for c in after["claims"]}
    assert by["thm4.1-norm"].get("rerun") is True and "rerun" not in by["poly4-normalised"]
    assert by["poly4-normalised"]["verdict"] == {c["id"]: c for c in before["claims"]}["poly4-normalised"]["verdict"]
    assert after["provenance"]["interrupted"]["not_run"] == ["poly4-normalised"]


@pytest.mark.slow  # a whole ledger's start (the training study's workers begin): ~15 s
def test_a_ledger_of_another_budget_is_never_overwritten_by_part_of_a_run(tmp_path, monkeypatch, capsys):
    assert main(["verify", "--only", "thm4.1-norm", "--seed", "7", "--out", str(tmp_path)]) == 0
    before = (tmp_path / "ledger.json").read_text()
    first = {"thm4.1-norm"}
    from sapa.commands import verify

    real_order = verify.verify_order
    monkeypatch.setattr(verify, "verify_order", lambda claims: sorted(real_order(claims), key=lambda c: c.id not in first))
    _interrupt_at(monkeypatch, "thm4.1-jacobian")
    assert main(["verify", "--out", str(tmp_path)]) == 130
    assert (tmp_path / "ledger.json").read_text() == before
    part = json.loads((tmp_path / "ledger.interrupted.json").read_text())
    assert [c["id"] for c in part["claims"]] == ["thm4.1-norm"]
    assert (tmp_path / "report.interrupted.md").is_file()
    assert "ledger.interrupted.json" in capsys.readouterr().err


def test_interrupted_before_anything_finished_writes_nothing(tmp_path, monkeypatch, capsys):
    _interrupt_at(monkeypatch, "thm4.1-norm")
    assert main(["verify", "--only", "thm4.1-norm", "--out", str(tmp_path)]) == 130
    assert not (tmp_path / "ledger.json").exists()
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"sapa: interrupted; no ledger entry had finished, so no ledger was written; finished results below {tmp_path} "
        "(sweep cells, training chunks) were kept, and a rerun resumes from them")
