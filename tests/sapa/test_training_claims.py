"""Tests for `sapa/claims/training_claims.py`: the question's readings on tiny synthetic final tables (arm-level
rules, every reading verdict), the answer built from the numbers, and the check end to end on a few-step experiment.
No locked verdicts on real data: the rules' calibration is tested in tests/sapa/test_rules_association.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from empirics.norm_accuracy import analyse
from sapa.claims.training_claims import CLAIMS, _headline, answer_text, decide

ARMS = ("softmax", "x_sqrtN", "x3_sqrtN", "x_16", "x3")


def _table(relations: dict, seeds: int = 6, x3_low_bad: bool = False, seed: int = 0) -> pd.DataFrame:
    """Synthetic final runs: per task, accuracy = f(norm) by ``relations[task]`` ∈ {neg, pos, none, neg_div}.

    neg: accuracy falls with the norm; pos: rises; none: independent; neg_div: independent among finite
    runs, but the largest-norm arm diverges (norm ∞, chance accuracy).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for task, rel in relations.items():
        for wd in (0.0, 0.05):
            for s in range(seeds):
                for k, arm in enumerate(ARMS):
                    norm = 10.0 ** (k - 2 + 0.1 * rng.normal()) * (1.3 if wd == 0 else 1.0)
                    acc = {"neg": 0.9 - 0.1 * k, "pos": 0.5 + 0.1 * k}.get(rel, 0.6) + 0.02 * rng.normal()
                    if rel in ("none", "neg_div"):
                        acc = 0.6 + 0.1 * rng.normal()
                    div = rel == "neg_div" and k == 4
                    if x3_low_bad and arm == "x3":  # the review: lowest norm, worst accuracy
                        norm, acc = 10.0 ** (-4 + 0.1 * rng.normal()), 0.2 + 0.01 * rng.normal()
                    rows.append({"task": task, "arm": arm, "label": arm, "weight_decay": wd, "seed": s,
                                 "diverged": div, "test_acc": 0.1 if div else acc, "test_loss": math.inf if div else 1.0,
                                 "attn_fro": math.inf if div else norm, "jac_fro": math.inf if div else 3 * norm,
                                 "attn_fro_init": norm, "jac_fro_init": norm, "w_fro": 1.0})
    return pd.DataFrame(rows)


def _verdict(relations, seeds: int = 3, **kw):
    a = analyse(_table(relations, seeds=seeds, **kw), n_boot=300, seed=1, arm_interval_level=0.98)
    v, rs, why = decide(a)
    # the words of the ledger entry are built from the same numbers, for every branch
    head = _headline(a, v)
    plateau = {"bigram_acc": 0.28, "softmax_acc": 0.29, "arm_min": 0.27, "arm_max": 0.29}
    ans = answer_text(a, rs, plateau)
    assert head.startswith("arm-level ρ̄") and "not left the bigram plateau" in ans and "x³ − x/16" in ans
    json.dumps({"h": head, "a": ans, "arm": a["arm_level"], "r": [r.why for r in rs]}, allow_nan=False)
    return v, {r.name: r.verdict for r in rs}, ans


def _assoc(rs: dict, task: str) -> set:
    return {v for k, v in rs.items() if k.startswith(task) and "across" in k}


def test_lower_norm_better_accuracy_holds_per_reading():
    v, rs, ans = _verdict({"digits": "neg", "text": "neg"})
    assert v == "ANSWERED" and _assoc(rs, "digits") == _assoc(rs, "text") == {"HOLDS"}
    assert "A lower norm goes with a higher accuracy" in ans


def test_higher_norm_better_accuracy_fails_symmetrically():
    v, rs, ans = _verdict({"digits": "neg", "text": "pos"})
    assert v == "ANSWERED" and _assoc(rs, "digits") == {"HOLDS"} and _assoc(rs, "text") == {"FAILS"}
    assert "A higher norm goes with a higher accuracy across arms in text" in ans


def test_no_association_is_an_answer():
    v, rs, ans = _verdict({"digits": "none", "text": "none"})
    assert v == "ANSWERED" and _assoc(rs, "digits") | _assoc(rs, "text") == {"UNDETERMINED"}
    assert "No arm-level association is shown" in ans


def test_run_level_pseudo_replication_does_not_decide():
    """Many seeds make run-level intervals narrow; the arm level still has only 5 arms (p ≥ 1/120)."""
    v, rs, _ = _verdict({"digits": "neg_div", "text": "none"}, seeds=8)
    assert v == "ANSWERED" and len(rs) == 6
    assert all(r in {"HOLDS", "FAILS", "UNDETERMINED"} for r in rs.values())


