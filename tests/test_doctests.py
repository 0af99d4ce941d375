"""Every docstring example in common/, theory/, empirics/, figures/ and sapa/ runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("common", "theory", "empirics", "figures", "sapa")


def _modules() -> list[str]:
    names = []
    for pkg in PACKAGES:
        mod = importlib.import_module(pkg)
        names.append(pkg)
        names += [m.name for m in pkgutil.walk_packages(mod.__path__, prefix=f"{pkg}.")]
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {name}"
