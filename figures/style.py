"""Shared figure style and atomic saving: PNG and PDF, configuration in the file name.

Colours come from the Okabe–Ito palette and every series also gets its own marker and
line style, so figures survive greyscale printing.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt  # the backend is the caller's: `sapa` uses Agg (MPLBACKEND), notebooks keep theirs

from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.ticker import Formatter, LogFormatterMathtext

from sapa.common.atomic import atomic_write
from sapa.common.safepath import inside, plain_name

PALETTE = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#F0E442"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 1)), (0, (8, 2))]

RC = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    # Titles at y = 1 (plus the pad) instead of matplotlib's automatic placement, which measures every axis's ticks
    # again at each draw to lift a title over tick labels on top (9–20 % of a figure's drawing time). No sapa figure
    # needed the lift (the tests' 55 figures and a quick ledger's 54 files are the same bytes either way), and
    # save() refuses a title that overlaps labels on top (the compare scorecard's pad clears its column names).
    "axes.titley": 1.0,
}


def series_style(i: int) -> dict:
    """Colour, marker and line style of the i-th series (distinct in colour and in greyscale)."""
    return {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)]}


_SUPERSCRIPT = str.maketrans("-−0123456789", "⁻⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
SUBSCRIPT = str.maketrans("-0123456789", "₋₀₁₂₃₄₅₆₇₈₉")


def unicode_math(label: str) -> str:
    r"""A log-tick mathtext label as plain Unicode: ``$\mathdefault{10^{-2}}$`` → ``10⁻²``, ``2\times10^{1}`` → ``2×10¹``."""
    import re

    if not (label.startswith("$") and label.endswith("$")):
        return label
    t = label[1:-1].replace("\\mathdefault", "").replace("\\times", "×").replace("\\,", "").replace("\\;", "")
    t = re.sub(r"\^\{([^{}]*)\}", lambda m: m.group(1).translate(_SUPERSCRIPT), t)
    return t.replace("{", "").replace("}", "").replace("-", "−")


class UnicodeTicks(Formatter):
    """Wrap a mathtext log formatter, keeping its choice of which ticks to label, and return plain Unicode.

    Matplotlib's default log labels are mathtext, which each renderer (every PNG and PDF save) parses anew: in
    the norm-scaling figures that was ~85 % of the drawing time.
    """

    def __init__(self, inner: Formatter):
        self.inner = inner

    def set_axis(self, axis):
        super().set_axis(axis)
        self.inner.set_axis(axis)

    def set_locs(self, locs):
        super().set_locs(locs)
        self.inner.set_locs(locs)

    def __call__(self, x, pos=None):
        return unicode_math(self.inner(x, pos))


def plain_log_ticks(fig: "plt.Figure") -> None:
    """Every mathtext log formatter (major and minor, both axes) of ``fig`` wrapped in :class:`UnicodeTicks`."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(axis.get_major_formatter(), LogFormatterMathtext):
                axis.set_major_formatter(UnicodeTicks(axis.get_major_formatter()))
            if isinstance(axis.get_minor_formatter(), LogFormatterMathtext):
                axis.set_minor_formatter(UnicodeTicks(axis.get_minor_formatter()))


def stem(name: str, **config: object) -> str:
    """File stem that encodes the configuration, e.g. ``norm_vs_n_D64_trials200``."""
    parts = [name] + [f"{k}{_fmt(v)}" for k, v in config.items()]
    return "_".join(parts).replace(".", "p").replace("/", "-")


def _fmt(v: object) -> str:
    if isinstance(v, (list, tuple)):
        return "-".join(_fmt(x) for x in v)
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


