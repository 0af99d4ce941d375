"""Tests for `sapa/claims/norm_vs_accuracy.py`: the question read from the training study's runs (arms at their best lr,
the (task, N) cells as strata), every reading verdict on synthetic studies with a known arm-level relation, the answer
built from the numbers, and the check end to end on a cached study (the same runs as scale-keeps-training-stable).
No locked verdicts on real data: the rules' calibration is tested in tests/sapa/rules/test_association.py."""

from __future__ import annotations

import json

import numpy as np

from empirics.training.arm_statistics import study_arm_level
from sapa.claims.norm_vs_accuracy import CLAIMS, CONTRAST, _headline, answer_text, decide
from tests.empirics.training.study_fixture import ARMS, make_study

ORDER = {a: k for k, a in enumerate(ARMS)}  # arm index k: norm 10^k in the designed studies


def _study(relation: str, seeds: int = 3, seed: int = 0):
    """neg: accuracy falls with the arm's norm; pos: rises; none: arm accuracies independent of the norms."""
    effects = np.random.default_rng(seed).normal(0, 0.03, size=len(ARMS))

    def gap(task, arm, N):
        k = ORDER[arm]
        return {"neg": -0.01 * k, "pos": 0.01 * k}.get(relation, effects[k])

    return make_study(tasks={"digits": (16, 64), "text": (32, 64)}, seeds=seeds, gap=gap, lrs=(1e-3, 3e-3),
                      norm=lambda task, arm, N: 10.0 ** ORDER[arm] * N ** 0.5, noise=0.002, seed=seed, history=False)


def _verdict(relation: str, seeds: int = 3):
    a = {"arm_level": study_arm_level(_study(relation, seeds).runs, n_boot=300, seed=1, level=0.98, contrast=CONTRAST)}
    v, rs, _ = decide(a)
    head = _headline(a, v)
    plateau = {"margin": 0.02, "per_N": {32: {"bigram_acc": 0.28, "softmax_acc": 0.29, "gap": 0.01, "left": False}},
               "left_at_every_N": False}
    ans = answer_text(a, rs, plateau)
    assert head.startswith("arm-level ρ̄") and "not left the bigram plateau" in ans and "x³ − x/α*" in ans
    json.dumps({"h": head, "a": ans, "arm": a["arm_level"], "r": [r.why for r in rs]}, allow_nan=False)
    return v, {r.name: r.verdict for r in rs}, ans, a


def _assoc(rs: dict, task: str) -> set:
    return {v for k, v in rs.items() if k.startswith(task) and "across" in k}


def test_arm_level_uses_the_study_cells_as_strata():
    _, _, _, a = _verdict("neg")
    d, t = a["arm_level"]["digits"], a["arm_level"]["text"]
    assert d["Ns"] == [16, 64] and t["Ns"] == [32, 64] and d["stratum"] == "N"
    assert d["n_arms"] == 9 and t["n_arms"] == 10  # x³/√i only on text; α arms at α* only
    assert set(d["association"]) == {"attn_fro", "jac_x_fro"} and d["n_replicates"] == 3
    # per-stratum arm means are the seed means at the best lr: softmax's digits N = 16 accuracy, recomputed
    from empirics.training.study_analysis import at_best

    b = at_best(_study("neg").runs)
    soft = b[(b["task"] == "digits") & (b["N"] == 16) & (b["arm"] == "softmax")]["test_acc"].mean()
    arms = d["association"]["attn_fro"]["arms"]
    assert d["association"]["attn_fro"]["acc_means"][0][arms.index("softmax")] == round(soft, 5)


def test_lower_norm_better_accuracy_holds_per_reading():
    v, rs, ans, _ = _verdict("neg")
    # one meaning per label: the reviewer's pair is undecided with 3 replicates, so the question is not ANSWERED
    assert v == "UNDETERMINED" and _assoc(rs, "digits") == _assoc(rs, "text") == {"HOLDS"}
    assert "A lower norm goes with a higher accuracy" in ans
    v6, rs6, _, _ = _verdict("neg", seeds=6)
    assert v6 == "ANSWERED" and "UNDETERMINED" not in set(rs6.values())


def test_higher_norm_better_accuracy_fails_symmetrically():
    v, rs, ans, _ = _verdict("pos")
    assert v == ("ANSWERED" if "UNDETERMINED" not in set(rs.values()) else "UNDETERMINED")
    assert _assoc(rs, "digits") == _assoc(rs, "text") == {"FAILS"}
    assert "A higher norm goes with a higher accuracy across arms in digits" in ans


def test_no_association_is_said_but_not_answered():
    """Every arm reading UNDETERMINED: the answer says no association is shown, the label is UNDETERMINED."""
    v, rs, ans, _ = _verdict("none")
    assert v == "UNDETERMINED" and _assoc(rs, "digits") | _assoc(rs, "text") == {"UNDETERMINED"}
    assert "No arm-level association is shown" in ans


