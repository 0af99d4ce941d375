"""sapa — checking, with evidence, the theory of softmax versus polynomial attention.

Reference: Saratchandran, Zheng, Ji, Zhang, Lucey, *Rethinking Softmax: Self-Attention with
Polynomial Activations*, arXiv 2410.18613. The command line (``sapa.cli``) and the claims
ledger (``sapa.ledger``) tie together ``theory`` (exact), ``empirics`` (numbers) and
``figures`` (pictures).
"""

import importlib.machinery
import importlib.util
import sys
from pathlib import Path


class _CheckoutFolders:
    """Finds sapa.common, sapa.theory, sapa.empirics and sapa.figures in the checkout this sapa/ was imported from.

    setup.py installs the four top folders under ``sapa``; an editable install maps them to the folders of the
    checkout it was made from. Where sapa/ is imported from another checkout (a worktree, a clone run in place), its
    own folders must be the ones used, or one process would mix two versions of the code."""

    def __init__(self, root: Path):
        self.root = root

    def find_spec(self, name, path=None, target=None):
        head, _, folder = name.partition(".")
        if head != "sapa" or folder not in ("common", "theory", "empirics", "figures"):
            return None
        return importlib.machinery.PathFinder.find_spec(folder, [str(self.root)]) and \
            importlib.util.spec_from_file_location(name, self.root / folder / "__init__.py",
                                                   submodule_search_locations=[str(self.root / folder)])


_root = Path(__file__).resolve().parent.parent
if (_root / "setup.py").is_file() and not any(isinstance(f, _CheckoutFolders) for f in sys.meta_path):
    sys.meta_path.insert(0, _CheckoutFolders(_root))

import sapa.empirics  # noqa: E402, F401  (pins CPU kernel dispatch before torch is imported: sapa.common.numerics)

__version__ = "0.1.0"
