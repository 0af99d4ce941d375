"""Tests for `sapa/rules/association.py`: dose-association decides per learning-rate stratum from the slope against
−DELTA (FAILS at any lr, HOLDS at every lr), its power and seeds-to-decide against Monte Carlo and by hand, matched-norm
from the entry's adjusted p-values and intervals; both meet their calibration targets on a short run (the stored one
has 1000 trials)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sapa.empirics.training.dose_response import Contrast, DoseSlope, dose_slope
from sapa.rules import calibrate, rule_named
from sapa.rules.association import (ALPHA_FAILS, ALPHA_HOLDS, DELTA, EQUIVALENCE, DoseEvidence, _power, decide_dose,
                                    decide_matched, doses_to_decide, matched_evidence, power_at_null, raw_p,
                                    seeds_to_decide)


def _slope(b, se, seed_var=0.0, seeds=3, sxx=1.0, lr=0.01):
    return DoseSlope(lr, b, se, 6, seed_var, seeds, sxx, math.nan, 8)


def _ev(*strata):
    raw = [raw_p(s) for s in strata]
    return DoseEvidence(tuple(strata), tuple(r[0] for r in raw), tuple(r[1] for r in raw))


def test_raw_p_are_the_one_sided_t_tails_against_the_margin():
    s = _slope(0.01, 0.01)
    pf, ph = raw_p(s)
    assert pf == pytest.approx(stats.t.sf(3.0, 6), rel=1e-12) and ph == pytest.approx(stats.t.cdf(3.0, 6), rel=1e-12)
    assert raw_p(_slope(0.0, 0.0)) == (0.0, 1.0) and raw_p(_slope(-0.1, 0.0)) == (1.0, 0.0)
    assert all(math.isnan(p) for p in raw_p(_slope(math.nan, 0.01)))


def test_fails_at_any_lr_holds_only_at_every_lr():
    steep, flat, edge = _slope(-0.2, 0.01), _slope(0.0, 0.001), _slope(-DELTA, 0.01)
    assert decide_dose(_ev(steep, steep)) == "HOLDS"
    assert decide_dose(_ev(steep, flat)) == "FAILS"  # one lr where a lower norm buys nothing refutes "at every lr"
    assert decide_dose(_ev(steep, edge)) == "UNDETERMINED"
    assert decide_dose(DoseEvidence((steep,), (ALPHA_FAILS * 1.01,), (1.0,))) == "UNDETERMINED"  # Holm moved it
    assert decide_dose(DoseEvidence((), (), ())) == "UNDETERMINED"


def test_power_is_the_noncentral_t_and_agrees_with_monte_carlo():
    rng = np.random.default_rng(0)
    se, df, level = 0.01, 6, 0.01
    z, chi = rng.standard_normal(200_000), rng.chisquare(df, 200_000)
    t = (z + (0.0 + DELTA) / se) / np.sqrt(chi / df)  # the t statistic when b = 0: a noncentral t, drawn
    mc = float((t > stats.t.ppf(1 - level, df)).mean())
    p = _power(0.0, se, df, level, "fails")
    assert abs(p - mc) < 4 * math.sqrt(p * (1 - p) / t.size)
    ev = _ev(_slope(0.0, se), _slope(0.0, 2 * se))
    both = 1 - (1 - _power(0.0, se, 6, level / 3, "fails")) * (1 - _power(0.0, 2 * se, 6, level / 3, "fails"))
    assert power_at_null(ev, 3) == pytest.approx(both, rel=1e-12)


def test_seeds_to_decide_is_the_smallest_count_reaching_80_percent():
    s = _slope(0.0, 0.02, seed_var=3 * 0.02 ** 2, seeds=3, sxx=1.0)  # all of the residual is seed noise
    k = seeds_to_decide(s, m=1)
    se = lambda n: math.sqrt(3 * 0.02 ** 2 / n)  # noqa: E731
    assert _power(0.0, se(k), 6, ALPHA_FAILS, "fails") >= 0.8 > _power(0.0, se(k - 1), 6, ALPHA_FAILS, "fails")
    lof = _slope(0.0, 0.02, seed_var=0.0, seeds=3, sxx=1.0)  # all of it the doses' scatter: seeds cannot help
    assert math.isinf(seeds_to_decide(lof, m=1)) and math.isnan(seeds_to_decide(_slope(math.nan, 0.1), m=1))
    below = _slope(-0.1, 0.02, seed_var=3 * 0.02 ** 2)  # far below the margin: the HOLDS side
    assert seeds_to_decide(below, m=1) <= 3
    assert seeds_to_decide(s, m=4) > k  # the family-wise level a_fails/m: more readings, more seeds
    near = _slope(-0.04, 0.02, seed_var=3 * 0.02 ** 2)  # the HOLDS side near the margin: a_holds/m likewise
    assert seeds_to_decide(near, m=16) > seeds_to_decide(near, m=1)


def test_doses_to_decide_is_where_a_simulated_dose_design_first_reaches_80_percent():
    """Monte Carlo of the design the count assumes: D doses spread over the norm like the stratum's 8, each dose mean
    scattered about the line with the stratum's residual sd, the OLS slope's one-sided t test at the level."""
    s = DoseSlope(0.01, 0.04, 0.027, 6, 3 * 0.02 ** 2, 3, 0.146, math.nan, 8)  # the text x³/c stratum's shape
    D = int(doses_to_decide(s, m=4))
    resid_sd = s.se * math.sqrt(s.sxx)  # the residual sd of one dose mean
    sd_x = math.sqrt(s.sxx / (s.n - 1))
    rng = np.random.default_rng(7)
    trials = 4000

    def rate(d: int) -> float:
        x = np.linspace(-1.0, 1.0, d)
        x = x / x.std(ddof=1) * sd_x  # the same spread per dose
        y = s.b * x + rng.normal(0.0, resid_sd, (trials, d))  # (trials, d)
        xc = x - x.mean()
        b = (y - y.mean(1, keepdims=True)) @ xc / (xc @ xc)
        r = y - y.mean(1, keepdims=True) - b[:, None] * xc
        se = np.sqrt((r ** 2).sum(1) / (d - 2) / (xc @ xc))
        return float(((b + DELTA) / se > stats.t.ppf(1 - ALPHA_FAILS / 4, d - 2)).mean())

    tol = 3.5 * math.sqrt(0.8 * 0.2 / trials)
    assert 20 <= D <= 40 and rate(D) >= 0.8 - tol and rate(D - 2) < 0.8 + tol
    assert doses_to_decide(_slope(-DELTA, 0.01), m=1) == math.inf  # at the margin no count decides
    assert math.isnan(doses_to_decide(_slope(math.nan, 0.1), m=1))
    assert doses_to_decide(_slope(-0.5, 0.001), m=1) == 3  # far below the margin: the fewest doses a slope has
    assert doses_to_decide(s, m=16) > D  # a stricter family-wise level needs more doses
    near = _slope(-0.045, 0.01)  # the HOLDS side near the margin likewise
    assert doses_to_decide(near, m=16) > doses_to_decide(near, m=1)


def test_a_real_dose_table_decides_through_dose_slope():
    x = np.linspace(-1.0, 1.0, 8)
    down = pd.DataFrame({"lr": 0.01, "log10_attn_fro": x, "test_acc": 0.8 - 0.1 * x, "test_acc_seeds": [[0.0]] * 8})
    up = down.assign(test_acc=0.8 + 0.1 * x)
    assert decide_dose(_ev(dose_slope(down))) == "HOLDS" and decide_dose(_ev(dose_slope(up))) == "FAILS"


def _contrast(diffs):
    return Contrast(tuple(diffs), tuple(0.0 for _ in diffs), sum(diffs) / len(diffs), math.nan, math.nan, len(diffs))


def test_matched_norm_fails_beyond_the_margin_holds_inside_it():
    far = matched_evidence(_contrast([-0.2, -0.18, -0.22, -0.19, -0.21, -0.2]))
    assert decide_matched(far) == "FAILS"
    near = matched_evidence(_contrast([0.001, -0.002, 0.0015, -0.001, 0.0005, 0.0]))
    assert decide_matched(near) == "HOLDS" and -EQUIVALENCE < near.lo < near.hi < EQUIVALENCE
    noisy = matched_evidence(_contrast([0.1, -0.1, 0.05, -0.08]))
    assert decide_matched(noisy) == "UNDETERMINED"
    assert decide_matched(matched_evidence(_contrast([0.0]))) == "UNDETERMINED"


@pytest.mark.parametrize("name", ["dose-association", "matched-norm"])
def test_calibration_meets_targets_on_a_short_run(name):
    c = calibrate(rule_named(name), trials=200, seed=1)
    assert c.false_fails_rate <= 0.01 + 3 * math.sqrt(0.01 * 0.99 / 200)
    assert c.false_holds_rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 200)


def test_raw_p_edges_one_degree_of_freedom_a_tie_at_the_margin_and_undefined_inputs():
    s = DoseSlope(0.01, 0.0, 0.01, 1, math.nan, 1, 1.0, math.nan, 3)  # three doses: df = 1 is a valid t test
    assert raw_p(s) == pytest.approx((stats.t.sf(2.0, 1), stats.t.cdf(2.0, 1)), rel=1e-12)
    assert raw_p(_slope(-DELTA, 0.0)) == (1.0, 1.0)  # exactly at the margin with no spread: neither side shown
    assert all(math.isnan(p) for p in raw_p(_slope(0.0, math.nan)))
    assert all(math.isnan(p) for p in raw_p(DoseSlope(0.01, 0.0, 0.01, 0, math.nan, 1, 1.0, math.nan, 2)))
    assert _power(0.0, 0.01, 1, 0.01, "fails") == pytest.approx(
        float(stats.nct.sf(stats.t.ppf(0.99, 1), 1, DELTA / 0.01)), rel=1e-12)
    assert math.isnan(_power(0.0, 0.01, 0, 0.01, "fails")) and math.isnan(_power(0.0, 0.0, 6, 0.01, "fails"))


def test_seeds_to_decide_answers_one_when_one_seed_already_decides():
    s = _slope(0.5, 0.001, seed_var=3 * 0.001 ** 2)  # far above the margin, tiny spread
    assert seeds_to_decide(s, m=1) == 1.0
    assert math.isinf(seeds_to_decide(_slope(-0.019, 0.01, seed_var=3 * 0.01 ** 2), m=1))  # at the margin: > MAX_SEEDS


def test_dose_evidence_as_dict_is_json_ready():
    import json

    ev = _ev(_slope(0.01, 0.01), DoseSlope(0.1, math.nan, math.nan, 0, math.nan, 1, math.nan, math.nan, 2))
    d = ev.as_dict()
    json.dumps(d, allow_nan=False)
    assert d["delta_per_decade"] == DELTA and d["strata"][0]["b_per_decade"] == 0.01
    assert d["strata"][1]["b_per_decade"] is None and d["strata"][1]["p_fails_adjusted"] is None


def test_simulations_have_their_designed_slope_spread_and_strata():
    """The calibration's synthetic dose-responses: the slope averages the truth (−DELTA or 0) within its Monte Carlo
    error, 2 or 3 lrs of 8 doses × 3 seeds; the matched differences centre on ±EQUIVALENCE (sign at random) or 0.06,
    with sd 0.03/√3."""
    from sapa.rules.association import SIM_DOSES, SIM_SEEDS, SIM_STRATA, simulate_dose, simulate_matched

    rng = np.random.default_rng(7)
    for truth, b in (("holds", -DELTA), ("fails", 0.0)):
        evs = [simulate_dose(truth, rng) for _ in range(300)]
        assert {len(e.strata) for e in evs} == set(SIM_STRATA) == {2, 3}  # text has 2 lrs, digits 3
        assert all(s.n == SIM_DOSES and s.seeds == SIM_SEEDS and s.df == SIM_DOSES - 2 for e in evs for s in e.strata)
        bs = np.array([s.b for e in evs for s in e.strata])
        assert abs(bs.mean() - b) < 4 * bs.std(ddof=1) / math.sqrt(bs.size)
        sxx = np.median([s.sxx for e in evs for s in e.strata])  # doses c = 2^i: 0.3–0.9 decades of norm per decade
        assert 0.5 < sxx < 2.5  # of c gives Σ(x − x̄)² ≈ 3.8 k² (k = 0.6: 1.4; with c = 3^i it would be 2.5× that)
        sd = np.sqrt([s.seed_var for e in evs for s in e.strata])
        assert 0.004 < np.median(sd) < 0.03  # the seed sd drawn from 0.005–0.03 (unit-variance t3 noise)
    draws = [np.asarray(simulate_matched("holds", rng).contrast.diffs) for _ in range(400)]
    signs = np.array([np.sign(d.mean()) for d in draws])
    assert 0.4 < (signs > 0).mean() < 0.6  # the edge +0.02 or −0.02 at random
    centred = np.concatenate([d - s * EQUIVALENCE for d, s in zip(draws, signs)])
    assert abs(centred.mean()) < 4 * centred.std() / math.sqrt(centred.size)
    d = np.concatenate([simulate_matched("fails", rng).contrast.diffs for _ in range(400)])
    assert abs(d.mean() - 0.06) < 4 * d.std() / math.sqrt(d.size)
    assert np.std(d) == pytest.approx(0.03 / math.sqrt(SIM_SEEDS), rel=0.1)  # t3 noise scaled to unit variance


def test_matched_evidence_is_the_two_one_sided_t_tests_and_the_90_percent_interval():
    d = [0.03, 0.01, 0.05, 0.02, 0.04]
    ev = matched_evidence(_contrast(d))
    m, se = float(np.mean(d)), float(np.std(d, ddof=1)) / math.sqrt(5)
    raw = min(1.0, 2 * min(stats.t.sf((m - EQUIVALENCE) / se, 4), stats.t.cdf((m + EQUIVALENCE) / se, 4)))
    assert ev.p_fails == pytest.approx(raw, rel=1e-12)
    assert (ev.lo, ev.hi) == pytest.approx((m - stats.t.ppf(0.95, 4) * se, m + stats.t.ppf(0.95, 4) * se), rel=1e-12)
    assert math.isnan(matched_evidence(_contrast([0.01, 0.01])).p_fails)  # no spread: no t test
    at = replace_p(ev, ALPHA_FAILS)
    assert decide_matched(at) == "FAILS"  # the level itself decides


def replace_p(ev, p):
    from dataclasses import replace

    return replace(ev, p_fails=p)


def _ols(x: np.ndarray, y: np.ndarray) -> DoseSlope:
    """The dose slope by hand (numpy least squares on the doses; no seed structure, no ρ)."""
    xc = x - x.mean()
    sxx = float(xc @ xc)
    b = float(xc @ (y - y.mean())) / sxx
    r = y - y.mean() - b * xc
    return DoseSlope(0.01, b, math.sqrt(float(r @ r) / (x.size - 2) / sxx), x.size - 2, math.nan, 3, sxx, math.nan,
                     x.size)


@pytest.mark.slow
def test_two_looks_at_half_the_level_keep_false_fails_within_the_level_and_two_at_the_full_level_do_not():
    """The dose-response's two-look design (sapa.claims.norm_vs_accuracy): 8 grid doses, then — if undecided and
    ``doses_to_decide`` says the finer grid's 36 suffice — all 36, each look at ALPHA_FAILS / 2. At the edge b = −DELTA
    (where FAILS is false) with normal scatter, 3 000 seeded designs: the false-FAILS rate is not above ALPHA_FAILS
    (one-sided binomial p > 0.001), while the same procedure at the full level at both looks exceeds it (p < 0.001)."""
    rng = np.random.default_rng(7)
    fine = np.log10(2.0 ** (np.arange(36) / 5))  # c = 2^(k/5): the grid is every fifth dose
    T, split, naive, extended = 3000, 0, 0, 0
    for _ in range(T):
        x = -0.6 * fine  # log10 norm falls 0.6 decades per decade of c
        y = -DELTA * x + 0.03 * rng.standard_normal(x.size)
        first = _ols(x[::5], y[::5])
        pf, ph = raw_p(first)
        if pf <= ALPHA_FAILS:
            naive += 1
        if pf <= ALPHA_FAILS / 2:
            split += 1
            continue
        if ph <= ALPHA_HOLDS / 2 or doses_to_decide(first, 1, ALPHA_FAILS / 2, ALPHA_HOLDS / 2) > 36:
            continue
        extended += 1
        p2 = raw_p(_ols(x, y))[0]
        split += p2 <= ALPHA_FAILS / 2
        naive += pf > ALPHA_FAILS and p2 <= ALPHA_FAILS
    assert extended > 0.1 * T  # the second look is taken often enough to matter
    assert stats.binom.sf(split - 1, T, ALPHA_FAILS) > 1e-3
    assert stats.binom.sf(naive - 1, T, ALPHA_FAILS) < 1e-3
