"""Tests for `empirics/training/bigram.py`: the bigram plateau by hand."""

import pytest

from sapa.empirics.training.bigram import bigram_accuracy


def test_bigram_accuracy_by_hand():
    train = [0, 1, 0, 1, 0, 2]  # after 0: 1 (twice) beats 2; after 1: 0; 2 never precedes: most frequent (0)
    x = [[0, 1, 2]]
    y = [[1, 1, 0]]
    assert bigram_accuracy(train, x, y) == pytest.approx(2 / 3)
