"""``sapa notebooks``: notebooks/NN_*.py → NN_*.ipynb with outputs, i.e. ipynb = normalise(execute(jupytext.read(py))).

The percent-format ``.py`` files are the source (diffable, paired by jupytext); the ``.ipynb`` files are
generated from them and shipped *with* outputs, so that a reader on a code host sees the printed
``expected / measured / agree`` lines and the figures. Generation runs each ``.py`` in a fresh kernel
(nbclient) at its full budget (``SAPA_SMALL`` unset), then normalises the result so that a rerun on the
same code gives the same bytes: cell ids from the cell's position and type (an edit of a cell's text, by hand or
by a refactoring tool, leaves them as they are), execution counts 1, 2, …, no timing
metadata, no kernel version, figures as PNG at a fixed modest dpi (the user's matplotlibrc is not read),
the checkout's path replaced by ``.``. The file is written atomically.

:func:`problems` is the check (``sapa notebooks --check`` and ``tests/notebooks``): every line it returns
names a notebook, what is wrong and the command that fixes it.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sapa.common.validate import InputError

__all__ = ["Notebook", "cell_id", "execute", "find", "kernel", "main", "normalise", "problems", "render", "small_png", "write",
           "add_parser", "run"]
KEPT = "the notebooks already written were kept"  # what an interrupt leaves (sapa.cli prints it)

BUDGETS = ("full", "small")
DPI = 100  # inline figures: 6 × 4 in → 600 × 400 px
MAX_BYTES = 500_000  # a shipped .ipynb larger than this is an output gone wrong (a giant table, a huge image)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]{6,}")  # reprs like <Figure at 0x7f…>: differ on every run
_CELL_FILE = re.compile(r"\S*ipykernel_\d+[/\\]\d+\.py")  # where a kernel compiles a cell (warnings name it): per pid
_KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
_MATPLOTLIBRC = f"backend: module://matplotlib_inline.backend_inline\nfigure.dpi: {DPI}\n"


@dataclass(frozen=True)
class Notebook:
    """One notebook: ``NN_name.py`` (the source) and ``NN_name.ipynb`` (generated, with outputs)."""

    py: Path

    @property
    def number(self) -> str:
        return self.py.name[:2]

    @property
    def ipynb(self) -> Path:
        return self.py.with_suffix(".ipynb")

    @property
    def fix(self) -> str:
        return f"sapa notebooks --only {self.number}"


def default_dir() -> Path:
    """The checkout's ``notebooks/`` folder (beside the ``sapa`` package)."""
    return Path(__file__).resolve().parents[2] / "notebooks"


def find(directory: Path, only: list[str] | None = None) -> list[Notebook]:
    """The notebooks ``NN_*.py`` in ``directory``, in order; ``only`` keeps the numbers (or stems) named."""
    if not directory.is_dir():
        raise InputError(f"no notebooks folder at {directory} (give --dir, or run from a checkout)")
    books = [Notebook(p) for p in sorted(directory.glob("[0-9][0-9]_*.py"))]
    if not books:
        raise InputError(f"no notebook NN_*.py in {directory}")
    if not only:
        return books
    unknown = [n for n in only if not any(n in (b.number, b.py.stem) for b in books)]
    if unknown:
        raise InputError(f"unknown notebook {unknown[0]!r}; known: {', '.join(b.number for b in books)}")
    return [b for b in books if b.number in only or b.py.stem in only]


def _jupyter():
    """(jupytext, nbformat), or an InputError that says what to install."""
    try:
        import jupytext
        import nbformat
    except ImportError as exc:
        raise InputError(f"sapa notebooks needs {exc.name}: python3 -m pip install -e \".[notebooks]\"") from None
    return jupytext, nbformat


def execute(py: Path, budget: str = "full", timeout: int = 1200, on_cell: Callable[[int, int], None] | None = None):
    """The notebook of ``py`` executed in a fresh ``python3`` kernel (cwd: its folder); raises on a failing cell.

    ``budget="small"`` sets ``SAPA_SMALL=1`` (the notebooks' fast mode); ``"full"`` removes it. ``on_cell(k, m)``:
    called as cell k (1-based) of the notebook's m cells starts (progress; the outputs do not depend on it).
    """
    with kernel(py.parent, budget) as run:
        return run(py, timeout, on_cell)


