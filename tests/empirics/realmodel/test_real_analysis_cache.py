"""Mutation-testing additions for the real-model cache reader (`empirics/realmodel/real_analysis.py` ``_cached``):
a missing cache is silent, a dangling link and an unreadable file warn once, the warning's reason is cut at 200
characters.

Each test names the mutants of ``tools/mutation_sample.py`` (line, change) it kills. No analysis runs: the caches
are hand-made files, and the expected texts are built from Python's own errors, not by the module."""

from __future__ import annotations

from sapa.empirics.realmodel.real_analysis import _cached


def test_a_missing_cache_is_none_without_a_warning(tmp_path, capsys):
    """Kills real_analysis.py line 345 ``not cache.exists() and not cache.is_symlink()`` with the second ``not``
    dropped (a missing file would be read, and its "file not found" reported as a corrupt cache)."""
    assert _cached(tmp_path / "real_heads_none.json") is None
    assert capsys.readouterr().err == ""


def test_a_dangling_link_is_reported_once(tmp_path, capsys):
    """A link to nothing is not a missing cache: it is read, refused and reported in one line (the same mutant)."""
    link = tmp_path / "real_heads_link.json"
    link.symlink_to(tmp_path / "gone.json")
    assert _cached(link) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "file not found" in err and str(link) in err


def test_the_reason_of_an_unreadable_cache_is_cut_at_200_characters(tmp_path, capsys):
    """Kills line 355 ``[:200]`` → ``[:201]``: a file that is not UTF-8 under a long name, whose reason is longer."""
    cache = tmp_path / ("real_heads_" + "n" * 150 + ".json")
    cache.write_bytes(b"\xff{}")
    try:
        b"\xff".decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"real-model cache: {cache} is not UTF-8 text ({exc.reason} at byte 0)"
    assert len(reason) > 201
    assert _cached(cache) is None
    err = capsys.readouterr().err
    assert err == f"sapa: warning: {cache}: unreadable ({reason[:200]}); recomputing it\n"
