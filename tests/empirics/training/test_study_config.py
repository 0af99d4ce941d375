"""The study's design: the dose-response's second look — its doses, its chunks, and a config hash it leaves alone."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from sapa.common.validate import InputError
from sapa.empirics.training.study_config import (DOSE_ARMS, FULL, QUICK, StudyConfig, look2_chunks, look2_doses,
                                            plan_chunks)


@pytest.mark.parametrize("grid, R", [((1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0), 5), ((4.0, 16.0, 64.0), 2),
                                     ((64.0, 1.0, 3.0), 3)])
def test_second_look_doses_split_each_grid_step_into_log_equal_steps(grid, R):
    """Between neighbouring grid values (sorted), R − 1 doses at log-equal spacing: with the grid they form one
    log-equal ladder per step, and none repeats a grid value."""
    cfg = replace(QUICK, alphas=grid, look2_refine=R)
    new = np.array(look2_doses(cfg))
    g = np.sort(np.array(grid))
    assert new.size == (g.size - 1) * (R - 1)
    ladder = np.sort(np.concatenate([g, new]))
    for a, b in zip(g, g[1:]):
        step = np.diff(np.log(ladder[(ladder >= a) & (ladder <= b)]))
        np.testing.assert_allclose(step, np.log(b / a) / R, rtol=1e-12)
    assert not np.isclose(new[:, None], g[None, :], rtol=1e-9).any()
    assert look2_doses(replace(cfg, look2_refine=1)) == () and look2_doses(replace(cfg, look2_refine=0)) == ()


def test_second_look_chunks_cover_each_stratum_dose_and_seed_once():
    strata = [("text", 3, 1e-2), ("digits", 1, 3e-3), ("text", 3, 1e-2)]  # a repeat counts once
    chunks = look2_chunks(FULL, strata)
    members = [(c.task, c.N, m) for c in chunks for m in c.members]
    want = {(t, FULL.plan(t).Ns[0], DOSE_ARMS[p], c, lr, r) for t, p, lr in set(strata) for c in look2_doses(FULL)
            for r in range(FULL.seeds)}
    assert len(members) == len(want) == 2 * 28 * 3
    assert {(t, N, m.arm, m.alpha, m.lr, m.seed) for t, N, m in members} == want
    assert {c.look for c in chunks} == {2} and all(c.family == f"p{3 if c.task == 'text' else 1}" for c in chunks)
    for task in ("text", "digits"):  # 2·seeds chunks per stratum family, sizes within one of each other
        sizes = [len(c.members) for c in chunks if c.task == task]
        assert len(sizes) == 2 * FULL.seeds and max(sizes) - min(sizes) <= 1
    first = {c.file_name for t in FULL.tasks for c in plan_chunks(FULL, t, FULL.plan(t).Ns[0], None)}
    names = [c.file_name for c in chunks]
    assert len(set(names)) == len(names) and not first & set(names) and all("_look2_" in n for n in names)
    assert look2_chunks(FULL, []) == []


@pytest.mark.parametrize("stratum", [("text", 0, 1e-2), ("text", 3, 0.02), ("images", 3, 1e-2)])
def test_a_second_look_at_a_stratum_the_design_lacks_is_refused(stratum):
    with pytest.raises(InputError):
        look2_chunks(FULL, [stratum])


def test_the_config_hash_ignores_the_second_look_and_nothing_else():
    """The first look's chunks stay valid when the refinement changes (a second-look chunk is checked against its own
    members); any other field still changes the hash."""
    assert replace(FULL, look2_refine=0).hash() == replace(FULL, look2_refine=7).hash() == FULL.hash()
    assert replace(FULL, seeds=4).hash() != FULL.hash() and replace(FULL, alphas=(1.0, 4.0)).hash() != FULL.hash()


@pytest.mark.parametrize("bad", [-1, 2.0, True, "4"])
def test_a_bad_refinement_is_refused(bad):
    with pytest.raises(InputError, match="look2_refine"):
        replace(QUICK, look2_refine=bad)


def test_the_full_budget_takes_a_second_look_and_the_quick_one_does_not():
    assert FULL.look2_refine == 5 and QUICK.look2_refine == 0 and isinstance(FULL, StudyConfig)
    assert math.isclose(look2_doses(FULL)[0], 2 ** 0.2)