@contextmanager
def kernel(folder: Path, budget: str = "full"):
    """One ``python3`` kernel in ``folder`` with the notebooks' environment; yields ``run(py, timeout) -> nb``.

    The first ``run`` sees a fresh kernel (as :func:`execute`); each later one first clears the kernel's
    namespace and closes its figures (``%reset -f``), so several notebooks run without paying a kernel start
    and the imports of torch, sympy and scipy each (4–6 CPU-s a notebook on 2 cores). Modules stay imported: fine for
    checking that notebooks run and agree (``tests/notebooks``), not for rendering, which uses :func:`execute`.
    """
    if budget not in BUDGETS:
        raise InputError(f"budget must be one of {', '.join(BUDGETS)}, got {budget!r}")
    jupytext, _ = _jupyter()
    try:
        from jupyter_client.manager import KernelManager
        from nbclient import NotebookClient
    except ImportError as exc:
        raise InputError(f"sapa notebooks needs {exc.name}: python3 -m pip install -e \".[notebooks]\"") from None
    folder = Path(folder)
    with tempfile.TemporaryDirectory(prefix="sapa-mplrc-") as rc:
        Path(rc, "matplotlibrc").write_text(_MATPLOTLIBRC, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k not in ("SAPA_SMALL", "MPLBACKEND")}
        env.update(MATPLOTLIBRC=rc, PYTHONHASHSEED="0", TQDM_DISABLE="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
        # The checkout the notebook belongs to comes first on the path (not whatever sapa is installed).
        env["PYTHONPATH"] = os.pathsep.join([str(folder.resolve().parent), *filter(None, [env.get("PYTHONPATH")])])
        if budget == "small":
            env["SAPA_SMALL"] = "1"
        km = KernelManager(kernel_name="python3")
        # stderr: the kernel's own log (a TCP warning), not the notebook's
        km.start_kernel(env=env, cwd=str(folder), stderr=subprocess.DEVNULL)
        runs = 0

        def run(py: Path, timeout: int = 1200, on_cell: Callable[[int, int], None] | None = None):
            nonlocal runs
            if Path(py).resolve().parent != folder.resolve():
                raise InputError(f"{py} is not in the kernel's folder {folder}")
            nb = jupytext.read(py)
            hooks = {} if on_cell is None else {
                "on_cell_start": lambda cell, cell_index: on_cell(cell_index + 1, len(nb.cells))}
            client = NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3", record_timing=False,
                                    resources={"metadata": {"path": str(folder)}}, **hooks)
            if runs:
                _reset(km, timeout)
            runs += 1
            try:
                client.execute()
            finally:
                if client.kc is not None:
                    client.kc.stop_channels()
            nb.metadata["sapa"] = {"budget": budget}
            return nb

        try:
            yield run
        finally:
            km.shutdown_kernel(now=True)


# ``%reset -f`` ends in a full gc.collect() (IPython's DisplayHook.flush), which in a kernel that has imported torch,
# sympy and scipy walks ~10⁶ objects: most of a reset's 0.6 CPU-s. The namespace is cleared all the same; what
# the cleared names leave in reference cycles is collected by the interpreter's own collector later.
_RESET = """def _sapa_reset():
    import gc
    import matplotlib.pyplot
    matplotlib.pyplot.close("all")
    collect, gc.collect = gc.collect, lambda *a, **k: 0
    try:
        get_ipython().run_line_magic("reset", "-f")  # also drops the name _sapa_reset
    finally:
        gc.collect = collect
_sapa_reset()
"""


def _reset(km, timeout: int) -> None:
    """Clear the namespace of ``km``'s kernel and close its figures; raises if that fails."""
    kc = km.blocking_client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=timeout)
        reply = kc.execute_interactive(_RESET, timeout=timeout, output_hook=lambda msg: None)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"resetting the notebook kernel failed: {reply['content'].get('evalue')}")
    finally:
        kc.stop_channels()


def normalise(nb, root: Path | None = None):
    """``nb`` with run-independent bytes: ids from positions, counts 1…k, merged streams, no timings or paths.

    Idempotent: a shipped .ipynb normalised again is the same file (tests/notebooks)."""
    _, nbformat = _jupyter()
    root = (root or default_dir().parent).resolve()
    count = 0
    for k, cell in enumerate(nb.cells, 1):
        cell["id"] = cell_id(k, cell.cell_type)
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        count += 1
        cell.execution_count = count
        cell.outputs = _merge_streams(cell.outputs, nbformat)
        for out in cell.outputs:
            if "execution_count" in out:
                out["execution_count"] = count
            if out.get("output_type") == "stream":
                out["text"] = _clean_text(out["text"], root)
            for mime, data in out.get("data", {}).items():
                if mime.startswith("text/") and isinstance(data, str):
                    out["data"][mime] = _clean_text(data, root)
    language = dict(nb.metadata.get("language_info", {"name": "python"}))
    language.pop("version", None)
    nb.metadata = {
        "jupytext": {"formats": nb.metadata.get("jupytext", {}).get("formats", "ipynb,py:percent")},
        "kernelspec": nb.metadata.get("kernelspec") or dict(_KERNELSPEC),
        "language_info": language,
        "sapa": nb.metadata.get("sapa", {}),
    }
    nb.nbformat, nb.nbformat_minor = 4, 5
    return nb