def test_reviewer_pair_is_a_replicate_level_reading():
    v, rs, _ = _verdict({"digits": "neg", "text": "neg"}, x3_low_bad=True)
    pair = {k: r for k, r in rs.items() if "x³ vs x/16" in k}
    assert set(pair) == {"digits: x³ vs x/16 (the reviewer's pair)", "text: x³ vs x/16 (the reviewer's pair)"}
    assert set(pair.values()) == {"UNDETERMINED"}  # 3 replicates: the smallest exact p is 1/8
    v6, rs6, _ = _verdict({"digits": "neg", "text": "neg"}, seeds=6, x3_low_bad=True)
    assert {r for k, r in rs6.items() if "x³ vs x/16" in k} == {"HOLDS"}  # 6 replicates: p = 1/64 ≤ 0.025


def test_undetermined_when_runs_did_not_complete_or_rho_is_undefined():
    assert decide(None, complete=False)[0] == "UNDETERMINED"
    f = _table({"digits": "neg", "text": "neg"}, seeds=3)
    f.loc[f["task"] == "text", "test_acc"] = 0.5  # a constant accuracy: ρ̄ undefined
    v, rs, why = decide(analyse(f, n_boot=200))
    assert v == "UNDETERMINED" and "text/attn_fro" in why


def test_contract():
    (c,) = CLAIMS
    assert c.id == "norm-vs-accuracy" and c.check is not None and c.contract is not None
    assert c.kind == "question" and c.statement.startswith("Does a lower attention norm go with better accuracy")


def test_check_end_to_end_on_a_few_steps(tmp_path, monkeypatch):
    """The check on a few-step experiment: an Outcome with a computed verdict, stored data, four figure files."""
    from empirics import figdata, training
    from sapa.budget import budget_named
    from sapa.ledger import VERDICTS, Context, run_claim

    from figures import training_norms

    real = training.run_experiment
    tiny = training.TINY  # one seed: 22 runs of 6 steps
    monkeypatch.setattr(training, "run_experiment",
                        lambda name, out, seed=0, **kw: real(tiny, out, seed=seed, workers=1, progress=False))
    drawn = []

    def fake_draw(res, out_dir, stem):  # drawing is tested in tests/figures/test_training_norms.py (≈10 s)
        drawn.append(res)
        paths = [out_dir / f"{stem}_{k}.{e}" for k in ("curves", "acc_vs_norm") for e in ("png", "pdf")]
        out_dir.mkdir(parents=True, exist_ok=True)
        for p in paths:
            p.write_bytes(b"x")
        return paths

    monkeypatch.setattr(training_norms, "draw", fake_draw)
    import sapa.ledger

    monkeypatch.setattr(sapa.ledger, "calibration_note", lambda rule: {"rule": rule.name})  # calibration: own tests
    e = run_claim(CLAIMS[0], Context(budget_named("quick", seed=0), tmp_path))
    assert e.verdict in ("ANSWERED", "UNDETERMINED") and e.verdict in VERDICTS and e.kind == "question"
    assert e.headline.startswith("arm-level ρ̄") and e.rule["name"] == "arm-association"
    assert {r["rule"] for r in e.readings} == {"arm-association", "seed-contrast"} and len(e.readings) == 6
    assert (e.answer is not None) == (e.verdict == "ANSWERED") and e.findings
    assert len(e.figures) == 4 and all((tmp_path / f).is_file() for f in e.figures)
    assert all(f.startswith("figures/") for f in e.figures) and set(drawn[0]) >= {"curves", "final", "analysis"}
    res, stem = figdata.read(tmp_path / "data" / "training_norms.json")
    assert stem.startswith("training_norms_budgettiny") and set(res) >= {"curves", "final", "analysis"}
    ev = e.evidence
    assert set(ev["arm_level"]) == {"digits", "text"} and ev["config"]["name"] == "tiny"
    assert set(ev["run_level_descriptive"]["correlations"]) == {"digits", "text"}
    assert ev["arm_level"]["text"]["n_arms"] == 6 and ev["arm_level"]["digits"]["n_arms"] == 5
    assert ev["dtype"].startswith("training float32")
    json.dumps(ev, allow_nan=False)  # ledger.json-serialisable, no NaN/inf
    assert (tmp_path / "train" / "final.parquet").is_file()