# No creation date in a figure file: two renders of the same data are the same bytes (a rerun's checksums agree).
# PNG carries no date unless asked; a PDF's /CreationDate is dropped by naming it None.
UNDATED = {"png": {}, "pdf": {"CreationDate": None}}
# zlib's fastest level for the PNGs: the same pixels, files ~25 % larger, a third less time per PNG saved (zlib at
# PIL's default level 6 took 0.21 of 0.64 CPU-s for a 2 × 3 panel figure; PNG encoding was 5 CPU-s of the default
# tests). report.html re-encodes each PNG it embeds from its pixels (sapa.report.figure_plan.compact_png): unchanged.
PNG_OPTIONS = {"compress_level": 1}


def _titles_clear_of_top_labels(fig: "plt.Figure", file_stem: str) -> None:
    """ValueError for a title that overlaps tick labels or an x label on top of its axes (or of an axes inside it: a
    secondary x axis). Titles sit at RC's ``axes.titley`` = 1 plus their pad, where matplotlib's automatic placement
    would have lifted them; measured only for axes with something on top (the compare scorecard: its pad clears
    them)."""
    from matplotlib.text import Text

    renderer = None
    for ax in fig.get_axes():
        tops = [a for a in (ax, *ax.child_axes)
                if a.xaxis.get_tick_params(which="major").get("labeltop") or a.xaxis.get_label_position() == "top"]
        texts = {ax.get_title(loc) for loc in ("left", "center", "right")} - {""}
        titles = [c for c in ax.get_children() if isinstance(c, Text) and c.get_text() in texts]
        if not tops or not titles:
            continue
        renderer = renderer or fig.canvas.get_renderer()
        for child in ax.child_axes:  # placed at draw time by their locator, as matplotlib does before measuring
            locator = child.get_axes_locator()
            child.apply_aspect(locator(ax, renderer) if locator else None)
        top = max(a.xaxis.get_tightbbox(renderer).ymax for a in tops)
        for t in titles:
            if t.get_window_extent(renderer).ymin < top:
                raise ValueError(f"figure {file_stem}: the title {t.get_text()!r} overlaps the tick labels or x "
                                 "label on top of its axes; give it a pad or a y of its own (ax.set_title(..., pad=...))")


def save(fig: "plt.Figure", out_dir: str | os.PathLike, file_stem: str) -> list[Path]:
    """Save ``fig`` as PNG and PDF atomically into ``out_dir``, undated (:data:`UNDATED`); return both paths.

    ``file_stem`` may come from a stored file: it must be a plain name (sapa.common.safepath), and each
    path written must stay inside ``out_dir``.
    """
    out_dir = Path(out_dir)
    plain_name(file_stem, "figure file stem")
    paths = []
    plain_log_ticks(fig)
    _titles_clear_of_top_labels(fig, file_stem)  # with the tick labels the files will show
    # The tight bounding box, laid out once for both files (``bbox_inches="tight"`` lays the figure out again for
    # each format: a quarter of the drawing time). A figure with a layout engine is laid out by savefig anyway.
    # No draw before it: get_tightbbox lays out what it measures, and a draw first (a third of the saving time)
    # changed no byte of the 30 figures the tests draw (PNG and PDF, each compared with a never-drawn pickled twin).
    if isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
        # A one-off ``fig.tight_layout()`` leaves this do-nothing engine behind, and any engine makes every savefig
        # draw the figure twice (a layout pass, then the file): a third of each figure's saving time, for nothing.
        with plt.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
            fig.set_layout_engine(None)
    bbox = "tight"
    if fig.get_layout_engine() is None:
        bbox = fig.get_tightbbox().padded(plt.rcParams["savefig.pad_inches"])
    for ext in ("png", "pdf"):
        target = inside(out_dir / f"{file_stem}.{ext}", out_dir, "figure")
        extra = {"pil_kwargs": PNG_OPTIONS} if ext == "png" else {}
        atomic_write(target, lambda fh, ext=ext, extra=extra: fig.savefig(fh, format=ext, bbox_inches=bbox,
                                                                          metadata=UNDATED[ext], **extra))
        paths.append(target)
    plt.close(fig)
    return paths
