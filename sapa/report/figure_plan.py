"""Figure plan of the reports: each figure (PNG + PDF of one stem) shown once, in the first entry citing it.

Each figure carries the caption of its kind (:mod:`figures.captions`): sentences that say what is drawn, what to
look at and what the reader should see; the file stem, which encodes the configuration, is its file name.

Every other entry that cites the figure links to it by its anchor (``fig-<name>``). Only PNG is ever
shown as an image (embedded as base64 in ``report.html``, a relative path in ``report.md``); the PDF
and any other file of the same stem are linked as files.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from figures.captions import Caption, caption_for


@dataclass(frozen=True)
class Figure:
    """One figure of the report: its files, anchor, number and the entries that cite it."""

    number: int                   # 1, 2, ... in order of first citation
    name: str                     # file name without suffix
    anchor: str                   # HTML id / Markdown anchor, "fig-<name>"
    png: str | None               # relative path of the PNG (the only file shown as an image)
    files: tuple[str, ...]        # every other file of the stem (PDF, ...): linked, never shown
    owner: str                    # id of the first entry that cites it (where it is shown)
    cited_by: tuple[str, ...]     # ids of every entry that cites it, in ledger order
    title: str = ""               # a few words (links: "Figure 3: the regime map")
    caption: str = ""             # sentences: what is drawn, what to look at, what it shows


def plan(entries) -> list[Figure]:
    """The report's figures, grouped by stem, in order of first citation (ledger order, then listing order)."""
    stems: dict[str, dict] = {}
    for e in entries:
        for path in e.figures:
            p = PurePosixPath(path)
            rec = stems.setdefault(str(p.with_suffix("")), {"name": p.stem, "png": None, "files": [], "cited": []})
            if p.suffix.lower() == ".png":
                rec["png"] = rec["png"] or path
            elif path not in rec["files"]:
                rec["files"].append(path)
            if e.id not in rec["cited"]:
                rec["cited"].append(e.id)
    anchors: set[str] = set()
    first_of_kind: dict[Caption, tuple[int, str]] = {}
    out = []
    for k, rec in enumerate(stems.values(), 1):
        anchor = _unique("fig-" + _slug(rec["name"]), anchors)
        cap = caption_for(rec["name"])
        if cap is None:
            text = NO_CAPTION
        else:
            setup = setup_words(rec["name"], cap)
            text = cap.text + (f" This figure's setup: {setup}." if setup else "")
            if cap in first_of_kind:  # a later figure of a kind: its own caption, and what differs from the first
                k0, setup0 = first_of_kind[cap]
                text += (f" Figure {k0} draws the same quantities for {setup0 or 'another setup'}: compare the two "
                         "to see what changing the setup moves.")
            else:
                first_of_kind[cap] = (k, setup)
        out.append(Figure(number=k, name=rec["name"], anchor=anchor, png=rec["png"], files=tuple(rec["files"]),
                          owner=rec["cited"][0], cited_by=tuple(rec["cited"]),
                          title=cap.title if cap else rec["name"], caption=text))
    return out


# the configuration keys of figure file stems (figures.style.stem: name, then key+value parts), in words
_SETUP_KEYS = (("Ntrain", "training length N = {}"), ("trials", "{} trials"), ("threads", "{} thread(s)"),
               ("budget", "{} budget"), ("seeds", "{} seeds"), ("dtype", "{}"), ("model", "{} weights"),
               ("steps", "{} steps"), ("texts", "{} texts"), ("grid", "grid {}"), ("seed", "seed {}"),
               ("rho", "ρ = {}"), ("D", "token width D = {}"), ("d", "head width d = {}"), ("N", "N = {}"),
               ("p", "p = {}"))


def setup_words(name: str, cap: Caption) -> str:
    """The setup a figure's file stem encodes, in words: ``norm_vs_n_D64_d16_rho0p5_trials768_N8-512`` →
    "token width D = 64, head width d = 16, ρ = 0.5, 768 trials, N = 8–512" ('' when the stem encodes none)."""
    import re

    rest = name[len(cap.prefix):] if name.startswith(cap.prefix) else name
    if cap.suffix and rest.endswith(cap.suffix):
        rest = rest[:-len(cap.suffix)]
    words = []
    for part in (x for x in rest.split("_") if x):
        for key, fmt in _SETUP_KEYS:
            v = part[len(key):]
            if part.startswith(key) and v and (key not in ("d", "D", "N", "p") or re.fullmatch(r"[\d][\dpx-]*", v)):
                v = re.sub(r"(?<=\d)p(?=\d)", ".", v)
                items = v.split("-")
                v = "–".join(items) if len(items) == 2 and key in ("N", "D") else ", ".join(items)  # a range of N
                words.append(fmt.format(v))
                break
        else:
            words.append(part)
    return ", ".join(words)


NO_CAPTION = "No caption is registered for this kind of figure yet (figures/captions.py); its file name gives its setup."


def cited_in(figures: list[Figure], entry_id: str) -> list[Figure]:
    """The figures an entry cites (shown there when it owns them, linked otherwise)."""
    return [f for f in figures if entry_id in f.cited_by]


MAX_EMBED = 16 * 2**20  # bytes of one embedded PNG (sapa's own figures are ~100 KB)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_data_uri(base_dir, fig: Figure) -> str | None:
    """``data:image/png;base64,...`` of the figure's PNG under ``base_dir`` (None when it has none on disk).

    The name comes from a ledger, which may have been edited: only a regular file inside ``base_dir`` (symbolic
    links resolved, no absolute path, no ``..``), at most MAX_EMBED bytes and starting with the PNG signature is
    embedded; anything else is treated as absent.
    """
    if not isinstance(fig.png, str) or fig.png.startswith("/") or ".." in PurePosixPath(fig.png).parts:
        return None
    root = Path(base_dir).resolve()
    path = (Path(base_dir) / fig.png).resolve()
    if root not in path.parents or not path.is_file():
        return None
    from common.readfile import read_regular

    try:
        data = read_regular(path, "figure", MAX_EMBED)
    except (OSError, ValueError):  # InputError is a ValueError
        return None
    if not data.startswith(PNG_MAGIC):
        return None
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _slug(s: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in s.lower())


def _unique(anchor: str, taken: set[str]) -> str:
    out, k = anchor, 2
    while out in taken:
        out, k = f"{anchor}-{k}", k + 1
    taken.add(out)
    return out
