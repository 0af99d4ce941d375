"""Tests for `sapa/conditions.py` and `sapa/labels.py`: the logit convention, robustness, and one meaning per label."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.conditions import (by_construction, could_fail, not_applicable, not_run, robustness, scaled_by_logit_convention,
                             varied)


@pytest.mark.parametrize("model", ["iid", "tied"])
@pytest.mark.parametrize("p", [1, 3])
def test_s_over_sqrt_d_moment_against_an_independent_monte_carlo(model, p):
    """E‖(S/√d)^{∘p}‖²_F = d^(−p)·E‖S^{∘p}‖²_F (exact moments), checked by plain numpy sampling with S/√d.

    S = X W_Q W_Kᵀ Xᵀ, X rows N(0, I_D), W entries N(0, 1/D) (tied: W_K = W_Q). 40 000 draws; the tolerance is
    4.5 standard errors of the sample mean (the x³ squares have heavy tails, so the bound is from the sample's own sd).
    """
    from sapa.theory.moments import exact_moments

    D, d, N, T = 16, 4, 6, 40_000
    rng = np.random.default_rng(20260)
    X = rng.standard_normal((T, N, D))
    Wq = rng.standard_normal((T, D, d)) / math.sqrt(D)
    Wk = Wq if model == "tied" else rng.standard_normal((T, D, d)) / math.sqrt(D)
    A, B = X @ Wq, X @ Wk  # (T, N, d)
    S = A @ np.swapaxes(B, 1, 2) / math.sqrt(d)  # (T, N, d) @ (T, d, N): the logits transformers compute
    sq = ((S**p) ** 2).sum(axis=(1, 2))  # (T,)
    exact_s = exact_moments(p, model, N, D, d, sigma=1 / math.sqrt(D)).expected_fro2
    want = scaled_by_logit_convention(exact_s, p, d, squared=True)
    se = sq.std(ddof=1) / math.sqrt(T)
    assert abs(sq.mean() - want) < 4.5 * se, (sq.mean(), want, se)


def test_vit_base_constants_under_both_conventions():
    """The ledger's constants: S/√d values are the S values times 64^(−p/2); the issue's figures at ViT-Base."""
    from sapa.evidence.growth_profiles import constants

    for p, iid, tied in ((1, 1.00, 1.19), (3, 4.09, 46.8)):
        m = constants(p, True)["ViT-Base"]["models"]
        for name in ("iid", "tied", "paper", "corr"):
            assert m[name]["ratio_exact_s_over_sqrt_d"] == pytest.approx(m[name]["ratio_exact"] * 64 ** (-p / 2),
                                                                         rel=1e-14)
        assert round(m["iid"]["ratio_exact_s_over_sqrt_d"], 2) == iid
        assert round(m["tied"]["ratio_exact_s_over_sqrt_d"], 2 if p == 1 else 1) == tied


def test_size_readings_under_s_over_sqrt_d():
    """x/√N holds on size; x³/√N holds with independent weights and fails with tied ones (46.8× > 10×)."""
    from sapa.claims.growth_check import size_readings
    from sapa.ledger import readings_keyed
    from sapa.evidence.growth_profiles import constants

    got = {}
    for p in (1, 3):
        for r in readings_keyed(size_readings(constants(p, True), "φ"), "size", "S/sqrt(d)"):
            got[(p, r.key[2])] = r.verdict
    assert got == {(1, "iid"): "HOLDS", (1, "tied"): "HOLDS", (3, "iid"): "HOLDS", (3, "tied"): "FAILS"}


def test_robustness_counts_headline_rows_only():
    rows = [varied("a", "HOLDS"), varied("b", "FAILS", reading="size"), not_applicable("seed", "exact")]
    r = robustness("HOLDS", rows)
    assert r["stable"] and r["flips"] == []
    r2 = robustness("HOLDS", rows + [varied("tol", "UNDETERMINED")])
    assert not r2["stable"] and r2["flips"] == ["tol"]


def test_labels_check_an_entry():
    from sapa.labels import DEFINITIONS, question_verdict, violations

    good = {"id": "q", "kind": "question", "verdict": "ANSWERED", "readings": [{"name": "r", "verdict": "FAILS"}],
            "contract": {"logit_scale": "S"}, "falsifiability": by_construction("one line"),
            "robustness": robustness("ANSWERED", [varied("x", "ANSWERED")])}
    assert violations(good) == []
    bad = {**good, "readings": [{"name": "r", "verdict": "UNDETERMINED"}]}
    assert any("is UNDETERMINED" in v for v in violations(bad))
    assert question_verdict(bad["readings"]) == "UNDETERMINED" and question_verdict([]) == "UNDETERMINED"
    regime = {**good, "kind": "claim", "verdict": "HOLDS_IN_REGIME", "readings": [{"name": "r", "verdict": "HOLDS_IN_REGIME"}],
              "robustness": robustness("HOLDS_IN_REGIME", [varied("x", "HOLDS_IN_REGIME")])}
    assert any("regime boundary" in v for v in violations(regime))
    assert violations({**regime, "regime": {"boundary": "N ≥ 16", "n_min": 16, "windows": {}}}) == []
    ctrl = {**good, "falsifiability": could_fail("w", "false variant", "UNDETERMINED")}
    assert violations(ctrl) == [] and ctrl["falsifiability"]["negative_control"]["control_ok"] is False
    assert violations({**good, "contract": {"logit_scale": "S/d"}})
    assert set(DEFINITIONS) == {"HOLDS", "HOLDS_LOOSE", "HOLDS_IN_REGIME", "FAILS", "UNDETERMINED", "ANSWERED"}


def test_docs_define_each_label_once_with_the_code_definitions():
    """docs/verdicts.md holds every definition of sapa.labels verbatim, once: one meaning per label."""
    from pathlib import Path

    from sapa.labels import DEFINITIONS

    text = (Path(__file__).resolve().parents[2] / "docs" / "verdicts.md").read_text(encoding="utf-8")
    for label, sentence in DEFINITIONS.items():
        assert text.count(f"| `{label}` | {sentence} |") == 1, label


def test_the_quick_ledger_fixture_keeps_every_definition(softmax_verify):
    """Every entry of the shared quick ledger (tests/conftest.py: sapa verify --only the Thm 4.1 claims) against
    sapa.labels: labels, logit convention, falsifiability with its control, robustness; the report says the same."""
    from sapa.labels import violations

    code, _, _, out_dir, ledger = softmax_verify
    assert code == 0
    for c in ledger["claims"]:
        assert violations(c) == [], c["id"]
        ctrl = c["falsifiability"].get("negative_control")
        assert ctrl is None or ctrl["verdict"] == "FAILS"  # bounds of 0.95√N and 0.45√N: the searches refute them
    md = (out_dir / "report.md").read_text(encoding="utf-8")
    assert "exact: no sampling error" in md and "Logits: S" in md and "negative control" in md


def test_question_row_counts_a_changed_answer_as_a_flip():
    from sapa.conditions import CHANGED_ANSWER, question_row

    names, base = ["a", "b"], ["HOLDS", "FAILS"]
    same = question_row("tol", names, base, ["HOLDS", "FAILS"])
    assert same["verdict"] == "ANSWERED" and "changed" not in same["note"]
    other = question_row("tol", names, base, ["HOLDS", "HOLDS"], "n")
    assert other["verdict"] == CHANGED_ANSWER and "b: FAILS → HOLDS" in other["note"] and other["note"].startswith("n; ")
    open_ = question_row("tol", names, base, ["UNDETERMINED", "FAILS"])
    assert open_["verdict"] == "UNDETERMINED"
    rob = robustness("ANSWERED", [same, other, open_])
    assert rob["stable"] is False and rob["flips"] == ["tol", "tol"]


def test_a_full_run_names_the_quick_budget_as_the_one_not_run():
    from sapa.ledger import _other_budget

    rob = robustness("HOLDS", [varied("tol", "HOLDS"), not_run("budget full", "not run in this budget")])
    assert _other_budget(rob, "quick") is rob
    full = _other_budget(rob, "full")
    assert [r["condition"] for r in full["varied"]] == ["tol", "budget quick"]
    assert "full-budget run" in full["varied"][1]["note"] and full["stable"] is True
