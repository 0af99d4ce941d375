"""Tests for `sapa/claims/training_claims.py`: the verdict rule on synthetic final tables (every branch), and the
check end to end on a few-step experiment."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from empirics.norm_accuracy import analyse
from sapa.claims.training_claims import CLAIMS, _corrected, _headline, decide

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


def _verdict(relations, **kw):
    a = analyse(_table(relations, **kw), n_boot=1000, seed=1)
    v, d = decide(a)
    # the words of the ledger entry are built from the same numbers, for every branch
    arms = {t: x["arms"] for t, x in a["tasks"].items()}
    head = _headline(a, {t: f"{x['n_diverged']}/{x['n_runs']}" for t, x in a["tasks"].items()})
    corr = _corrected(v, a, d, arms)
    assert head.startswith("within weight decay") and (corr is None) == (v == "HOLDS")
    if corr is not None:
        assert "review's pair" in corr and ("diverged" in corr) == any(x["n_diverged"] for x in a["tasks"].values())
    json.dumps({"h": head, "c": corr, "a": {t: x["contrast"] for t, x in a["tasks"].items()}}, allow_nan=False)
    return v, d


def test_holds_when_every_interval_is_below_zero():
    v, d = _verdict({"digits": "neg", "text": "neg"})
    assert v == "HOLDS" and len(d["below"]) == 8 and not d["contains_0"]


def test_fails_when_a_higher_norm_goes_with_better_accuracy():
    v, d = _verdict({"digits": "neg", "text": "pos"})
    assert v == "FAILS" and "text/attn_fro/all" in d["above"]


def test_fails_when_the_reviewer_contrast_is_reproduced():
    v, d = _verdict({"digits": "neg", "text": "neg"}, x3_low_bad=True)
    assert v == "FAILS" and set(d["contrast_reproduced"]) == {"digits", "text"}


def test_holds_in_regime_when_only_some_intervals_are_below_zero():
    v, d = _verdict({"digits": "neg", "text": "none"})
    assert v == "HOLDS_IN_REGIME"
    assert all(c.startswith("digits") for c in d["below"]) and all(c.startswith("text") for c in d["contains_0"])


def test_holds_in_regime_when_only_divergence_carries_the_association():
    v, d = _verdict({"digits": "neg_div", "text": "neg_div"})
    assert v == "HOLDS_IN_REGIME"
    assert set(d["below"]) == {f"{t}/{q}/all" for t in ("digits", "text") for q in ("attn_fro", "jac_fro")}
    assert all(c.endswith("/finite") for c in d["contains_0"])


def test_undetermined_when_every_interval_contains_zero():
    v, d = _verdict({"digits": "none", "text": "none"})
    assert v == "UNDETERMINED" and len(d["contains_0"]) == 8


def test_undetermined_when_runs_did_not_complete_or_rho_is_undefined():
    assert decide(None, complete=False)[0] == "UNDETERMINED"
    f = _table({"digits": "neg", "text": "neg"})
    f.loc[f["task"] == "text", "test_acc"] = 0.5  # a constant accuracy: ρ undefined
    v, d = decide(analyse(f, n_boot=200))
    assert v == "UNDETERMINED" and d["undefined"]


def test_contract():
    (c,) = CLAIMS
    assert c.id == "norm-vs-accuracy" and c.check is not None and c.contract is not None
    assert c.statement == "Softmax works because it regularizes the attention norm."


def test_check_end_to_end_on_a_few_steps(tmp_path, monkeypatch):
    """The check on a few-step experiment: an Outcome with a computed verdict, stored data, four figure files."""
    import pickle

    from empirics import training
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
    e = run_claim(CLAIMS[0], Context(budget_named("quick", seed=0), tmp_path))
    assert e.verdict in VERDICTS and e.headline.startswith("within weight decay")
    assert len(e.figures) == 4 and all((tmp_path / f).is_file() for f in e.figures)
    assert all(f.startswith("figures/") for f in e.figures) and set(drawn[0]) >= {"curves", "final", "analysis"}
    stored = pickle.loads((tmp_path / "data" / "training_norms.pkl").read_bytes())
    assert set(stored) == {"res", "stem"} and stored["stem"].startswith("training_norms_budgettiny")
    ev = e.evidence
    assert set(ev["correlations"]) == {"digits", "text"} and ev["config"]["name"] == "tiny"
    assert ev["dtype"].startswith("training float32")
    json.dumps(ev, allow_nan=False)  # ledger.json-serialisable, no NaN/inf
    assert (tmp_path / "train" / "final.parquet").is_file()
