"""sapa — checking, with evidence, the theory of softmax versus polynomial attention.

Reference: Saratchandran, Zheng, Ji, Zhang, Lucey, *Rethinking Softmax: Self-Attention with
Polynomial Activations*, arXiv 2410.18613. The command line (``sapa.cli``) and the claims
ledger (``sapa.ledger``) tie together ``theory`` (exact), ``empirics`` (numbers) and
``figures`` (pictures).

The Python API (docs/api.md; each command prints one of these; arrays may be numpy or torch, read as float64):

- ``sapa.audit(expr, **options)``: does the activation φ = expr grow like softmax? (``sapa audit``)
- ``sapa.norms(X, W=None, *, wq=None, wk=None, activation="softmax", spectral=False, ...)``: exact norms of
  φ(S) and its Jacobians on given matrices, σ₁ certified with ``spectral`` (``sapa norms``)
- ``sapa.exact(p, model, N, D=None, d=None, ...)``: closed-form E‖S^{∘p}‖²_F, its Jacobian's and N* (``sapa exact``)
- ``sapa.compare(activations, budget="quick")``: several activations side by side
- ``sapa.load_ledger(path)``: a ``ledger.json`` read back and checked against its schema

Each returns a frozen result: named fields (the verdict where there is one), ``to_dict()`` (the command's JSON
object) and a short ``repr``; a bad argument raises ``sapa.common.validate.InputError`` with one line.
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
__all__ = ["audit", "compare", "exact", "load_ledger", "norms"]

# name → the module of sapa.api that defines it, imported on first use (PEP 562): `import sapa` stays light (no
# torch, sympy or scipy until an API function is called), and sapa is whole before any of sapa.api is imported
_API = {"audit": "audit", "norms": "norms", "exact": "exact", "load_ledger": "ledger", "compare": "compare"}


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'sapa' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"sapa.api.{_API[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
