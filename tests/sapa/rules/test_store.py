"""The stored calibrations the ledger cites are current (fingerprints) and equal a fresh calibration (slow)."""

from __future__ import annotations

import dataclasses

import pytest

from sapa.rules import all_rules, calibrate, cached_calibration
from sapa.rules.store import SEED, fingerprint, stored, write_store


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.name)
def test_every_rule_has_a_current_stored_calibration(rule):
    """Changing a rule (its module, thresholds, design or trials) requires `sapa calibrate --store`."""
    c = stored(rule)
    assert c is not None, f"calibration of {rule.name} is missing or stale: run `sapa calibrate --store`"
    assert c.rule == rule.name and c.seed == SEED and c.trials == rule.trials
    assert cached_calibration(rule.name) == c


@pytest.mark.slow
@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.name)
def test_stored_calibration_equals_a_fresh_one(rule):
    assert stored(rule) == calibrate(rule, seed=SEED)


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
