"""Tests for `common/seeds.py`: a random stream is a pure function of (seed, key[, trial])."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sapa.common.seeds import rng_for, seed_sequence, spawn_key, stable_hash, torch_gen_for, trial_generator
from sapa.common.validate import InputError


def test_stable_hash_is_canonical():
    assert stable_hash({"a": 1, "b": [1, 2]}) == stable_hash({"b": (1, 2), "a": 1})
    assert stable_hash({"a": 1}) != stable_hash({"a": 2})
    # a fixed reference: sha256 of '{"a":1}'
    assert stable_hash({"a": 1}) == "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"
    assert len(spawn_key({"a": 1})) == 8 and all(0 <= k < 2**32 for k in spawn_key({"a": 1}))


def test_torch_gen_for_is_a_pure_function_of_seed_and_key():
    draw = lambda g: torch.randn(6, generator=g, dtype=torch.float64)  # noqa: E731
    a = draw(torch_gen_for(5, "lipschitz", 3))
    assert torch.equal(a, draw(torch_gen_for(5, "lipschitz", 3)))
    for other in (torch_gen_for(6, "lipschitz", 3), torch_gen_for(5, "lipschitz", 4),
                  torch_gen_for(5, "lipschitz")):
        assert not torch.equal(a, draw(other))
    # the same SeedSequence as rng_for: its first 64-bit word seeds the generator
    ss = seed_sequence(5, ["lipschitz", 3])
    assert torch_gen_for(5, "lipschitz", 3).initial_seed() == int(ss.generate_state(1, dtype=np.uint64)[0])
    with pytest.raises(InputError, match="seed"):
        torch_gen_for(-1, "k")


def test_trial_generator_depends_only_on_seed_key_trial():
    a = torch.randn(5, generator=trial_generator(3, {"cell": 1}, 7), dtype=torch.float64)
    b = torch.randn(5, generator=trial_generator(3, {"cell": 1}, 7), dtype=torch.float64)
    assert torch.equal(a, b)
    for other in (trial_generator(4, {"cell": 1}, 7), trial_generator(3, {"cell": 2}, 7), trial_generator(3, {"cell": 1}, 8)):
        assert not torch.equal(a, torch.randn(5, generator=other, dtype=torch.float64))
    with pytest.raises(InputError, match="seed"):
        trial_generator(-1, {"cell": 1})


def test_rng_for_and_torch_gen_for_are_two_views_of_one_seed_sequence():
    a = rng_for(7, "cell", 2).standard_normal(4)
    assert np.array_equal(a, np.random.default_rng(seed_sequence(7, ["cell", 2])).standard_normal(4))
    assert not np.array_equal(a, rng_for(7, "cell", 3).standard_normal(4))
