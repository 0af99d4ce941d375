"""The worst-case figure draws a small result, or its stored JSON, passes its own check and writes PNG + PDF."""

from __future__ import annotations

from sapa.common import figdata
from sapa.empirics.experiments.worst_case import run_worst_case
from sapa.figures import worst_case


def test_worst_case_figure(tmp_path):
    res = run_worst_case(ps=(1, 3), Ns=(3, 6), D=3, steps=2, restarts=1)
    worst_case.check(res)
    paths = worst_case.draw(res, tmp_path, "wc")
    assert {p.suffix for p in paths} == {".png", ".pdf"} and all(p.stat().st_size > 1000 for p in paths)
    stem = worst_case.stored_stem(res)
    assert stem.startswith("worst_case_D3_N3-6")
    figdata.write(tmp_path / "data" / "worst_case.json", res.to_json(), stem)
    again = worst_case.main(tmp_path, tmp_path / "b")
    assert {p.name for p in again} == {f"{stem}.png", f"{stem}.pdf"}
