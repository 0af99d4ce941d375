"""Tests for `sapa/rules/stability.py`: the trend rules read one-sided t bounds against the margin, combine the
headline as a conjunction, and meet their calibration targets (false FAILS ≤ 1 %, false HOLDS ≤ 5 %) on synthetic
studies of the real shape; measured rates must stay below the 99.9 % binomial quantile of the target."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sapa.common.seeds import rng_for
from sapa.empirics.training.study_analysis import GapTrend
from sapa.rules import FALSE_FAILS_TARGET, FALSE_HOLDS_TARGET, all_rules, calibrate, rule_named
from sapa.rules import stability as S


def _ev(delta: float, se: float, df: int = 6) -> GapTrend:
    return GapTrend(task="t", arm="a", quantity="test_acc", N=(16, 64), n=(4, 4), cell_mean=(0.0, delta),
                    slope=delta / 2, delta=delta, se=se, df=df, pooled_sd=se)


def _ceiling(rate: float, n: int) -> float:
    return stats.binom.ppf(0.999, n, rate) / n


def test_decide_reads_the_one_sided_bounds_against_the_margin():
    se, df = 0.01, 6
    t_h, t_f = stats.t.ppf(1 - S.ALPHA_HOLDS, df), stats.t.ppf(1 - S.ALPHA_FAILS, df)
    edge_h = -S.MARGIN + t_h * se  # Δ above this: lower bound > −δ
    edge_f = -S.MARGIN - t_f * se  # Δ below this: upper bound < −δ
    assert S.decide_accuracy(_ev(edge_h + 1e-9, se, df)) == "HOLDS"
    assert S.decide_accuracy(_ev(edge_h - 1e-9, se, df)) == "UNDETERMINED"
    assert S.decide_accuracy(_ev(edge_f - 1e-9, se, df)) == "FAILS"
    assert S.decide_accuracy(_ev(edge_f + 1e-9, se, df)) == "UNDETERMINED"
    assert S.decide_accuracy(_ev(0.2, se, df)) == "HOLDS"  # improving with N is not a degradation
    lo, hi = S.bounds(_ev(-0.02, se, df))
    assert lo == pytest.approx(-0.02 - t_h * se) and hi == pytest.approx(-0.02 + t_f * se)


def test_undefined_evidence_is_undetermined():
    assert S.decide_accuracy(_ev(math.nan, 0.01)) == "UNDETERMINED"
    assert S.decide_accuracy(_ev(-0.5, math.nan)) == "UNDETERMINED"
    assert S.decide_accuracy(_ev(-0.5, 0.0)) == "UNDETERMINED"  # no within-cell variation: nothing to infer
    assert S.decide_accuracy(_ev(-0.5, 0.01, df=0)) == "UNDETERMINED"
    assert S.decide_divergence(_ev(-0.5, 0.01)) == "FAILS" and S.decide_divergence(_ev(-0.09, 1e-4)) == "HOLDS"


def test_combine_is_a_conjunction_for_holds_and_a_union_for_fails():
    assert S.combine(["HOLDS"] * 4) == "HOLDS"
    assert S.combine(["HOLDS", "HOLDS", "UNDETERMINED", "HOLDS"]) == "UNDETERMINED"
    assert S.combine(["HOLDS", "FAILS", "UNDETERMINED", "HOLDS"]) == "FAILS"
    assert S.combine([]) == "UNDETERMINED"
    assert S.ALPHA_FAILS * S.K_HEADLINE == pytest.approx(FALSE_FAILS_TARGET)  # Bonferroni over the headline


def test_rules_are_registered_with_their_thresholds():
    names = {r.name for r in all_rules()}
    assert {"stability-trend", "divergence-trend"} <= names
    assert rule_named("stability-trend").thresholds["margin"] == S.MARGIN
    assert rule_named("divergence-trend").thresholds["margin"] == S.MARGIN_STABLE


def test_simulations_have_the_study_shape_and_the_designed_truth():
    shapes = set()
    ds = {"holds": [], "fails": []}
    for k in range(600):
        for truth, deltas in ds.items():
            ev = S.simulate_accuracy(truth, rng_for(9, "shape", truth, k))
            shapes.add((len(ev.N), ev.n[0]))
            assert len(set(ev.n)) == 1 and ev.df == sum(ev.n) - len(ev.N)
            deltas.append(ev.delta)
    assert {K for K, _ in shapes} == set(S.SIM_K) and {R for _, R in shapes} == set(S.SIM_R)
    # the estimator is unbiased for the designed Δ: mean over draws within 4 standard errors
    for truth, target in (("holds", -S.MARGIN), ("fails", -2 * S.MARGIN)):
        d = np.array(ds[truth])
        assert abs(d.mean() - target) < 4 * d.std(ddof=1) / math.sqrt(d.size)


@pytest.mark.slow  # 1 000 trials (~1 CPU-s each); by default tests/sapa/rules/test_base.py's
# test_calibration_meets_targets[stability-trend] and [divergence-trend] check the same targets at 400 trials
@pytest.mark.parametrize("rule", [S.STABILITY_TREND, S.DIVERGENCE_TREND], ids=lambda r: r.name)
def test_calibration_meets_targets(rule):
    c = calibrate(rule, trials=1000, seed=11)
    assert c.false_fails_rate <= _ceiling(FALSE_FAILS_TARGET, c.trials)
    assert c.false_holds_rate <= _ceiling(FALSE_HOLDS_TARGET, c.trials)


def test_accuracy_rule_has_power_and_holds_when_nothing_changes(monkeypatch):
    """Power exists where the seeds agree (gap sd 0.02); at the study's real per-seed spread (0.14, the calibrated
    design) it is ≈ 0.5 %: the rule then rarely says FAILS — stated in docs/verdicts.md, never hidden."""
    real = calibrate(S.STABILITY_TREND, trials=600, seed=12)
    assert S.SIM_SD == 0.14 and real.power < 0.05
    monkeypatch.setattr(S, "SIM_SD", 0.02)
    c = calibrate(S.STABILITY_TREND, trials=600, seed=12)
    assert c.power > 5 * max(c.false_fails_rate, 1 / c.trials)
    flat = [S.decide_accuracy(_flat(rng_for(13, "flat", k))) for k in range(300)]
    assert flat.count("HOLDS") / 300 > 0.5 and flat.count("FAILS") == 0


def _flat(rng):
    """Δ = 0, 5 N cells × 3 seeds, gap sd 0.02, no divergence: the study's design when x^p/√N works."""
    from sapa.empirics.training.study_analysis import gap_trend

    return gap_trend((32, 64, 128, 256, 512), [0.02 * rng.standard_normal(3) for _ in range(5)])


