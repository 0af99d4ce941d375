"""Tests for `empirics/timing/cost_model.py`: its flop counts equal torch's FlopCounterMode on the timed functions;
the machine's rates are measured positive and finite."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import sapa.empirics.timing.overhead as ov
from sapa.empirics.timing import cost_model
from sapa.empirics.timing.cost_model import Rates, counts, predicted_ratio, predicted_seconds


def _counted(fn, N: int, d: int, backward: bool) -> int:
    Q, K, V = (torch.randn(1, 1, N, d, requires_grad=backward) for _ in range(3))
    with FlopCounterMode(display=False) as c:
        out = fn(Q, K, V, torch.ones(N))
        if backward:
            out.sum().backward()
    return c.get_total_flops()


@pytest.mark.parametrize("N, block", [(64, 16), (100, 32), (128, 128)])
@pytest.mark.parametrize("p", [1, 3])
@pytest.mark.parametrize("backward", [False, True])
def test_matmul_flops_of_the_naive_and_the_blocked_forms(N, block, p, backward):
    d, pas = 8, "fwd+bwd" if backward else "fwd"
    assert counts("naive", N, d, p, False, pas)["flops"] == _counted(ov._naive_fn(p, False), N, d, backward)
    assert counts("naive", N, d, p, True, pas)["flops"] == _counted(ov._naive_fn(p, True), N, d, backward)
    assert counts("causal_blocked", N, d, p, True, pas, block)["flops"] == _counted(ov._blocked_fn(p, block), N, d,
                                                                                    backward)


def test_the_blocked_form_does_about_half_the_work_and_the_model_says_so():
    r = Rates(matmul=1e11, elementwise=1e10, bandwidth=1e10, exp_cost=3.0)
    full, half = counts("naive", 1024, 64, 3, True, "fwd"), counts("causal_blocked", 1024, 64, 3, True, "fwd", 128)
    assert half["flops"] / full["flops"] == pytest.approx((1024 + 128) / (2 * 1024))
    assert predicted_seconds(half, r) < predicted_seconds(full, r)
    assert predicted_ratio("causal_blocked", 1024, 64, 3, True, "fwd", r) < predicted_ratio("naive", 1024, 64, 3, True,
                                                                                             "fwd", r)
    with pytest.raises(ValueError, match="no cost model"):
        counts("compiled", 8, 8, 1, False, "fwd")


def test_machine_rates_are_measured_afresh_positive_and_finite():
    """The rates the overhead runs record (the tests' session fixture keeps one measurement per worker: here the
    function itself runs, with short blocks)."""
    import math

    measure = getattr(cost_model.machine_rates, "__wrapped__", cost_model.machine_rates)
    r = measure(seed=1, min_s=0.005)
    assert all(math.isfinite(v) for v in (r.matmul, r.elementwise, r.bandwidth, r.exp_cost))
    # in the units the model divides by, within what one thread of any CPU reaches (a unit slip is 10³ off or more)
    assert 1e8 < r.matmul < 1e13  # flop/s
    assert 1e7 < r.elementwise < 1e12  # float32 multiplies/s
    assert 1e8 < r.bandwidth < 1e12  # bytes/s
    assert 1.0 <= r.exp_cost < 100.0  # an exp in multiplies (at least one: clamped)
