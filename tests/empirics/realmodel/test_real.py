"""Tests for `empirics/realmodel/real.py`: the public face of the real-model code re-exports its four modules unchanged."""

from __future__ import annotations

from sapa.empirics.realmodel import real, real_analysis, real_geometry, real_model, real_records


def test_every_public_name_resolves_to_its_module_object():
    homes = (real_model, real_geometry, real_records, real_analysis)
    for name in real.__all__:
        obj = getattr(real, name)
        owners = [m for m in homes if getattr(m, name, None) is obj]
        assert owners or name == "InputError", name


def test_the_analysis_entry_points_are_the_split_ones():
    assert real.analyse is real_analysis.analyse and real.RealResult is real_records.RealResult
    assert real.head_geometry is real_geometry.head_geometry and real.forward is real_model.forward