def cell_id(k: int, cell_type: str) -> str:
    """The id of the k-th cell (1-based), e.g. '03-code': unique, a valid nbformat id, the same on every run."""
    return f"{k:02d}-{cell_type}"


def _merge_streams(outputs: list, nbformat) -> list:
    """Consecutive stream outputs of the same name as one (the split depends on flush timing)."""
    merged: list = []
    for out in outputs:
        if (out.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                and merged[-1]["name"] == out["name"]):
            merged[-1]["text"] += out["text"]
        else:
            merged.append(out)
    return [nbformat.from_dict(o) for o in merged]


def _clean_text(text: str, root: Path) -> str:
    """``text`` without carriage-return redraws, the checkout's path as ``.``, a cell's file as ``<cell>``."""
    lines = [line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r")
             for line in text.split("\n")]
    text = _CELL_FILE.sub("<cell>", "\n".join(lines))
    return text.replace(str(root) + os.sep, "").replace(str(root), ".")


def render(book: Notebook, budget: str = "full", timeout: int = 1200,
           on_cell: Callable[[int, int], None] | None = None) -> str:
    """The ``.ipynb`` text of ``book``: executed, normalised, serialised the way Jupyter writes it."""
    _, nbformat = _jupyter()
    nb = normalise(execute(book.py, budget, timeout, on_cell), book.py.parent.parent)
    return nbformat.writes(nb) + "\n"


def write(book: Notebook, text: str) -> Path:
    """Atomically replace ``book.ipynb`` with ``text`` (keeping the file's permissions)."""
    from sapa.common.atomic import atomic_write_text

    return atomic_write_text(book.ipynb, text)


def problems(book: Notebook, budget: str = "full") -> list[str]:
    """Why ``book.ipynb`` is not the up-to-date, executed form of ``book.py`` (empty when it is)."""
    jupytext, nbformat = _jupyter()
    name, fix = book.ipynb.name, book.fix
    shipped = read_ipynb(book.ipynb, nbformat)
    if shipped is None:
        return [f"{name} is missing: run `{fix}`"]
    raw, nb = shipped
    src = jupytext.read(book.py)
    out: list[str] = []
    a = [(c.cell_type, c.source) for c in src.cells]
    b = [(c.cell_type, c.source) for c in nb.cells]
    if a != b:
        k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        what = (f"cell {k + 1} ({a[k][0]}) differs" if k < min(len(a), len(b))
                else f"the .py has {len(a)} cells, the .ipynb {len(b)}")
        out.append(f"{name} is stale: {what} from {book.py.name}: run `{fix}`")
    code = [c for c in nb.cells if c.cell_type == "code"]
    if any(c.execution_count is None for c in code) or not any(c.outputs for c in code):
        out.append(f"{name} has no outputs (never executed): run `{fix}`")
    errors = [i for i, c in enumerate(nb.cells, 1) for o in c.get("outputs", []) if o.output_type == "error"]
    if errors:
        out.append(f"{name}: cell {errors[0]} holds an error: run `{fix}`")
    shipped = nb.metadata.get("sapa", {}).get("budget")
    if code and shipped != budget and not out:
        out.append(f"{name} was executed at budget {shipped!r}, not {budget!r}: run `{fix}`")
    bad = [line for line in _printed(nb).splitlines() if "agree:" in line and not line.rstrip().endswith("True")]
    if bad:
        out.append(f"{name}: a check disagrees: {bad[0].strip()}")
    if len(raw.encode()) > MAX_BYTES:
        out.append(f"{name} is {len(raw.encode()) / 1e6:.1f} MB (limit {MAX_BYTES / 1e6:.1f} MB): shrink its outputs")
    places = (book.py.resolve().parent.parent, default_dir().parent, tempfile.gettempdir(), Path.home())
    leaks = [s for s in (str(x) + os.sep for x in places) if s in raw]
    if leaks or _ADDRESS.search(raw):
        out.append(f"{name} contains a machine-specific path or memory address "
                   f"({leaks[0] if leaks else _ADDRESS.search(raw).group().strip()}): end the cell with `;` or "
                   f"plt.show(), then run `{fix}`")
    return out