def test_reviewer_pair_is_a_replicate_level_reading():
    _, rs, _, _ = _verdict("neg")
    pair = {k: r for k, r in rs.items() if "x³ vs x/α*" in k}
    assert set(pair) == {"digits: x³ vs x/α* (the reviewer's pair)", "text: x³ vs x/α* (the reviewer's pair)"}
    assert set(pair.values()) == {"UNDETERMINED"}  # 3 replicates: the smallest exact p is 1/8 > 0.025
    _, rs6, _, _ = _verdict("neg", seeds=6)
    assert {r for k, r in rs6.items() if "x³ vs x/α*" in k} == {"HOLDS"}  # x³ worse: 6 replicates, p = 1/64


def test_undetermined_when_runs_did_not_complete_or_rho_is_undefined():
    assert decide(None, complete=False)[0] == "UNDETERMINED"
    runs = _study("neg").runs.copy()
    runs.loc[runs["task"] == "text", ["test_acc", "val_acc_final"]] = 0.5  # a constant accuracy: ρ̄ undefined
    v, _, why = decide({"arm_level": study_arm_level(runs, n_boot=200)})
    assert v == "UNDETERMINED" and "text/attn_fro" in why


def test_contract():
    (c,) = CLAIMS
    assert c.id == "norm-vs-accuracy" and c.check is not None and c.contract is not None
    assert c.kind == "question" and c.statement.startswith("Does a lower attention norm go with better accuracy")


def test_check_reads_the_cached_study(tmp_path, monkeypatch):
    """The check takes the study from ctx.cache (never retrains) and the figures drawn once for both entries."""
    import sapa.ledger
    from sapa.budget import budget_named
    from sapa.claims import scale_keeps_training_stable
    from sapa.ledger import Context, run_claim

    monkeypatch.setattr(sapa.ledger, "calibration_note", lambda rule: {"rule": rule.name})  # calibration: own tests
    monkeypatch.setattr(scale_keeps_training_stable, "bigram_by_n", lambda Ns, cfg: {N: 0.2 for N in Ns})
    st = _study("neg")
    ctx = Context(budget_named("quick", seed=0), tmp_path)
    ctx.cache[scale_keeps_training_stable.CACHE_KEY] = st
    ctx.cache[scale_keeps_training_stable.FIG_KEY] = ("figures/a.png",)
    e = run_claim(CLAIMS[0], ctx)
    assert e.verdict == "UNDETERMINED" and e.kind == "question" and e.figures == ["figures/a.png"]  # pair undecided
    from dataclasses import asdict

    from sapa.labels import violations

    assert violations(asdict(e)) == []
    assert e.falsifiability["negative_control"]["verdict"] == "FAILS"  # accuracy := norm: ρ̄ = +1, exact p = 1/9!
    assert e.headline.startswith("arm-level ρ̄") and e.rule["name"] == "arm-association"
    assert {r["rule"] for r in e.readings} == {"arm-association", "seed-contrast"} and len(e.readings) == 6
    assert e.answer and "left the bigram plateau" in e.answer
    ev = e.evidence
    assert set(ev["arm_level"]) == {"digits", "text"} and ev["same_runs_as"] == "scale-keeps-training-stable"
    assert ev["bigram_plateau"]["per_N"][32]["left"] is True
    json.dumps(ev, allow_nan=False)


def test_check_is_undetermined_when_the_study_fails(tmp_path):
    from sapa.budget import budget_named
    from sapa.claims import scale_keeps_training_stable
    from sapa.ledger import Context

    ctx = Context(budget_named("quick", seed=0), tmp_path)
    ctx.cache[scale_keeps_training_stable.CACHE_KEY] = RuntimeError("out of memory")
    out = CLAIMS[0].check(ctx)
    assert out.verdict == "UNDETERMINED" and "RuntimeError: out of memory" in out.headline


def test_a_control_that_no_data_could_make_fail_marks_the_verdict_as_unable_to_fail():
    # with k arms the exact permutation p is at least 1/k!: 5 arms (the quick budget) cannot reach the 0.005 level
    from sapa.claims.norm_vs_accuracy import _falsifiability
    from sapa.rules.association import ALPHA

    def analysis(k):
        means = [[0.1 * a + 0.01 * s for a in range(k)] for s in range(2)]  # 2 N strata × k arms
        return {"arm_level": {"digits": {"association": {"attn_fro": {"log10_norm_means": means}}}}}

    five = _falsifiability(analysis(5), seed=0)
    assert 1 / 120 > ALPHA and five["kind"] == "by_construction" and "1/5!" in five["why"]
    seven = _falsifiability(analysis(7), seed=0)
    assert seven["kind"] == "could_fail" and seven["negative_control"]["verdict"] == "FAILS"