def _zeros(Ns, seeds, diverged=None, gaps=None):
    from sapa.empirics.training.study_analysis import gap_trend

    gaps = gaps if gaps is not None else [[0.0] * seeds for _ in Ns]
    return gap_trend(Ns, gaps, quantity="stable_fraction", diverged=diverged if diverged is not None else [0] * len(Ns))


def test_nothing_diverged_is_decided_by_the_zero_event_bound():
    """All-zero cells: HOLDS once the seeds make the bound tighter than the margin, UNDETERMINED before; for two cells
    the floor is −2·(1 − (α/2)^(1/R)) exactly."""
    R = S.zero_event_seeds(_zeros((64, 128), 3))
    assert R == math.ceil(math.log(S.ALPHA_HOLDS / 2) / math.log(1 - S.MARGIN_STABLE / 2))  # 72
    assert S.decide_divergence(_zeros((64, 128), R)) == "HOLDS"
    assert S.decide_divergence(_zeros((64, 128), R - 1)) == "UNDETERMINED"
    assert S.decide_divergence(_zeros((64, 128), 3)) == "UNDETERMINED"
    assert S.zero_event_floor(_zeros((64, 128), 3)) == pytest.approx(-2 * (1 - (S.ALPHA_HOLDS / 2) ** (1 / 3)))
    assert S.decide_accuracy(_zeros((64, 128), R)) == "UNDETERMINED"  # the accuracy reading has no such path


def test_the_zero_event_bound_is_only_for_zero_events():
    """Equal, non-zero shares (gaps 0 but the arm diverged) or an accuracy quantity take the t path."""
    assert not S.no_events(_zeros((64, 128), 80, diverged=[1, 0]))
    assert S.decide_divergence(_zeros((64, 128), 80, diverged=[1, 0])) == "UNDETERMINED"  # se = 0: no t bound
    assert S.no_events(_zeros((16, 32, 64), 5)) and not S.no_events(_zeros((16,), 5))


def test_the_zero_share_bound_holds_its_level_by_monte_carlo():
    """A seed's share is 0 with probability 1 − μ at worst (all-or-nothing seeds): R zeros happen with probability
    (1 − μ)^R, so at μ = the bound exactly, all-zero cells occur at rate α (4 000 draws, within 4 binomial sd)."""
    R, alpha = 6, 0.05
    mu = S.zero_share_bound(R, alpha)
    rng = np.random.default_rng(7)
    zero = (rng.random((4000, R)) >= mu).all(axis=1).mean()  # each seed diverges entirely with probability μ
    assert abs(zero - alpha) <= 4 * math.sqrt(alpha * (1 - alpha) / 4000)


def test_the_why_of_zero_events_names_the_seeds_that_would_decide():
    from sapa.prose.scale_keeps_training_stable_words import trend_why

    why = trend_why(_zeros((64, 128), 3))
    assert "no member of the arm or of softmax diverged" in why and "72 seeds per cell" in why
    assert f"Δ = {S.zero_event_floor(_zeros((64, 128), 3)):.2f}" in why
