"""Tests for `empirics/training/evidence_pack.py`: a study exported, sealed and read back is the same study; the three
training entries judge it exactly as they judge the study's own folder; a changed, missing or extra file is refused
with one line before anything is read (issue 51.4)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pandas as pd
import pytest

from sapa.common.validate import InputError
from sapa.empirics.training import evidence_pack as EP
from sapa.empirics.training import mechanism as M
from sapa.empirics.training import train_study as ts

CFG = replace(ts.TINY, name="quick", tasks=("digits",), digits=replace(ts.TINY.digits, steps=3))
TRAINED = ("scale-keeps-training-stable", "norm-vs-accuracy", "mechanism-across-n")


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("evidence")
    study = root / "train"
    ts.run_study(CFG, study, workers=1, progress=False, mechanism=replace(M.MECH_TINY, probes=(M.Probe("copy1", (16,), 4, 2),)), design={"levels": {"fails": 0.01}})
    man = EP.export(study, root / "shipped" / "quick")
    return root, man


def test_a_pack_reads_back_as_the_study_it_was_exported_from(packed):
    root, man = packed
    orig, got = ts.load_study(root / "train"), EP.load(root / "shipped" / "quick")
    pd.testing.assert_frame_equal(got.runs, orig.runs)
    pd.testing.assert_frame_equal(got.history, orig.history)
    assert got.mechanism == orig.mechanism and got.config == orig.config
    assert got.provenance["design"] == orig.provenance["design"] and got.provenance["design"]["fixed_first"]
    assert got.provenance["evidence"]["manifest_sha256"] == man["sha256"]
    assert set(man["files"]) == {"runs.parquet", "history.parquet", "study.json", "mechanism.json.gz", "design.json"}
    assert man["seed"] == 0 and man["budget"] == "quick" and man["config_hash"] == CFG.hash()


def _copy(packed, tmp_path):
    import shutil

    root, _ = packed
    shutil.copytree(root / "shipped" / "quick", tmp_path / "quick")
    return tmp_path / "quick"


@pytest.mark.parametrize("damage", ["a byte of a table", "a number in a record", "a file gone", "a file added",
                                    "the manifest's list"])
def test_a_changed_pack_is_refused_with_one_line_before_it_is_read(packed, tmp_path, damage):
    d = _copy(packed, tmp_path)
    if damage == "a byte of a table":
        b = bytearray((d / "runs.parquet").read_bytes())
        b[len(b) // 2] ^= 0x01
        (d / "runs.parquet").write_bytes(bytes(b))
    elif damage == "a number in a record":
        rec = json.loads((d / "study.json").read_text())
        rec["members"] += 1
        (d / "study.json").write_text(json.dumps(rec))
    elif damage == "a file gone":
        (d / "history.parquet").unlink()
    elif damage == "a file added":
        (d / "extra.parquet").write_bytes(b"x")
    else:
        man = json.loads((d / "evidence.json").read_text())
        man["files"].pop("mechanism.json.gz")
        (d / "evidence.json").write_text(json.dumps(man))
    with pytest.raises(InputError) as e:
        EP.load(d)
    msg = str(e.value)
    assert msg.startswith("shipped training evidence refused: ") and "\n" not in msg


def test_verify_reads_a_shipped_pack_of_its_budget_instead_of_training(packed, tmp_path, monkeypatch, capsys):
    from sapa.budget import budget_named
    from sapa.evidence import training_study as TS
    from sapa.ledger import Context

    root, _ = packed
    monkeypatch.setattr(EP, "SHIPPED", root / "shipped")
    monkeypatch.setattr(ts, "run_study", lambda *a, **k: pytest.fail("trained although a pack is shipped"))
    # under the real quick budget's config the pack is not its study: not read (one warning line; the study trains)
    assert TS.shipped_study(Context(budget_named("quick", 0), tmp_path / "a")) is None
    assert "is of another config than the quick budget's" in capsys.readouterr().err
    monkeypatch.setitem(ts.BUDGETS, "quick", CFG)  # now the pack is the budget's study (its config hash)
    ctx = Context(budget_named("quick", 0), tmp_path / "b")
    TS.prefetch_study(ctx)
    got = TS.get_study(ctx)
    assert got.provenance["evidence"]["shipped"] == str(root / "shipped" / "quick") and len(got.runs)
    (tmp_path / "c" / "train").mkdir(parents=True)  # a study of one's own in OUT/train is read instead of the pack
    (tmp_path / "c" / "train" / "study.json").write_text("{}")
    assert TS.shipped_study(Context(budget_named("quick", 0), tmp_path / "c")) is None


@pytest.mark.slow
def test_the_three_training_entries_judge_the_pack_as_they_judge_the_chunks(packed, tmp_path, monkeypatch):
    import sapa.ledger
    from sapa.budget import budget_named
    from sapa.claims import all_claims
    from sapa.evidence import training_study as TS
    from sapa.ledger import Context, run_claim

    root, _ = packed
    monkeypatch.setitem(ts.BUDGETS, "quick", CFG)  # the pack is this budget's study (its config hash)
    monkeypatch.setattr(EP, "SHIPPED", root / "shipped")
    monkeypatch.setattr(ts, "run_study", lambda *a, **k: pytest.fail("trained although a pack is shipped"))
    monkeypatch.setattr(sapa.ledger, "calibration_note", lambda rule: {"rule": rule.name})
    claims = [c for c in all_claims() if c.id in TRAINED]
    a = Context(budget_named("quick", 0), tmp_path / "a")
    a.cache[TS.CACHE_KEY] = ts.load_study(root / "train")  # the study's own folder (its chunks, assembled)
    b = Context(budget_named("quick", 0), tmp_path / "b")
    TS.prefetch_study(b)  # reads the shipped pack: nothing trains
    assert b.cache[TS.CACHE_KEY].provenance["evidence"]["shipped"] == str(root / "shipped" / "quick")
    drop = ("check_wall_seconds", "shipped_evidence")
    for c in claims:
        ea, eb = asdict(run_claim(c, a)), asdict(run_claim(c, b))
        for e in (ea, eb):
            e.pop("seconds"), e.pop("cpu_seconds")
            for k in drop:
                e["evidence"].pop(k, None)
        assert ea == eb, c.id


def test_sapa_verify_refuses_a_tampered_pack_with_one_line(packed, tmp_path, monkeypatch, capsys):
    from sapa.cli import main

    d = _copy(packed, tmp_path / "shipped")
    (d / "design.json").write_text("{}")
    monkeypatch.setitem(ts.BUDGETS, "quick", CFG)
    monkeypatch.setattr(EP, "SHIPPED", tmp_path / "shipped")
    monkeypatch.setattr(ts, "run_study", lambda *a, **k: pytest.fail("trained although a pack is shipped"))
    rc = main(["verify", "--only", "norm-vs-accuracy", "--out", str(tmp_path / "out")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if "refused" in ln]
    assert rc == 2 and len(err) == 1 and "design.json" in err[0], err


def test_every_pack_file_is_package_data():
    """A wheel (a non-editable install) carries every file a pack holds: mechanism.json.gz matched no pattern."""
    import fnmatch
    import tomllib
    from pathlib import Path

    from sapa.empirics.training.evidence_pack import FILES, MANIFEST

    root = Path(__file__).resolve().parents[3]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["sapa.empirics"]
    for name in (*FILES, MANIFEST):
        assert any(fnmatch.fnmatch(f"data/training/full/{name}", p) for p in patterns), name


def test_a_pack_inside_the_installed_tree_is_recorded_by_its_relative_path(tmp_path):
    """A ledger's bytes do not depend on where the repository was cloned: the shipped pack is named relative to it."""
    assert EP.shown_path(EP.SHIPPED / "full") == "empirics/data/training/full"
    assert EP.shown_path(tmp_path / "quick") == str(tmp_path / "quick")
