"""Every docstring example in common/, theory/, empirics/, figures/ and sapa/, and every example of the Python API's
page docs/api.md, runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import time
from pathlib import Path

import pytest

PACKAGES = ("sapa.common", "sapa.theory", "sapa.empirics", "sapa.figures", "sapa")  # sapa's own walk skips the four


def _modules() -> list[str]:
    names = []
    for pkg in PACKAGES:
        mod = importlib.import_module(pkg)
        names.append(pkg)
        names += [m.name for m in pkgutil.walk_packages(mod.__path__, prefix=f"{pkg}.")]
    return sorted(set(names))


@pytest.fixture
def fresh_linecache(monkeypatch):
    """An empty source-line cache while doctest runs: its runner resets a debugger for every docstring, and bdb's reset
    stats every file linecache holds (~200 in a worker late in the suite: 6 · 10⁵ stats in all). Lines a traceback
    needs are read again on demand; the cache is put back after."""
    import linecache

    monkeypatch.setattr(linecache, "cache", {})


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name, fresh_linecache):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {name}"


DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize("page", ["api.md"])
def test_documentation_examples(page, fresh_linecache):
    """The page's ``>>>`` examples (each code block ends with a blank line) run, and fast: small sizes, fixed seeds."""
    t0 = time.perf_counter()
    result = doctest.testfile(str(DOCS / page), module_relative=False, verbose=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 20, f"only {result.attempted} examples found in docs/{page}"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in docs/{page}"
    assert time.perf_counter() - t0 < 30, "the examples of a documentation page run in seconds (10 s on a quiet machine)"
