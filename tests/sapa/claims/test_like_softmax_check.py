"""Tests for `sapa/claims/like_softmax_check.py` and the three entries that use it (relu_over_n, sigmoid_bias_logn,
poly4_normalised): the other softmax alternatives' scale rules, audited three ways.

Each entry's headline verdict is fixed (HOLDS on both budgets) and its size reading is checked against a numpy Monte
Carlo of E-RMS ‖φ(S)‖_F/√N at ViT-Base, independent of the audit's closed forms; each reading's verdict is also
recomputed from the stored evidence with its rule, and the Monte Carlo gate and the figure are checked.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.budget import budget_named
from sapa.claims import like_softmax_check, poly4_normalised, relu_over_n, sigmoid_bias_logn
from sapa.ledger import Context, reading_keyed, run_claim
from sapa.rules.like_softmax import LikeSoftmaxEvidence, decide

MODULES = {m.ID: m for m in (relu_over_n, sigmoid_bias_logn, poly4_normalised)}
IDS = list(MODULES)
CLAIMS = [m.CLAIM for m in MODULES.values()]


@pytest.fixture(scope="module", params=["small", pytest.param("quick", marks=pytest.mark.slow)])
def entries(request, tmp_path_factory):
    """The three checks at the quick budget (``-m slow``) or, in the default run, with fewer Monte Carlo trials
    (100 per exact comparison, 16 per normalised row size, 4 for the figure's two Monte Carlo sizes)."""
    from sapa.empirics.experiments import activation_sampling as empirics_audit

    out = tmp_path_factory.mktemp("ledger")
    ctx = Context(budget_named("quick", seed=0), out)
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "small":
            full = empirics_audit.run_audit_compare
            mp.setattr(like_softmax_check, "MC_TRIALS", 100)
            mp.setattr(like_softmax_check, "ROW_TRIALS", 16)
            mp.setattr(empirics_audit, "run_audit_compare",
                       lambda **kw: full(**{**kw, "trials": 4, "mc_Ns": (32, 64)}))
        return out, {c.id: run_claim(c, ctx) for c in CLAIMS}


def test_ids_kinds_sources_and_contracts():
    assert [c.id for c in CLAIMS] == IDS
    assert all(c.kind == "claim" and c.contract is not None and c.check is not None for c in CLAIMS)
    for c, source in zip(CLAIMS, ("Wortsman", "Ramapuram", "Kacham")):
        assert source in c.statement


def test_claims_are_in_the_ledger_order():
    from sapa.claims import ORDER, all_claims

    assert ORDER[-3:] == IDS
    assert [c.id for c in all_claims()][-3:] == IDS


@pytest.mark.parametrize("cid", IDS)
def test_readings_follow_their_rules(entries, cid):
    _, es = entries
    e = es[cid]
    assert e.kind == "claim" and e.rule["name"] == "audit-like-softmax"
    rules = [r["rule"] for r in e.readings]
    assert rules[:2] == ["audit-like-softmax", "audit-like-softmax"]
    for m, r in zip(("iid", "tied"), e.readings[:2]):
        ev = LikeSoftmaxEvidence(**{k: (math.nan if v is None else v)
                                    for k, v in e.evidence["per_model"][m]["evidence"].items()})
        assert r["verdict"] == decide(ev)
    gate = e.evidence["monte_carlo"]["gate"]["verdict"]
    assert e.verdict == (e.readings[0]["verdict"] if gate == "HOLDS" else "UNDETERMINED")
    assert all("calibration" in r for r in e.readings)


@pytest.mark.parametrize("cid", ["relu-over-n", "sigmoid-bias-logn"])
def test_closed_form_side_is_checked_by_monte_carlo(entries, cid):
    _, es = entries
    ev = es[cid].evidence
    comps = ev["monte_carlo"]["comparisons"]
    assert len(comps) == 12 and all(math.isfinite(c["z"]) for c in comps)
    assert ev["monte_carlo"]["missed_at_99"] <= 2  # honest 99 % intervals: P(≥ 3 of 12 miss) < 3e-4
    assert ev["per_model"]["iid"]["method"] == "quadrature"


def test_relu_over_n_is_flat_and_half_of_the_linear_moment(entries):
    _, es = entries
    pm = es["relu-over-n"].evidence["per_model"]["iid"]
    # E relu(S_12)² = ½ E S_12² off the diagonal (symmetric law): ‖ReLU(x/8)/N‖² → ½·E(S_12/8)² = ½ as N → ∞
    assert abs(pm["asymptotic_exponent"]) < 1e-3 and pm["sup_exponent"] <= 0.5


def test_normalised_rows_never_exceed_softmax_bound(entries):
    _, es = entries
    ev = es["poly4-normalised"].evidence
    assert ev["per_model"]["iid"]["method"] == "monte_carlo"
    assert all(c["z"] == 0.0 for c in ev["monte_carlo"]["comparisons"])  # max ‖P‖²_F ≤ N on every draw
    assert ev["worst_case"]["fro"]["bracket"] == [0.0, 0.5]


def test_figure_is_listed_and_written(entries):
    out, es = entries
    figs = es["relu-over-n"].figures
    assert figs and all((out / f).is_file() for f in figs)
    assert all(es[c].figures == figs for c in IDS)
    assert (out / "data" / "audit_compare.json").is_file()


def test_entries_name_the_command_that_reproduces_them(entries):
    _, es = entries
    for cid in IDS:
        text = like_softmax_check.activation_of(MODULES[cid].FAMILY)[0]
        assert es[cid].evidence["command"].startswith("sapa audit") and text in es[cid].evidence["command"]


@pytest.mark.parametrize("cid", IDS)
def test_rate_and_size_are_separate_readings_and_recompute(entries, cid):
    from sapa.rules.like_softmax import decide_rate, decide_size

    _, es = entries
    e = es[cid]
    for m in ("iid", "tied"):
        ev = LikeSoftmaxEvidence(**{k: (math.nan if v is None else v)
                                    for k, v in e.evidence["per_model"][m]["evidence"].items()})
        rate, size = reading_keyed(e.readings, "rate", m), reading_keyed(e.readings, "size", m)
        assert rate["verdict"] == decide_rate(ev) and size["verdict"] == decide_size(ev)
        assert size["rule"] == "size-within-factor"


@pytest.mark.parametrize("cid", IDS)
def test_entries_keep_the_label_definitions_and_controls_fail(entries, cid):
    from dataclasses import asdict

    from sapa.labels import violations

    _, es = entries
    d = asdict(es[cid])
    assert violations(d) == []
    fal = d["falsifiability"]
    if cid == "poly4-normalised":
        assert fal["kind"] == "by_construction"
    else:
        assert fal["kind"] == "could_fail" and fal["negative_control"]["verdict"] == "FAILS"
        assert fal["negative_control"]["size_control"]["verdict"] == "FAILS"
    assert isinstance(d["robustness"]["stable"], bool)


def test_sigmoid_windows_are_all_reported_and_judged_from_n_min(entries):
    _, es = entries
    pm = es["sigmoid-bias-logn"].evidence["per_model"]
    iid, tied = pm["iid"]["windows_above_edge"], pm["tied"]["windows_above_edge"]
    # iid: one window at small N only (below the practical minimum 16); tied: a second one at N ≈ 400–1 800
    assert len(iid) == 1 and iid[0]["below_n_min"] and 7 < iid[0]["to"] < 8
    assert len(tied) == 2 and not tied[1]["below_n_min"] and 350 < tied[1]["from"] < tied[1]["peak_at"] < tied[1]["to"] < 2000
    assert 0.59 < tied[1]["peak"] < 0.61
    jac_s = pm["iid"]["windows_by_quantity"]["jac_s"]
    assert len(jac_s) == 1 and 7.2 < jac_s[0]["to"] < 7.3  # ‖∂φ/∂S‖ alone: N ≤ 7.3
    assert pm["iid"]["sup_exponent_from_n_min"] <= 0.55 < tied[1]["peak"]


def _numpy_size_ratio(expr, normalize: bool, N: int, trials: int = 64, D: int = 768, d: int = 64) -> float:
    """E-RMS ‖φ(S)‖_F/√N by numpy alone: S = X W_Q W_Kᵀ Xᵀ, x_i ~ N(0, I_D), W entries N(0, 1/D), iid."""
    rng = np.random.default_rng(17)
    sq = []
    for _ in range(trials):
        X = rng.standard_normal((N, D))
        WQ, WK = rng.standard_normal((2, D, d)) / np.sqrt(D)
        P = expr((X @ WQ) @ (X @ WK).T, N)  # (N, d) @ (d, N) -> (N, N)
        if normalize:
            P = P / P.sum(axis=1, keepdims=True)
        sq.append(float((P**2).sum()))
    return float(np.sqrt(np.mean(sq) / N))


NUMPY_PHI = {"relu-over-n": (lambda S, N: np.maximum(S / 8, 0) / N, False, 196),
             "sigmoid-bias-logn": (lambda S, N: 1 / (1 + np.exp(-(S / 8 - np.log(N)))), False, 196),
             "poly4-normalised": (lambda S, N: (S / 8) ** 4, True, 128)}


@pytest.mark.parametrize("cid", IDS)
def test_each_entry_holds_and_its_size_is_numpys(entries, cid):
    _, es = entries
    e = es[cid]
    assert e.verdict == "HOLDS"  # on both budgets: every paper's rule keeps attention at softmax's rate and size
    assert reading_keyed(e.readings, "like-softmax", "iid")["verdict"] == "HOLDS"
    phi, normalize, N = NUMPY_PHI[cid]
    got = _numpy_size_ratio(phi, normalize, N)
    pm = e.evidence["per_model"]["iid"]
    if normalize:  # Monte Carlo evidence: an interval at N = 128, and a ratio ≤ 1 by construction
        lo, hi = pm["constant_interval_at_128"]
        assert got <= 1 and lo * 0.9 <= got <= hi * 1.1
    else:
        assert got == pytest.approx(pm["constant_vs_softmax"], rel=0.05)
    assert reading_keyed(e.readings, "size", "iid")["verdict"] == "HOLDS"
