"""Tests for `sapa/claims/lipschitz_on_a_ball.py`: the ball entry's readings, bound check, control and figure."""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest

from sapa.empirics.experiments.lipschitz_ball import BallConfig
from sapa.empirics.kernels.ball_ascent import AscentConfig
from sapa.budget import budget_named
from sapa.claims import lipschitz_on_a_ball as LB
from sapa.ledger import Context, reading_keyed, run_claim

SMALL = {"ball": BallConfig(ns=(2, 4, 8, 16, 32), betas=(4.0, 1.0), D=4, d=4, d_v=4,
                            ascent=AscentConfig(restarts=4, steps=20)),
         "minilm_Ns": (8, 12), "max_steps": 6}


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setattr(LB, "QUICK", SMALL)
    out = tmp_path_factory.mktemp("ball")
    try:
        yield run_claim(LB.CLAIM, Context(budget_named("quick"), out)), out
    finally:
        mp.undo()


def test_registered_under_its_new_id_only():
    from sapa.claims import ORDER, all_claims

    assert "lipschitz-on-a-ball" in ORDER and "lipschitz-vs-published-bound" not in ORDER
    assert LB.CLAIM.kind == "claim" and any(c.id == "lipschitz-on-a-ball" for c in all_claims())


def test_verdict_is_the_headline_reading_and_the_entry_keeps_the_definitions(entry):
    from sapa.labels import violations

    e, _ = entry
    # the small design (n ≤ 32: three lengths from n = 8) leaves softmax's interval across ½ + 0.05: UNDETERMINED (the
    # quick budget's nine lengths decide it: HOLDS)
    assert e.verdict == "UNDETERMINED"
    head = reading_keyed(e.readings, "softmax", "ball")
    assert head is e.readings[0] and head["verdict"] == e.verdict and head["rule"] == "growth-upper"
    # independent: the fit of the stored certified lower bounds on β = 4 by numpy's least squares and its covariance
    import numpy as np
    from scipy import stats

    from sapa.rules.growth import LEVEL, TOL

    rows = [r for r in e.evidence["ball"]["rows"] if r["activation"] == "softmax" and r["beta"] == 4.0
            and r["n"] >= LB.FIT_FROM]
    (slope, _), cov = np.polyfit(np.log([r["n"] for r in rows]), np.log([r["sigma_lower"] for r in rows]), 1, cov=True)
    half = stats.t.ppf(0.5 + LEVEL / 2, len(rows) - 2) * math.sqrt(cov[0, 0])
    assert slope == pytest.approx(e.evidence["fits"]["softmax, β = 4"]["slope"], abs=1e-9)
    assert slope - half <= 0.5 + TOL < slope + half  # the interval reaches across the edge: not decided
    assert violations(asdict(e)) == []
    assert "2312.14820" in e.evidence["published_statement"] and "mean-field" in e.evidence["published_statement"]


def test_no_adversarial_input_exceeds_sapas_bound_recomputed_independently(entry):
    from sapa.theory.lipschitz_ball import ball_bound

    e, _ = entry
    ball = e.evidence["ball"]
    for r in ball["rows"]:
        assert r["bound"] == pytest.approx(ball_bound(r["activation"], r["n"], r["beta"], ball["v"]), rel=1e-12)
        assert 0 < r["sigma_lower"] <= r["bound"]
        assert max(math.sqrt(ball["w"] * r["R"] ** 2 / 2), 0) > 0  # (R recorded: β = wR²/√d with d = 4)
        assert ball["w"] * r["R"] ** 2 / 2 == pytest.approx(r["beta"], rel=1e-12)
    for a in ("softmax", "poly1", "poly3"):  # found ratios σ̲/U well below 1: the bound is loose, never broken
        assert reading_keyed(e.readings, a, "bound-holds")["verdict"] == "HOLDS_LOOSE"


