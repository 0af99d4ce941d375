"""Tests for `notebooks/` and `sapa/commands/notebooks.py`: every shipped .ipynb is the executed form of its .py.

The percent-format ``.py`` files are the source; ``sapa notebooks`` executes each (jupytext + nbclient) and
writes the ``.ipynb`` with normalised outputs. Here: (1) the check ``sapa notebooks --check`` passes for every
notebook: same cells as the .py, executed, every "agree:" line True, small, no machine-specific path; and it
fails, naming the notebook and the fixing command, on a stale, unexecuted or disagreeing one; (2) every .py
executes at ``SAPA_SMALL=1`` with every "agree:" line True, and its normalised form has run-independent
metadata (all six run in one kernel, reset between them, to save a kernel start each); (3) rendering is
reproducible byte for byte; (4) ``-m slow``: at the full budget every notebook, each in a fresh kernel,
prints exactly what its shipped .ipynb shows.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jupytext
import nbformat
import numpy as np
import pytest

from sapa.common.validate import InputError
from sapa.cli import main as sapa_main
from sapa.commands.notebooks import Notebook, cell_id, default_dir, find, kernel, normalise, problems, render

ROOT = Path(__file__).resolve().parents[2]
BOOKS = find(ROOT / "notebooks")


def _printed(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_notebooks_are_numbered_from_01_without_gaps():
    names = [b.number for b in BOOKS]
    assert names == [f"{k:02d}" for k in range(1, len(names) + 1)] and len(names) >= 6
    assert default_dir() == ROOT / "notebooks"


@pytest.mark.parametrize("book", BOOKS, ids=lambda b: b.py.stem)
def test_shipped_ipynb_is_the_executed_form_of_its_py(book):
    assert problems(book) == []


def _copy(book: Notebook, tmp_path: Path) -> Notebook:
    for p in (book.py, book.ipynb):
        shutil.copy(p, tmp_path / p.name)
    return Notebook(tmp_path / book.py.name)


def test_check_names_a_stale_notebook_and_the_command_that_fixes_it(tmp_path, capsys):
    book = _copy(BOOKS[0], tmp_path)
    assert problems(book) == []
    assert sapa_main(["notebooks", "--check", "--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    src = book.py.read_text(encoding="utf-8")
    book.py.write_text(src.replace("# %%\n", "# %%\nx = 1\n", 1), encoding="utf-8")  # edit the 1st code cell
    code_index = next(i for i, c in enumerate(jupytext.read(book.py).cells, 1) if c.cell_type == "code")
    assert problems(book) == [f"{book.ipynb.name} is stale: cell {code_index} (code) differs from {book.py.name}: "
                              f"run `sapa notebooks --only {book.number}`"]
    assert sapa_main(["notebooks", "--check", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "is stale" in err and f"sapa notebooks --only {book.number}" in err

    book.py.write_text(src + "\n# %%\nprint('one more cell')\n", encoding="utf-8")
    n = len(jupytext.read(book.py).cells)
    assert problems(book)[0].endswith(f"the .py has {n} cells, the .ipynb {n - 1} from {book.py.name}: "
                                      f"run `sapa notebooks --only {book.number}`")


def test_check_refuses_an_unexecuted_disagreeing_large_or_missing_notebook(tmp_path):
    book = _copy(BOOKS[0], tmp_path)
    nb = nbformat.read(book.ipynb, as_version=4)
    bare = nbformat.from_dict(json.loads(json.dumps(nb)))
    for c in bare.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    nbformat.write(bare, book.ipynb)
    assert [line for line in problems(book) if "has no outputs (never executed)" in line]

    def with_first_agree_line(new: str) -> None:
        """Write the shipped notebook with its first printed "agree: True" replaced by ``new``."""
        changed = nbformat.from_dict(json.loads(json.dumps(nb)))
        out = next(o for c in changed.cells for o in c.get("outputs", []) if "agree: True" in o.get("text", ""))
        out.text = out.text.replace("agree: True", new, 1)
        nbformat.write(changed, book.ipynb)

    with_first_agree_line("agree: False")
    assert [line for line in problems(book) if "a check disagrees" in line and line.endswith("agree: False")]
    with_first_agree_line("agree: True" + " " * 600_000)
    assert [line for line in problems(book) if "MB (limit 0.5 MB)" in line]
    for where in (ROOT, tmp_path):
        with_first_agree_line(f"agree: True {where / 'notebooks' / 'x.png'}")
        assert [line for line in problems(book) if "machine-specific path" in line]
    with_first_agree_line("agree: True <object at 0x7f3a2b1c4d50>")
    assert [line for line in problems(book) if "memory address" in line]
    with_first_agree_line("agree: True")
    assert problems(book) == []

    book.ipynb.unlink()
    assert problems(book) == [f"{book.ipynb.name} is missing: run `sapa notebooks --only {book.number}`"]


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert sapa_main(["notebooks", "--check", "--only", "99"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sapa: error: unknown notebook '99'; known: 01, 02") and "\n" not in err
    assert sapa_main(["notebooks", "--check", "--dir", str(tmp_path / "nowhere")]) == 2
    assert sapa_main(["notebooks", "--check", "--dir", str(tmp_path)]) == 2
    assert "no notebook NN_*.py" in capsys.readouterr().err


@pytest.fixture(scope="module")
def small_kernel():
    """One kernel at the small budget for all notebooks (reset between them): saves ~4 CPU-s of start-up each.
    Module-scoped, so its tests run on one worker (tests/conftest.py groups them)."""
    with kernel(ROOT / "notebooks", "small") as run:
        yield run


@pytest.mark.parametrize("book", BOOKS, ids=lambda b: b.py.stem)
def test_notebook_executes_at_the_small_budget_and_agrees(book, small_kernel):
    nb = normalise(small_kernel(book.py, timeout=600), ROOT)
    agree = [line for line in _printed(nb).splitlines() if "agree:" in line]
    assert agree, "the notebook must print expected / measured / agree lines"
    bad = [line for line in agree if not line.rstrip().endswith("True")]
    assert not bad, "\n".join(bad)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert [(c.cell_type, c.source) for c in nb.cells] == [(c.cell_type, c.source) for c in jupytext.read(book.py).cells]
    assert [c.id for c in nb.cells] == [cell_id(k, c.cell_type) for k, c in enumerate(nb.cells, 1)]
    assert not any("execution" in c.metadata for c in nb.cells)
    assert set(nb.metadata) == {"jupytext", "kernelspec", "language_info", "sapa"} and nb.metadata.sapa == {"budget": "small"}
    assert "version" not in nb.metadata.language_info and str(ROOT) not in nbformat.writes(nb)


@pytest.mark.slow  # the notebook tooling (~3 s)
def test_a_shared_kernel_resets_between_notebooks_and_raises_on_a_failing_cell(tmp_path):
    first, second, failing, elsewhere = (Notebook(tmp_path / f"0{k}_nb.py") for k in range(1, 5))
    first.py.write_text("# %%\nimport os\nleftover = 41\nprint(os.environ['SAPA_SMALL'], leftover + 1)\n")
    second.py.write_text("# %%\nprint('leftover' in dir(), 'os' in dir(), '_sapa_reset' in dir())\n"
                         "import gc\nprint(type(gc.collect).__name__)\n")
    failing.py.write_text("# %%\nraise ValueError('boom')\n")
    (tmp_path / "sub").mkdir()
    with kernel(tmp_path, "small") as run:
        assert _printed(run(first.py)) == "1 42\n"
        # the namespace of the first is gone, the reset's own helper too, and gc.collect is the real one again
        assert _printed(run(second.py)) == "False False False\nbuiltin_function_or_method\n"
        with pytest.raises(Exception, match="boom"):
            run(failing.py)
        assert _printed(run(first.py)) == "1 42\n"  # the kernel survives a failing notebook
        with pytest.raises(InputError, match="not in the kernel's folder"):
            run(tmp_path / "sub" / elsewhere.py.name)
    with pytest.raises(InputError, match="budget must be one of full, small"):
        with kernel(tmp_path, "medium"):
            pass


TINY = """# %% [markdown]
# # A tiny notebook

