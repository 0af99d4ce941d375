"""Tests for `empirics/training/mechanism_data.py`: each task's targets from its definition, by brute force."""

import pytest
import torch

from sapa.common.validate import InputError
from sapa.empirics.training import mechanism_data as MD


def _gen(s=0):
    g = torch.Generator()
    g.manual_seed(s)
    return g


@pytest.mark.parametrize("task, N, k", [("copy1", 12, 1), ("copy2", 12, 2), ("copy_far", 12, 6), ("copy_far", 9, 4)])
def test_copy_targets_are_the_token_k_back(task, N, k):
    x, y = MD.batch(task, 5, N, 7, _gen())
    for b in range(5):
        for t in range(N):
            assert y[b, t].item() == (x[b, t - k].item() if t >= k else MD.IGNORE)


def test_induction_target_follows_the_earlier_trigger():
    V, N = 9, 20
    x, y = MD.batch("induction", 50, N, V, _gen(1))
    for b in range(50):
        trig = [t for t in range(N - 1) if x[b, t] == V - 1]
        assert len(trig) == 1 and x[b, N - 1] == V - 1  # one earlier trigger, and the query trigger last
        assert y[b, N - 1] == x[b, trig[0] + 1] and (y[b, :N - 1] == MD.IGNORE).all()


def test_mqar_pairs_then_each_key_queried_once_with_its_value():
    V, N, D = 16, 40, MD.MQAR_PAIRS
    x, y = MD.batch("mqar", 30, N, V, _gen(2))
    for b in range(30):
        keys, vals = x[b, 0:2 * D:2].tolist(), x[b, 1:2 * D:2].tolist()
        assert len(set(keys)) == D and all(1 <= k < V // 2 for k in keys)
        assert len(set(vals)) == D and all(V // 2 <= v < V for v in vals)
        q = [t for t in range(N) if y[b, t] != MD.IGNORE]
        assert len(q) == D and all(t >= 2 * D and (t - 2 * D) % 2 == 0 for t in q)
        assert sorted(x[b, t].item() for t in q) == sorted(keys)
        for t in q:
            assert y[b, t].item() == vals[keys.index(x[b, t].item())]


def test_mqar_gaps_follow_the_power_law():
    # P(g) ∝ g^(a−1), a = 0.01: the first gap slot is much likelier than the last (Zoology's short-gap bias)
    x, y = MD.batch("mqar", 4000, 64, 16, _gen(3))
    pos = (y != MD.IGNORE).nonzero()[:, 1]
    g = (pos - 2 * MD.MQAR_PAIRS) // 2
    assert (g == 0).float().mean() > (g == g.max()).float().mean() * 1.5


def test_bad_sizes_are_one_input_error():
    with pytest.raises(InputError):
        MD.batch("mqar", 2, 8, 16, _gen())
    with pytest.raises(InputError):
        MD.batch("copy2", 2, 2, 16, _gen())
    with pytest.raises(InputError):
        MD.batch("sorting", 2, 8, 16, _gen())


def test_induction_lag_targets_follow_the_tokens_one_earlier_occurrence_at_a_random_lag():
    N, V = 16, 64
    x, y = MD.batch("induction_lag", 300, N, V, _gen(2))
    lags = []
    for b in range(300):
        scored = [t for t in range(N) if y[b, t] != MD.IGNORE]
        assert len(scored) == N // 4 - 1
        for t in scored:
            earlier = [k for k in range(t) if x[b, k] == x[b, t]]
            assert len(earlier) == 1 and y[b, t] == x[b, earlier[0] + 1]  # found by content, its successor copied
        lags.append(scored[0] - [k for k in range(scored[0]) if x[b, k] == x[b, scored[0]]][0])
    share = max(lags.count(v) for v in set(lags)) / len(lags)
    assert len(set(lags)) >= 6 and share < 0.2  # no single lag (position) solves it


def test_induction_lag_needs_distinct_tokens():
    with pytest.raises(InputError, match="V ≥ N"):
        MD.batch("induction_lag", 2, 32, 16, _gen())
