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


def save(fig: "plt.Figure", out_dir: str | os.PathLike, file_stem: str) -> list[Path]:
    """Save ``fig`` as PNG and PDF atomically into ``out_dir``, undated (:data:`UNDATED`); return both paths.

    ``file_stem`` may come from a stored file: it must be a plain name (sapa.common.safepath), and each
    path written must stay inside ``out_dir``.
    """
    out_dir = Path(out_dir)
    plain_name(file_stem, "figure file stem")
    paths = []
    plain_log_ticks(fig)
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
        atomic_write(target, lambda fh, ext=ext: fig.savefig(fh, format=ext, bbox_inches=bbox,
                                                             metadata=UNDATED[ext]))
        paths.append(target)
    plt.close(fig)
    return paths
