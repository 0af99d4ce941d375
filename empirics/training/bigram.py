"""acc = mean[argmax_b count(a → b) = next character]: the bigram predictor, the text task's floor ("plateau").

A next-character model that has learned nothing beyond which character follows which sits at this
accuracy; the training study reads a text run as having *left the floor* only above it.
"""

from __future__ import annotations

import numpy as np

from sapa.common.validate import InputError

__all__ = ["bigram_accuracy"]


def bigram_accuracy(train_ids, test_x, test_y) -> float:
    """Test accuracy of argmax_b count(a → b) on the training text: the "bigram plateau" of a next-character model.

    Args:
      train_ids: (n,) character ids of the training text; test_x, test_y: (M, N) inputs and next characters.
    A character never seen as a predecessor predicts the most frequent character.
    """
    tr = np.asarray(train_ids, dtype=np.int64).ravel()
    x = np.asarray(test_x, dtype=np.int64).ravel()
    y = np.asarray(test_y, dtype=np.int64).ravel()
    if tr.size < 2 or x.size == 0 or x.shape != y.shape:
        raise InputError("bigram_accuracy needs ≥ 2 training ids and test inputs/targets of one shape")
    V = int(max(tr.max(), x.max(), y.max())) + 1
    counts = np.zeros((V, V), dtype=np.int64)
    np.add.at(counts, (tr[:-1], tr[1:]), 1)
    pred = counts.argmax(axis=1)  # (V,)
    seen = counts.sum(axis=1) > 0
    pred = np.where(seen, pred, np.bincount(tr, minlength=V).argmax())
    return float((pred[x] == y).mean())