# %%
import sys
import warnings

import matplotlib.pyplot as plt
import numpy as np

x = np.random.default_rng(0).standard_normal(5)
print("drawn:", np.round(x, 6))
print("second line")
print("to stderr", file=sys.stderr)
warnings.warn("a warning")

# %%
fig, ax = plt.subplots(figsize=(3, 2))
ax.plot(x)
plt.show()
"""


@pytest.mark.slow  # the notebook tooling (~3 s); the shipped notebooks' freshness is checked by default
def test_rendering_is_reproducible_byte_for_byte(tmp_path):
    book = Notebook(tmp_path / "01_tiny.py")
    book.py.write_text(TINY, encoding="utf-8")
    first, second = render(book), render(book)
    assert first == second
    nb = nbformat.reads(first, as_version=4)
    nbformat.validate(nb)
    a, b = [c for c in nb.cells if c.cell_type == "code"]
    streams = {o.name: o.text for o in a.outputs if o.output_type == "stream"}
    assert streams["stdout"] == f"drawn: {np.round(np.random.default_rng(0).standard_normal(5), 6)}\nsecond line\n"
    assert streams["stderr"].startswith("to stderr\n<cell>:") and "UserWarning: a warning" in streams["stderr"]
    assert str(tmp_path) not in first and nb.metadata.sapa == {"budget": "full"}
    png = [o for o in b.outputs if "image/png" in o.get("data", {})]
    assert len(png) == 1 and "<Figure size 300x200 with 1 Axes>" in png[0].data["text/plain"]  # 3 × 2 in at 100 dpi


@pytest.mark.slow
@pytest.mark.parametrize("book", BOOKS, ids=lambda b: b.py.stem)
def test_full_budget_rerun_leaves_the_shipped_notebook_byte_identical(book):
    """`sapa notebooks` run again writes the same bytes: what it prints, the figures, the ids, the metadata."""
    raw = book.ipynb.read_text(encoding="utf-8")
    text = render(book)
    shipped, fresh = nbformat.reads(raw, as_version=4), nbformat.reads(text, as_version=4)

    def texts(nb):
        return [[o.get("text") or o.get("data", {}).get("text/plain") for o in c.outputs]
                for c in nb.cells if c.cell_type == "code"]

    assert texts(fresh) == texts(shipped), f"{book.ipynb.name} is out of date: run `{book.fix}`"
    assert text == raw, f"{book.ipynb.name}: a rerun changes its bytes beyond the printed text"


@pytest.mark.parametrize("book", BOOKS, ids=lambda b: b.py.stem)
def test_the_shipped_notebook_is_already_normalised(book):
    """Normalising a shipped .ipynb again changes no byte: its ids are those of its cells' positions (a stale id,
    left by an edit outside `sapa notebooks`, was what a rerun changed: "479b23c5" → "c3bc1e25"), its counts,
    streams and metadata those a rerun writes."""
    raw = book.ipynb.read_text(encoding="utf-8")
    nb = nbformat.reads(raw, as_version=4)
    assert [c.id for c in nb.cells] == [cell_id(k, c.cell_type) for k, c in enumerate(nb.cells, 1)]
    assert nbformat.writes(normalise(nbformat.reads(raw, as_version=4), ROOT)) + "\n" == raw


def test_cell_ids_are_positions_whatever_the_sources():
    """Two notebooks with other sources (or the same source twice) get the same, unique, valid ids."""
    a = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"), nbformat.v4.new_code_cell("x = 1"),
                                        nbformat.v4.new_code_cell("x = 1")])
    b = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# other"), nbformat.v4.new_code_cell("y"),
                                        nbformat.v4.new_code_cell("z")])
    ids = [[c.id for c in normalise(nb, ROOT).cells] for nb in (a, b)]
    assert ids[0] == ids[1] == ["01-markdown", "02-code", "03-code"]
    nbformat.validate(normalise(a, ROOT))


@pytest.mark.slow  # the notebook tooling (~5 s); every notebook itself runs in the default suite
def test_regenerating_says_which_notebook_and_which_cell_runs(tmp_path, capsys, monkeypatch):
    import functools

    import sapa.common.progress as progress
    from sapa.commands.notebooks import execute

    book = Notebook(tmp_path / "01_slow.py")
    book.py.write_text("# %% [markdown]\n# slow\n\n# %%\nimport time\n\n# %%\ntime.sleep(1.5)\n", encoding="utf-8")
    calls = []
    execute(book.py, "small", on_cell=lambda k, m: calls.append((k, m)))
    assert calls == [(1, 3), (2, 3), (3, 3)]  # every cell, markdown included, numbered among all
    monkeypatch.setattr(progress, "stage", functools.partial(progress.stage, every_s=0.5))  # a line after 0.5 s silent
    assert sapa_main(["notebooks", "--dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "[1/1] 01_slow.py: executing ..."
    assert any(ln.startswith("[1/1] 01_slow.py: cell 3/3: running ") for ln in err)
    assert book.ipynb.is_file()
