"""The API's inputs: numpy arrays or torch tensors as float64 matrices, and the names a refusal gives an argument.

The commands and the API run the same checks; a refusal names the argument as its caller knows it: ``--w`` on the
command line (:data:`CLI`), ``W`` in Python (:data:`PY`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sapa.common.validate import InputError, finite_matrix

__all__ = ["CLI", "PY", "Names", "matrix", "nonneg_int"]

_PYTHON = {"w": "W", "x": "X", "sigma_x": "sigma_x"}


@dataclass(frozen=True)
class Names:
    """How a refusal names an argument: ``--sigma-x`` (command line) or ``sigma_x`` (Python)."""

    cli: bool

    def __call__(self, key: str) -> str:
        """The argument ``key`` (spelled as the option, without dashes: "w", "sigma_x", "D")."""
        return "--" + key.replace("_", "-") if self.cli else _PYTHON.get(key, key)

    def setting(self, key: str, value) -> str:
        """``--model shared`` / ``model='shared'``."""
        return f"{self(key)} {value}" if self.cli else f"{key}={value!r}"

    def file(self, key: str, stem: str) -> str:
        """What to give: ``--w W.npy`` / ``W``."""
        return f"{self(key)} {stem}.npy" if self.cli else self(key)


CLI, PY = Names(True), Names(False)


def matrix(name: str, a, shape: tuple[int | None, ...] | None = (None, None)) -> np.ndarray:
    """``a`` (a numpy array, a torch tensor on any device, nested lists) as a finite float64 numpy array of
    ``shape``; else InputError, one line naming ``name``.

    >>> import torch
    >>> matrix("X", torch.ones(2, 3, dtype=torch.float32)).dtype
    dtype('float64')
    >>> matrix("X", [1.0, 2.0])
    Traceback (most recent call last):
    ...
    sapa.common.validate.InputError: X must have 2 dimensions, got shape (2,)
    """
    if hasattr(a, "detach") and hasattr(a, "cpu"):  # a torch tensor: off the autograd graph, onto the host
        if a.is_complex():  # .double() would drop the imaginary part with only a warning
            raise InputError(f"{name} must be real, got a complex tensor")
        a = a.detach().cpu().double().numpy()
    return finite_matrix(name, a, shape)


def nonneg_int(name: str, value) -> int:
    """``value`` as an int ≥ 0 (a seed), else InputError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InputError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)
