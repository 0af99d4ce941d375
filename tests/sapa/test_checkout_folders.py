"""sapa/__init__.py: a checkout's own common/, theory/, empirics/ and figures/ are the sapa.* it imports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.layout import FOLDERS, ROOT


def test_a_second_checkout_imports_its_own_folders_not_the_installed_ones(tmp_path):
    """Run from a copy of the checkout (as a worktree is), every sapa.<folder> comes from the copy, while the
    editable install of this repository maps the same names to this repository's folders."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "data")
    for name in ("sapa",) + FOLDERS:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=skip)
    shutil.copy(ROOT / "setup.py", tmp_path / "setup.py")
    code = ("import sapa, sapa.theory.moments, sapa.empirics.kernels.norms, sapa.figures.style, sapa.common.validate;"
            "import sys; print('\\n'.join(sys.modules[m].__file__ for m in ('sapa', 'sapa.theory.moments', "
            "'sapa.empirics.kernels.norms', 'sapa.figures.style', 'sapa.common.validate')))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert len(out) == 5 and all(p.startswith(str(tmp_path)) for p in out), out


def test_the_checkout_finder_claims_only_the_four_folders():
    import sapa

    finder = next(f for f in sys.meta_path if isinstance(f, sapa._CheckoutFolders))
    assert finder.find_spec("sapa.rules") is None and finder.find_spec("theory") is None
    assert finder.find_spec("sapa.nothing") is None
    spec = finder.find_spec("sapa.theory")
    assert spec.name == "sapa.theory" and spec.origin == str(ROOT / "theory" / "__init__.py")
