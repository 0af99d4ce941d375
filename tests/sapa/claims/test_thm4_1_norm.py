"""Tests for `sapa/claims/thm4_1_norm.py`: ‖softmax(S)‖_F ≤ √N HOLDS, checked against numpy's own softmax.

The entry runs once per session through ``sapa verify --only thm4.1-norm thm4.1-jacobian`` (the ``softmax_verify``
fixture of tests/conftest.py, quick budget, seed 0).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sapa.ledger import reading_keyed
from sapa.rules.bound import BoundEvidence
from sapa.rules.bound import decide as decide_bound


@pytest.fixture(scope="module")
def entry(softmax_verify):
    from sapa.commands.ledger_merge import ledger_entries

    code, _, err, _, ledger = softmax_verify
    assert code == 0, err
    return next(e for e in ledger_entries(ledger) if e.id == "thm4.1-norm")


def _numpy_softmax_ratio(S: np.ndarray) -> float:
    """‖softmax(S)‖_F/√N by numpy alone (rows shifted by their maximum), independent of sapa's searches."""
    P = np.exp(S - S.max(axis=1, keepdims=True))  # (N, N)
    P /= P.sum(axis=1, keepdims=True)
    return float(np.linalg.norm(P) / math.sqrt(S.shape[0]))


def test_the_bound_holds_and_is_approached_as_numpy_computes_it(entry):
    assert entry.verdict == "HOLDS"  # the headline on the quick budget: the √N bound holds and is sharp
    assert reading_keyed(entry.readings, "for-all-S")["verdict"] == "HOLDS"
    ev = entry.evidence
    assert ev["fro_sup_over_sqrtN"] == 1.0 and ev["max_observed_ratio"] <= 1 + 1e-12
    # independent: numpy's softmax on random logits stays below √N, and rows with a gap of 700 reach it
    rng = np.random.default_rng(11)
    assert max(_numpy_softmax_ratio(rng.standard_normal((n, n)) * t) for n in (4, 16) for t in (1e-3, 1, 1e3)) <= 1
    gap = np.zeros((8, 8)) - 700.0
    np.fill_diagonal(gap, 0.0)
    assert ev["supremum_approached_ratio"] == pytest.approx(_numpy_softmax_ratio(gap), abs=1e-9)
    assert entry.verdict == decide_bound(BoundEvidence(1.0, ev["fro_sup_over_sqrtN"],
                                                       max(ev["max_observed_ratio"], ev["supremum_approached_ratio"])))


def test_the_negative_control_fails_and_the_entry_is_exact(entry):
    ctrl = entry.falsifiability["negative_control"]
    assert entry.falsifiability["kind"] == "by_construction" and ctrl["verdict"] == "FAILS" and ctrl["control_ok"]
    r = entry.readings[0]
    assert r["calibration"]["exact"] and r["calibration"]["note"] == "exact: no sampling error"
    assert r["calibration"]["false_fails_rate"] is None
    assert r["calibration"]["decision_logic_check"]["false_fails_rate"] <= 0.01
    assert entry.contract["logit_scale"] == "S" and isinstance(entry.robustness["stable"], bool)
