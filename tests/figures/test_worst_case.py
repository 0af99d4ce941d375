"""The worst-case figure runs on a small budget, passes its own check and writes PNG + PDF."""

from __future__ import annotations

from figures import worst_case


def test_worst_case_figure(tmp_path):
    res = worst_case.compute(ps=(1, 3), Ns=(3, 6), D=3, steps=2, restarts=1)
    worst_case.check(res)
    paths = worst_case.draw(res, tmp_path, "wc")
    assert {p.suffix for p in paths} == {".png", ".pdf"} and all(p.stat().st_size > 1000 for p in paths)
