"""rng = default_rng(SeedSequence(seed, spawn_key = sha256(canonical JSON of key))): every random stream of sapa.

The one place a random stream is derived (``tests/test_seeds.py`` checks that no other module seeds a
generator). A stream is a pure function of an explicit ``seed`` and a plain-JSON ``key`` naming what it
is for, so it is the same in any process, on any worker and in any order: :func:`rng_for` gives a numpy
generator, :func:`torch_gen_for` its CPU torch counterpart, :func:`trial_generator` one trial of a
Monte Carlo cell. :func:`stable_hash` (sha256 of canonical JSON) also keys stored results.
"""

from __future__ import annotations

import hashlib
import json
from typing import Sequence

import numpy as np
import torch

from sapa.common.validate import InputError

__all__ = ["canonical_json", "stable_hash", "spawn_key", "seed_sequence", "rng_for", "torch_gen_for",
           "torch_generator", "trial_generator", "trial_generators"]


def canonical_json(obj: object) -> str:
    """Canonical JSON text of ``obj``: sorted keys, no spaces, tuples as lists, no NaN."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def stable_hash(obj: object) -> str:
    """sha256(canonical_json(obj)) as 64 hex digits; independent of process and ``PYTHONHASHSEED``."""
    try:
        text = canonical_json(obj)
    except (TypeError, ValueError) as exc:  # NaN, or not JSON (an object, a set, ...)
        raise InputError(f"key must be plain JSON without NaN/inf ({' '.join(str(exc).split())})") from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def spawn_key(obj: object) -> tuple[int, ...]:
    """The 256-bit :func:`stable_hash` of ``obj`` as eight uint32 words (a SeedSequence spawn key)."""
    h = stable_hash(obj)
    return tuple(int(h[i : i + 8], 16) for i in range(0, 64, 8))


def seed_sequence(seed: int, key: object, trial: int | None = None) -> np.random.SeedSequence:
    """``SeedSequence(entropy=seed, spawn_key=spawn_key(key) [+ (trial,)])``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    if trial is not None and (isinstance(trial, bool) or not isinstance(trial, (int, np.integer)) or trial < 0):
        raise InputError(f"trial must be a non-negative integer, got {trial!r}")
    sk = spawn_key(key) + (() if trial is None else (int(trial),))
    return np.random.SeedSequence(entropy=int(seed), spawn_key=sk)


def rng_for(seed: int, *key: object) -> np.random.Generator:
    """``default_rng(SeedSequence(seed, spawn_key=sha256(key)))``: the one way sapa derives a named stream.

    The same ``(seed, *key)`` gives the same stream in any process, on any worker, in any order.
    """
    return np.random.default_rng(seed_sequence(seed, list(key)))


def torch_gen_for(seed: int, *key: object) -> torch.Generator:
    """CPU ``torch.Generator`` of the named stream ``(seed, *key)``: the torch counterpart of :func:`rng_for`.

    Built from the same ``SeedSequence(seed, spawn_key=sha256(key))``, so ``rng_for`` and
    ``torch_gen_for`` of one key are two views of one derivation (not the same numbers).
    """
    return torch_generator(seed_sequence(seed, list(key)))


def torch_generator(ss: np.random.SeedSequence) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with 64 bits drawn from ``ss``."""
    g = torch.Generator(device="cpu")
    g.manual_seed(int(ss.generate_state(1, dtype=np.uint64)[0]))
    return g


def trial_generator(seed: int, key: object, trial: int | None = None) -> torch.Generator:
    """Generator for one trial of cell ``key``: a pure function of ``(seed, key, trial)``."""
    return torch_generator(seed_sequence(seed, key, trial))


def trial_generators(seed: int, key: object, trials: Sequence[int]) -> list[torch.Generator]:
    """One :func:`trial_generator` per trial index in ``trials``."""
    return [trial_generator(seed, key, t) for t in trials]
