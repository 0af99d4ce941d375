"""Where a module of sapa lives in the repository: ``sapa.theory.moments`` → ``theory/moments.py``.

setup.py installs the folders common/, theory/, empirics/ and figures/ under the one name ``sapa``; the tests that
read source files by module name (the import walk, the layer check) map names to files through here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("common", "theory", "empirics", "figures")  # as setup.py's FOLDERS


def installed_as(folder: str) -> str:
    """The import name of a top folder: ``theory`` → ``sapa.theory``; ``sapa`` stays ``sapa``."""
    return f"sapa.{folder}" if folder in FOLDERS else folder


def source_path(module: str) -> Path:
    """The repository path of a dotted module name, without suffix (``sapa.theory.moments`` → ROOT/theory/moments)."""
    parts = module.split(".")
    if len(parts) > 1 and parts[0] == "sapa" and parts[1] in FOLDERS:
        parts = parts[1:]
    return ROOT.joinpath(*parts)


def installed_tree(dest: Path) -> Path:
    """A copy of the sources laid out as a wheel installs them (dest/sapa/, dest/sapa/theory/, …); returns dest."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "sapa", dest / "sapa", ignore=skip)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, dest / "sapa" / folder, ignore=skip)
    return dest
