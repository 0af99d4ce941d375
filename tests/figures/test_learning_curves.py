"""Tests for `figures/learning_curves.py`: the three panels from learning-statistics cells (smoke test)."""

from figures import learning_curves as fig


def _cell(task, N, arm, median, solved):
    return {"task": task, "N": N, "arm": arm, "floor": 0.1, "curve": [[0, 0.1], [10, 0.2], [100, 0.9]],
            "exits": {"median": median, "cap": 100, "censored": 0 if median else 2, "n": 2},
            "solved_fraction": solved}


def test_draws_curves_exits_and_solved(tmp_path):
    cells = [_cell("copy1", N, a, m, s) for N in (16, 32) for a, m, s in (("softmax", 10, 1.0), ("x_sqrtN", None, 0.5))]
    paths = fig.draw(cells, tmp_path, stem="t", solved=True)
    assert sorted(p.name for p in paths) == sorted(f"t_{k}.{e}" for k in ("curves", "exit", "solved")
                                                   for e in ("png", "pdf"))
    assert all(p.stat().st_size > 0 for p in paths)
    assert fig.draw([], tmp_path) == []