def test_a_bound_that_is_too_small_fails_in_the_same_run(entry):
    e, _ = entry
    ctrl = e.falsifiability["negative_control"]
    assert e.falsifiability["kind"] == "could_fail" and ctrl["verdict"] == "FAILS" and ctrl["control_ok"]
    from sapa.rules.bound import BoundEvidence, decide

    # a bound 1.5× below the largest σ̲/U found: rule `bound` rejects it on the same evidence
    for a, r in e.evidence["bound_ratios"].items():
        assert decide(BoundEvidence(claimed=r / 1.5, sharp=math.inf, found=r)) == "FAILS"


def test_polynomials_grow_like_root_n_on_both_balls_and_softmax_flattens_on_the_small_one(entry):
    e, _ = entry
    fits = e.evidence["fits"]
    for a in ("x/√N", "x³/√N"):
        for b in (4, 1):
            assert abs(fits[f"{a}, β = {b}"]["slope"] - 0.5) < 0.1
    assert fits["softmax, β = 1"]["slope"] < 0.15 < fits["softmax, β = 4"]["slope"]
    assert reading_keyed(e.readings, "poly1", "small-ball")["verdict"] == "FAILS"


def test_figure_is_stored_and_redrawn(entry, tmp_path):
    from sapa.figures import lipschitz_ball as fig

    e, out = entry
    assert e.figures and all((out / f).is_file() for f in e.figures)
    assert (out / "data" / f"{fig.NAME}.json").is_file()
    assert all(p.is_file() for p in fig.main(out, tmp_path))


def test_robustness_rows_recompute_the_headline(entry):
    e, _ = entry
    conds = [r["condition"] for r in e.robustness["varied"]]
    assert any(c.startswith("another seed") for c in conds) and any(c.startswith("fit window") for c in conds)
    assert e.robustness["headline"] == e.verdict


@pytest.mark.slow
def test_full_budget_softmax_series_stays_below_the_bound_and_within_root_n():
    """The full budget's n grid to 256 on the big ball: every σ̲ ≤ U and the exponent interval below ½ + 0.05."""
    from dataclasses import replace

    from sapa.empirics.experiments.lipschitz_ball import run_ball
    from sapa.rules.growth import TOL

    res = run_ball(replace(LB.FULL["ball"], activations=("softmax",), betas=(LB.BIG,)))
    assert max(res.config["ns"]) >= 256
    assert all(r["sigma_lower"] <= r["bound"] for r in res.rows)
    f = LB._fit(res, "softmax", LB.BIG)
    assert f.hi <= 0.5 + TOL and f.slope > 0.3


def test_the_published_estimator_is_reported_beside_sigma_on_the_same_inputs(entry):
    """Each MiniLM row carries √‖JᵀF(X)‖ (recomputed here by autograd on the row's own layer and input), each layer
    its secant slope, and a finding says it is not σ₁."""
    import torch

    from sapa.empirics.realmodel import real_model as rm
    from sapa.empirics.realmodel.layer_lipschitz import minilm_layer
    from sapa.empirics.realmodel.peer_estimator import layer_function, published_quantity

    e, _ = entry
    rows = [r for r in e.evidence["real_rows"] if r["model"] == "all-MiniLM-L6-v2"]
    if not rows:
        pytest.skip("all-MiniLM-L6-v2 is not installed")
    r = rows[0]
    w = rm.load_weights()
    ids = rm.prefix_ids(rm.encode(rm.load_tokenizer(), next(iter(rm.load_corpus().passages.values()))), r["N"])
    X = rm.forward(w, ids, dtype=torch.float64)[r["layer"]]
    assert r["published_estimator"] == pytest.approx(published_quantity(layer_function(minilm_layer(w, r["layer"])), X),
                                                     rel=1e-9)
    for k, v in e.evidence["real_slopes"].items():
        s = [x["published_estimator"] for x in rows if f"layer {x['layer']}" == k]
        assert v["published_estimator"]["slope"] == pytest.approx(math.log(s[-1] / s[0]) / math.log(12 / 8), rel=1e-12)
    assert any("returns √‖J(X)ᵀF(X)‖, not σ₁" in f for f in e.findings)


