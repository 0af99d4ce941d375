"""Figure plan of the reports: each figure (PNG + PDF of one stem) shown once, each entry showing one of its own
where the figures allow (:func:`owners_of`).

Each figure carries the caption of its kind (:mod:`sapa.figures.captions`): sentences that say what is drawn, what to
look at and what the reader should see; the file stem, which encodes the configuration, is its file name.

Every other entry that cites the figure links to it by its anchor (``fig-<name>``). Only PNG is ever
shown as an image (embedded as base64 in ``report.html``, a relative path in ``report.md``); the PDF
and any other file of the same stem are linked as files.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sapa.figures.captions import Caption, caption_for


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


def plan(entries, base_dir=None) -> list[Figure]:
    """The report's figures, grouped by stem, in order of first citation (ledger order, then listing order); only
    :func:`referable` paths (under ``base_dir`` when given) become figures: the others are :func:`refused`."""
    stems: dict[str, dict] = {}
    for e in entries:
        for path in e.figures:
            if not referable(base_dir, path):
                continue
            p = PurePosixPath(path)
            rec = stems.setdefault(str(p.with_suffix("")), {"name": p.stem, "png": None, "files": [], "cited": []})
            if p.suffix.lower() == ".png":
                rec["png"] = rec["png"] or path
            elif path not in rec["files"]:
                rec["files"].append(path)
            if e.id not in rec["cited"]:
                rec["cited"].append(e.id)
    owners = owners_of(entries, {k: rec["cited"] for k, rec in stems.items() if rec["png"]})
    anchors: set[str] = set()
    first_of_kind: dict[Caption, tuple[int, str]] = {}
    out = []
    for k, (key, rec) in enumerate(stems.items(), 1):
        anchor = _unique("fig-" + _slug(rec["name"]), anchors)
        cap = caption_for(rec["name"])
        if cap is None:
            text = UNKNOWN_KIND
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
                          owner=owners.get(key, rec["cited"][0]), cited_by=tuple(rec["cited"]),
                          title=cap.title if cap else rec["name"], caption=text))
    return out


def owners_of(entries, cited: dict[str, list[str]]) -> dict[str, str]:
    """{figure: the entry that shows it}: as many entries as possible show a figure of their own, each figure shown
    once (a maximum bipartite matching: augmenting paths tried in ledger order, each entry's figures in the report's
    order of first citation); a figure left over is shown by the first entry citing it.

    >>> from types import SimpleNamespace as E
    >>> owners_of([E(id="a"), E(id="b")], {"shared": ["a", "b"], "own": ["a"]})
    {'shared': 'b', 'own': 'a'}
    """
    wants: dict[str, list[str]] = {e.id: [] for e in entries}
    for fig, ids in cited.items():
        for i in ids:
            wants.setdefault(i, []).append(fig)
    order = {fig: k for k, fig in enumerate(cited)}
    for i in wants:
        wants[i].sort(key=order.get)
    shown_by: dict[str, str] = {}

    def place(entry: str, seen: set[str]) -> bool:
        for fig in wants[entry]:
            if fig not in seen:
                seen.add(fig)
                if fig not in shown_by or place(shown_by[fig], seen):
                    shown_by[fig] = entry
                    return True
        return False

    for e in entries:
        place(e.id, set())
    return {fig: shown_by.get(fig, ids[0]) for fig, ids in cited.items()}


# the configuration keys of figure file stems (sapa.figures.style.stem: name, then key+value parts), in words
_SETUP_KEYS = (("Ntrain", "training length N = {}"), ("trials", "{} trials"), ("threads", "{} thread(s)"),
               ("budget", "{} budget"), ("seeds", "{} seeds"), ("dtype", "{}"), ("model", "{} weights"),
               ("steps", "{} steps"), ("texts", "{} texts"), ("grid", "grid {}"), ("seed", "seed {}"),
               ("rho", "ρ = {}"), ("D", "token width D = {}"), ("d", "head width d = {}"), ("N", "N = {}"),
               ("p", "p = {}"))


def setup_words(name: str, cap: Caption) -> str:
    """The setup a figure's file stem encodes, in words: ``norm_vs_n_D64_d16_rho0p5_trials768_N8-512`` →
    "token width D = 64, head width d = 16, ρ = 0.5, 768 trials, N = 8–512" ('' when the stem encodes none)."""
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


UNKNOWN_KIND = ("sapa draws no figure of this kind, so no caption says what to read from it (figures/captions.py "
                "captions every kind sapa draws); its file name gives its setup.")


def refused(entry, base_dir=None) -> list[str]:
    """The entry's figure paths that no report references (not :func:`referable`): named as text, never linked."""
    return [str(p) for p in entry.figures if not referable(base_dir, p)]


