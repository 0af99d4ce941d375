"""Tests for `sapa/claim_ids.py`: the light id registry equals the ids of the claims the ledger builds."""

from __future__ import annotations

from sapa.claim_ids import ORDER


def test_registry_is_the_ledger_order():
    """Every built claim is in the registry exactly once, and the ledger lists them in the registry's order."""
    import importlib
    import pkgutil

    import sapa.claims
    from sapa.claims import all_claims

    modules = [importlib.import_module(f"sapa.claims.{m.name}") for m in pkgutil.iter_modules(sapa.claims.__path__)]
    built = [c.id for m in modules  # every entry module of the package: its CLAIM (or the older CLAIMS list)
             for c in ([m.CLAIM] if hasattr(m, "CLAIM") else getattr(m, "CLAIMS", []))]
    assert len(ORDER) == len(set(ORDER))
    assert sorted(built) == sorted(ORDER)
    assert [c.id for c in all_claims()] == ORDER


def test_verify_help_lists_every_id(capsys, monkeypatch):
    """``sapa verify --help`` names every id ``--only`` accepts."""
    import pytest

    from sapa.cli import main

    monkeypatch.setenv("COLUMNS", "2000")  # argparse wraps help at hyphens: one line keeps each id whole

    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for cid in ORDER:
        assert cid in out
