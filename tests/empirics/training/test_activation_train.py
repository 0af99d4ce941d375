"""Tests for `empirics/training/activation_train.py`: `sapa train --activation` end to end on a tiny budget."""

from dataclasses import replace

from sapa.empirics.training import mechanism as M
from sapa.empirics.training.activation_train import main_activation


def test_activation_trains_beside_softmax_and_prints_statistics(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(M.MECH_BUDGETS, "quick", replace(M.MECH_TINY, probes=M.MECH_TINY.probes[:1]))
    assert main_activation("relu(x)/N", "quick", tmp_path, decide=lambda trend: "VERDICT") == 0
    out = capsys.readouterr().out
    assert "φ = relu(x)/N beside softmax" in out and "not converged within the cap" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("copy1")]
    assert len(rows) == 2 * 2 and sum(" φ " in r for r in rows) == 2  # (N = 16, 32) × (softmax, φ)
    assert "slowdown copy1: softmax solves fewer than two N cells" in out  # 6 steps: nothing is solved, no trend
    files = sorted(p.name for p in (tmp_path / "activation" / "mechanism").glob("*.json"))  # timing/: the sidecars
    assert files == ["copy1_N16_expr.json", "copy1_N16_softmax.json", "copy1_N32_expr.json", "copy1_N32_softmax.json"]


def test_a_finding_probe_is_named_a_finding_not_too_hard(tmp_path, monkeypatch, capsys):
    """A probe kept as a finding (too few seeds and N for a trend) is never reported as one softmax cannot solve."""
    finding = replace(M.MECH_TINY.probes[0], role="finding")
    monkeypatch.setitem(M.MECH_BUDGETS, "quick", replace(M.MECH_TINY, probes=(finding,)))
    assert main_activation("relu(x)/N", "quick", tmp_path, progress=False) == 0
    out = capsys.readouterr().out
    assert "slowdown copy1: a finding at this budget" in out and "fewer than two N cells" not in out


def test_training_shows_its_members_and_a_resumed_run_counts_stored_chunks_as_done(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(M.MECH_BUDGETS, "quick", replace(M.MECH_TINY, probes=M.MECH_TINY.probes[:1]))
    cfg = replace(M.mech_config("quick", activation="relu(x)/N"), arms=("softmax",))  # as sapa train --activation
    members = sum(len(c.members) for c in M.plan_mech_chunks(cfg))
    assert members == 2 * 2 * 2  # (N = 16, 32) × (softmax, φ) × 2 seeds
    assert main_activation("relu(x)/N", "quick", tmp_path) == 0
    err = capsys.readouterr().err
    assert f"train φ = relu(x)/N and softmax: 100% ({members}/{members} member)" in err
    seen = []
    monkeypatch.setattr(M, "train_mechanism_chunk", lambda *a: seen.append(a))  # a resumed run trains nothing
    assert main_activation("relu(x)/N", "quick", tmp_path, progress=False) == 0
    assert seen == [] and "member" not in capsys.readouterr().err


def test_a_trend_is_printed_with_the_verdicts_the_caller_passes(monkeypatch, capsys):
    """Where softmax solves two N cells, the trend line carries the caller's verdict text (the CLI: both questions)."""
    from sapa.empirics.training import activation_train as AT
    from sapa.empirics.training import learning_analysis as LA
    from sapa.empirics.training.censored_trend import interval_trend
    import numpy as np

    tr = interval_trend((16, 32), [np.array([[0.0, 0.2], [0.1, 0.3]]), np.array([[1.0, 1.2], [0.9, 1.1]])])
    monkeypatch.setattr(LA, "mechanism_learning", lambda mech: [])
    monkeypatch.setattr(LA, "slowdown_trends", lambda cells, arms, threshold: {("copy1", "expr"): tr})
    AT.print_mechanism({"config": {"probes": [{"task": "copy1", "steps": 10}]}}, lambda t: "VERDICT")
    out = capsys.readouterr().out
    assert "slowdown copy1 φ" in out and "→ VERDICT" in out and f"{tr.delta:+.2f}" in out
