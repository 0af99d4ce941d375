"""Tests for `empirics/realmodel/real_model.py`: weights, tokenizer, forward pass, protocols and corpus of all-MiniLM-L6-v2.

Tests that need the optional extra ``real`` skip without it (``pytest.importorskip``). No test may
touch the network: every test runs with the hub's offline variables set and with
``socket.connect`` / ``create_connection`` raising.
"""

from __future__ import annotations

import socket

import numpy as np
import pytest
import torch

from sapa.empirics.realmodel import real

# offline, sockets refused (tests/conftest.py); one torch thread (conftest.py here)
pytestmark = pytest.mark.usefixtures("no_network", "real_one_thread")


def test_socket_guard_is_active():
    with pytest.raises(OSError, match="network"):
        socket.create_connection(("127.0.0.1", 9))

CLS, SEP = 101, 102

@pytest.mark.parametrize("N", [4, 8, 13, 24])
def test_protocol_token_sets_are_the_documented_ones(N):
    """The table of the module docstring, on a synthetic encoding [CLS] 1..30 [SEP] with longest grid prefix M = 24."""
    ids = np.array([CLS, *range(1, 31), SEP])
    M = 24
    got = {pr.name: list(pr.token_ids(ids, N, M)) for pr in real.PROTOCOLS}
    assert got["prefix"] == [CLS, *range(1, N - 1), SEP]
    assert got["prefix-content"] == list(range(1, N - 1))
    assert got["fixed"] == ([CLS, *range(1, N)] if N < M else [CLS, *range(1, M - 1), SEP])
    assert got["fixed-content"] == list(range(1, N - 1))
    for pr in real.PROTOCOLS:
        assert len(got[pr.name]) == pr.size(N) == (N if pr.specials else N - 2)
        assert pr.pass_length(N, M) == (N if pr.context == "prefix" else M)
    assert real.PROTOCOL_NAMES == ("prefix", "prefix-content", "fixed", "fixed-content")
    with pytest.raises(real.InputError):
        real.protocol_named("first-n")
    with pytest.raises(real.InputError):
        real.PROTOCOLS[0].token_ids(ids, M + 1, M)

def test_weights_load(weights):
    c = weights.config
    assert (c.n_layers, c.hidden, c.n_heads, c.d_head, c.max_len) == (6, 384, 12, 32, 512)
    qk = real.head_qk(weights, 2, 5)
    Wq = weights.t("encoder.layer.2.attention.self.query.weight").double().numpy()  # (out, in)
    np.testing.assert_array_equal(qk.W_Q, Wq[5 * 32 : 6 * 32].T)
    assert qk.W_K.shape == (384, 32) and qk.b_K.shape == (32,)
    assert all(real.head_geometry(real.head_qk(weights, l, h)).shift_residual < 1e-10 for l in (0, 5) for h in (0, 11))

def test_forward_matches_transformers(weights, tok):
    """Hidden states of our forward pass vs transformers.BertModel (output_hidden_states), float32 tolerance."""
    transformers = pytest.importorskip("transformers")
    folder = real.model_dir()
    model = transformers.BertModel.from_pretrained(str(folder), local_files_only=True).eval()
    ref_tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    corpus = real.load_corpus()
    for text, N in ((corpus.sentences[12], None), (corpus.passages[sorted(corpus.passages)[0]], 40)):
        ids = real.encode(tok, text)
        assert list(ids) == ref_tok(text)["input_ids"]
        if N is not None:
            ids = real.prefix_ids(ids, N)
        ours = real.forward(weights, ids)  # (L+1, N, D) float32
        with torch.no_grad():
            out = model(torch.as_tensor(ids)[None], output_hidden_states=True)
        ref = torch.stack(out.hidden_states)[:, 0]
        assert ours.shape == ref.shape == (7, len(ids), 384)
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(real.forward(weights, ids, dtype=torch.float64), ref.double(), rtol=1e-4, atol=1e-4)

def test_prefix_ids(tok):
    ids = real.encode(tok, "The old dog slept well.")
    assert len(ids) == 8 and ids[0] == 101 and ids[-1] == 102  # [CLS] … [SEP]
    p = real.prefix_ids(ids, 5)
    assert list(p) == list(ids[:4]) + [102]
    with pytest.raises(real.InputError):
        real.prefix_ids(ids, 9)

def test_corpus_lengths(tok):
    corpus = real.load_corpus()
    lengths = [len(real.encode(tok, s)) for s in corpus.sentences]
    assert min(lengths) == 8 and max(lengths) > 200
    assert len(corpus.passages) == 8 and all(len(real.encode(tok, t)) >= 512 for t in corpus.passages.values())
