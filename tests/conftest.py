"""Shared fixtures of the test suite."""

from __future__ import annotations

import socket

import pytest

import empirics  # noqa: F401  (pins CPU kernel dispatch before any test module imports torch)


@pytest.fixture
def no_network(monkeypatch):
    """Offline hub variables, and any socket connection raises (tests of the shipped real model)."""
    from empirics import real

    for k, v in real.OFFLINE_ENV.items():
        monkeypatch.setenv(k, v)

    def refuse(*args, **kwargs):
        raise OSError("network access attempted in a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
