"""Tests for `empirics/training/study_design.py`: the design is written and hashed before the first member trains,
kept while unchanged, and a design recorded after data is shown as such (DESIGN.md item 10)."""

from __future__ import annotations

import json
from dataclasses import replace

from sapa.common.integrity import timing_path, write_sealed_json
from sapa.empirics.training import study_design as SD
from sapa.empirics.training import train_study as ts

MICRO = replace(ts.TINY, arms=("softmax",), tasks=("text",), text=replace(ts.TINY.text, Ns=(8,), steps=2, evals=1))


def _stored_at(out, name: str, when: str) -> None:
    path = out / "chunks" / name
    write_sealed_json(path, {"x": 1})
    timing_path(path).write_text(json.dumps({"finished_utc": when}))


def test_the_design_is_hashed_and_kept_while_it_is_unchanged(tmp_path):
    a = SD.fix_design(tmp_path, {"config": {"seeds": 3}, "levels": {"fails": 0.005}})
    assert a["sha256"] == SD.design_sha256({"levels": {"fails": 0.005}, "config": {"seeds": 3}})
    assert SD.fix_design(tmp_path, {"levels": {"fails": 0.005}, "config": {"seeds": 3}}) == a  # the same design
    b = SD.fix_design(tmp_path, {"config": {"seeds": 3}, "levels": {"fails": 0.01}})
    assert b["sha256"] != a["sha256"] and json.loads((tmp_path / SD.DESIGN_FILE).read_text()) == b


def test_a_design_fixed_before_the_data_reads_fixed_first_and_one_added_after_does_not(tmp_path, monkeypatch):
    monkeypatch.setattr(SD, "utc_now", lambda: "2026-12-05T10:00:00Z")
    SD.fix_design(tmp_path, {"looks": 1})
    assert SD.design_record(tmp_path)["first_data_at"] is None and SD.design_record(tmp_path)["fixed_first"]
    _stored_at(tmp_path, "a.json", "2026-12-05T10:19:17Z")
    _stored_at(tmp_path, "b.json", "2026-12-05T11:00:00Z")
    rec = SD.design_record(tmp_path)
    assert rec["first_data_at"] == "2026-12-05T10:19:17Z" and rec["fixed_first"]
    monkeypatch.setattr(SD, "utc_now", lambda: "2026-12-05T12:59:30Z")  # a look added after data were read
    SD.fix_design(tmp_path, {"looks": 2})
    rec = SD.design_record(tmp_path)
    assert rec["fixed_at"] == "2026-12-05T12:59:30Z" and not rec["fixed_first"]


def test_run_study_writes_the_design_before_its_first_member_trains(tmp_path, monkeypatch):
    real, seen = ts.train_chunk, []

    def train(c, cfg):
        seen.append(json.loads((tmp_path / SD.DESIGN_FILE).read_text()))  # on disk before any member trains
        return real(c, cfg)

    monkeypatch.setattr(ts, "train_chunk", train)
    res = ts.run_study(MICRO, tmp_path, workers=1, progress=False, mechanism=None, design={"levels": {"fails": 0.01}})
    assert seen and seen[0]["design"]["config"] == json.loads(json.dumps(ts.study_config(MICRO).as_dict()))
    assert seen[0]["design"]["levels"] == {"fails": 0.01}
    d = res.provenance["design"]
    assert d["sha256"] == seen[0]["sha256"] and d["fixed_first"] and d["fixed_at"] <= d["first_data_at"]
    assert ts.load_study(tmp_path).provenance["design"]["sha256"] == d["sha256"]
