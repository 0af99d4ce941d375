"""Tests for `figures/style.py`: a figure saved twice is the same bytes (no creation date in PNG or PDF)."""

from __future__ import annotations

import time

import numpy as np

from sapa.figures import style


def _draw(out, stem="f"):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    x = np.linspace(1.0, 100.0, 50)
    ax.loglog(x, x ** 0.5, label="√N")
    ax.legend()
    return style.save(fig, out, stem)


def test_two_renders_of_one_figure_are_byte_identical(tmp_path):
    a = _draw(tmp_path / "a")
    time.sleep(1.1)  # a creation date would differ by a second at least
    b = _draw(tmp_path / "b")
    assert [p.suffix for p in a] == [".png", ".pdf"]
    for pa, pb in zip(a, b):
        assert pa.read_bytes() == pb.read_bytes(), pa.name
    assert b"/CreationDate" not in a[1].read_bytes()