def read_ipynb(path: Path, nbformat) -> tuple[str, object] | None:
    """(text, notebook) of a shipped .ipynb, None when there is none; InputError (one line, saying which) when it is
    not a regular file (a FIFO, ``/dev/zero``: read without blocking, never in full), not JSON, or not nbformat 4."""
    import json

    from sapa.common.readfile import read_regular_text

    if not os.path.exists(path):  # nothing there, or a link to nothing
        return None
    raw = read_regular_text(path, "notebook")  # a regular file, bounded; says what else it is
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"notebook {path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): "
                         "regenerate it with `sapa notebooks`") from None
    version = doc.get("nbformat") if isinstance(doc, dict) else None
    if type(version) is not int or version != 4:
        what = f"nbformat {version!r}" if isinstance(doc, dict) else f"a JSON {type(doc).__name__}, not a notebook"
        raise InputError(f"notebook {path} has {what}; sapa reads nbformat 4 notebooks: regenerate it with "
                         "`sapa notebooks`")
    try:
        return raw, nbformat.reads(raw, as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat's validation and reader errors
        raise InputError(f"notebook {path} is not a valid nbformat 4 notebook ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:120]})") from None


def small_png(path: str | os.PathLike, width: int) -> bytes:
    """The PNG at ``path`` resampled to ``width`` pixels wide, 256 colours: a print-sized figure sized for a notebook.

    The figure modules save at 150 dpi for print (the regime map is 1.9k × 1.1k px, 0.5 MB); shown
    in a notebook at this size the shipped .ipynb stays small (≈ 0.1 MB per figure).
    """
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("RGB").resize((width, max(1, round(im.height * width / im.width))), Image.LANCZOS)
    buf = io.BytesIO()
    im.quantize(256).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def _printed(nb) -> str:
    """Everything the code cells printed (stdout and stderr)."""
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def main(directory: Path | None, only: list[str] | None, check: bool, timeout: int = 1200) -> int:
    """Regenerate (or, with ``check``, check) the notebooks; 0 when all is well, 1 when one fails or is stale.

    A notebook whose execution fails keeps its old .ipynb; the others are still regenerated.
    """
    books = find(directory or default_dir(), only)
    if check:
        found = [line for book in books for line in problems(book)]
        for line in found:
            print(f"sapa: notebooks: {line}", file=sys.stderr)
        if not found:
            print(f"{len(books)} notebooks up to date with their .py, executed, every check agreeing")
        return 1 if found else 0
    try:
        from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
    except ImportError as exc:
        raise InputError(f"sapa notebooks needs {exc.name}: python3 -m pip install -e \".[notebooks]\"") from None
    from sapa.common.progress import say, stage

    failed = 0
    for i, book in enumerate(books, 1):
        tag = f"[{i}/{len(books)}] {book.py.name}"
        say(f"{tag}: executing ...")
        t0 = time.perf_counter()
        try:
            with stage(tag) as beat:  # silent for 10 s: a line naming the cell that runs

                def on_cell(k: int, m: int, beat=beat, tag=tag) -> None:
                    beat.desc = f"{tag}: cell {k}/{m}"

                text = render(book, "full", timeout, on_cell)
        except CellExecutionError as exc:
            why = f"{exc.ename}: {' '.join(str(exc.evalue).split())}" if getattr(exc, "ename", None) else "a cell failed"
        except (CellTimeoutError, DeadKernelError) as exc:
            why = " ".join(str(exc).split())[:200]
        else:
            write(book, text)
            print(f"{book.ipynb}: {len(text.encode()) / 1e3:.0f} kB, {time.perf_counter() - t0:.0f} s")
            continue
        failed += 1
        print(f"sapa: notebooks: {book.py.name} failed ({why}); {book.ipynb.name} left as it was", file=sys.stderr)
    return 1 if failed else 0


def add_parser(sub) -> None:
    """Declare ``sapa notebooks`` and its arguments on the subparsers ``sub``."""
    from pathlib import Path
    from sapa.commands.arguments import positive_int

    nb = sub.add_parser("notebooks",
                        help="execute notebooks/NN_*.py and write NN_*.ipynb with outputs (--check: only check)")
    nb.add_argument("--check", action="store_true", help="execute nothing; exit 1 if an .ipynb is stale or lacks outputs")
    nb.add_argument("--only", nargs="+", metavar="NN", help="only these notebooks, by number (default: all)")
    nb.add_argument("--dir", type=Path, help="notebook folder (default: the checkout's notebooks/)")
    nb.add_argument("--timeout", type=positive_int, default=1200, help="seconds one cell may run")


def run(args) -> int:
    """``sapa notebooks``: regenerate the shipped notebooks with outputs, or check them (:func:`main`)."""
    return main(args.dir, args.only, args.check, args.timeout)
