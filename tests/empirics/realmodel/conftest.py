"""Fixtures shared by the real-model tests: one torch thread, the optional extras, MiniLM's weights and tokenizer."""

from __future__ import annotations

import pytest

from sapa.empirics.realmodel import real


@pytest.fixture(scope="module")
def real_one_thread():
    """The module's own policy (see ``real.single_thread``): small products, 2 shared cores."""
    with real.single_thread():
        yield


@pytest.fixture(scope="module")
def real_extras():
    """Skip where the optional real-model packages (``real.REQUIRED_MODULES``) are missing."""
    for m in real.REQUIRED_MODULES:
        pytest.importorskip(m)


@pytest.fixture(scope="module")
def weights(real_extras):
    return real.load_weights()


@pytest.fixture(scope="module")
def tok(real_extras):
    return real.load_tokenizer()
