"""Tests for `sapa/rules/calibration_store.py`: the stored calibrations the ledger cites are current (fingerprints of what each
rule computes) and agree with a fresh calibration at another seed within their Monte Carlo error (slow)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from sapa.rules import all_rules, calibrate, cached_calibration
from sapa.rules.calibration_store import SEED, fingerprint, stored, write_store


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.name)
def test_every_rule_has_a_current_stored_calibration(rule):
    """Changing a rule (its module, thresholds, design or trials) requires `sapa calibrate --store`."""
    c = stored(rule)
    assert c is not None, f"calibration of {rule.name} is missing or stale: run `sapa calibrate --store`"
    assert c.rule == rule.name and c.seed == SEED and c.trials == rule.trials
    assert cached_calibration(rule.name) == c


@pytest.mark.slow
@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.name)
def test_stored_rates_agree_with_a_fresh_calibration_within_monte_carlo_error(rule):
    # A fresh seed, so the check is of the rates, not of a replay: each rate is a binomial proportion of
    # n = rule.trials synthetic evidences; two independent estimates differ by at most 4 standard errors of
    # the difference (√(2 p̄(1−p̄)/n), with p̄ floored at 1/n so that a rate of 0 is checked too).
    stored_c, fresh = stored(rule), calibrate(rule, seed=SEED + 1)
    n = rule.trials
    for field in ("false_fails_rate", "false_holds_rate", "power", "undetermined_rate_null"):
        a, b = getattr(stored_c, field), getattr(fresh, field)
        p = max((a + b) / 2, 1 / n)
        assert abs(a - b) <= 4 * math.sqrt(2 * p * (1 - p) / n) + 1e-12, (field, a, b)


def test_the_fingerprint_follows_what_the_rule_computes_not_its_text(monkeypatch):
    import sapa.empirics.montecarlo.stats as st
    from sapa.rules import growth
    from sapa.rules.calibration_store import fingerprint

    rule = next(r for r in all_rules() if r.name == "growth-upper")
    same = dataclasses.replace(rule, decide=lambda ev: rule.decide(ev))  # other code, same behaviour
    assert fingerprint(same) == fingerprint(rule)
    true_fit = st.rms_exponent_interval

    def biased(N, sq, level):  # a dependency of the rule computes something else (the − v/2 mutant's size)
        f = true_fit(N, sq, level=level)
        return dataclasses.replace(f, estimate=f.estimate + 0.003, lo=f.lo + 0.003, hi=f.hi + 0.003)

    monkeypatch.setattr(st, "rms_exponent_interval", biased)
    changed = dataclasses.replace(rule, simulate=lambda truth, rng: growth.simulate_upper(truth, rng))
    assert fingerprint(changed) != fingerprint(rule)


def test_another_optimiser_path_or_library_release_keeps_the_fingerprint_current(monkeypatch):
    """What moved between numpy 2.2.6 / scipy 1.15.3 and 2.4.6 / 1.17.1 (≤ 6·10⁻⁹ relative, the censored trend's fits
    and numerical Hessian) is far inside the tolerance: here every L-BFGS-B fit of the slowdown rules starts 10⁻⁶
    away (an optimiser that takes another path, as another release or BLAS build may), which moves their numbers
    by up to ~10⁻⁸ (measured: 3.5·10⁻⁸), and the stored calibration is still current; the old 9-digit hash was not."""
    import numpy as np
    from scipy import optimize

    from sapa.rules import calibration_store as store

    rules = [r for r in all_rules() if r.name.startswith("slowdown-")]
    before = {r.name: fingerprint(r) for r in rules}
    minimize = optimize.minimize
    monkeypatch.setattr(optimize, "minimize", lambda f, x0, *a, **k: minimize(f, np.asarray(x0) * (1 + 1e-6) + 1e-6,
                                                                               *a, **k))
    for rule in rules:
        moved = store._fingerprint(rule)  # not the cached one
        assert moved.numbers != before[rule.name].numbers  # the numbers did move ...
        assert moved == before[rule.name]  # ... within the tolerance
        e = store._read()[rule.name]
        assert store.Fingerprint.from_json(e) == moved


def test_the_tolerance_is_far_above_round_off_and_far_below_a_change():
    from sapa.rules.calibration_store import ATOL, RTOL, Fingerprint

    fp = fingerprint(next(r for r in all_rules() if r.name == "growth-upper"))
    assert Fingerprint.from_json(fp.as_json()) == fp  # stored to 8 digits: within the tolerance
    assert Fingerprint(fp.digest, tuple(x * (1 + RTOL / 30) for x in fp.numbers)) == fp  # 30× the round-off seen
    for k in range(len(fp.numbers)):  # any one number moved by 2 tolerances is a change
        x = fp.numbers[k]
        moved = fp.numbers[:k] + (x + 2 * (RTOL * abs(x) + ATOL) + 1e-12,) + fp.numbers[k + 1:]
        assert Fingerprint(fp.digest, moved) != fp
    assert Fingerprint("0" * 64, fp.numbers) != fp


def test_a_stale_or_foreign_entry_is_not_used(tmp_path):
    rule = all_rules()[0]
    c = calibrate(rule, trials=rule.trials, seed=SEED) if rule.trials <= 50 else dataclasses.replace(
        stored(rule) or calibrate(rule, seed=SEED))
    path = tmp_path / "cal.json"
    write_store([(rule, c)], path)
    assert stored(rule, path) == c
    other = dataclasses.replace(rule, thresholds={**rule.thresholds, "new": 1})
    assert fingerprint(other) != fingerprint(rule) and stored(other, path) is None
    with pytest.raises(ValueError):
        write_store([(rule, dataclasses.replace(c, seed=SEED + 1))], path)


def test_calibrate_counts_each_verdict_where_it_belongs():
    # A rule whose verdicts are known in advance: under "holds" every 4th is FAILS, every 4th + 1 UNDETERMINED;
    # under "fails" every 2nd is HOLDS. With n = 8: false FAILS 2/8, undetermined 2/8, false HOLDS 4/8, power 4/8.
    from sapa.rules.base import Rule

    def simulate(truth, rng):
        simulate.k[truth] = simulate.k.get(truth, -1) + 1
        return truth, simulate.k[truth]

    simulate.k = {}

    def decide(ev):
        truth, k = ev
        if truth == "holds":
            return {0: "FAILS", 1: "UNDETERMINED"}.get(k % 4, "HOLDS")
        return "HOLDS" if k % 2 else "FAILS"

    rule = Rule(name="known", summary="", thresholds={}, decide=decide, simulate=simulate, design={}, trials=8)
    c = calibrate(rule, trials=8, seed=0)
    assert (c.false_fails_rate, c.undetermined_rate_null, c.false_holds_rate, c.power) == (0.25, 0.25, 0.5, 0.5)
