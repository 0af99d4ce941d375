"""The packages of sapa: ``sapa`` and, under it, the folders ``common/``, ``theory/``, ``empirics/`` and ``figures/``.

The folders stay at the top of the repository (the design card's layout), but they install as ``sapa.common``,
``sapa.theory``, ``sapa.empirics`` and ``sapa.figures`` (a package-dir mapping), so ``sapa`` is the one top-level
name a wheel puts into site-packages. Everything else about the project is in ``pyproject.toml``.
"""

from setuptools import find_packages, setup

FOLDERS = ("common", "theory", "empirics", "figures")  # each installs as sapa.<folder>

setup(
    packages=find_packages(include=["sapa", "sapa.*"])
    + [f"sapa.{p}" for p in find_packages(include=[f"{f}{tail}" for f in FOLDERS for tail in ("", ".*")])],
    package_dir={f"sapa.{f}": f for f in FOLDERS},
)