def test_tightness_is_read_on_the_half_attention_family_recomputed_independently(entry):
    """"√n is tight" is decided by the explicit family's exponent: numpy's own fit of the stored family values, each
    value re-derived by autograd's J·E at the stored construction, and the proven bound above every value."""
    import numpy as np
    import torch
    from scipy import stats

    from sapa.empirics.experiments.lipschitz_ball import make_head, radius_for
    from sapa.empirics.kernels.half_attention_family import family_point, largest_gap
    from sapa.empirics.kernels.head_jacobian import forward
    from sapa.rules.growth import LEVEL, TOL

    e, _ = entry
    fam = e.evidence["half_attention_family"]
    assert fam["n"] == list(LB.TIGHT_NS) and max(fam["over_bound"]) <= 1
    inside = [(n, s) for n, s, ok in zip(fam["n"], fam["sigma_lower"], fam["in_regime"]) if ok]
    assert fam["fit"]["n"] == [n for n, _ in inside] and all(n <= fam["n_regime_end"] for n, _ in inside)
    (slope, _), cov = np.polyfit(np.log([n for n, _ in inside]), np.log([s for _, s in inside]), 1, cov=True)
    half = stats.t.ppf(0.5 + LEVEL / 2, len(inside) - 2) * math.sqrt(cov[0, 0])
    assert slope == pytest.approx(fam["fit"]["slope"], abs=1e-9)
    tight = reading_keyed(e.readings, "softmax", "tight")
    assert tight["verdict"] == ("HOLDS" if 0.5 - slope - half <= TOL else "UNDETERMINED")
    assert "half of every query's attention" in tight["statement"] and f"{fam['fit']['slope']:.3f}" in tight["why"]
    c = SMALL["ball"]
    h = make_head(0, c.D, c.d, c.d_v, "softmax")
    q = family_point(h, largest_gap(h, radius_for(h, LB.BIG)), 64)
    _, JE = torch.autograd.functional.jvp(lambda Y: forward(h, Y[None])[0], q.X, q.E)
    assert float(JE.norm()) == pytest.approx(fam["sigma_lower"][fam["n"].index(64)], rel=1e-12)


def test_the_peers_construction_is_reported_beside_the_ascent(entry):
    """Castin et al.'s adversarial inputs: σ₁ at each (β, n) over the ascent's σ̲ at the same point, in one finding."""
    e, _ = entry
    peer = e.evidence["peer_adversarial"]
    assert peer["constructed"] and len(peer["rows"]) == len([r for r in e.evidence["ball"]["rows"]
                                                             if r["activation"] == "softmax"])
    for r in peer["rows"]:
        assert r["ratio"] == pytest.approx(r["sigma_peer"] / r["sigma_ascent"], rel=1e-12)
    line = next(f for f in e.findings if f.startswith("Castin et al.'s adversarial construction"))
    big = max(peer["largest_ratio"].values())
    assert f"at most {big:.2f}×" in line and (("never beats" in line) == (big < 1))


def test_the_real_input_reading_reads_the_random_start_intervals(entry):
    """"O(n^¼) on real inputs" is decided on the largest layer interval built from σ₁'s certified lower bounds and its
    random-start upper bounds (never wider than the deterministic brackets' interval)."""
    from sapa.rules.growth import UpperEvidence, decide_upper

    e, _ = entry
    sl = e.evidence["real_slopes"]
    if not sl:
        pytest.skip("MiniLM not installed")
    for x in sl.values():
        (a, b), (c, d) = x["sigma_exponent_interval"], x["sigma_exponent_interval_prob"]
        assert a <= c <= d <= b and x["kw_delta"] == 1e-3
    lo, hi = (max(x["sigma_exponent_interval_prob"][i] for x in sl.values()) for i in (0, 1))
    r = reading_keyed(e.readings, "real", "minilm")
    assert r["verdict"] == decide_upper(UpperEvidence(0.25, lo, hi, False)) and "Kuczyński" in r["statement"]