def cited_in(figures: list[Figure], entry_id: str) -> list[Figure]:
    """The figures an entry cites (shown there when it owns them, linked otherwise)."""
    return [f for f in figures if entry_id in f.cited_by]


MAX_EMBED = 16 * 2**20  # bytes of one PNG read for embedding (sapa's own figures are ~100 KB)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EMBED_WIDTH = 1100  # px: the widest an embedded figure is kept (~100 dpi of sapa's figures; text stays legible)
EMBED_COLOURS = 64  # a plot's few colours and their anti-aliasing, in a palette
_NAME = re.compile(r"[A-Za-z0-9_+=,@.-]+")  # one path segment a figure may have: no scheme (':'), '%', '?', '#', '\\'


def referable(base_dir, path) -> bool:
    """Whether a ledger's figure ``path`` may be referenced by a report: a file inside the results folder.

    The figure list comes from ``ledger.json``, which may have been edited: only a relative POSIX path of plain
    segments (letters, digits, ``_+=,@.-``; no ``.`` or ``..`` segment, so no absolute path, URL scheme, percent
    escape, query or fragment) is referable, and, when ``base_dir`` is given, only if no segment that exists under it
    is a symbolic link (``lstat``, links never followed) and the path, if it exists, is a regular file.

    >>> referable(None, "figures/norm_vs_n_D16.png"), referable(None, "javascript:alert(1)//a.png")
    (True, False)
    >>> referable(None, "/abs/secret.png"), referable(None, "../../secret/secret.png")
    (False, False)
    """
    if not isinstance(path, str) or not path:
        return False
    parts = path.split("/")
    if any(x in ("", ".", "..") or not _NAME.fullmatch(x) for x in parts):
        return False
    if base_dir is None:
        return True
    here = Path(base_dir)
    for k, part in enumerate(parts):
        here = here / part
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return True  # absent: referenced as a missing file inside the folder, never followed anywhere
        except OSError:
            return False
        if stat.S_ISLNK(st.st_mode) or (k == len(parts) - 1 and not stat.S_ISREG(st.st_mode)):
            return False
        if k < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            return False
    return True


def png_data_uri(base_dir, fig: Figure) -> str | None:
    """``data:image/png;base64,...`` of the figure's PNG under ``base_dir``, compacted (None when it has none on disk).

    Only a :func:`referable` regular file of at most MAX_EMBED bytes that starts with the PNG signature is embedded;
    anything else is treated as absent. The image is re-encoded by :func:`compact_png`.
    """
    if fig.png is None or not referable(base_dir, fig.png):
        return None
    from sapa.common.readfile import read_regular

    try:
        data = read_regular(Path(base_dir) / fig.png, "figure", MAX_EMBED)
    except (OSError, ValueError):  # InputError is a ValueError
        return None
    if not data.startswith(PNG_MAGIC):
        return None
    return "data:image/png;base64," + base64.b64encode(compact_png(data)).decode("ascii")


@functools.lru_cache(maxsize=64)
def compact_png(data: bytes, width: int = EMBED_WIDTH, colours: int = EMBED_COLOURS) -> bytes:
    """The PNG ``data`` at most ``width`` px wide, as a ``colours``-colour palette PNG (a plot's lines, text and
    shading survive; sapa's quick-budget figures shrink from ~300 KB to ~60 KB, so 27 of them fit a 3 MB page);
    ``data`` itself when it cannot be decoded or would not shrink.

    Deterministic (no dithering, a fixed quantiser), so a rerendered report is byte-identical. Cached by content:
    ``sapa verify`` renders report.html after every entry, and re-encoding the quick ledger's 27 figures each time
    cost 2.4 CPU-s a render.
    """
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            img = im.convert("RGB")  # the figures' background is opaque white
    except Exception:  # noqa: BLE001 — any undecodable image is embedded as it is
        return data
    if img.width > width:
        img = img.resize((width, round(img.height * width / img.width)), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    img.quantize(colours, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(out, "PNG", optimize=True)
    return out.getvalue() if out.tell() < len(data) else data


def _slug(s: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in s.lower())


def _unique(anchor: str, taken: set[str]) -> str:
    out, k = anchor, 2
    while out in taken:
        out, k = f"{anchor}-{k}", k + 1
    taken.add(out)
    return out
