"""Tests for `common/safepath.py`: names from files are plain, written paths stay inside their folder."""

from __future__ import annotations

import pytest

from sapa.common.safepath import inside, plain_name
from sapa.common.validate import InputError


@pytest.mark.parametrize("name", ["norm_vs_n_D64_trials200", "overhead_d8_N16-32_threads1", "a.b", "x=1,y@2+3"])
def test_plain_names_pass(name):
    assert plain_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "/abs", ".hidden", "a..b", "x\0y", "a\\b", "é", "ab\n",
                                  "x" * 201, 3, None, "a\nb"])
def test_other_names_are_refused(name):
    with pytest.raises(InputError, match="not a plain file name"):
        plain_name(name)


def test_inside_resolves_links(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "up").symlink_to(tmp_path)
    assert inside(tmp_path / "out" / "f.png", tmp_path / "out") == tmp_path / "out" / "f.png"
    for bad in (tmp_path / "out" / ".." / "f.png", tmp_path / "out" / "up" / "f.png", tmp_path / "f.png"):
        with pytest.raises(InputError, match="outside"):
            inside(bad, tmp_path / "out")
