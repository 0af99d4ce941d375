"""Tests for `sapa/claims/causal_masking.py`: under a causal mask x^p/√N stays O(√N) as a whole (exact), but its
rows grow like √i; 1/√i makes them uniform.

The headline reading (the whole masked matrix) is checked against E‖·‖² = c²[N(N−1)/2·m_off + N·m_diag] built from
``sapa.theory.moments.exact_moments`` directly. Small sizes in the default run (one reading is left open there); the quick
budget's own sizes under ``-m slow`` (every reading decided).
"""

from __future__ import annotations

import json
import math

import pytest

from sapa.budget import budget_named
from sapa.claims import causal_masking as entry
from sapa.ledger import Context, reading_keyed, run_claim
from sapa.theory.moments import exact_moments

SMALL = {"Ns": (64, 128), "trials": (4, 4), "max_trials": 64, "N_train": 32, "transfer_trials": 2,
         "transfer_max_trials": 16}
EXPECTED = {"small": "UNDETERMINED", "quick": "ANSWERED"}


@pytest.fixture(scope="module", params=["small", pytest.param("quick", marks=pytest.mark.slow)])
def run(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("ledger")
    ctx = Context(budget_named("quick", seed=0), out)
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "small":
            mp.setattr(entry, "causal_config", lambda ctx: SMALL)
        return request.param, out, run_claim(entry.CLAIM, ctx), ctx


def _masked_exponent(p: int, Ns) -> float:
    """Exponent of √E‖x^p/√N‖² of the causally masked matrix over Ns (iid, D = d = 64), from exact_moments' m_off and
    m_diag: E‖S^{∘p}‖² under the mask = N(N−1)/2·m_off + N·m_diag."""
    e = exact_moments(p, "iid", 2, 64, 64, sigma=1 / 8)
    f = [(n * (n - 1) / 2 * float(e.m_off) + n * float(e.m_diag)) / n for n in Ns]
    return 0.5 * math.log(f[-1] / f[0]) / math.log(Ns[-1] / Ns[0])


def test_the_whole_masked_matrix_stays_o_sqrt_n_as_exact_moments_say(run):
    budget, out, e, _ = run
    assert e.kind == "question" and e.answer and e.verdict == EXPECTED[budget]
    head = reading_keyed(e.readings, "whole-matrix")
    assert head["rule"] == "growth-upper-exact" and head["verdict"] == "HOLDS"
    Ns = list(SMALL["Ns"] if budget == "small" else entry.causal_config(run[3])["Ns"])
    for p in (1, 3):
        assert e.evidence["whole_matrix_under_mask"][f"iid/p{p}"]["exponent_on_grid"] == pytest.approx(
            _masked_exponent(p, Ns), abs=1e-9)
        assert e.evidence["whole_matrix_under_mask"][f"iid/p{p}"]["sup_local_exponent"] <= 0.5 + 1e-12


def test_rows_grow_like_sqrt_i_under_one_global_scale(run):
    budget, out, e, _ = run
    assert reading_keyed(e.readings, "rows", "inv_sqrt_n", "bound")["verdict"] == "FAILS"
    n_max = max(int(k.split("/")[0][1:]) for k in e.evidence["profile_exponents"])
    prof = e.evidence["profile_exponents"][f"N{n_max}/p1"]
    assert prof["inv_sqrt_n/bound"]["exact_slope"] == pytest.approx(0.5, abs=0.01)  # rows ∝ √i: exact
    assert e.evidence["exact_per_model"]["tied/p3"]["per_row_flat_from_row"] > 10_000
    ctrl = e.falsifiability["negative_control"]
    assert ctrl["verdict"] == "FAILS" and ctrl["control_ok"]  # c_i = 1/i: rows fall like i^(−½), not uniform
    assert all((out / f).is_file() for f in e.figures) and len(e.figures) == 2
    json.dumps(e.evidence)
