"""Offline data for the training experiment (arXiv 2410.18613): 8×8 digits and English prose.

* :func:`load_digits` — scikit-learn's 1797 8×8 handwritten digits (shipped with the package),
  pixels scaled to [0, 1], a fixed stratified train/test split (``split_seed``).
* :func:`load_text` — a character corpus: the prose of CPython's ``pydoc_data.topics``
  (≈465k characters of the Python documentation, shipped with the interpreter), or the
  passages in ``empirics/data/*.txt`` if that module is missing. Topics are sorted by name;
  every 10th topic is held out, so test text comes from documents never trained on. The
  held-out evaluation set is a fixed grid of evenly spaced windows (no randomness).

Nothing here downloads anything. Training minibatches are drawn by the caller from an
explicit ``torch.Generator`` (:func:`text_batch`, :func:`digits_batch`).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from sapa.common.validate import InputError, positive_int

__all__ = ["Digits", "Text", "load_digits", "load_text", "text_batch", "text_probe", "digits_batch", "corpus"]

DATA_DIR = Path(__file__).resolve().parents[1] / "data"  # empirics/data
HOLDOUT_EVERY = 10  # every 10th document (sorted by name) is held out


@dataclass(frozen=True)
class Digits:
    """Images (n, 8, 8) float32 in [0, 1] and labels (n,) int64, split into train and test."""

    x_train: torch.Tensor  # (n_train, 8, 8)
    y_train: torch.Tensor  # (n_train,)
    x_test: torch.Tensor  # (n_test, 8, 8)
    y_test: torch.Tensor  # (n_test,)
    classes: int = 10


@dataclass(frozen=True)
class Text:
    """Character ids: a training stream and a fixed held-out grid of windows."""

    train: torch.Tensor  # (n_chars,) int64 ids of the training documents, concatenated
    test_x: torch.Tensor  # (M, N) inputs of the held-out windows
    test_y: torch.Tensor  # (M, N) next characters
    vocab: str  # id k is the character vocab[k]
    source: str  # "pydoc_data.topics" | "empirics/data"
    sha256: str  # of the whole corpus text (the corpus changes with the Python version)


@functools.lru_cache(maxsize=4)  # a pure function of its arguments: each process loads each split once
def load_digits(test_fraction: float = 0.25, split_seed: int = 0) -> Digits:
    """sklearn digits, pixels / 16, stratified split with ``random_state=split_seed`` (tensors: read only)."""
    from sklearn.datasets import load_digits as _load
    from sklearn.model_selection import train_test_split

    d = _load()
    x = (d.data / 16.0).astype(np.float32).reshape(-1, 8, 8)  # (1797, 8, 8)
    y = d.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=test_fraction, random_state=split_seed, stratify=y)
    t = torch.from_numpy
    return Digits(t(xtr), t(ytr), t(xte), t(yte))


def corpus() -> tuple[list[str], str]:
    """The documents (sorted by name) and their source: pydoc_data topics, else the bundled passages."""
    try:
        from pydoc_data.topics import topics
    except ImportError:  # a Python built without pydoc_data
        files = sorted(DATA_DIR.glob("*.txt"))
        return [f.read_text(encoding="utf-8") for f in files], "empirics/data"
    return [topics[k] for k in sorted(topics)], "pydoc_data.topics"


def load_text(context: int, n_test_windows: int = 128, *, docs: list[str] | None = None) -> Text:
    """Character ids of the corpus, every ``HOLDOUT_EVERY``-th document held out.

    Args:
      context: N, the window length.
      n_test_windows: M windows of N + 1 characters, evenly spaced over the held-out text.
      docs: documents to use instead of :func:`corpus` (tests).

    The tensors of the returned (cached) object are shared: read them, do not modify them.
    """
    N = positive_int("context", context)
    M = positive_int("n_test_windows", n_test_windows)
    if docs is None:
        return _load_corpus_text(N, M)
    return _encode(docs, "given", N, M)


@functools.lru_cache(maxsize=4)  # encoding 465k characters once per process, not once per run
def _load_corpus_text(N: int, M: int) -> Text:
    docs, source = corpus()
    return _encode(docs, source, N, M)


def _encode(docs: list[str], source: str, N: int, M: int) -> Text:
    """Character ids of ``docs`` (vocabulary: their sorted characters), split and windowed as in :func:`load_text`."""
    full = "\n\n".join(docs)
    vocab = "".join(sorted(set(full)))
    table = {ch: i for i, ch in enumerate(vocab)}
    if len(docs) >= 2 * HOLDOUT_EVERY:
        held = [k % HOLDOUT_EVERY == HOLDOUT_EVERY - 1 for k in range(len(docs))]
        train_txt = "\n\n".join(d for d, h in zip(docs, held) if not h)
        test_txt = "\n\n".join(d for d, h in zip(docs, held) if h)
    else:  # few documents (the bundled passages): hold out the last tenth of each
        cut = [len(d) - len(d) // HOLDOUT_EVERY for d in docs]
        train_txt = "\n\n".join(d[:c] for d, c in zip(docs, cut))
        test_txt = "\n\n".join(d[c:] for d, c in zip(docs, cut))
    enc = lambda s: torch.tensor([table[ch] for ch in s], dtype=torch.int64)  # noqa: E731
    train, test = enc(train_txt), enc(test_txt)
    if len(test) < N + 1 or len(train) < N + 2:
        raise InputError(f"corpus too short for context {N}: {len(train)} train, {len(test)} test characters")
    starts = torch.linspace(0, len(test) - N - 1, M).round().long()  # (M,) evenly spaced, deterministic
    win = torch.stack([test[s:s + N + 1] for s in starts.tolist()])  # (M, N + 1)
    return Text(train, win[:, :-1].contiguous(), win[:, 1:].contiguous(), vocab, source,
                hashlib.sha256(full.encode("utf-8")).hexdigest())


def text_batch(text: Text, batch: int, context: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` random training windows: inputs (B, N) and next characters (B, N)."""
    starts = torch.randint(0, len(text.train) - context - 1, (batch,), generator=gen)  # (B,)
    idx = starts[:, None] + torch.arange(context + 1)[None, :]  # (B, N + 1)
    win = text.train[idx]
    return win[:, :-1], win[:, 1:]


def text_probe(text: Text, size: int, context: int) -> torch.Tensor:
    """A fixed probe batch (P, N): ``size`` evenly spaced training windows."""
    starts = torch.linspace(0, len(text.train) - context - 1, size).round().long()
    return torch.stack([text.train[s:s + context] for s in starts.tolist()])


def digits_batch(data: Digits, batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` random training images (B, 8, 8) and labels (B,), drawn with replacement."""
    idx = torch.randint(0, len(data.y_train), (batch,), generator=gen)
    return data.x_train[idx], data.y_train[idx]
